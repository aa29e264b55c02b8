package transcript

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func sp(s string) *string { return &s }

func TestCountLines(t *testing.T) {
	tests := []struct {
		name       string
		old, new   *string
		adds, dels int
	}{
		{"both nil", nil, nil, 0, 0},
		{"created", nil, sp("a\nb\nc\n"), 3, 0},
		{"created no trailing newline", nil, sp("a\nb"), 2, 0},
		{"created empty", nil, sp(""), 0, 0},
		{"deleted", sp("a\nb\n"), nil, 0, 2},
		{"equal", sp("a\nb\n"), sp("a\nb\n"), 0, 0},
		{"one line changed", sp("a\nb\nc\n"), sp("a\nB\nc\n"), 1, 1},
		{"append", sp("a\n"), sp("a\nb\nc\n"), 2, 0},
		{"remove middle", sp("a\nb\nc\n"), sp("a\nc\n"), 0, 1},
		{"trailing newline added", sp("a\nb"), sp("a\nb\n"), 1, 1},
		{"empty to text", sp(""), sp("x\ny\n"), 2, 0},
		{"reorder", sp("a\nb\nc\n"), sp("c\na\nb\n"), 1, 1},
		{"repeated lines", sp("x\nx\nx\ny\n"), sp("x\ny\nx\nx\n"), 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, d := CountLines(tt.old, tt.new)
			if a != tt.adds || d != tt.dels {
				t.Errorf("CountLines = +%d -%d, want +%d -%d", a, d, tt.adds, tt.dels)
			}
		})
	}
}

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		old, new *string
		want     string
	}{
		{"equal", "a.txt", sp("x\n"), sp("x\n"), ""},
		{"created", "/a.txt", nil, sp("one\ntwo\n"),
			"--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"},
		{"deleted", "a.txt", sp("one\n"), nil,
			"--- a/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"},
		{"created empty", "e", nil, sp(""), "--- /dev/null\n+++ b/e\n"},
		{"change with context", "f.go", sp("1\n2\n3\n4\n5\n6\n7\n8\n"), sp("1\n2\n3\n4\nfive\n6\n7\n8\n"),
			"--- a/f.go\n+++ b/f.go\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{"no newline at end", "n", sp("a\nb"), sp("a\nc"),
			"--- a/n\n+++ b/n\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"two hunks", "h", sp("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"), sp("x\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ny\n"),
			"--- a/h\n+++ b/h\n@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+y\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UnifiedDiff(tt.path, tt.old, tt.new); got != tt.want {
				t.Errorf("UnifiedDiff =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// applyUnified applies a diff made by UnifiedDiff to old (a minimal patch
// reader for the test; it trusts hunk order).
func applyUnified(old, diff string) (string, error) {
	oldLines := splitOps(' ', old)
	var out strings.Builder
	pos := 0 // next old line index
	lines := strings.SplitAfter(diff, "\n")
	inHunks := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if l == "" || !inHunks && (strings.HasPrefix(l, "---") || strings.HasPrefix(l, "+++")) {
			continue
		}
		if strings.HasPrefix(l, "@@ ") {
			inHunks = true
			f := strings.Fields(l)
			r := strings.TrimPrefix(f[1], "-")
			start, count, _ := strings.Cut(r, ",")
			n, err := strconv.Atoi(start)
			if err != nil {
				return "", err
			}
			if count == "0" {
				n++ // an empty range names the line before it
			}
			for pos < n-1 {
				out.WriteString(oldLines[pos].text)
				pos++
			}
			continue
		}
		text := l[1:]
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], `\ No newline`) {
			text = strings.TrimSuffix(text, "\n")
			i++
		}
		switch l[0] {
		case ' ':
			if pos >= len(oldLines) || oldLines[pos].text != text {
				return "", fmt.Errorf("context mismatch at old line %d", pos+1)
			}
			out.WriteString(text)
			pos++
		case '-':
			if pos >= len(oldLines) || oldLines[pos].text != text {
				return "", fmt.Errorf("delete mismatch at old line %d", pos+1)
			}
			pos++
		case '+':
			out.WriteString(text)
		default:
			return "", fmt.Errorf("bad line %q", l)
		}
	}
	for ; pos < len(oldLines); pos++ {
		out.WriteString(oldLines[pos].text)
	}
	return out.String(), nil
}

func randomText(r *rand.Rand) string {
	var b strings.Builder
	n := r.IntN(30)
	for range n {
		fmt.Fprintf(&b, "l%d\n", r.IntN(6))
	}
	if r.IntN(4) == 0 {
		b.WriteString("tail")
	}
	return b.String()
}

// TestUnifiedDiffApplies checks on random texts that the diff turns old into
// new and that its +/- lines agree with CountLines.
func TestUnifiedDiffApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a, b := randomText(r), randomText(r)
		d := UnifiedDiff("f", &a, &b)
		got, err := applyUnified(a, d)
		if err != nil || got != b {
			t.Fatalf("case %d: apply(%q, diff) = %q, %v; want %q\ndiff:\n%s", i, a, got, err, b, d)
		}
		adds, dels := CountLines(&a, &b)
		var pa, pd int
		for l := range strings.Lines(d) {
			switch {
			case strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---"):
			case l[0] == '+':
				pa++
			case l[0] == '-':
				pd++
			}
		}
		if pa != adds || pd != dels {
			t.Fatalf("case %d: diff has +%d -%d, CountLines +%d -%d", i, pa, pd, adds, dels)
		}
		// Minimal: never more changes than delete-all/add-all.
		if adds > countTextLines(b) || dels > countTextLines(a) {
			t.Fatalf("case %d: non-minimal +%d -%d", i, adds, dels)
		}
	}
}
