package transcript

import (
	"encoding/json"
	"strconv"
)

// RecordKind names the kind of a history record: "user" or a segment type.
type RecordKind string

// Record kinds (DESIGN.md, "History wire form").
const (
	KindUser       RecordKind = "user"
	KindReasoning  RecordKind = RecordKind(SegReasoning)
	KindContent    RecordKind = RecordKind(SegContent)
	KindTool       RecordKind = RecordKind(SegTool)
	KindPlan       RecordKind = RecordKind(SegPlan)
	KindFileChange RecordKind = RecordKind(SegFileChange)
	KindWorkspace  RecordKind = RecordKind(SegWorkspace)
)

// Record is one entry of the flat history wire form (ochat/history): one per
// user message and one per assistant segment, in time order. Every record
// has ID, Timestamp (Unix ms), Kind and MessageID (the message it belongs
// to); assistant records carry Agent. The remaining fields are those of the
// user message (Content, Attachments, Hidden) or of the segment (see
// Segment; Content for reasoning and content).
//
// The assistant message's own state travels on its last record as
// TurnStatus, StopReason, TurnError and TurnDurationMs (named apart from the
// segment's Status, Error and DurationMs). An assistant message with no
// segments is one content record with empty Content.
//
// IDs: a user record's ID is its message ID; a segment record's ID is
// "<messageId>/<segment index>".
type Record struct {
	ID        string     `json:"id"`
	Timestamp int64      `json:"timestamp"` // Unix ms
	Kind      RecordKind `json:"kind"`
	MessageID string     `json:"messageId"`
	Agent     string     `json:"agent,omitempty"`

	// user (Content also for reasoning and content)
	Content     string       `json:"content,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	Hidden      bool         `json:"hidden,omitempty"`

	// tool
	ToolID       string          `json:"toolId,omitempty"` // Segment.ID
	Name         string          `json:"name,omitempty"`
	Status       string          `json:"status,omitempty"`
	ProviderKind string          `json:"providerKind,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	Output       string          `json:"output,omitempty"`
	Error        string          `json:"error,omitempty"`
	DurationMs   int64           `json:"durationMs,omitempty"`

	// plan
	Entries []PlanEntry `json:"entries,omitempty"`

	// fileChange
	Path       string  `json:"path,omitempty"`
	Additions  *int    `json:"additions,omitempty"`
	Deletions  *int    `json:"deletions,omitempty"`
	Diff       string  `json:"diff,omitempty"`
	OldText    *string `json:"oldText,omitempty"`
	NewText    *string `json:"newText,omitempty"`
	ToolCallID string  `json:"toolCallId,omitempty"`
	Change     string  `json:"change,omitempty"`
	OldPath    string  `json:"oldPath,omitempty"`
	Origin     string  `json:"origin,omitempty"`
	Binary     bool    `json:"binary,omitempty"`
	ModeChange string  `json:"modeChange,omitempty"`
	Note       string  `json:"note,omitempty"`

	// workspace
	Files  []string `json:"files,omitempty"`
	Errors []string `json:"errors,omitempty"`

	// assistant message state (last record of the message only)
	TurnStatus     MessageStatus `json:"turnStatus,omitempty"`
	StopReason     string        `json:"stopReason,omitempty"`
	TurnError      string        `json:"turnError,omitempty"`
	TurnDurationMs int64         `json:"turnDurationMs,omitempty"`
}

// Segment returns the segment a non-user record describes.
func (r *Record) Segment() Segment {
	return Segment{
		Type:         SegmentType(r.Kind),
		Content:      r.Content,
		ID:           r.ToolID,
		Name:         r.Name,
		Status:       r.Status,
		ProviderKind: r.ProviderKind,
		Input:        r.Input,
		Output:       r.Output,
		Error:        r.Error,
		DurationMs:   r.DurationMs,
		Entries:      r.Entries,
		Path:         r.Path,
		Additions:    r.Additions,
		Deletions:    r.Deletions,
		Diff:         r.Diff,
		OldText:      r.OldText,
		NewText:      r.NewText,
		ToolCallID:   r.ToolCallID,
		Change:       r.Change,
		OldPath:      r.OldPath,
		Origin:       r.Origin,
		Binary:       r.Binary,
		ModeChange:   r.ModeChange,
		Note:         r.Note,
		Files:        r.Files,
		Errors:       r.Errors,
	}
}

func segmentRecord(id string, m *Message, s *Segment) Record {
	return Record{
		ID:           id,
		Timestamp:    m.Timestamp,
		Kind:         RecordKind(s.Type),
		MessageID:    m.ID,
		Agent:        m.Agent,
		Content:      s.Content,
		ToolID:       s.ID,
		Name:         s.Name,
		Status:       s.Status,
		ProviderKind: s.ProviderKind,
		Input:        s.Input,
		Output:       s.Output,
		Error:        s.Error,
		DurationMs:   s.DurationMs,
		Entries:      s.Entries,
		Path:         s.Path,
		Additions:    s.Additions,
		Deletions:    s.Deletions,
		Diff:         s.Diff,
		OldText:      s.OldText,
		NewText:      s.NewText,
		ToolCallID:   s.ToolCallID,
		Change:       s.Change,
		OldPath:      s.OldPath,
		Origin:       s.Origin,
		Binary:       s.Binary,
		ModeChange:   s.ModeChange,
		Note:         s.Note,
		Files:        s.Files,
		Errors:       s.Errors,
	}
}

// Flatten turns messages into the flat history wire form: a user message
// becomes one "user" record; an assistant message one record per segment
// (or one empty content record if it has none), the last carrying the
// message's status, stop reason, error and duration. Records share the
// messages' slices and pointers; treat both as read-only.
func Flatten(msgs []Message) []Record {
	// Segment record ids ("<messageId>/<index>") are cut from one string
	// built up front: one allocation instead of one per record.
	n, idBytes := 0, 0
	for i := range msgs {
		m := &msgs[i]
		if m.Role == RoleUser {
			n++
			continue
		}
		k := max(len(m.Segments), 1)
		n += k
		for j := range k {
			idBytes += len(m.ID) + 1 + digits(j)
		}
	}
	ids := make([]byte, 0, idBytes)
	for i := range msgs {
		m := &msgs[i]
		if m.Role == RoleUser {
			continue
		}
		for j := range max(len(m.Segments), 1) {
			ids = append(ids, m.ID...)
			ids = append(ids, '/')
			ids = strconv.AppendInt(ids, int64(j), 10)
		}
	}
	idStr := string(ids)
	out := make([]Record, 0, n)
	for i := range msgs {
		m := &msgs[i]
		if m.Role == RoleUser {
			out = append(out, Record{
				ID:          m.ID,
				Timestamp:   m.Timestamp,
				Kind:        KindUser,
				MessageID:   m.ID,
				Content:     m.Content,
				Attachments: m.Attachments,
				Hidden:      m.Hidden,
			})
			continue
		}
		nextID := func(j int) string {
			l := len(m.ID) + 1 + digits(j)
			id := idStr[:l]
			idStr = idStr[l:]
			return id
		}
		if len(m.Segments) == 0 {
			out = append(out, Record{ID: nextID(0), Timestamp: m.Timestamp, Kind: KindContent, MessageID: m.ID, Agent: m.Agent})
		}
		for j := range m.Segments {
			out = append(out, segmentRecord(nextID(j), m, &m.Segments[j]))
		}
		last := &out[len(out)-1]
		last.TurnStatus = m.Status
		last.StopReason = m.StopReason
		last.TurnError = m.Error
		last.TurnDurationMs = m.DurationMs
	}
	return out
}

// digits is the number of decimal digits of j >= 0.
func digits(j int) int {
	n := 1
	for j >= 10 {
		j /= 10
		n++
	}
	return n
}

// Regroup turns history records back into messages, by the rules both
// sides of the wire share (DESIGN.md):
//
//   - a user record starts a new user message and closes the assistant turn;
//   - any other record joins the open assistant message, or starts one when
//     none is open or its MessageID differs from the open one (an empty
//     MessageID joins the open message);
//   - adjacent content or reasoning merges into one segment (empty text adds
//     no segment);
//   - a tool upserts by tool ID and a fileChange by path, keeping the
//     position of first appearance (present fields overwrite);
//   - a plan replaces the message's single plan segment;
//   - <files> blocks inside content become workspace segments;
//   - Turn* fields set the message's status, stop reason, error, duration.
//
// For a canonical message list x (as Apply builds after the terminal event:
// no empty or adjacent same-kind text segments, tools unique by ID,
// fileChanges unique by path, at most one plan, no <files> block left in
// content) Regroup(Flatten(x)) equals x. Unknown kinds are kept as segments
// of that type. The result shares slices with the records.
func Regroup(recs []Record) []Message {
	// First pass: the number of messages and of records per assistant
	// message, so that the second pass allocates the messages once and all
	// segments once (records of one message are contiguous).
	var counts []int // segment records per assistant message, in order
	nMsgs, nSegs := 0, 0
	open, openID := false, ""
	for i := range recs {
		r := &recs[i]
		if r.Kind == KindUser {
			nMsgs++
			open = false
			continue
		}
		if !open || (r.MessageID != "" && r.MessageID != openID) {
			nMsgs++
			open, openID = true, regroupID(r)
			counts = append(counts, 0)
		}
		counts[len(counts)-1]++
		nSegs++
	}
	out := make([]Message, 0, nMsgs)
	pool := make([]Segment, nSegs) // backing store of every message's Segments
	cur := -1                      // index in out of the open assistant message
	nAsst := 0
	for i := range recs {
		r := &recs[i]
		if r.Kind == KindUser {
			out = append(out, Message{
				ID:          regroupID(r),
				Timestamp:   r.Timestamp,
				Role:        RoleUser,
				Content:     r.Content,
				Attachments: r.Attachments,
				Hidden:      r.Hidden,
			})
			cur = -1
			continue
		}
		if cur < 0 || (r.MessageID != "" && r.MessageID != out[cur].ID) {
			// Capacity capped at this message's records: an append never
			// spills into the next message's share.
			n := counts[nAsst]
			nAsst++
			segs := pool[:0:n]
			pool = pool[n:]
			out = append(out, Message{ID: regroupID(r), Timestamp: r.Timestamp, Role: RoleAssistant, Agent: r.Agent, Segments: segs})
			cur = len(out) - 1
		}
		m := &out[cur]
		if m.Agent == "" {
			m.Agent = r.Agent
		}
		applyRecord(m, r)
		if r.TurnStatus != "" {
			m.Status = r.TurnStatus
		}
		if r.StopReason != "" {
			m.StopReason = r.StopReason
		}
		if r.TurnError != "" {
			m.Error = r.TurnError
		}
		if r.TurnDurationMs != 0 {
			m.DurationMs = r.TurnDurationMs
		}
	}
	for i := range out {
		if len(out[i].Segments) == 0 {
			out[i].Segments = nil
		}
	}
	return out
}

// regroupID is the message id a record names: MessageID, else its own ID.
func regroupID(r *Record) string {
	if r.MessageID != "" {
		return r.MessageID
	}
	return r.ID
}

// applyRecord folds one segment record into m.
func applyRecord(m *Message, r *Record) {
	switch r.Kind {
	case KindContent:
		if hasFilesBlock(r.Content) {
			for _, p := range splitFiles(r.Content) {
				m.Segments = appendMerged(m.Segments, p)
			}
			return
		}
		m.Segments = appendMerged(m.Segments, Segment{Type: SegContent, Content: r.Content})
	case KindReasoning:
		m.Segments = appendMerged(m.Segments, Segment{Type: SegReasoning, Content: r.Content})
	case KindTool, KindFileChange:
		s := r.Segment()
		if i := findSegment(m.Segments, &s); i >= 0 {
			mergeSegment(&m.Segments[i], &s)
			return
		}
		m.Segments = append(m.Segments, s)
	case KindPlan:
		for i := range m.Segments {
			if m.Segments[i].Type == SegPlan {
				m.Segments[i].Entries = r.Entries
				return
			}
		}
		m.Segments = append(m.Segments, Segment{Type: SegPlan, Entries: r.Entries})
	default:
		m.Segments = append(m.Segments, r.Segment())
	}
}
