package native

import "bytes"

// This file is a minimal JSON skimmer for the listing fast path: it finds
// the top-level fields of one JSON object and returns their raw values
// without decoding them, skipping strings with bytes.IndexByte. It checks
// structure (balanced brackets, terminated strings, no trailing bytes) but
// not every lexical rule; lines that matter are decoded with encoding/json.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just after the string that starts at b[i]=='"'.
func skipString(b []byte, i int) (int, bool) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, false
		}
		k := i + j
		// count backslashes before the quote
		n := 0
		for p := k - 1; p >= i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return k + 1, true
		}
		i = k + 1
	}
}

// skipValue returns the index just after the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				e, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			case 0:
				return 0, false
			}
			i++
		}
		return 0, false
	default:
		if !(c == '-' || c == 't' || c == 'f' || c == 'n' || (c >= '0' && c <= '9')) {
			return 0, false
		}
		j := i
		for j < len(b) {
			c := b[j]
			if c == ',' || c == '}' || c == ']' || isSpace(c) {
				break
			}
			if c < 0x20 || c == '"' || c == '{' || c == '[' {
				return 0, false
			}
			j++
		}
		return j, true
	}
}

// objectFields calls fn with each key (raw, without quotes) and raw value of
// the JSON object b. fn returns false to stop early. It reports whether b
// looked like one complete object (stopping early counts as well-formed
// only up to that point).
func objectFields(b []byte, fn func(key, val []byte) bool) bool {
	end, ok := objectFieldsAt(b, skipSpace(b, 0), fn)
	if !ok {
		return false
	}
	return end < 0 || skipSpace(b, end) == len(b)
}

// objectFieldsAt is objectFields for the object that starts at b[i]; it
// returns the index just after the object (-1 when fn stopped early).
func objectFieldsAt(b []byte, i int, fn func(key, val []byte) bool) (int, bool) {
	return objectFieldsHook(b, i, nil, fn)
}

// valueHook parses the value of key that starts at b[i] itself (so a
// large value is scanned once, not skipped and scanned again): it returns
// the index just after the value and whether the value was well formed,
// or handled=false to let the caller skip it.
type valueHook func(key, b []byte, i int) (end int, handled, ok bool)

// objectFieldsHook is objectFieldsAt with a hook that may parse values in
// place; fn still sees every key and raw value. hook may be nil.
func objectFieldsHook(b []byte, i int, hook valueHook, fn func(key, val []byte) bool) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		ke, ok := skipString(b, i)
		if !ok {
			return 0, false
		}
		key := b[i+1 : ke-1]
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = skipSpace(b, i+1)
		var ve int
		handled := false
		if hook != nil {
			ve, handled, ok = hook(key, b, i)
		}
		if !handled {
			ve, ok = skipValue(b, i)
		}
		if !ok {
			return 0, false
		}
		if !fn(key, b[i:ve]) {
			return -1, true
		}
		i = skipSpace(b, ve)
		if i >= len(b) {
			return 0, false
		}
		if b[i] == '}' {
			return i + 1, true
		}
		if b[i] != ',' {
			return 0, false
		}
		i = skipSpace(b, i+1)
	}
}

// rawString returns the contents of a raw JSON string value if it has no
// escapes (the common case for ids, types and timestamps); ok is false
// otherwise.
func rawString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		return "", false
	}
	return string(s), true
}
