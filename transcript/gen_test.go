package transcript

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// genConversation returns n turns (user message + assistant message each),
// built live from random events through Apply, so they are canonical.
func genConversation(r *rand.Rand, n int) []Message {
	var msgs []Message
	ts := int64(1764496000000)
	for i := range n {
		ts += int64(r.IntN(1000))
		u := Message{ID: fmt.Sprintf("%08dU", i), Timestamp: ts, Role: RoleUser, Content: fmt.Sprintf("question %d", i)}
		if r.IntN(5) == 0 {
			u.Attachments = []Attachment{{Kind: "file", Path: "a.go", Hash: "ab12", Size: 3}}
		}
		if r.IntN(20) == 0 {
			u.Hidden = true
		}
		msgs = append(msgs, u)
		a := Message{ID: fmt.Sprintf("%08dA", i), Timestamp: ts + 1, Role: RoleAssistant, Agent: []string{"claude", "codex"}[r.IntN(2)], Status: StatusStreaming}
		for _, ev := range genTurnEvents(r, ts+1) {
			Apply(&a, ev)
		}
		msgs = append(msgs, a)
	}
	return msgs
}

var deltaWords = []string{"Hello", " world", ".", "\n", "let me ", "check", " the file", "<files>\na.go\nerror: b.go: denied\n</files>", ""}

// genTurnEvents returns a random but well-formed live event stream of one
// turn, ending with a terminal event.
func genTurnEvents(r *rand.Rand, ts int64) []Event {
	var evs []Event
	n := r.IntN(12)
	tools := 0
	for range n {
		ts += int64(r.IntN(50))
		switch k := r.IntN(10); {
		case k < 4:
			evs = append(evs, Event{Type: EvContentDelta, Delta: deltaWords[r.IntN(len(deltaWords))], Timestamp: ts})
		case k < 6:
			evs = append(evs, Event{Type: EvReasoningDelta, Delta: deltaWords[r.IntN(len(deltaWords)-1)], Timestamp: ts})
		case k < 8:
			id := fmt.Sprintf("toolu_%d", r.IntN(tools+1))
			if id == fmt.Sprintf("toolu_%d", tools) {
				tools++
			}
			st := []ToolStatus{ToolPending, ToolRunning, ToolCompleted, ToolError}[r.IntN(4)]
			seg := &Segment{Type: SegTool, ID: id, Name: "Read " + id, Status: string(st), ProviderKind: "read"}
			if r.IntN(2) == 0 {
				seg.Input = json.RawMessage(`{"path":"a.go"}`)
			}
			if st == ToolCompleted {
				seg.Output = "ok"
			}
			if st == ToolError {
				seg.Error = "boom"
			}
			evs = append(evs, Event{Type: EvActivityUpsert, Segment: seg, Timestamp: ts})
		case k < 9:
			old, nw := "a\n", "a\nb\n"
			ad, de := CountLines(&old, &nw)
			seg := &Segment{Type: SegFileChange, Path: fmt.Sprintf("f%d.go", r.IntN(3)), Additions: &ad, Deletions: &de,
				OldText: &old, NewText: &nw, Status: "applied", ToolCallID: "toolu_0", Diff: UnifiedDiff("f.go", &old, &nw)}
			evs = append(evs, Event{Type: EvActivityUpsert, Segment: seg, Timestamp: ts})
		default:
			evs = append(evs, Event{Type: EvPlanUpdated, Entries: []PlanEntry{{Content: "step 1", Status: "completed"}, {Content: "step 2", Status: []string{"pending", "in_progress"}[r.IntN(2)], Priority: "high"}}, Timestamp: ts})
		}
	}
	ts += 10
	switch r.IntN(6) {
	case 0:
		evs = append(evs, Event{Type: EvTurnFailed, Message: "agent exited with status 1", Timestamp: ts})
	case 1:
		evs = append(evs, Event{Type: EvTurnCompleted, StopReason: "cancelled", Timestamp: ts})
	default:
		evs = append(evs, Event{Type: EvTurnCompleted, StopReason: "end_turn", Timestamp: ts})
	}
	for i := range evs {
		evs[i].Seq = int64(i + 1)
	}
	return evs
}
