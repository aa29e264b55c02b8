package native

import (
	"encoding/json"
	"errors"
	sjson "github.com/segmentio/encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/ochat-dev/ochat/transcript"
)

// builder assembles canonical messages from a store's records, keeping the
// transcript invariants for every reader:
//  1. one provider turn → at most one assistant message (everything from a
//     real user message to the next lands in one assistant message);
//  2. adjacent reasoning/content segments merge;
//  3. a tool call is one segment, upserted by id (start, then result);
//  4. a tool result never becomes a user message.
type builder struct {
	t     *Transcript
	agent string
	cur   int            // index of the open assistant message, -1 after a user message
	tools map[string]int // tool call id → index of the message holding it
	// absorbed are tool calls mapped to something other than a tool segment
	// (a plan); their results are dropped.
	absorbed map[string]bool
	// children maps a child (subagent) session id to the tool call that
	// started it.
	children map[string]string
}

func newBuilder(t *Transcript, agent string) *builder {
	return &builder{t: t, agent: agent, cur: -1, tools: map[string]int{}, absorbed: map[string]bool{}, children: map[string]string{}}
}

func (b *builder) lastID() string {
	if n := len(b.t.Messages); n > 0 {
		return b.t.Messages[n-1].ID
	}
	return ""
}

// user appends a user message and closes the open assistant turn.
func (b *builder) user(id string, ts int64, content string, atts []transcript.Attachment, hidden bool) {
	b.t.Messages = append(b.t.Messages, transcript.Message{
		ID: id, Timestamp: ts, Role: transcript.RoleUser, Content: content, Attachments: atts, Hidden: hidden,
	})
	if !hidden {
		b.cur = -1
	}
}

// assistant returns the open assistant message, starting one with id if
// there is none.
func (b *builder) assistant(id string, ts int64) *transcript.Message {
	if b.cur < 0 {
		b.t.Messages = append(b.t.Messages, transcript.Message{
			ID: id, Timestamp: ts, Role: transcript.RoleAssistant, Agent: b.agent, Status: transcript.StatusCompleted,
		})
		b.cur = len(b.t.Messages) - 1
	}
	return &b.t.Messages[b.cur]
}

// text appends reasoning or content text, merging with an adjacent segment
// of the same type (separate blocks are joined by a blank line).
func (b *builder) text(id string, ts int64, typ transcript.SegmentType, s string) {
	if s == "" {
		return
	}
	m := b.assistant(id, ts)
	if n := len(m.Segments); n > 0 && m.Segments[n-1].Type == typ {
		prev := m.Segments[n-1].Content
		sep := "\n\n"
		if strings.HasSuffix(prev, "\n") || strings.HasPrefix(s, "\n") {
			sep = ""
		}
		m.Segments[n-1].Content = prev + sep + s
		return
	}
	m.Segments = append(m.Segments, transcript.Segment{Type: typ, Content: s})
}

// tool upserts a tool segment by id into the open turn (or into the turn
// that already holds it).
func (b *builder) tool(msgID string, ts int64, seg transcript.Segment) {
	if seg.Status == "" {
		seg.Status = string(transcript.ToolPending)
	}
	if i, ok := b.tools[seg.ID]; ok && seg.ID != "" {
		m := &b.t.Messages[i]
		for k := range m.Segments {
			if m.Segments[k].Type == transcript.SegTool && m.Segments[k].ID == seg.ID {
				old := m.Segments[k]
				if seg.Name == "" {
					seg.Name = old.Name
				}
				if seg.Input == nil {
					seg.Input = old.Input
				}
				if seg.Output == "" {
					seg.Output = old.Output
				}
				m.Segments[k] = seg
				return
			}
		}
	}
	m := b.assistant(msgID, ts)
	m.Segments = append(m.Segments, seg)
	if seg.ID != "" {
		b.tools[seg.ID] = b.cur
	}
}

// toolSeg returns the tool segment with call id, or nil.
func (b *builder) toolSeg(id string) *transcript.Segment {
	i, ok := b.tools[id]
	if !ok {
		return nil
	}
	m := &b.t.Messages[i]
	for k := range m.Segments {
		if m.Segments[k].Type == transcript.SegTool && m.Segments[k].ID == id {
			return &m.Segments[k]
		}
	}
	return nil
}

// result completes a tool call. It reports false if the call is unknown.
func (b *builder) result(id, output string, isErr bool, ts int64) bool {
	if b.absorbed[id] {
		return true
	}
	s := b.toolSeg(id)
	if s == nil {
		return false
	}
	if isErr {
		s.Status = string(transcript.ToolError)
		s.Error = output
	} else {
		s.Status = string(transcript.ToolCompleted)
		s.Output = output
	}
	return true
}

// fileChange inserts a fileChange segment right after the tool call it
// belongs to (or at the end of the open turn if the call is unknown).
func (b *builder) fileChange(msgID string, ts int64, fc transcript.Segment) {
	fc.Type = transcript.SegFileChange
	if fc.Status == "" {
		fc.Status = "applied"
	}
	if i, ok := b.tools[fc.ToolCallID]; ok && fc.ToolCallID != "" {
		m := &b.t.Messages[i]
		for k := range m.Segments {
			if m.Segments[k].Type == transcript.SegTool && m.Segments[k].ID == fc.ToolCallID {
				// after the tool and any fileChanges already following it
				j := k + 1
				for j < len(m.Segments) && m.Segments[j].Type == transcript.SegFileChange && m.Segments[j].ToolCallID == fc.ToolCallID {
					j++
				}
				m.Segments = append(m.Segments, transcript.Segment{})
				copy(m.Segments[j+1:], m.Segments[j:])
				m.Segments[j] = fc
				return
			}
		}
	}
	m := b.assistant(msgID, ts)
	m.Segments = append(m.Segments, fc)
}

// plan appends a plan segment (the whole plan as it is now).
func (b *builder) plan(msgID string, ts int64, callID string, entries []transcript.PlanEntry) {
	if callID != "" {
		b.absorbed[callID] = true
	}
	m := b.assistant(msgID, ts)
	m.Segments = append(m.Segments, transcript.Segment{Type: transcript.SegPlan, Entries: entries})
}

func (b *builder) marker(kind, text string, ts int64) {
	b.t.Markers = append(b.t.Markers, Marker{AfterID: b.lastID(), Kind: kind, Text: text, Timestamp: ts})
}

// finish fills the counts of the Session from the messages.
func (b *builder) finish() {
	s := &b.t.Session
	s.MessageCount, s.ToolCount = 0, 0
	for _, m := range b.t.Messages {
		if m.Hidden {
			continue
		}
		s.MessageCount++
		for _, seg := range m.Segments {
			if seg.Type == transcript.SegTool {
				s.ToolCount++
			}
		}
		if m.Timestamp > s.UpdatedAt {
			s.UpdatedAt = m.Timestamp
		}
		if s.CreatedAt == 0 || (m.Timestamp != 0 && m.Timestamp < s.CreatedAt) {
			s.CreatedAt = m.Timestamp
		}
	}
	for i := range b.t.Messages {
		if b.t.Messages[i].Segments == nil && b.t.Messages[i].Role == transcript.RoleAssistant {
			b.t.Messages[i].Segments = []transcript.Segment{}
		}
	}
	if b.t.Messages == nil {
		b.t.Messages = []transcript.Message{}
	}
}

// parseTime parses an RFC 3339 timestamp into Unix ms (0 if invalid).
func parseTime(s string) int64 {
	if s == "" {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

// countPatch counts added and removed lines of a unified diff body,
// ignoring file headers and "\ No newline at end of file".
func countPatch(diff string) (add, del int) {
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			// header (a removed line starting with "--" is rare enough)
		case strings.HasPrefix(l, "+"):
			add++
		case strings.HasPrefix(l, "-"):
			del++
		}
	}
	return
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

func intp(n int) *int { return &n }

func strp(s string) *string { return &s }

// jsonString decodes a raw JSON string, or returns "" for anything else.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// truncate shortens s to at most n bytes on a rune boundary, for titles.
func truncate(s string, n int) string {
	s = strings.TrimSpace(strings.Join(strings.Fields(s), " "))
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// isScaffold reports text injected into the user role by a CLI or harness
// (native-stores.md §0.6): environment blocks, instructions, reminders,
// command wrappers.
func isScaffold(s string) bool {
	t := strings.TrimSpace(s)
	for _, p := range scaffoldPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

var scaffoldPrefixes = []string{
	"<environment_context>", "<user_instructions>", "<permissions instructions>", "# AGENTS.md instructions",
	"<system-reminder>", "<local-command-caveat>", "<local-command-stdout>", "<local-command-stderr>",
	"<command-name>", "<command-message>", "<session_context>", "<bash-input>", "<bash-stdout>", "<bash-stderr>",
	"<user-prompt-submit-hook>", "<turn_aborted>", "<subagent_notification>", "Caveat: The messages below were generated",
}

// rollback removes the last n user turns (a user message and everything
// after it), as Codex's thread_rolled_back does.
func (b *builder) rollback(n int) {
	if n <= 0 {
		return
	}
	cut := len(b.t.Messages)
	for i := len(b.t.Messages) - 1; i >= 0 && n > 0; i-- {
		m := b.t.Messages[i]
		if m.Role == transcript.RoleUser && !m.Hidden {
			cut = i
			n--
		}
	}
	if n > 0 {
		cut = 0
	}
	b.t.Messages = b.t.Messages[:cut]
	for id, i := range b.tools {
		if i >= cut {
			delete(b.tools, id)
		}
	}
	// the turn before the removed ones is open again: output that follows
	// without a new user message belongs to it (one turn, one message)
	b.cur = -1
	if cut > 0 && b.t.Messages[cut-1].Role == transcript.RoleAssistant {
		b.cur = cut - 1
	}
}

func sortStrings(s []string) { sort.Strings(s) }

// decodeLenient is json.Unmarshal that tolerates a field of an unexpected
// JSON type (that field stays zero; the rest is decoded). Stores change
// field types between versions; one odd field must not lose a record.
// It decodes with segmentio's decoder (2-3x encoding/json on large
// records, same results), the same one history/ uses.
func decodeLenient(b []byte, v any) error {
	err := sjson.Unmarshal(b, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return nil
	}
	return err
}
