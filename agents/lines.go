package agents

import "strings"

// countLines returns the lines a change from oldText to newText adds and
// deletes (git diff --numstat figures). nil oldText: a new file; nil
// newText: a deleted file.
//
// Local stand-in until transcript.CountLines is committed.
func countLines(oldText, newText *string) (adds, dels int) {
	switch {
	case oldText == nil && newText == nil:
		return 0, 0
	case oldText == nil:
		return len(splitLines(*newText)), 0
	case newText == nil:
		return 0, len(splitLines(*oldText))
	}
	a, b := splitLines(*oldText), splitLines(*newText)
	// Trim the common prefix and suffix, then take an LCS of the middle.
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	if len(a) == 0 || len(b) == 0 || len(a)*len(b) > 4_000_000 {
		return len(b), len(a)
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			switch {
			case a[i-1] == b[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] >= cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	common := prev[len(b)]
	return len(b) - common, len(a) - common
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n")
}
