package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/transcript"
)

func mustUpdate(t testing.TB, s string) *rawUpdate {
	t.Helper()
	u, err := decodeUpdate([]byte(s))
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return u
}

// fakeClock advances 10 ms per reading.
func fakeClock() func() time.Time {
	now := time.Unix(1_800_000_000, 0)
	return func() time.Time {
		now = now.Add(10 * time.Millisecond)
		return now
	}
}

func TestApplyKinds(t *testing.T) {
	tests := []struct {
		name   string
		update string
		live   bool
		events string // JSON of the events, "" = none
		state  string // JSON of the state, "" = none
	}{
		{"message", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`, true,
			`[{"type":"content.delta","delta":"hi"}]`, ""},
		{"thought", `{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}`, true,
			`[{"type":"reasoning.delta","delta":"hm"}]`, ""},
		{"link", `{"sessionUpdate":"agent_message_chunk","content":{"type":"resource_link","uri":"file:///a","name":"a"}}`, true,
			`[{"type":"content.delta","delta":"[a](file:///a)"}]`, ""},
		{"image", `{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA","mimeType":"image/png"}}`, true, "", ""},
		{"replayed message", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"old"}}`, false, "", ""},
		{"user chunk", `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"me"}}`, true, "", ""},
		{"unknown kind shaped like a chunk", `{"sessionUpdate":"brand_new_kind","content":{"type":"text","text":"x"}}`, true, "", ""},
		{"no kind", `{"content":{"type":"text","text":"x"}}`, true, "", ""},
		{"plan", `{"sessionUpdate":"plan","entries":[{"content":"a","status":"pending","priority":"high"}]}`, true,
			`[{"type":"plan.updated","entries":[{"content":"a","status":"pending","priority":"high"}]}]`, ""},
		{"empty plan", `{"sessionUpdate":"plan","entries":[]}`, true, `[{"type":"plan.updated"}]`, ""},
		{"commands", `{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"init","description":"d"},{"name":5}]}`, false,
			"", `{"commands":[{"description":"d","name":"init"}]}`},
		{"mode", `{"sessionUpdate":"current_mode_update","currentModeId":"plan"}`, true,
			"", `{"modes":{"availableModes":null,"currentModeId":"plan"}}`},
		{"config", `{"sessionUpdate":"config_option_update","configOptions":[{"id":"m","name":"M","type":"select","currentValue":"a","options":[{"value":"a","name":"A"}]}]}`, true,
			"", `{"configOptions":[{"currentValue":"a","id":"m","name":"M","options":[{"name":"A","value":"a"}],"type":"select"}]}`},
		{"usage", `{"sessionUpdate":"usage_update","used":5,"size":100,"cost":{"amount":0.5,"currency":"USD"}}`, true,
			"", `{"usage":{"used":5,"size":100,"cost":0.5}}`},
		{"usage without cost", `{"sessionUpdate":"usage_update","used":5,"size":100}`, true, "", `{"usage":{"used":5,"size":100}}`},
		{"title", `{"sessionUpdate":"session_info_update","title":"T"}`, true, "", `{"title":"T"}`},
		{"title null", `{"sessionUpdate":"session_info_update","title":null}`, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := newMapper(fakeClock()).apply(mustUpdate(t, tt.update), tt.live)
			got := ""
			if len(out.events) > 0 {
				got = mustJSON(t, out.events)
			}
			if got != tt.events {
				t.Errorf("events = %s, want %s", got, tt.events)
			}
			got = ""
			if out.state != nil {
				got = mustJSON(t, out.state)
			}
			if got != tt.state {
				t.Errorf("state = %s, want %s", got, tt.state)
			}
		})
	}
}

// TestToolMerge checks the upsert rules: present fields overwrite, missing
// fields keep, any arrival order.
func TestToolMerge(t *testing.T) {
	tests := []struct {
		name    string
		updates []string
		want    transcript.Segment
	}{
		{"create then complete", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"t","title":"Run","kind":"execute","status":"pending","rawInput":{"cmd":"ls"}}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"in_progress"}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed","rawOutput":{"stdout":"a\n","stderr":""}}`,
		}, transcript.Segment{Name: "Run", ProviderKind: "execute", Status: "completed", Input: json.RawMessage(`{"cmd":"ls"}`), Output: "a\n", DurationMs: 20}},
		{"update before create", []string{
			`{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"in_progress","rawInput":{"x":1}}`,
			`{"sessionUpdate":"tool_call","toolCallId":"t","title":"Late create","kind":"read"}`,
		}, transcript.Segment{Name: "Late create", ProviderKind: "read", Status: "running", Input: json.RawMessage(`{"x":1}`)}},
		{"create twice", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"t","title":"A","kind":"read","status":"pending"}`,
			`{"sessionUpdate":"tool_call","toolCallId":"t","title":"B"}`,
		}, transcript.Segment{Name: "B", ProviderKind: "read", Status: "pending"}},
		{"empty input does not erase", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"t","rawInput":{"a":1}}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"t","rawInput":{}}`,
		}, transcript.Segment{Status: "pending", Input: json.RawMessage(`{"a":1}`)}},
		{"content replaces output", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"t","content":[{"type":"content","content":{"type":"text","text":"old"}}]}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"t","content":[{"type":"content","content":{"type":"text","text":"new"}},{"type":"content","content":{"type":"text","text":"more"}}]}`,
		}, transcript.Segment{Status: "pending", Output: "new\nmore"}},
		{"failed", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"t","status":"in_progress"}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"failed","rawOutput":"boom"}`,
		}, transcript.Segment{Status: "error", Output: "boom", Error: "boom", DurationMs: 10}},
		{"unknown status keeps", []string{
			`{"sessionUpdate":"tool_call","toolCallId":"t","status":"in_progress"}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"paused"}`,
		}, transcript.Segment{Status: "running"}},
		{"raw output object", []string{
			`{"sessionUpdate":"tool_call_update","toolCallId":"t","rawOutput":{"exit":1}}`,
		}, transcript.Segment{Status: "pending", Output: `{"exit":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMapper(fakeClock())
			var last transcript.Segment
			for _, u := range tt.updates {
				out := m.apply(mustUpdate(t, u), true)
				last = *out.events[0].Segment
			}
			tt.want.Type, tt.want.ID = transcript.SegTool, "t"
			if got, want := mustJSON(t, last), mustJSON(t, tt.want); got != want {
				t.Errorf("merged = %s\nwant     %s", got, want)
			}
		})
	}
}

func TestFileChanges(t *testing.T) {
	m := newMapper(fakeClock())
	create := `{"sessionUpdate":"tool_call","toolCallId":"e","kind":"edit","content":[
		{"type":"diff","path":"/w/a.go","oldText":"a\nb\nc\n","newText":"a\nB\nc\nd\n"},
		{"type":"diff","path":"/w/new.go","newText":"x\n"},
		{"type":"diff","path":"/w/null.go","oldText":null,"newText":"y\n"},
		{"type":"diff","path":"/w/empty.go","oldText":"","newText":"z\n"},
		{"type":"diff","path":"","newText":"ignored"}]}`
	out := m.apply(mustUpdate(t, create), true)
	if len(out.events) != 5 {
		t.Fatalf("events = %d, want tool + 4 fileChanges", len(out.events))
	}
	want := []struct {
		path       string
		adds, dels int
		old        string // "<nil>" for nil
	}{
		{"/w/a.go", 2, 1, "a\nb\nc\n"}, {"/w/new.go", 1, 0, "<nil>"}, {"/w/null.go", 1, 0, "<nil>"}, {"/w/empty.go", 1, 0, ""},
	}
	for i, w := range want {
		fc := out.events[i+1].Segment
		old := "<nil>"
		if fc.OldText != nil {
			old = *fc.OldText
		}
		if fc.Type != transcript.SegFileChange || fc.Path != w.path || *fc.Additions != w.adds || *fc.Deletions != w.dels || old != w.old || fc.ToolCallID != "e" {
			t.Errorf("fileChange %d = %+v (old %q)", i, fc, old)
		}
	}
	// The same diff again is not re-emitted; a changed one is.
	again := `{"sessionUpdate":"tool_call_update","toolCallId":"e","status":"completed","content":[
		{"type":"diff","path":"/w/new.go","newText":"x\n"},{"type":"diff","path":"/w/null.go","oldText":null,"newText":"y2\n"}]}`
	out = m.apply(mustUpdate(t, again), true)
	if len(out.events) != 2 || out.events[1].Segment.Path != "/w/null.go" {
		t.Errorf("second update events = %s", mustJSON(t, out.events))
	}
	if out.events[0].Segment.Output != "" {
		t.Errorf("diff content became output: %q", out.events[0].Segment.Output)
	}
}

func TestCloseOpen(t *testing.T) {
	m := newMapper(fakeClock())
	m.beginTurn()
	for _, u := range []string{
		`{"sessionUpdate":"tool_call","toolCallId":"b","status":"in_progress"}`,
		`{"sessionUpdate":"tool_call","toolCallId":"a","status":"pending"}`,
		`{"sessionUpdate":"tool_call","toolCallId":"c","status":"completed"}`,
	} {
		m.apply(mustUpdate(t, u), true)
	}
	evs := m.closeOpen(ToolErrCancelled)
	if len(evs) != 2 || evs[0].Segment.ID != "a" || evs[1].Segment.ID != "b" {
		t.Fatalf("closed = %s", mustJSON(t, evs))
	}
	for _, e := range evs {
		if e.Segment.Status != "error" || e.Segment.Error != ToolErrCancelled {
			t.Errorf("closed tool = %+v", e.Segment)
		}
	}
	if again := m.closeOpen(ToolErrCancelled); len(again) != 0 {
		t.Errorf("closed twice: %v", again)
	}
	m.beginTurn()
	if len(m.tools) != 0 {
		t.Errorf("finished tools kept: %d", len(m.tools))
	}
	// Tools of an earlier turn are not closed by a later one.
	m.apply(mustUpdate(t, `{"sessionUpdate":"tool_call","toolCallId":"d","status":"in_progress"}`), true)
	m.tools["d"].inTurn = false
	if evs := m.closeOpen(ToolErrTurnEnded); len(evs) != 0 {
		t.Errorf("closed a tool of another turn: %v", evs)
	}
}

func TestLineFilter(t *testing.T) {
	var in bytes.Buffer
	in.WriteString("not json\n")
	in.WriteString("\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{}}` + "\r\n")
	in.WriteString(`{"broken":` + "\n")
	in.WriteString(`{"jsonrpc":"2.0"}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("y", maxLineBytes) + `"}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","id":"a-b","result":{}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{}}`) // no final newline
	f := newLineFilter(quietLogger(), nil)
	pr, pw := io.Pipe()
	go f.run(&in, pw)
	got, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","method":"session/update","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":"a-b","result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{}}` + "\n"
	if string(got) != want {
		t.Errorf("forwarded:\n%s\nwant:\n%s", got, want)
	}
	if f.dropped != 4 || f.mark() != 1 {
		t.Errorf("dropped %d, notifications %d", f.dropped, f.mark())
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{n: 16}
	fmt.Fprint(tb, "first line\nsecond line\nthird\n")
	if got := tb.String(); got != "third" {
		t.Errorf("tail = %q", got)
	}
	tb2 := &tailBuffer{n: 100}
	fmt.Fprint(tb2, "  short\n")
	if got := tb2.String(); got != "short" {
		t.Errorf("tail = %q", got)
	}
}

// BenchmarkMapUpdate measures decoding plus mapping of one session/update
// (the per-update cost on the live path, without I/O).
func BenchmarkMapUpdate(b *testing.B) {
	cases := map[string]string{
		"chunk":      `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello from the agent, a typical streamed chunk."}}`,
		"toolUpdate": `{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"in_progress","title":"Edit main.go","kind":"edit","rawInput":{"path":"main.go","content":"package main\n"}}`,
		"diff":       `{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"completed","content":[{"type":"diff","path":"/w/main.go","oldText":"package main\n\nfunc main() {}\n","newText":"package main\n\nfunc main() {\n\tprintln(1)\n}\n"}]}`,
	}
	for name, raw := range cases {
		b.Run(name, func(b *testing.B) {
			m := newMapper(nil)
			params := []byte(`{"sessionId":"s","update":` + raw + `}`)
			b.ReportAllocs()
			b.SetBytes(int64(len(params)))
			for b.Loop() {
				p, err := decodeNotification(params)
				if err != nil {
					b.Fatal(err)
				}
				_ = m.apply(&p.Update, true)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
		})
	}
}

// FuzzApply: nothing an agent sends as a session/update or a permission
// request's toolCall panics the mapping, and every tool event carries the
// tool's id.
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`,
		`{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","kind":"edit","status":"pending","rawInput":{},"content":[{"type":"diff","path":"/w/a","oldText":null,"newText":"a\n"}]}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed","rawOutput":{"stdout":"s"},"content":[{"type":"content","content":{"type":"text","text":"o"}}]}`,
		`{"sessionUpdate":"plan","entries":[{"content":"a","status":"pending"}]}`,
		`{"sessionUpdate":"usage_update","used":1,"size":2,"cost":{"amount":1,"currency":"USD"}}`,
		`{"sessionUpdate":"config_option_update","configOptions":[{"id":"m","type":"select","currentValue":"a","options":[]}]}`,
		`{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"a","description":"b"}]}`,
		`{"toolCallId":"p","content":[{"type":"diff","path":"/w/b","oldText":"","newText":"x"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := decodeUpdate(b)
		if err != nil {
			return
		}
		m := newMapper(fakeClock(), "/w")
		for _, live := range []bool{true, false, true} {
			out := m.apply(u, live)
			for _, ev := range out.events {
				if ev.Type == transcript.EvActivityUpsert && ev.Segment.Type == transcript.SegTool && ev.Segment.ID != u.ToolCallID {
					t.Fatalf("tool event for %q from update of %q", ev.Segment.ID, u.ToolCallID)
				}
			}
		}
		if u.ToolCallID != "" {
			tool, _, _ := m.mergePermissionTool(u)
			if tool.ID != u.ToolCallID {
				t.Fatalf("permission tool id %q", tool.ID)
			}
		}
		m.closeOpen(ToolErrTurnEnded)
	})
}

// TestPermissionFileChangesFromToolCall: a permission request whose
// toolCall carries no content (codex-acp 2.6) shows the diffs the tool call
// already sent; one with its own diff shows that one.
func TestPermissionFileChangesFromToolCall(t *testing.T) {
	m := newMapper(fakeClock())
	m.apply(mustUpdate(t, `{"sessionUpdate":"tool_call","toolCallId":"p","kind":"edit","status":"in_progress","content":[
		{"type":"diff","path":"/w/b.txt","newText":"b\n"},{"type":"diff","path":"/w/a.txt","newText":"a\n"}]}`), true)
	_, fcs, _ := m.mergePermissionTool(mustUpdate(t, `{"sessionUpdate":"tool_call_update","toolCallId":"p"}`))
	if len(fcs) != 2 || fcs[0].Path != "/w/a.txt" || fcs[1].Path != "/w/b.txt" || *fcs[0].Additions != 1 {
		t.Errorf("bare permission: fileChanges %s, want the tool call's two diffs", mustJSON(t, fcs))
	}
	_, fcs, _ = m.mergePermissionTool(mustUpdate(t, `{"sessionUpdate":"tool_call_update","toolCallId":"p","content":[
		{"type":"diff","path":"/w/c.txt","newText":"c\n"}]}`))
	if len(fcs) != 1 || fcs[0].Path != "/w/c.txt" {
		t.Errorf("permission with its own diff: fileChanges %s", mustJSON(t, fcs))
	}
	_, fcs, _ = m.mergePermissionTool(mustUpdate(t, `{"sessionUpdate":"tool_call_update","toolCallId":"new"}`))
	if fcs == nil || len(fcs) != 0 {
		t.Errorf("unknown tool: fileChanges %v, want empty", fcs)
	}
}
