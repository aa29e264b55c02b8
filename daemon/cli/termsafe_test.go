package cli

import (
	"bytes"
	"fmt"
	"testing"
)

func TestTermSafe(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "hello, world", "hello, world"},
		{"newline and tab kept", "a\tb\nc\n", "a\tb\nc\n"},
		{"unicode kept", "naïve — 日本語 🙂", "naïve — 日本語 🙂"},
		{"window title", "\x1b]0;pwned\x07", "^[]0;pwned^G"},
		{"clear screen", "\x1b[2Jx", "^[[2Jx"},
		{"crlf kept", "a\r\nb", "a\r\nb"},
		{"lone cr", "100%\rdone", "100%^Mdone"},
		{"cr at end", "a\r", "a^M"},
		{"nul del", "\x00\x7f", "^@^?"},
		{"backspace", "ab\bc", "ab^Hc"},
		{"c1 csi", "\u009b2J", `\u009b2J`},
		{"c1 nel", "a\u0085b", `a\u0085b`},
		{"raw 0x9b byte", "a\x9b2J", `a\x9b2J`},
		{"truncated utf-8", "é\xc3", `é\xc3`},
		{"line separator", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"bidi isolates", "\u2066x\u2069", `\u2066x\u2069`},
		{"bidi embedding", "\u202ax\u202c", `\u202ax\u202c`},
		{"left-to-right mark kept", "a\u200eb", "a\u200eb"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := termSafe(tt.in); got != tt.want {
				t.Errorf("termSafe(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTermSafeWriter(t *testing.T) {
	var b bytes.Buffer
	w := termSafeWriter{&b}
	n, err := fmt.Fprintf(w, "# %s\n", "\x1b]0;t\x07title")
	if err != nil || n != len("# \x1b]0;t\x07title\n") {
		t.Errorf("Fprintf = %d, %v", n, err)
	}
	if got := b.String(); got != "# ^[]0;t^Gtitle\n" {
		t.Errorf("wrote %q", got)
	}
}

func BenchmarkTermSafeASCII(b *testing.B) {
	s := "an ordinary chunk of an agent's answer, with no control characters at all\n"
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		termSafe(s)
	}
}
