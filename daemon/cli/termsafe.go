package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// termSafe returns s with every character that could drive a terminal made
// visible, for the CLI's human-readable output (agent text, tool names,
// titles, error messages): text from an agent or a title must not set the
// window title (ESC ] 0 ; … BEL), clear the screen (ESC [ 2 J) or reorder
// what the user reads.
//
//   - C0 controls other than \n and \t, and DEL, become caret notation as
//     `cat -v` prints them: ESC is "^[", BEL "^G", NUL "^@", DEL "^?"; a CR
//     is kept only directly before an LF (CRLF line ends), else it is "^M".
//   - C1 controls (U+0080–U+009F), the line and paragraph separators
//     U+2028/U+2029 and the bidi embeddings, overrides and isolates
//     (U+202A–U+202E, U+2066–U+2069) become "\u" and four hex digits.
//   - A byte that is not part of valid UTF-8 becomes "\x" and two hex
//     digits (a raw 0x9B is CSI on a terminal that takes 8-bit controls).
//
// Everything else, including printable non-ASCII text, is unchanged. JSON
// output does not go through it: encoding/json escapes these characters
// already.
func termSafe(s string) string {
	i := 0
	for i < len(s) && !unsafeByte(s, i) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n' || c == '\t' || (c == '\r' && i+1 < len(s) && s[i+1] == '\n'):
				b.WriteByte(c)
			case c < 0x20:
				b.WriteByte('^')
				b.WriteByte(c + '@')
			case c == 0x7f:
				b.WriteString("^?")
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, c)
		case controlRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeByte reports whether s[i] may start something termSafe rewrites
// (any non-ASCII byte is checked further on the slow path).
func unsafeByte(s string, i int) bool {
	c := s[i]
	switch {
	case c == '\n' || c == '\t':
		return false
	case c == '\r':
		return i+1 >= len(s) || s[i+1] != '\n'
	}
	return c < 0x20 || c >= 0x7f
}

// controlRune reports whether r is a non-ASCII character termSafe escapes:
// C1 controls, U+2028/U+2029, bidi embeddings/overrides (U+202A–U+202E) and
// isolates (U+2066–U+2069).
func controlRune(r rune) bool {
	return (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029 ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// termSafeWriter passes everything written to it through termSafe: for
// printing functions whose every line is for a human (show). Each Write is
// escaped on its own, so a caller must not split a UTF-8 character across
// two writes (fmt.Fprint* write once per call).
type termSafeWriter struct{ w io.Writer }

func (t termSafeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, termSafe(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
