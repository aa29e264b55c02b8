package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/ochat-dev/ochat/transcript"
)

// rawUpdate is the union of the fields of every ACP session/update variant
// this package reads (schema: SessionUpdate, ToolCall, ToolCallUpdate, Plan,
// AvailableCommandsUpdate, CurrentModeUpdate, ConfigOptionUpdate,
// SessionInfoUpdate, UsageUpdate). It is decoded from the raw JSON on
// purpose: the SDK's decoder maps unknown sessionUpdate kinds onto known ones
// by field shape, so the kind is taken from the raw discriminator only.
// The same struct decodes the toolCall of a session/request_permission.
type rawUpdate struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Content       json.RawMessage `json:"content"` // ContentBlock for chunks, []ToolCallContent for tools
	ToolCallID    string          `json:"toolCallId"`
	Title         *string         `json:"title"`
	Kind          *string         `json:"kind"`
	Status        *string         `json:"status"`
	RawInput      json.RawMessage `json:"rawInput"`
	RawOutput     json.RawMessage `json:"rawOutput"`

	Entries           json.RawMessage `json:"entries"`
	AvailableCommands json.RawMessage `json:"availableCommands"`
	CurrentModeID     *string         `json:"currentModeId"`
	ConfigOptions     json.RawMessage `json:"configOptions"`
	Used              *int64          `json:"used"`
	Size              *int64          `json:"size"`
	Cost              *acp.Cost       `json:"cost"`
}

// contentBlock is the part of an ACP ContentBlock this package renders.
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	URI  string `json:"uri"`
	Name string `json:"name"`
}

// toolContent is one ACP ToolCallContent item: "content" (a ContentBlock),
// "diff" (path, oldText?, newText) or "terminal".
type toolContent struct {
	Type       string          `json:"type"`
	Content    json.RawMessage `json:"content"`
	Path       string          `json:"path"`
	OldText    *string         `json:"oldText"`
	NewText    *string         `json:"newText"`
	TerminalID string          `json:"terminalId"`
}

// updateKind classifies a decoded update for the caller.
type updateKind int

const (
	kindIgnored updateKind = iota // unknown kind, user chunk, malformed
	kindEvent                     // produced events
	kindState                     // produced state
)

// toolRec is what a session knows of one toolCallId.
type toolRec struct {
	seg     transcript.Segment
	started time.Time
	inTurn  bool                          // touched during the running prompt turn
	files   map[string]transcript.Segment // last fileChange emitted per path
}

// Caps on what one tool call may put into the transcript. Everything the
// mapper emits is capped, so the daemon's replay buffer, the store and every
// snapshot hold the capped version. A cut keeps the head and the tail and
// puts cutMarker in between.
const (
	// maxToolTextBytes caps a tool's Output (ACP ToolCall content text or
	// rawOutput) and its Input (rawInput, see capInput): 256 KB.
	maxToolTextBytes = 256 << 10
	// maxFileTextBytes caps a fileChange's OldText and NewText: 10 MB, the
	// size fs/write_text_file accepts (maxWriteBytes). They stay whole
	// below it, because apply and revert write them to disk.
	maxFileTextBytes = maxWriteBytes
)

// cutMarker is what replaces the middle of a capped text; %d is the number
// of bytes cut.
const cutMarker = "\n… [ochat: %d bytes cut] …\n"

// capText returns s unchanged when it has at most limit bytes, else its head
// and tail around cutMarker, at most limit bytes in all, both cut at UTF-8
// character boundaries.
func capText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// The marker is at most 64 bytes; keep the rest, half head, half tail.
	keep := max(limit-64, 0)
	head := keep / 2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	tail := len(s) - (keep - head)
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + fmt.Sprintf(cutMarker, tail-head) + s[tail:]
}

// capTextPtr is capText for an optional text (nil stays nil).
func capTextPtr(s *string, limit int) *string {
	if s == nil || len(*s) <= limit {
		return s
	}
	c := capText(*s, limit)
	return &c
}

// capInput returns a copy of a tool's rawInput of at most about limit bytes.
// A larger input keeps its JSON shape when it can: its long string values
// (a Write tool's file content, say) are cut with capText, each to a
// shorter length until the whole fits. An input that still does not fit
// (a huge array of short values) or is not valid JSON becomes a JSON string
// of its cut raw text.
func capInput(raw json.RawMessage, limit int) json.RawMessage {
	if len(raw) <= limit {
		return append(json.RawMessage(nil), raw...)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil {
		for each := limit / 4; each >= 1<<10; each /= 2 {
			if b, ok := encodeJSON(capStrings(v, each)); ok && len(b) <= limit {
				return b
			}
		}
	}
	text := strings.ToValidUTF8(string(raw), "\uFFFD")
	for l := limit; ; l -= l / 4 {
		// Escaping can make the encoded string longer than the text.
		if b, _ := encodeJSON(capText(text, l)); len(b) <= limit || l < 1<<10 {
			return b
		}
	}
}

// capStrings returns v (decoded JSON) with every string longer than each
// bytes cut by capText; v itself is not changed.
func capStrings(v any, each int) any {
	switch x := v.(type) {
	case string:
		return capText(x, each)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = capStrings(e, each)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[capText(k, each)] = capStrings(e, each)
		}
		return out
	}
	return v
}

// encodeJSON encodes v without HTML escaping and without the trailing
// newline.
func encodeJSON(v any) (json.RawMessage, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

// mapper turns the session/update stream of one session into live events and
// state. It holds the tool map (toolCallId → merged tool segment). It is not
// safe for concurrent use.
type mapper struct {
	tools map[string]*toolRec
	now   func() time.Time
	roots []string // workspace roots: fileChange diffs use paths relative to them
}

func newMapper(now func() time.Time, roots ...string) *mapper {
	if now == nil {
		now = time.Now
	}
	return &mapper{tools: make(map[string]*toolRec), now: now, roots: roots}
}

// mapped is the result of one update: events to deliver, and state if any.
type mapped struct {
	events []transcript.Event
	state  *State
	kind   string // raw sessionUpdate value
}

// updateNotification is the params of a session/update notification.
type updateNotification struct {
	SessionID string    `json:"sessionId"`
	Update    rawUpdate `json:"update"`
}

// decodeNotification decodes the params of a session/update in one pass.
func decodeNotification(params []byte) (*updateNotification, error) {
	var p updateNotification
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("decode session/update: %w", err)
	}
	if p.SessionID == "" {
		return nil, errors.New("decode session/update: no sessionId")
	}
	return &p, nil
}

// decodeUpdate decodes the "update" object of a session/update.
func decodeUpdate(raw []byte) (*rawUpdate, error) {
	var u rawUpdate
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// apply maps one update. live reports whether events may be produced (false
// while history is being replayed): tool state is only tracked for live
// updates, so a replayed tool call never reaches a live turn.
func (m *mapper) apply(u *rawUpdate, live bool) mapped {
	out := mapped{kind: u.SessionUpdate}
	switch u.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		if !live {
			return out
		}
		text := blockText(u.Content)
		if text == "" {
			return out
		}
		typ := transcript.EvContentDelta
		if u.SessionUpdate == "agent_thought_chunk" {
			typ = transcript.EvReasoningDelta
		}
		out.events = []transcript.Event{{Type: typ, Delta: text}}
	case "tool_call", "tool_call_update":
		if !live || u.ToolCallID == "" {
			return out
		}
		out.events = m.mergeTool(u, true)
	case "plan":
		if !live {
			return out
		}
		var entries []transcript.PlanEntry
		if len(u.Entries) > 0 && json.Unmarshal(u.Entries, &entries) != nil {
			return out
		}
		if entries == nil {
			entries = []transcript.PlanEntry{}
		}
		out.events = []transcript.Event{{Type: transcript.EvPlanUpdated, Entries: entries}}
	case "available_commands_update":
		var cmds []acp.AvailableCommand
		if !decodeEach(u.AvailableCommands, &cmds) {
			return out
		}
		if cmds == nil {
			cmds = []acp.AvailableCommand{}
		}
		out.state = &State{Commands: cmds}
	case "current_mode_update":
		if u.CurrentModeID == nil {
			return out
		}
		// The caller fills in the rest of the mode state.
		out.state = &State{Modes: &acp.SessionModeState{CurrentModeId: acp.SessionModeId(*u.CurrentModeID)}}
	case "config_option_update":
		var opts []acp.SessionConfigOption
		if !decodeEach(u.ConfigOptions, &opts) {
			return out
		}
		if opts == nil {
			opts = []acp.SessionConfigOption{}
		}
		out.state = &State{ConfigOptions: opts}
	case "usage_update":
		us := &Usage{}
		if u.Used != nil {
			us.Used = *u.Used
		}
		if u.Size != nil {
			us.Size = *u.Size
		}
		if u.Cost != nil {
			c := u.Cost.Amount
			us.Cost = &c
		}
		out.state = &State{Usage: us}
	case "session_info_update":
		if u.Title == nil || *u.Title == "" {
			return out
		}
		out.state = &State{Title: *u.Title}
	}
	return out
}

// decodeEach decodes a JSON array into *dst element by element, skipping
// elements that do not decode (one bad command or option degrades only
// itself). It reports false when raw is not an array at all.
func decodeEach[T any](raw json.RawMessage, dst *[]T) bool {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return false
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		var v T
		if json.Unmarshal(it, &v) == nil {
			out = append(out, v)
		}
	}
	*dst = out
	return true
}

// blockText renders an ACP ContentBlock as text: text blocks verbatim,
// resource links as a Markdown link; other kinds (image, audio, embedded
// resource) are not rendered.
func blockText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b contentBlock
	if json.Unmarshal(raw, &b) != nil {
		return ""
	}
	switch b.Type {
	case "text":
		return b.Text
	case "resource_link":
		name := b.Name
		if name == "" {
			name = b.URI
		}
		return "[" + name + "](" + b.URI + ")"
	}
	return ""
}

// toolStatus maps an ACP ToolCallStatus onto the canonical tool status; ok is
// false for an unknown value.
func toolStatus(s string) (transcript.ToolStatus, bool) {
	switch s {
	case "pending":
		return transcript.ToolPending, true
	case "in_progress":
		return transcript.ToolRunning, true
	case "completed":
		return transcript.ToolCompleted, true
	case "failed":
		return transcript.ToolError, true
	}
	return "", false
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func isEmptyObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	if len(t) < 2 || t[0] != '{' {
		return false
	}
	return len(bytes.TrimSpace(t[1:len(t)-1])) == 0 && t[len(t)-1] == '}'
}

// rawOutputText renders a tool's rawOutput: a JSON string verbatim; an object
// with a string "output", "stdout" or "content" field by that field (plus
// "stderr" if any); anything else as compact JSON.
func rawOutputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for _, k := range []string{"output", "stdout", "content", "formatted_output", "aggregated_output"} {
			if v, ok := obj[k]; ok && json.Unmarshal(v, &s) == nil {
				var errText string
				if e, ok := obj["stderr"]; ok && k == "stdout" {
					_ = json.Unmarshal(e, &errText)
				}
				if errText != "" {
					return s + errText
				}
				return s
			}
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

// mergeTool upserts u into the tool map (present fields overwrite, missing
// fields keep their value; update-before-create and create-twice are
// fine) and returns the activity.upsert events: the whole merged tool
// segment, then one fileChange per diff item that changed.
func (m *mapper) mergeTool(u *rawUpdate, inTurn bool) []transcript.Event {
	now := m.now()
	rec, ok := m.tools[u.ToolCallID]
	if !ok {
		rec = &toolRec{
			seg:     transcript.Segment{Type: transcript.SegTool, ID: u.ToolCallID, Status: string(transcript.ToolPending)},
			started: now,
		}
		m.tools[u.ToolCallID] = rec
	}
	if inTurn {
		rec.inTurn = true
	}
	seg := &rec.seg
	if u.Title != nil {
		seg.Name = *u.Title
	}
	if u.Kind != nil {
		seg.ProviderKind = *u.Kind
	}
	if !isNull(u.RawInput) && !(isEmptyObject(u.RawInput) && len(seg.Input) > 0) {
		seg.Input = capInput(u.RawInput, maxToolTextBytes)
	}
	var diffs []toolContent
	contentText, haveContentText := "", false
	if !isNull(u.Content) {
		var items []json.RawMessage
		if json.Unmarshal(u.Content, &items) == nil {
			var texts []string
			for _, it := range items {
				var tc toolContent
				if json.Unmarshal(it, &tc) != nil {
					continue
				}
				switch tc.Type {
				case "diff":
					if tc.Path != "" && tc.NewText != nil {
						diffs = append(diffs, tc)
					}
				case "content":
					if t := blockText(tc.Content); t != "" {
						texts = append(texts, t)
					}
				}
			}
			// content replaces the old content: its text replaces Output.
			contentText, haveContentText = strings.Join(texts, "\n"), true
		}
	}
	if haveContentText && (contentText != "" || isNull(u.RawOutput)) {
		seg.Output = contentText
	}
	if !isNull(u.RawOutput) && (!haveContentText || contentText == "") {
		seg.Output = rawOutputText(u.RawOutput)
	}
	seg.Output = capText(seg.Output, maxToolTextBytes)
	if u.Status != nil {
		if st, ok := toolStatus(*u.Status); ok {
			seg.Status = string(st)
			switch st {
			case transcript.ToolCompleted, transcript.ToolError:
				seg.DurationMs = now.Sub(rec.started).Milliseconds()
				if st == transcript.ToolError && seg.Error == "" {
					seg.Error = seg.Output
					if seg.Error == "" {
						seg.Error = "failed"
					}
				}
			default:
				seg.DurationMs = 0
				seg.Error = ""
			}
		}
	}
	toolSeg := *seg
	evs := []transcript.Event{{Type: transcript.EvActivityUpsert, Segment: &toolSeg}}
	for _, fc := range m.fileChanges(rec, diffs) {
		evs = append(evs, transcript.Event{Type: transcript.EvActivityUpsert, Segment: &fc})
	}
	return evs
}

// fileChanges builds one fileChange segment per diff and returns those that
// differ from the last one emitted for the same tool and path.
func (m *mapper) fileChanges(rec *toolRec, diffs []toolContent) []transcript.Segment {
	var out []transcript.Segment
	for _, d := range diffs {
		fc := m.fileChangeSegment(rec.seg.ID, d)
		if prev, ok := rec.files[d.Path]; ok && sameText(prev.OldText, fc.OldText) && sameText(prev.NewText, fc.NewText) {
			continue
		}
		if rec.files == nil {
			rec.files = make(map[string]transcript.Segment)
		}
		rec.files[d.Path] = fc
		out = append(out, fc)
	}
	return out
}

// fileChangeSegment builds the fileChange segment of one ACP diff: the path
// as the agent sent it, additions and deletions (transcript.CountLines), the
// texts, and a unified diff whose headers use the workspace-relative path. A
// nil or absent oldText means the file is new; "" is kept as an empty old
// text.
func (m *mapper) fileChangeSegment(toolCallID string, d toolContent) transcript.Segment {
	d.OldText, d.NewText = capTextPtr(d.OldText, maxFileTextBytes), capTextPtr(d.NewText, maxFileTextBytes)
	adds, dels := transcript.CountLines(d.OldText, d.NewText)
	return transcript.Segment{
		Type:       transcript.SegFileChange,
		Path:       d.Path,
		Additions:  &adds,
		Deletions:  &dels,
		Diff:       transcript.UnifiedDiff(m.relPath(d.Path), d.OldText, d.NewText),
		NewText:    d.NewText,
		OldText:    d.OldText,
		ToolCallID: toolCallID,
	}
}

// relPath returns p relative to the first workspace root containing it, else
// p unchanged.
func (m *mapper) relPath(p string) string {
	clean := filepath.Clean(p)
	for _, r := range m.roots {
		if r != "" && within(r, clean) {
			if rel, err := filepath.Rel(r, clean); err == nil {
				return rel
			}
		}
	}
	return p
}

func sameText(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// mergePermissionTool merges the toolCall of a permission request and returns
// the merged tool segment, the fileChange segments of every diff in it, and
// the events to deliver.
func (m *mapper) mergePermissionTool(u *rawUpdate) (transcript.Segment, []transcript.Segment, []transcript.Event) {
	// The toolCall of a permission request may say "pending" of a tool the
	// agent already reported running: a tool does not go back.
	if rec, ok := m.tools[u.ToolCallID]; ok && u.Status != nil && *u.Status == "pending" &&
		rec.seg.Status != string(transcript.ToolPending) {
		c := *u
		c.Status = nil
		u = &c
	}
	evs := m.mergeTool(u, true)
	tool := *m.tools[u.ToolCallID]
	var fcs []transcript.Segment
	if !isNull(u.Content) {
		var items []toolContent
		if json.Unmarshal(u.Content, &items) == nil {
			for _, it := range items {
				if it.Type == "diff" && it.Path != "" && it.NewText != nil {
					fcs = append(fcs, m.fileChangeSegment(u.ToolCallID, it))
				}
			}
		}
	}
	if fcs == nil {
		// codex-acp 2.x asks with a bare toolCall (no content): the diffs
		// its earlier tool_call sent are what the question is about.
		for _, p := range slices.Sorted(maps.Keys(m.tools[u.ToolCallID].files)) {
			fcs = append(fcs, m.tools[u.ToolCallID].files[p])
		}
	}
	if fcs == nil {
		fcs = []transcript.Segment{}
	}
	return tool.seg, fcs, evs
}

// beginTurn forgets finished tools and clears the in-turn marks.
func (m *mapper) beginTurn() {
	for id, r := range m.tools {
		if r.seg.Status == string(transcript.ToolCompleted) || r.seg.Status == string(transcript.ToolError) {
			delete(m.tools, id)
			continue
		}
		r.inTurn = false
	}
}

// closeOpen marks every tool of the ended turn that is still pending or
// running as error with the given message and returns the events.
func (m *mapper) closeOpen(msg string) []transcript.Event {
	now := m.now()
	var evs []transcript.Event
	for _, r := range m.tools {
		if !r.inTurn {
			continue
		}
		if r.seg.Status != string(transcript.ToolPending) && r.seg.Status != string(transcript.ToolRunning) {
			continue
		}
		r.seg.Status = string(transcript.ToolError)
		r.seg.Error = msg
		r.seg.DurationMs = now.Sub(r.started).Milliseconds()
		seg := r.seg
		evs = append(evs, transcript.Event{Type: transcript.EvActivityUpsert, Segment: &seg})
	}
	sortEventsByID(evs)
	return evs
}

// droppedLine returns the activity.upsert that marks an agent line dropped
// for its length (see Conn.onDroppedLine): the tool toolCallID, known or
// not, set to status error with msg; without a toolCallID a new tool
// segment id named DroppedToolName with status error and msg.
func (m *mapper) droppedLine(id, toolCallID, msg string) []transcript.Event {
	now := m.now()
	seg := transcript.Segment{Type: transcript.SegTool, ID: id, Name: DroppedToolName,
		Status: string(transcript.ToolError), Error: msg}
	if toolCallID != "" {
		rec, ok := m.tools[toolCallID]
		if !ok {
			rec = &toolRec{seg: transcript.Segment{Type: transcript.SegTool, ID: toolCallID, Name: DroppedToolName}, started: now}
			m.tools[toolCallID] = rec
		}
		rec.inTurn = true
		rec.seg.Status = string(transcript.ToolError)
		rec.seg.Error = msg
		rec.seg.DurationMs = now.Sub(rec.started).Milliseconds()
		seg = rec.seg
	}
	return []transcript.Event{{Type: transcript.EvActivityUpsert, Segment: &seg}}
}

// reset forgets every tool (after a history replay).
func (m *mapper) reset() {
	clear(m.tools)
}

func sortEventsByID(evs []transcript.Event) {
	// Insertion sort: few open tools, deterministic order for tests.
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].Segment.ID < evs[j-1].Segment.ID; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}
