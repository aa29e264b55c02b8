package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func exportString(t *testing.T, conv ConversationMeta, msgs []Message) (string, ExportResult) {
	t.Helper()
	var b bytes.Buffer
	res, err := ExportEvents(&b, conv, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), res
}

func TestExportEventsGolden(t *testing.T) {
	msgs := []Message{
		{ID: "U1", Timestamp: 100, Role: RoleUser, Content: "write a.txt", Attachments: []Attachment{{Kind: "image", Name: "x.png", Hash: "ff", Size: 9}}},
		{ID: "A1", Timestamp: 110, Role: RoleAssistant, Agent: "claude", Status: StatusCompleted, StopReason: "end_turn", DurationMs: 50, Segments: []Segment{
			{Type: SegReasoning, Content: "plan it"},
			{Type: SegContent, Content: "Writing."},
			{Type: SegTool, ID: "t1", Name: "Write a.txt", Status: "completed", ProviderKind: "edit", Input: json.RawMessage("{\"path\":\n\"a.txt\"}"), Output: "ok", DurationMs: 7},
			{Type: SegTool, ID: "t2", Name: "Run ls", Status: "running"},
			{Type: SegFileChange, Path: "a.txt", Additions: ip(2), ToolCallID: "t1"},
			{Type: SegPlan, Entries: []PlanEntry{{Content: "x", Status: "completed"}}},
			{Type: SegContent, Content: "Done \"quoted\"\n"},
		}},
	}
	got, res := exportString(t, ConversationMeta{ID: "C", Title: "demo"}, msgs)
	want := `{"seq":1,"type":"session/title","timestamp":100,"title":"demo"}
{"seq":2,"type":"turn/start","timestamp":100,"turnId":"U1"}
{"seq":3,"type":"user/message","timestamp":100,"turnId":"U1","messageId":"U1","surfaceOp":"append","text":"write a.txt"}
{"seq":4,"type":"step/start","timestamp":110,"turnId":"U1"}
{"seq":5,"type":"assistant/message","timestamp":110,"turnId":"U1","messageId":"A1","surfaceOp":"append","agent":"claude","reasoning":"plan it"}
{"seq":6,"type":"assistant/message","timestamp":110,"turnId":"U1","messageId":"A1","surfaceOp":"append","agent":"claude","text":"Writing."}
{"seq":7,"type":"tool/call","timestamp":110,"turnId":"U1","messageId":"A1","toolCallId":"t1","name":"Write a.txt","kind":"edit","input":{"path":"a.txt"}}
{"seq":8,"type":"tool/call","timestamp":110,"turnId":"U1","messageId":"A1","toolCallId":"t2","name":"Run ls"}
{"seq":9,"type":"tool/result","timestamp":117,"turnId":"U1","messageId":"A1","toolCallId":"t1","status":"completed","output":"ok","sourceEventSeqs":[7],"durationMs":7}
{"seq":10,"type":"tool/result","timestamp":110,"turnId":"U1","messageId":"A1","toolCallId":"t2","status":"error","error":"tool call did not finish (synthetic result added on export)","isError":true,"sourceEventSeqs":[8]}
{"seq":11,"type":"step/end","timestamp":110,"turnId":"U1"}
{"seq":12,"type":"step/start","timestamp":110,"turnId":"U1"}
{"seq":13,"type":"assistant/message","timestamp":110,"turnId":"U1","messageId":"A1","surfaceOp":"append","agent":"claude","text":"Done \"quoted\"\n"}
{"seq":14,"type":"step/end","timestamp":110,"turnId":"U1"}
{"seq":15,"type":"turn/end","timestamp":160,"turnId":"U1","messageId":"A1","agent":"claude","status":"completed","stopReason":"end_turn","durationMs":50}
`
	if got != want {
		t.Errorf("export:\n%s\nwant\n%s", got, want)
	}
	kinds := []string{}
	for _, d := range res.Degradations {
		kinds = append(kinds, d.Kind)
	}
	if !reflect.DeepEqual(kinds, []string{"attachment", "fileChange", "plan", "unfinishedTool"}) {
		t.Errorf("degradations = %+v", res.Degradations)
	}
	if res.Events != 15 {
		t.Errorf("events = %d", res.Events)
	}
	if v := Validate([]byte(got)); v != nil {
		t.Errorf("own export invalid: %v", v)
	}
	// Every line is what encoding/json makes of the same event.
	for line := range strings.Lines(got) {
		var e LogEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if e.Input != nil {
			var c bytes.Buffer
			_ = json.Compact(&c, e.Input)
			e.Input = c.Bytes()
		}
		std, _ := json.Marshal(&e)
		if string(std)+"\n" != line {
			t.Errorf("hand encoder differs from encoding/json:\n%s\n%s", line, std)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "ctl\x00\x01\x1f\t\r\n", "utf8 é 漢字 🙂", "bad \xff\xfe utf8", "sep \u2028 \u2029", "<html>&"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%q: invalid JSON %s: %v", s, got, err)
			continue
		}
		std, _ := json.Marshal(s)
		var stdBack string
		_ = json.Unmarshal(std, &stdBack)
		if back != stdBack {
			t.Errorf("%q: decodes to %q, encoding/json gives %q", s, back, stdBack)
		}
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestExportWriteError(t *testing.T) {
	msgs := genConversation(rand.New(rand.NewPCG(1, 1)), 3)
	_, err := ExportEvents(&failWriter{n: 2}, ConversationMeta{}, msgs)
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "event 3") {
		t.Errorf("err = %v", err)
	}
}

// expressible returns msgs without what the event log cannot carry (plans,
// file changes, workspace segments, attachments) and with unfinished tools
// closed as Export closes them: the expected result of Import(Export).
func expressible(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		m.Attachments = nil
		var segs []Segment
		for _, s := range m.Segments {
			switch s.Type {
			case SegPlan, SegFileChange, SegWorkspace:
				continue
			case SegTool:
				if s.Status != string(ToolCompleted) && s.Status != string(ToolError) {
					s.Status = string(ToolError)
					if s.Error == "" {
						s.Error = syntheticToolError
					}
				}
			}
			segs = appendMerged(segs, s)
		}
		m.Segments = segs
		out[i] = m
	}
	return out
}

// TestExportImportRoundTrip: a random conversation survives export and
// import except for what the degradations report; the export is valid.
func TestExportImportRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 300 {
		msgs := genConversation(r, 1+r.IntN(5))
		if r.IntN(4) == 0 { // an assistant message answering nobody, and an empty one
			msgs = append(msgs, Message{ID: "Z1", Timestamp: 9, Role: RoleAssistant, Agent: "codex", Status: StatusFailed, Error: "exit 1"})
		}
		if r.IntN(4) == 0 { // a user message with no answer yet
			msgs = append(msgs, Message{ID: "Z2", Timestamp: 10, Role: RoleUser, Content: "pending?"})
		}
		log, res := exportString(t, ConversationMeta{Title: "t"}, msgs)
		if v := Validate([]byte(log)); v != nil {
			t.Fatalf("case %d: export invalid: %v\n%s", i, v, log)
		}
		imp := Import([]byte(log))
		if imp.Skipped != nil || imp.Repaired != nil || imp.Title != "t" {
			t.Fatalf("case %d: import of a valid log skipped %v repaired %v title %q", i, imp.Skipped, imp.Repaired, imp.Title)
		}
		if want := expressible(msgs); !reflect.DeepEqual(imp.Messages, want) {
			t.Fatalf("case %d: import differs\n got %+v\nwant %+v\nlog:\n%s", i, imp.Messages, want, log)
		}
		// Every dropped thing is reported.
		n := 0
		for _, m := range msgs {
			n += len(m.Attachments)
			for _, s := range m.Segments {
				switch s.Type {
				case SegPlan, SegFileChange, SegWorkspace:
					n++
				case SegTool:
					if s.Status != string(ToolCompleted) && s.Status != string(ToolError) {
						n++
					}
				}
			}
		}
		if n != len(res.Degradations) {
			t.Fatalf("case %d: %d things not expressible, %d degradations", i, n, len(res.Degradations))
		}
	}
}

func TestValidateBadLogs(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want []string // "line: substring"
	}{
		{"valid minimal", `{"seq":1,"type":"turn/start"}
{"seq":2,"type":"user/message","text":"hi"}
{"seq":3,"type":"turn/end"}
`, nil},
		{"gap duplicate reorder", `{"seq":1,"type":"turn/start"}
{"seq":3,"type":"user/message"}
{"seq":3,"type":"user/message"}
{"seq":2,"type":"step/start"}
{"seq":4,"type":"step/end"}
{"seq":5,"type":"turn/end"}
`, []string{"2: seq gap: 3 follows 1", "3: duplicate seq 3 (first on line 2)", "4: seq 2 out of order after 3"}},
		{"broken json, unknown type, empty line, missing seq", `{"seq":1,"type":"turn/start"}
{"seq":2,"type":"user/mess
{"seq":3,"type":"vendor/thing"}

{"type":"turn/end"}
{"seq":4,"type":"turn/end"}
`, []string{"2: broken JSON", "3: unknown event type \"vendor/thing\"", "4: empty line", "5: missing or non-positive seq"}},
		{"tool pairing", `{"seq":1,"type":"turn/start","turnId":"T"}
{"seq":2,"type":"tool/call","toolCallId":"a"}
{"seq":3,"type":"tool/call","toolCallId":"b"}
{"seq":4,"type":"tool/result","toolCallId":"c","sourceEventSeqs":[2]}
{"seq":5,"type":"tool/result","toolCallId":"a","sourceEventSeqs":[3]}
{"seq":6,"type":"tool/result","toolCallId":"a","sourceEventSeqs":[2]}
{"seq":7,"type":"tool/call","toolCallId":"a"}
{"seq":8,"type":"turn/end","turnId":"T"}
`, []string{
			"3: tool/call \"b\" has no tool/result before turn/end on line 8",
			"4: orphan tool/result: no tool/call \"c\" before it",
			"5: sourceEventSeqs [3] do not name tool/call \"a\" (seq 2)",
			"6: second tool/result for tool/call \"a\"",
			"7: duplicate tool/call \"a\""}},
		{"structure", `{"seq":1,"type":"user/message"}
{"seq":2,"type":"turn/start","turnId":"T"}
{"seq":3,"type":"step/start"}
{"seq":4,"type":"step/start"}
{"seq":5,"type":"turn/start","turnId":"U"}
{"seq":6,"type":"assistant/message","turnId":"X","text":"x"}
{"seq":7,"type":"turn/end"}
{"seq":8,"type":"step/end"}
{"seq":9,"type":"tool/call","toolCallId":"z"}
`, []string{
			"1: user/message outside a turn",
			"4: step/start while the step of line 3 is open",
			"5: turn/start while the turn of line 2 is open",
			"6: names turn \"X\" inside turn \"U\"",
			"8: step/end outside a turn", "8: step/end without step/start",
			"9: tool/call outside a turn",
			"9: tool/call \"z\" has no tool/result"}},
		{"unclosed turn at end", `{"seq":1,"type":"turn/start"}
{"seq":2,"type":"user/message"}`, []string{"2: turn of line 1 has no turn/end"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Validate([]byte(tt.log))
			var lines []string
			for _, v := range got {
				lines = append(lines, v.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("violations:\n%s\nwant %d: %q", strings.Join(lines, "\n"), len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				num, sub, _ := strings.Cut(w, ": ")
				if !strings.HasPrefix(lines[i], "line "+num+": ") || !strings.Contains(lines[i], sub) {
					t.Errorf("violation %d = %q, want line %s containing %q", i, lines[i], num, sub)
				}
			}
		})
	}
}

func TestImportBadLog(t *testing.T) {
	log := `{"seq":1,"type":"session/title","title":"T"}
{"seq":2,"type":"turn/start"}
{"seq":3,"type":"user/message","messageId":"U","text":"hi"}
not json
{"seq":4,"type":"assistant/message","messageId":"A","agent":"pi","text":"hel"}
{"seq":4,"type":"assistant/message","messageId":"A","text":"DUP"}
{"seq":5,"type":"assistant/message","messageId":"A","text":"lo"}
{"seq":6,"type":"tool/result","toolCallId":"x","output":"orphan"}
{"seq":7,"type":"tool/call","toolCallId":"t","name":"Read"}
{"seq":8,"type":"tool/result","toolCallId":"t","isError":true,"error":"nope"}
{"seq":9,"type":"weird"}
{"seq":10,"type":"turn/end","messageId":"A","status":"completed","stopReason":"end_turn"}
`
	res := Import([]byte(log))
	want := []Message{
		{ID: "U", Role: RoleUser, Content: "hi"},
		{ID: "A", Role: RoleAssistant, Agent: "pi", Status: StatusCompleted, StopReason: "end_turn", Segments: []Segment{
			{Type: SegContent, Content: "hello"},
			{Type: SegTool, ID: "x", Status: "completed", Output: "orphan"},
			{Type: SegTool, ID: "t", Name: "Read", Status: "error", Error: "nope"},
		}},
	}
	if !reflect.DeepEqual(res.Messages, want) || res.Title != "T" {
		t.Errorf("messages:\n got %+v\nwant %+v", res.Messages, want)
	}
	if len(res.Skipped) != 3 || res.Skipped[0].Line != 4 || res.Skipped[1].Line != 6 || res.Skipped[2].Line != 11 {
		t.Errorf("skipped = %v", res.Skipped)
	}
	if len(res.Repaired) != 1 || res.Repaired[0].Line != 8 {
		t.Errorf("repaired = %v", res.Repaired)
	}
	for _, m := range res.Messages {
		if m.Role == RoleUser && m.Content != "hi" {
			t.Errorf("a tool result became a user message: %+v", m)
		}
	}
}

// TestValidateFindsInjectedFaults breaks valid exports in one place and
// checks that Validate names that place.
func TestValidateFindsInjectedFaults(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for i := range 300 {
		log, _ := exportString(t, ConversationMeta{Title: "t"}, genConversation(r, 1+r.IntN(4)))
		lines := slices.Collect(strings.Lines(log))
		k := 1 + r.IntN(len(lines)-1) // 0-based index of a line that is not the first
		var bad []string
		var wantLine int
		var want string
		switch fault := r.IntN(4); fault {
		case 0: // drop a line: the next one follows a gap
			if k == len(lines)-1 {
				k--
			}
			bad = append(slices.Clone(lines[:k]), lines[k+1:]...)
			wantLine, want = k+1, "seq gap"
		case 1: // repeat a line
			bad = append(slices.Clone(lines[:k+1]), lines[k:]...)
			wantLine, want = k+2, "duplicate seq"
		case 2: // cut a line short
			bad = slices.Clone(lines)
			bad[k] = bad[k][:len(bad[k])/2] + "\n"
			wantLine, want = k+1, "broken JSON"
		case 3: // an event type nobody knows
			bad = slices.Clone(lines)
			var e LogEvent
			_ = json.Unmarshal([]byte(bad[k]), &e)
			bad[k] = strings.Replace(bad[k], `"type":"`+e.Type+`"`, `"type":"vendor/x"`, 1)
			wantLine, want = k+1, "unknown event type"
		}
		vs := Validate([]byte(strings.Join(bad, "")))
		found := false
		for _, v := range vs {
			if v.Line == wantLine && strings.Contains(v.Message, want) {
				found = true
			}
		}
		if !found {
			t.Fatalf("case %d: want %q on line %d, got %v", i, want, wantLine, vs)
		}
		// The importer takes what it can and never makes a user message of
		// anything but a user/message line.
		imp := Import([]byte(strings.Join(bad, "")))
		for _, m := range imp.Messages {
			if m.Role == RoleUser && !strings.HasPrefix(m.Content, "question") && !strings.HasPrefix(m.ID, "seq-") {
				t.Fatalf("case %d: odd user message %+v", i, m)
			}
		}
	}
}
