package transcript

import (
	"slices"
	"strings"
)

// Apply applies one live event to the assistant message m (the streaming
// reducer shared by the daemon and, by the same rules, both editors):
//
//   - content.delta / reasoning.delta append Delta to the last segment if it
//     has that type, else start a new segment; an empty delta changes nothing.
//   - activity.upsert upserts Segment: a tool by ID, a fileChange by Path,
//     keeping the position where it first appeared; a present field
//     overwrites, a missing (zero) field keeps the old value. A plan segment
//     acts as plan.updated, a content or reasoning segment as a delta, any
//     other type is appended.
//   - plan.updated replaces the entries of the single plan segment, creating
//     it if there is none.
//   - turn.completed sets Status completed (cancelled when StopReason is
//     "cancelled") and StopReason; turn.failed sets Status failed and Error.
//     Both split <files> blocks out of content into workspace segments (so
//     the finished message is canonical, see Regroup) and, when the event and
//     m carry timestamps, set DurationMs if it is unset.
//
// A non-terminal event on a message without status marks it streaming.
// Apply changes m.Segments in place, so a copy of m made by assignment sees
// the change (use Reducer.Message for independent snapshots); it copies the
// event's slices, so the caller may reuse them. Appending
// text re-allocates the segment's string; to stream long answers use a
// Reducer, which amortises appends.
func Apply(m *Message, ev Event) {
	switch ev.Type {
	case EvContentDelta, EvReasoningDelta:
		if ev.Delta == "" {
			return
		}
		markStreaming(m)
		typ := SegContent
		if ev.Type == EvReasoningDelta {
			typ = SegReasoning
		}
		if n := len(m.Segments); n > 0 && m.Segments[n-1].Type == typ {
			m.Segments[n-1].Content += ev.Delta
			return
		}
		m.Segments = append(m.Segments, Segment{Type: typ, Content: ev.Delta})
	case EvActivityUpsert:
		if ev.Segment == nil {
			return
		}
		markStreaming(m)
		upsertSegment(m, ev.Segment)
	case EvPlanUpdated:
		markStreaming(m)
		setPlan(m, ev.Entries)
	case EvTurnCompleted, EvTurnFailed:
		finishTurn(m, ev)
	}
}

func markStreaming(m *Message) {
	if m.Role == "" {
		m.Role = RoleAssistant
	}
	if m.Status == "" {
		m.Status = StatusStreaming
	}
}

// upsertSegment applies an activity.upsert segment to m.
func upsertSegment(m *Message, s *Segment) {
	switch s.Type {
	case SegTool, SegFileChange:
		if i := findSegment(m.Segments, s); i >= 0 {
			mergeSegment(&m.Segments[i], s)
			return
		}
		m.Segments = append(m.Segments, cloneSegment(*s))
	case SegPlan:
		setPlan(m, s.Entries)
	case SegContent, SegReasoning:
		typ := EvContentDelta
		if s.Type == SegReasoning {
			typ = EvReasoningDelta
		}
		Apply(m, Event{Type: typ, Delta: s.Content})
	default:
		m.Segments = append(m.Segments, cloneSegment(*s))
	}
}

// findSegment returns the index of the segment s upserts: the tool with
// s.ID or the fileChange with s.Path; -1 if none.
func findSegment(segs []Segment, s *Segment) int {
	for i := range segs {
		if segs[i].Type != s.Type {
			continue
		}
		if s.Type == SegTool && segs[i].ID == s.ID || s.Type == SegFileChange && segs[i].Path == s.Path {
			return i
		}
	}
	return -1
}

// mergeSegment overwrites the fields of dst that src sets (non-zero).
func mergeSegment(dst *Segment, src *Segment) {
	if src.Content != "" {
		dst.Content = src.Content
	}
	if src.ID != "" {
		dst.ID = src.ID
	}
	if src.Name != "" {
		dst.Name = src.Name
	}
	if src.Status != "" {
		dst.Status = src.Status
	}
	if src.ProviderKind != "" {
		dst.ProviderKind = src.ProviderKind
	}
	if len(src.Input) > 0 {
		dst.Input = slices.Clone(src.Input)
	}
	if src.Output != "" {
		dst.Output = src.Output
	}
	if src.Error != "" {
		dst.Error = src.Error
	}
	if src.DurationMs != 0 {
		dst.DurationMs = src.DurationMs
	}
	if src.Entries != nil {
		dst.Entries = slices.Clone(src.Entries)
	}
	if src.Path != "" {
		dst.Path = src.Path
	}
	if src.Additions != nil {
		dst.Additions = ptr(*src.Additions)
	}
	if src.Deletions != nil {
		dst.Deletions = ptr(*src.Deletions)
	}
	if src.Diff != "" {
		dst.Diff = src.Diff
	}
	if src.OldText != nil {
		dst.OldText = ptr(*src.OldText)
	}
	if src.NewText != nil {
		dst.NewText = ptr(*src.NewText)
	}
	if src.ToolCallID != "" {
		dst.ToolCallID = src.ToolCallID
	}
	for _, f := range [][2]*string{{&dst.Change, &src.Change}, {&dst.OldPath, &src.OldPath}, {&dst.Origin, &src.Origin},
		{&dst.ModeChange, &src.ModeChange}, {&dst.Note, &src.Note}} {
		if *f[1] != "" {
			*f[0] = *f[1]
		}
	}
	dst.Binary = dst.Binary || src.Binary
	if src.Files != nil {
		dst.Files = slices.Clone(src.Files)
	}
	if src.Errors != nil {
		dst.Errors = slices.Clone(src.Errors)
	}
}

func ptr[T any](v T) *T { return &v }

// cloneSegment copies s so that it shares no slice or pointer with the
// original.
func cloneSegment(s Segment) Segment {
	s.Input = slices.Clone(s.Input)
	s.Entries = slices.Clone(s.Entries)
	s.Files = slices.Clone(s.Files)
	s.Errors = slices.Clone(s.Errors)
	if s.Additions != nil {
		s.Additions = ptr(*s.Additions)
	}
	if s.Deletions != nil {
		s.Deletions = ptr(*s.Deletions)
	}
	if s.OldText != nil {
		s.OldText = ptr(*s.OldText)
	}
	if s.NewText != nil {
		s.NewText = ptr(*s.NewText)
	}
	return s
}

// setPlan replaces the entries of m's plan segment or appends one.
func setPlan(m *Message, entries []PlanEntry) {
	entries = slices.Clone(entries)
	for i := range m.Segments {
		if m.Segments[i].Type == SegPlan {
			m.Segments[i].Entries = entries
			return
		}
	}
	m.Segments = append(m.Segments, Segment{Type: SegPlan, Entries: entries})
}

func finishTurn(m *Message, ev Event) {
	if m.Role == "" {
		m.Role = RoleAssistant
	}
	if ev.Type == EvTurnFailed {
		m.Status = StatusFailed
		m.Error = ev.Message
	} else {
		m.Status = StatusCompleted
		if ev.StopReason == "cancelled" {
			m.Status = StatusCancelled
		}
		m.StopReason = ev.StopReason
	}
	if m.DurationMs == 0 && ev.Timestamp > 0 && m.Timestamp > 0 && ev.Timestamp > m.Timestamp {
		m.DurationMs = ev.Timestamp - m.Timestamp
	}
	m.Segments = splitWorkspaceBlocks(m.Segments)
}

// CloseOpenTools returns one activity.upsert event per tool segment of m
// still pending or running, setting its status to status (normally
// ToolError) and its Error to reason when reason is not empty. It does not
// change m: the caller numbers the events, applies them and sends them
// before the turn's terminal event, so clients see the same result (ACP
// rule: the end of a turn or a cancel closes tool calls still open).
func CloseOpenTools(m Message, status ToolStatus, reason string) []Event {
	var evs []Event
	for _, s := range m.Segments {
		if s.Type != SegTool || (s.Status != string(ToolPending) && s.Status != string(ToolRunning) && s.Status != "") {
			continue
		}
		c := cloneSegment(s)
		c.Status = string(status)
		if reason != "" {
			c.Error = reason
		}
		evs = append(evs, Event{Type: EvActivityUpsert, Segment: &c})
	}
	return evs
}

// Reducer applies live events to one assistant message like Apply, but keeps
// the trailing text segment in a growing buffer so that a long stream of
// deltas costs amortised O(len(delta)) each. The zero Reducer is not usable;
// make one with NewReducer. A Reducer is not safe for concurrent use.
type Reducer struct {
	m Message
	// b holds the text of the last segment when it is content or reasoning;
	// m.Segments[len-1].Content is always b.String() (no copy: a
	// strings.Builder never changes bytes it has handed out).
	b    strings.Builder
	open bool // b backs the last segment
}

// NewReducer returns a Reducer starting from m (typically the streaming
// placeholder: ID, Timestamp, Role assistant, Agent, Status streaming).
func NewReducer(m Message) *Reducer {
	m.Segments = slices.Clone(m.Segments)
	return &Reducer{m: m}
}

// Apply applies ev to the message; see the package function Apply for the
// rules.
func (r *Reducer) Apply(ev Event) {
	if ev.Type != EvContentDelta && ev.Type != EvReasoningDelta {
		r.open = false
		r.b = strings.Builder{}
		Apply(&r.m, ev)
		return
	}
	if ev.Delta == "" {
		return
	}
	typ := SegContent
	if ev.Type == EvReasoningDelta {
		typ = SegReasoning
	}
	markStreaming(&r.m)
	n := len(r.m.Segments)
	if n > 0 && r.m.Segments[n-1].Type == typ {
		if !r.open {
			r.b = strings.Builder{}
			r.b.WriteString(r.m.Segments[n-1].Content)
			r.open = true
		}
		r.b.WriteString(ev.Delta)
		r.m.Segments[n-1].Content = r.b.String()
		return
	}
	r.b = strings.Builder{}
	r.b.WriteString(ev.Delta)
	r.open = true
	r.m.Segments = append(r.m.Segments, Segment{Type: typ, Content: r.b.String()})
}

// Message returns the message built so far. The result shares no mutable
// state with the Reducer: later events do not change it.
func (r *Reducer) Message() Message {
	m := r.m
	m.Segments = slices.Clone(r.m.Segments)
	return m
}
