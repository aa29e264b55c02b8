package transcript

import "strings"

// Workspace blocks.
//
// A gateway or agent may report the files a turn touched as a block inside
// the answer text:
//
//	<files>
//	src/main.go
//	README.md
//	error: docs/x.md: permission denied
//	</files>
//
// One entry per line, surrounding blanks trimmed; a line starting with
// "error:" is an error (the rest of the line, trimmed), any other non-empty
// line a file path. Such a block inside a content segment becomes a
// workspace segment {Files, Errors} at that position (DESIGN.md, history
// wire form). A "<files>" with no closing "</files>" is still being streamed
// and stays text.
const (
	filesOpen  = "<files>"
	filesClose = "</files>"
)

// splitWorkspaceBlocks returns segs with every complete <files> block inside
// content segments turned into a workspace segment, and adjacent text of the
// same type merged. It returns segs itself when there is nothing to split.
func splitWorkspaceBlocks(segs []Segment) []Segment {
	found := false
	for _, s := range segs {
		if s.Type == SegContent && hasFilesBlock(s.Content) {
			found = true
			break
		}
	}
	if !found {
		return segs
	}
	out := make([]Segment, 0, len(segs)+2)
	for _, s := range segs {
		if s.Type != SegContent {
			out = append(out, s)
			continue
		}
		for _, p := range splitFiles(s.Content) {
			out = appendMerged(out, p)
		}
	}
	return out
}

func hasFilesBlock(s string) bool {
	i := strings.Index(s, filesOpen)
	return i >= 0 && strings.Contains(s[i+len(filesOpen):], filesClose)
}

// splitFiles splits text into content and workspace segments, in order.
// Empty text parts are dropped.
func splitFiles(text string) []Segment {
	var out []Segment
	for {
		i := strings.Index(text, filesOpen)
		if i < 0 {
			break
		}
		j := strings.Index(text[i+len(filesOpen):], filesClose)
		if j < 0 {
			break
		}
		if i > 0 {
			out = append(out, Segment{Type: SegContent, Content: text[:i]})
		}
		body := text[i+len(filesOpen) : i+len(filesOpen)+j]
		out = append(out, parseFilesBlock(body))
		text = text[i+len(filesOpen)+j+len(filesClose):]
	}
	if text != "" {
		out = append(out, Segment{Type: SegContent, Content: text})
	}
	return out
}

func parseFilesBlock(body string) Segment {
	seg := Segment{Type: SegWorkspace}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "error:"):
			seg.Errors = append(seg.Errors, strings.TrimSpace(strings.TrimPrefix(line, "error:")))
		default:
			seg.Files = append(seg.Files, line)
		}
	}
	return seg
}

// appendMerged appends s to segs, merging it into the last segment when both
// are content or both reasoning; empty text is dropped.
func appendMerged(segs []Segment, s Segment) []Segment {
	if s.Type == SegContent || s.Type == SegReasoning {
		if s.Content == "" {
			return segs
		}
		if n := len(segs); n > 0 && segs[n-1].Type == s.Type {
			segs[n-1].Content += s.Content
			return segs
		}
	}
	return append(segs, s)
}
