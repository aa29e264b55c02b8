package transcript

import (
	"fmt"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// lineOp is one line of a line diff: ' ' (kept), '-' (deleted) or '+' (added).
type lineOp struct {
	op   byte
	text string // the line including its trailing "\n", if it had one
}

// lineDiff returns the minimal line diff of oldText and newText (Myers, via
// github.com/sergi/go-diff in line mode with no timeout, so no clock is read
// and the result is deterministic). A last line without a trailing newline is
// a different line from the same text with one, as in git.
func lineDiff(oldText, newText string) []lineOp {
	if oldText == newText {
		return nil
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0 // unlimited: minimal diff, and DiffMainRunes never calls time.Now
	a, b, lines := dmp.DiffLinesToRunes(oldText, newText)
	diffs := dmp.DiffMainRunes(a, b, false)
	ops := make([]lineOp, 0, len(a)+len(b))
	for _, d := range diffs {
		var op byte
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			op = ' '
		case diffmatchpatch.DiffDelete:
			op = '-'
		default:
			op = '+'
		}
		for _, r := range d.Text {
			ops = append(ops, lineOp{op: op, text: lines[int(r)]})
		}
	}
	return ops
}

// countTextLines returns the number of lines in s: "" has none, and a last
// line without a trailing newline counts.
func countTextLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// CountLines returns how many lines a change from oldText to newText adds and
// deletes, from a minimal line diff (the figures git diff --numstat gives).
// A nil oldText means the file did not exist (every new line is an addition);
// a nil newText means it was deleted (every old line is a deletion).
// Agents use it to fill fileChange Additions and Deletions from an ACP diff
// (ToolCallContent "diff": path, oldText?, newText).
func CountLines(oldText, newText *string) (adds, dels int) {
	switch {
	case oldText == nil && newText == nil:
		return 0, 0
	case oldText == nil:
		return countTextLines(*newText), 0
	case newText == nil:
		return 0, countTextLines(*oldText)
	}
	for _, o := range lineDiff(*oldText, *newText) {
		switch o.op {
		case '+':
			adds++
		case '-':
			dels++
		}
	}
	return adds, dels
}

// diffContext is the number of unchanged lines shown around each change.
const diffContext = 3

// UnifiedDiff returns a git-style unified diff (3 lines of context, "\ No
// newline at end of file" markers) from oldText to newText for path. nil
// oldText shows the file as created (--- /dev/null), nil newText as deleted
// (+++ /dev/null). Headers are "a/"+path and "b/"+path with any leading "/"
// removed, so pass a workspace-relative path for a diff that git apply
// accepts. Equal texts give "".
func UnifiedDiff(path string, oldText, newText *string) string {
	var oldS, newS string
	if oldText != nil {
		oldS = *oldText
	}
	if newText != nil {
		newS = *newText
	}
	if oldS == newS && (oldText == nil) == (newText == nil) {
		return ""
	}
	rel := strings.TrimPrefix(path, "/")
	from, to := "a/"+rel, "b/"+rel
	if oldText == nil {
		from = "/dev/null"
	}
	if newText == nil {
		to = "/dev/null"
	}
	var ops []lineOp
	switch {
	case oldText == nil:
		ops = splitOps('+', newS)
	case newText == nil:
		ops = splitOps('-', oldS)
	default:
		ops = lineDiff(oldS, newS)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", from, to)
	writeHunks(&b, ops)
	return b.String()
}

// splitOps turns every line of s into an op of kind op.
func splitOps(op byte, s string) []lineOp {
	var ops []lineOp
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			ops = append(ops, lineOp{op, s})
			break
		}
		ops = append(ops, lineOp{op, s[:i+1]})
		s = s[i+1:]
	}
	return ops
}

// writeHunks writes the @@ hunks of ops with diffContext lines of context.
func writeHunks(b *strings.Builder, ops []lineOp) {
	// Line numbers (1-based) of each op in the old and new file.
	oldLine := make([]int, len(ops)+1)
	newLine := make([]int, len(ops)+1)
	o, n := 1, 1
	for i, op := range ops {
		oldLine[i], newLine[i] = o, n
		if op.op != '+' {
			o++
		}
		if op.op != '-' {
			n++
		}
	}
	oldLine[len(ops)], newLine[len(ops)] = o, n

	i := 0
	for i < len(ops) {
		// Find the next change.
		for i < len(ops) && ops[i].op == ' ' {
			i++
		}
		if i == len(ops) {
			return
		}
		start := max(i-diffContext, 0)
		// Extend the hunk while changes are within 2*context of each other.
		end := i
		for {
			for end < len(ops) && ops[end].op != ' ' {
				end++
			}
			next := end
			for next < len(ops) && ops[next].op == ' ' {
				next++
			}
			if next < len(ops) && next-end <= 2*diffContext {
				end = next
				continue
			}
			end = min(end+diffContext, len(ops))
			break
		}
		var oldCount, newCount int
		for _, op := range ops[start:end] {
			if op.op != '+' {
				oldCount++
			}
			if op.op != '-' {
				newCount++
			}
		}
		oldStart, newStart := oldLine[start], newLine[start]
		if oldCount == 0 {
			oldStart--
		}
		if newCount == 0 {
			newStart--
		}
		fmt.Fprintf(b, "@@ -%s +%s @@\n", hunkRange(oldStart, oldCount), hunkRange(newStart, newCount))
		for _, op := range ops[start:end] {
			b.WriteByte(op.op)
			b.WriteString(op.text)
			if !strings.HasSuffix(op.text, "\n") {
				b.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
}

func hunkRange(start, count int) string {
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}
