package transcript

import (
	"fmt"
	"strings"
)

// MergeContent returns the final answer of a turn: the text of its content
// segments in order. Content segments separated by other segments (tools,
// reasoning…) are joined with a blank line unless a newline already separates
// them.
func MergeContent(segs []Segment) string {
	var b strings.Builder
	prev := -1 // index of the last content segment written
	for i, s := range segs {
		if s.Type != SegContent || s.Content == "" {
			continue
		}
		if prev >= 0 {
			cur := b.String()
			switch {
			case prev == i-1 || strings.HasSuffix(cur, "\n\n") || strings.HasPrefix(s.Content, "\n\n"):
			case strings.HasSuffix(cur, "\n") || strings.HasPrefix(s.Content, "\n"):
				b.WriteByte('\n')
			default:
				b.WriteString("\n\n")
			}
		}
		b.WriteString(s.Content)
		prev = i
	}
	return b.String()
}

// Summary counts the activity of one assistant message (the line an editor
// shows above a folded turn).
type Summary struct {
	Reasoning     int            `json:"reasoning"`               // reasoning segments
	ToolCalls     int            `json:"toolCalls"`               // tool segments
	ToolsByStatus map[string]int `json:"toolsByStatus,omitempty"` // tool status ("pending", "running", "completed", "error", or as sent) → count
	FileChanges   int            `json:"fileChanges"`             // fileChange segments (distinct paths), not counting status "rejected"
	Additions     int            `json:"additions"`               // lines, summed over file changes that report them
	Deletions     int            `json:"deletions"`               // lines
	PlanDone      int            `json:"planDone"`                // plan entries with status completed
	PlanTotal     int            `json:"planTotal"`               // plan entries
	Files         int            `json:"files"`                   // paths listed by workspace segments
}

// Summarize counts reasoning segments, tool calls by status, file changes
// with their +additions/-deletions and plan progress of m.
func Summarize(m Message) Summary {
	var s Summary
	for _, seg := range m.Segments {
		switch seg.Type {
		case SegReasoning:
			s.Reasoning++
		case SegTool:
			s.ToolCalls++
			if s.ToolsByStatus == nil {
				s.ToolsByStatus = map[string]int{}
			}
			s.ToolsByStatus[seg.Status]++
		case SegFileChange:
			if seg.Status == "rejected" { // the write did not happen
				continue
			}
			s.FileChanges++
			if seg.Additions != nil {
				s.Additions += *seg.Additions
			}
			if seg.Deletions != nil {
				s.Deletions += *seg.Deletions
			}
		case SegPlan:
			s.PlanTotal += len(seg.Entries)
			for _, e := range seg.Entries {
				if e.Status == "completed" {
					s.PlanDone++
				}
			}
		case SegWorkspace:
			s.Files += len(seg.Files)
		}
	}
	return s
}

// String renders s as one short English line, for example
// "2 thoughts · 3 tool calls (1 error) · 2 files +10 -3 · plan 2/5";
// "" when there was no activity.
func (s Summary) String() string {
	var parts []string
	if s.Reasoning > 0 {
		parts = append(parts, plural(s.Reasoning, "thought"))
	}
	if s.ToolCalls > 0 {
		p := plural(s.ToolCalls, "tool call")
		var notes []string
		for _, st := range []string{string(ToolError), string(ToolRunning), string(ToolPending)} {
			if n := s.ToolsByStatus[st]; n > 0 {
				notes = append(notes, fmt.Sprintf("%d %s", n, st))
			}
		}
		if len(notes) > 0 {
			p += " (" + strings.Join(notes, ", ") + ")"
		}
		parts = append(parts, p)
	}
	if s.FileChanges > 0 {
		parts = append(parts, fmt.Sprintf("%s +%d -%d", plural(s.FileChanges, "file"), s.Additions, s.Deletions))
	}
	if s.PlanTotal > 0 {
		parts = append(parts, fmt.Sprintf("plan %d/%d", s.PlanDone, s.PlanTotal))
	}
	return strings.Join(parts, " · ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// scaffoldingTags are the XML-ish blocks coding agents inject into "user"
// content (research/native-stores.md, "Scaffolding is injected as user
// content"): Claude Code 2.x (<system-reminder>, local command output,
// hooks, task notifications), Codex 0.1xx (<environment_context>,
// <user_instructions>, <permissions instructions>, AGENTS.md
// <INSTRUCTIONS>, <turn_aborted>, skills), Gemini CLI (<session_context>),
// and ochat's own <handoff> block.
var scaffoldingTags = []string{
	"system-reminder",
	"local-command-caveat",
	"local-command-stdout",
	"local-command-stderr",
	"user-prompt-submit-hook",
	"task-notification",
	"environment_context",
	"user_instructions",
	"permissions instructions",
	"skills_instructions",
	"apps_instructions",
	"collaboration_mode",
	"INSTRUCTIONS",
	"turn_aborted",
	"session_context",
	"handoff",
}

// interruptionMarkers are whole-line markers Claude Code writes as user text.
var interruptionMarkers = []string{
	"[Request interrupted by user for tool use]",
	"[Request interrupted by user]",
}

// StripScaffolding returns the text a user typed, without the blocks agents
// inject into user content: every scaffoldingTags block with its body, the
// "# AGENTS.md instructions for …" heading Codex puts before <INSTRUCTIONS>,
// Codex's "# Files mentioned by the user" preamble up to "## My request for
// Codex:", and Claude's interruption markers. A Claude slash command
// (<command-name>/x</command-name> … <command-args>a</command-args>)
// becomes "/x a". An unclosed block is kept. Surrounding blank space is
// trimmed; the result is "" when only scaffolding was there.
func StripScaffolding(text string) string {
	if !strings.ContainsAny(text, "<[#") {
		return strings.TrimSpace(text)
	}
	if name, ok := tagBody(text, "command-name"); ok {
		cmd := strings.TrimSpace(name)
		if args, ok := tagBody(text, "command-args"); ok && strings.TrimSpace(args) != "" {
			cmd += " " + strings.TrimSpace(args)
		}
		text = removeTag(removeTag(removeTag(text, "command-name"), "command-message"), "command-args")
		rest := strings.TrimSpace(StripScaffolding(text))
		if rest == "" {
			return cmd
		}
		return cmd + "\n" + rest
	}
	for _, tag := range scaffoldingTags {
		text = removeTag(text, tag)
	}
	if i := strings.Index(text, "# Files mentioned by the user"); i >= 0 {
		const req = "## My request for Codex:"
		if j := strings.Index(text[i:], req); j >= 0 {
			text = text[:i] + text[i+j+len(req):]
		}
	}
	for {
		i := strings.Index(text, "# AGENTS.md instructions for ")
		if i < 0 {
			break
		}
		end := strings.IndexByte(text[i:], '\n')
		if end < 0 {
			end = len(text) - i
		}
		text = text[:i] + text[i+end:]
	}
	for _, mk := range interruptionMarkers {
		text = strings.ReplaceAll(text, mk, "")
	}
	return strings.TrimSpace(text)
}

// tagBody returns the body of the first <tag>…</tag> in text.
func tagBody(text, tag string) (string, bool) {
	open, closing := "<"+tag+">", "</"+tag+">"
	i := strings.Index(text, open)
	if i < 0 {
		return "", false
	}
	j := strings.Index(text[i+len(open):], closing)
	if j < 0 {
		return "", false
	}
	return text[i+len(open) : i+len(open)+j], true
}

// removeTag removes every complete <tag …>…</tag> block (attributes
// allowed) from text.
func removeTag(text, tag string) string {
	open, closing := "<"+tag, "</"+tag+">"
	from := 0
	for {
		i := strings.Index(text[from:], open)
		if i < 0 {
			return text
		}
		i += from
		next := i + len(open)
		if next >= len(text) || (text[next] != '>' && text[next] != ' ' && text[next] != '\n') {
			from = next
			continue
		}
		j := strings.Index(text[next:], closing)
		if j < 0 {
			return text
		}
		text = text[:i] + text[next+j+len(closing):]
		from = i
	}
}
