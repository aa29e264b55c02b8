package transcript_test

import (
	"fmt"

	"github.com/ochat-dev/ochat/transcript"
)

func ExampleReducer() {
	r := transcript.NewReducer(transcript.Message{ID: "01A", Role: transcript.RoleAssistant, Agent: "claude", Status: transcript.StatusStreaming})
	r.Apply(transcript.Event{Type: transcript.EvContentDelta, Delta: "Writing "})
	r.Apply(transcript.Event{Type: transcript.EvContentDelta, Delta: "a.txt."})
	r.Apply(transcript.Event{Type: transcript.EvActivityUpsert, Segment: &transcript.Segment{Type: transcript.SegTool, ID: "toolu_1", Name: "Write a.txt", Status: "pending"}})
	r.Apply(transcript.Event{Type: transcript.EvActivityUpsert, Segment: &transcript.Segment{Type: transcript.SegTool, ID: "toolu_1", Status: "completed"}})
	r.Apply(transcript.Event{Type: transcript.EvTurnCompleted, StopReason: "end_turn"})
	m := r.Message()
	for _, s := range m.Segments {
		fmt.Printf("%s content=%q name=%q status=%s\n", s.Type, s.Content, s.Name, s.Status)
	}
	fmt.Println(m.Status, m.StopReason)
	// Output:
	// content content="Writing a.txt." name="" status=
	// tool content="" name="Write a.txt" status=completed
	// completed end_turn
}

func ExampleUnifiedDiff() {
	old, new := "one\ntwo\n", "one\n2\n"
	adds, dels := transcript.CountLines(&old, &new)
	fmt.Printf("+%d -%d\n", adds, dels)
	fmt.Print(transcript.UnifiedDiff("notes.txt", &old, &new))
	// Output:
	// +1 -1
	// --- a/notes.txt
	// +++ b/notes.txt
	// @@ -1,2 +1,2 @@
	//  one
	// -two
	// +2
}

func ExampleRegroup() {
	recs := []transcript.Record{
		{ID: "U", Kind: transcript.KindUser, MessageID: "U", Content: "hi"},
		{ID: "A/0", Kind: transcript.KindContent, MessageID: "A", Agent: "codex", Content: "Hel"},
		{ID: "A/1", Kind: transcript.KindContent, MessageID: "A", Agent: "codex", Content: "lo"},
		{ID: "A/2", Kind: transcript.KindTool, MessageID: "A", ToolID: "t", Status: "running"},
		{ID: "A/3", Kind: transcript.KindTool, MessageID: "A", ToolID: "t", Status: "completed", TurnStatus: transcript.StatusCompleted},
	}
	for _, m := range transcript.Regroup(recs) {
		fmt.Printf("%s content=%q segments=%d status=%q\n", m.Role, m.Content, len(m.Segments), m.Status)
	}
	// Output:
	// user content="hi" segments=0 status=""
	// assistant content="" segments=2 status="completed"
}
