package transcript

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func ip(n int) *int { return &n }

// checkCanonical reports the first way m breaks the canonical-message
// invariants: no empty or adjacent same-kind text segments, tools unique by
// ID, fileChanges unique by path, at most one plan, no <files> block left in
// content.
func checkCanonical(m Message) error {
	tools := map[string]bool{}
	paths := map[string]bool{}
	plans := 0
	for i, s := range m.Segments {
		switch s.Type {
		case SegContent, SegReasoning:
			if s.Content == "" {
				return fmt.Errorf("message %s segment %d: empty %s", m.ID, i, s.Type)
			}
			if i > 0 && m.Segments[i-1].Type == s.Type {
				return fmt.Errorf("message %s segment %d: adjacent %s segments not merged", m.ID, i, s.Type)
			}
			if s.Type == SegContent && hasFilesBlock(s.Content) {
				return fmt.Errorf("message %s segment %d: <files> block left in content", m.ID, i)
			}
		case SegTool:
			if tools[s.ID] {
				return fmt.Errorf("message %s: tool %q appears twice", m.ID, s.ID)
			}
			tools[s.ID] = true
		case SegFileChange:
			if paths[s.Path] {
				return fmt.Errorf("message %s: fileChange %q appears twice", m.ID, s.Path)
			}
			paths[s.Path] = true
		case SegPlan:
			plans++
			if plans > 1 {
				return fmt.Errorf("message %s: %d plan segments", m.ID, plans)
			}
		}
	}
	return nil
}

func TestApply(t *testing.T) {
	base := Message{ID: "A", Timestamp: 1000, Role: RoleAssistant, Agent: "claude", Status: StatusStreaming}
	tool := func(id, status string) Event {
		return Event{Type: EvActivityUpsert, Segment: &Segment{Type: SegTool, ID: id, Status: status}}
	}
	tests := []struct {
		name string
		in   Message
		evs  []Event
		want Message
	}{
		{
			name: "deltas merge by kind",
			in:   base,
			evs: []Event{
				{Type: EvReasoningDelta, Delta: "think"}, {Type: EvReasoningDelta, Delta: "ing"},
				{Type: EvContentDelta, Delta: "Hel"}, {Type: EvContentDelta, Delta: ""}, {Type: EvContentDelta, Delta: "lo"},
				{Type: EvReasoningDelta, Delta: "more"},
			},
			want: Message{ID: "A", Timestamp: 1000, Role: RoleAssistant, Agent: "claude", Status: StatusStreaming, Segments: []Segment{
				{Type: SegReasoning, Content: "thinking"}, {Type: SegContent, Content: "Hello"}, {Type: SegReasoning, Content: "more"}}},
		},
		{
			name: "tool upserts by id, keeps position, missing fields kept",
			in:   base,
			evs: []Event{
				{Type: EvActivityUpsert, Segment: &Segment{Type: SegTool, ID: "t1", Name: "Read a.go", Status: "pending", Input: json.RawMessage(`{"p":1}`)}},
				{Type: EvContentDelta, Delta: "x"},
				tool("t2", "running"),
				{Type: EvActivityUpsert, Segment: &Segment{Type: SegTool, ID: "t1", Status: "completed", Output: "body"}},
			},
			want: Message{ID: "A", Timestamp: 1000, Role: RoleAssistant, Agent: "claude", Status: StatusStreaming, Segments: []Segment{
				{Type: SegTool, ID: "t1", Name: "Read a.go", Status: "completed", Input: json.RawMessage(`{"p":1}`), Output: "body"},
				{Type: SegContent, Content: "x"},
				{Type: SegTool, ID: "t2", Status: "running"}}},
		},
		{
			name: "fileChange upserts by path",
			in:   base,
			evs: []Event{
				{Type: EvActivityUpsert, Segment: &Segment{Type: SegFileChange, Path: "a.go", Additions: ip(1), Deletions: ip(0), Status: "proposed"}},
				{Type: EvActivityUpsert, Segment: &Segment{Type: SegFileChange, Path: "b.go", Additions: ip(2)}},
				{Type: EvActivityUpsert, Segment: &Segment{Type: SegFileChange, Path: "a.go", Additions: ip(3), Status: "applied"}},
			},
			want: Message{ID: "A", Timestamp: 1000, Role: RoleAssistant, Agent: "claude", Status: StatusStreaming, Segments: []Segment{
				{Type: SegFileChange, Path: "a.go", Additions: ip(3), Deletions: ip(0), Status: "applied"},
				{Type: SegFileChange, Path: "b.go", Additions: ip(2)}}},
		},
		{
			name: "plan replaced in place",
			in:   base,
			evs: []Event{
				{Type: EvPlanUpdated, Entries: []PlanEntry{{Content: "a", Status: "pending"}}},
				{Type: EvContentDelta, Delta: "x"},
				{Type: EvPlanUpdated, Entries: []PlanEntry{{Content: "a", Status: "completed"}, {Content: "b", Status: "pending"}}},
			},
			want: Message{ID: "A", Timestamp: 1000, Role: RoleAssistant, Agent: "claude", Status: StatusStreaming, Segments: []Segment{
				{Type: SegPlan, Entries: []PlanEntry{{Content: "a", Status: "completed"}, {Content: "b", Status: "pending"}}},
				{Type: SegContent, Content: "x"}}},
		},
		{
			name: "completed with duration and files block",
			in:   base,
			evs: []Event{
				{Type: EvContentDelta, Delta: "done <fil"}, {Type: EvContentDelta, Delta: "es>\na.go\n error: b: x \n</files> ok"},
				{Type: EvTurnCompleted, StopReason: "end_turn", Timestamp: 1800},
			},
			want: Message{ID: "A", Timestamp: 1000, Role: RoleAssistant, Agent: "claude", Status: StatusCompleted, StopReason: "end_turn", DurationMs: 800,
				Segments: []Segment{{Type: SegContent, Content: "done "}, {Type: SegWorkspace, Files: []string{"a.go"}, Errors: []string{"b: x"}}, {Type: SegContent, Content: " ok"}}},
		},
		{
			name: "cancelled",
			in:   base,
			evs:  []Event{{Type: EvTurnCompleted, StopReason: "cancelled"}},
			want: Message{ID: "A", Timestamp: 1000, Role: RoleAssistant, Agent: "claude", Status: StatusCancelled, StopReason: "cancelled"},
		},
		{
			name: "failed",
			in:   base,
			evs:  []Event{{Type: EvContentDelta, Delta: "partial"}, {Type: EvTurnFailed, Message: "agent exited: status 1"}},
			want: Message{ID: "A", Timestamp: 1000, Role: RoleAssistant, Agent: "claude", Status: StatusFailed, Error: "agent exited: status 1",
				Segments: []Segment{{Type: SegContent, Content: "partial"}}},
		},
		{
			name: "empty message gets role and status",
			in:   Message{ID: "B"},
			evs:  []Event{{Type: EvActivityUpsert}, {Type: EvContentDelta, Delta: "x"}},
			want: Message{ID: "B", Role: RoleAssistant, Status: StatusStreaming, Segments: []Segment{{Type: SegContent, Content: "x"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.in
			for _, ev := range tt.evs {
				Apply(&m, ev)
			}
			if !reflect.DeepEqual(m, tt.want) {
				t.Errorf("Apply:\n got %+v\nwant %+v", m, tt.want)
			}
			r := NewReducer(tt.in)
			for _, ev := range tt.evs {
				r.Apply(ev)
			}
			if got := r.Message(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Reducer:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestApplyDoesNotAliasEvent(t *testing.T) {
	var m Message
	seg := &Segment{Type: SegTool, ID: "t", Input: json.RawMessage(`{"a":1}`)}
	entries := []PlanEntry{{Content: "a", Status: "pending"}}
	Apply(&m, Event{Type: EvActivityUpsert, Segment: seg})
	Apply(&m, Event{Type: EvPlanUpdated, Entries: entries})
	seg.Input[2] = 'X'
	entries[0].Content = "changed"
	if string(m.Segments[0].Input) != `{"a":1}` || m.Segments[1].Entries[0].Content != "a" {
		t.Errorf("message aliases event data: %+v", m.Segments)
	}
}

func TestReducerMessageIsSnapshot(t *testing.T) {
	r := NewReducer(Message{ID: "A", Role: RoleAssistant})
	r.Apply(Event{Type: EvContentDelta, Delta: "a"})
	snap := r.Message()
	r.Apply(Event{Type: EvContentDelta, Delta: "b"})
	r.Apply(Event{Type: EvActivityUpsert, Segment: &Segment{Type: SegTool, ID: "t"}})
	if len(snap.Segments) != 1 || snap.Segments[0].Content != "a" {
		t.Errorf("snapshot changed: %+v", snap.Segments)
	}
	if got := r.Message().Segments[0].Content; got != "ab" {
		t.Errorf("content = %q, want ab", got)
	}
	// A reducer resumed on a message ending in text continues that text.
	r2 := NewReducer(r.Message())
	r2.Apply(Event{Type: EvContentDelta, Delta: "c"})
	if got := r2.Message().Segments; len(got) != 3 || got[2].Content != "c" {
		t.Errorf("resume: %+v", got)
	}
}

func TestCloseOpenTools(t *testing.T) {
	m := Message{Segments: []Segment{
		{Type: SegTool, ID: "a", Status: "pending"},
		{Type: SegTool, ID: "b", Status: "completed"},
		{Type: SegTool, ID: "c", Status: "running", Name: "Run"},
		{Type: SegContent, Content: "x"},
	}}
	evs := CloseOpenTools(m, ToolError, "cancelled")
	if len(evs) != 2 || evs[0].Segment.ID != "a" || evs[1].Segment.ID != "c" || evs[1].Segment.Name != "Run" {
		t.Fatalf("events = %+v", evs)
	}
	if m.Segments[0].Status != "pending" {
		t.Error("CloseOpenTools changed its argument")
	}
	for _, ev := range evs {
		Apply(&m, ev)
	}
	for _, s := range m.Segments {
		if s.Type == SegTool && (s.Status == "pending" || s.Status == "running") {
			t.Errorf("tool %s still %s", s.ID, s.Status)
		}
	}
	if m.Segments[2].Error != "cancelled" {
		t.Errorf("error = %q", m.Segments[2].Error)
	}
}

// TestReducerMatchesApply checks on random streams that the Reducer and
// Apply build the same message, and that the result is canonical.
func TestReducerMatchesApply(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		start := Message{ID: "A", Timestamp: 5, Role: RoleAssistant, Status: StatusStreaming}
		evs := genTurnEvents(r, 10)
		m := start
		red := NewReducer(start)
		for _, ev := range evs {
			Apply(&m, ev)
			red.Apply(ev)
		}
		if got := red.Message(); !reflect.DeepEqual(got, m) {
			t.Fatalf("case %d: reducer %+v\napply %+v", i, got, m)
		}
		if err := checkCanonical(m); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
	}
}

// TestReducerAmortisesAppends guards the streaming cost: appending a delta
// to a long answer must not copy the answer (amortised: well under one
// allocation per delta).
func TestReducerAmortisesAppends(t *testing.T) {
	r := NewReducer(Message{ID: "A", Role: RoleAssistant})
	ev := Event{Type: EvContentDelta, Delta: "0123456789"}
	for range 10_000 {
		r.Apply(ev)
	}
	if allocs := testing.AllocsPerRun(10_000, func() { r.Apply(ev) }); allocs > 0.05 {
		t.Errorf("%.3f allocations per delta, want amortised ~0", allocs)
	}
}

func TestReducerMarksStreamingLikeApply(t *testing.T) {
	start := Message{ID: "A", Segments: []Segment{{Type: SegContent, Content: "x"}}}
	m := start
	m.Segments = slices.Clone(start.Segments) // Apply changes segments in place
	Apply(&m, Event{Type: EvContentDelta, Delta: "y"})
	r := NewReducer(start)
	r.Apply(Event{Type: EvContentDelta, Delta: "y"})
	if got := r.Message(); !reflect.DeepEqual(got, m) {
		t.Errorf("reducer %+v, Apply %+v", got, m)
	}
}
