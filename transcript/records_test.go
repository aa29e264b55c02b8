package transcript

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestRegroupRules(t *testing.T) {
	recs := []Record{
		{ID: "U1", Timestamp: 1, Kind: KindUser, MessageID: "U1", Content: "hi"},
		{ID: "A1/0", Timestamp: 2, Kind: KindReasoning, MessageID: "A1", Agent: "claude", Content: "hm"},
		{ID: "A1/1", Timestamp: 2, Kind: KindReasoning, MessageID: "A1", Agent: "claude", Content: "m"},
		{ID: "A1/2", Timestamp: 2, Kind: KindContent, MessageID: "A1", Content: "see <files>\na.go\n</files>"},
		{ID: "A1/3", Timestamp: 2, Kind: KindTool, MessageID: "A1", ToolID: "t1", Name: "Read", Status: "pending"},
		{ID: "A1/4", Timestamp: 2, Kind: KindFileChange, MessageID: "A1", Path: "a.go", Additions: ip(1)},
		// Tool result record: upserts the tool, never a user message.
		{ID: "A1/5", Timestamp: 3, Kind: KindTool, MessageID: "A1", ToolID: "t1", Status: "completed", Output: "ok"},
		{ID: "A1/6", Timestamp: 3, Kind: KindFileChange, MessageID: "A1", Path: "a.go", Deletions: ip(2)},
		{ID: "A1/7", Timestamp: 3, Kind: KindPlan, MessageID: "A1", Entries: []PlanEntry{{Content: "x", Status: "pending"}}},
		{ID: "A1/8", Timestamp: 3, Kind: KindPlan, MessageID: "A1", Entries: []PlanEntry{{Content: "x", Status: "completed"}},
			TurnStatus: StatusCompleted, StopReason: "end_turn", TurnDurationMs: 5},
		{ID: "U2", Timestamp: 4, Kind: KindUser, MessageID: "U2", Content: "next"},
		// Records without a message id join the open assistant message.
		{ID: "x", Timestamp: 5, Kind: KindContent, Content: "a"},
		{ID: "y", Timestamp: 5, Kind: KindContent, Content: "b"},
		// A different message id starts a new assistant message.
		{ID: "A3/0", Timestamp: 6, Kind: KindContent, MessageID: "A3", Agent: "codex", Content: "c", TurnStatus: StatusFailed, TurnError: "boom"},
	}
	want := []Message{
		{ID: "U1", Timestamp: 1, Role: RoleUser, Content: "hi"},
		{ID: "A1", Timestamp: 2, Role: RoleAssistant, Agent: "claude", Status: StatusCompleted, StopReason: "end_turn", DurationMs: 5, Segments: []Segment{
			{Type: SegReasoning, Content: "hmm"},
			{Type: SegContent, Content: "see "},
			{Type: SegWorkspace, Files: []string{"a.go"}},
			{Type: SegTool, ID: "t1", Name: "Read", Status: "completed", Output: "ok"},
			{Type: SegFileChange, Path: "a.go", Additions: ip(1), Deletions: ip(2)},
			{Type: SegPlan, Entries: []PlanEntry{{Content: "x", Status: "completed"}}},
		}},
		{ID: "U2", Timestamp: 4, Role: RoleUser, Content: "next"},
		{ID: "x", Timestamp: 5, Role: RoleAssistant, Segments: []Segment{{Type: SegContent, Content: "ab"}}},
		{ID: "A3", Timestamp: 6, Role: RoleAssistant, Agent: "codex", Status: StatusFailed, Error: "boom", Segments: []Segment{{Type: SegContent, Content: "c"}}},
	}
	got := Regroup(recs)
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.MarshalIndent(got, "", " ")
		wj, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("Regroup:\n%s\nwant\n%s", gj, wj)
	}
}

func TestFlattenEmptyAssistant(t *testing.T) {
	msgs := []Message{
		{ID: "U", Timestamp: 1, Role: RoleUser, Content: "q"},
		{ID: "A", Timestamp: 2, Role: RoleAssistant, Agent: "gemini", Status: StatusFailed, Error: "no auth"},
	}
	recs := Flatten(msgs)
	if len(recs) != 2 || recs[1].Kind != KindContent || recs[1].TurnStatus != StatusFailed {
		t.Fatalf("records = %+v", recs)
	}
	if got := Regroup(recs); !reflect.DeepEqual(got, msgs) {
		t.Errorf("round trip = %+v", got)
	}
}

// TestFlattenRegroupRoundTrip is the parity property: a message list built
// live (by Apply) equals the one regrouped from its flattened history
// records, also after a JSON round trip of the records (the wire).
func TestFlattenRegroupRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 300 {
		msgs := genConversation(r, 1+r.IntN(6))
		for _, m := range msgs {
			if err := checkCanonical(m); err != nil {
				t.Fatalf("case %d: generator made a non-canonical message: %v", i, err)
			}
		}
		recs := Flatten(msgs)
		if got := Regroup(recs); !reflect.DeepEqual(got, msgs) {
			t.Fatalf("case %d: Regroup(Flatten(x)) != x\n got %+v\nwant %+v", i, got, msgs)
		}
		data, err := json.Marshal(recs)
		if err != nil {
			t.Fatal(err)
		}
		var back []Record
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if got := Regroup(back); !reflect.DeepEqual(got, msgs) {
			t.Fatalf("case %d: JSON round trip differs\n got %+v\nwant %+v", i, got, msgs)
		}
	}
}
