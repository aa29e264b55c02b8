package agents

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

// TestLineFilterOnDrop checks that a line over maxLineBytes reaches onDrop
// with its head and length, after the lines before it were forwarded and
// before the lines after it.
func TestLineFilterOnDrop(t *testing.T) {
	before := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}` + "\n"
	after := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	big := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("y", maxLineBytes) + `"}}}}` + "\n"
	exact := `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("z", maxLineBytes-len(`{"jsonrpc":"2.0","method":"x","params":""}`)-1) + `"}` + "\n"
	if len(exact) != maxLineBytes {
		t.Fatalf("test line is %d bytes", len(exact))
	}
	in := before + big + after + exact + big[:len(big)-1] // the last one without a newline

	type drop struct {
		n, mark uint64 // mark: session/update notifications forwarded before it
		head    string
		size    int64
	}
	var drops []drop
	var out bytes.Buffer
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		io.Copy(&out, pr)
		close(done)
	}()
	f := newLineFilter(quietLogger(), nil)
	f.onDrop = func(n uint64, head []byte, size int64) {
		drops = append(drops, drop{n, f.mark(), string(head), size})
	}
	f.run(strings.NewReader(in), pw)
	<-done
	if want := before + after + exact; out.String() != want {
		t.Errorf("forwarded %d bytes, want %d", out.Len(), len(want))
	}
	if len(drops) != 2 {
		t.Fatalf("%d drops, want 2", len(drops))
	}
	for i, d := range drops {
		if d.n != uint64(i+1) || d.mark != 1 {
			t.Errorf("drop %d: n = %d, forwarded before it %d", i, d.n, d.mark)
		}
		if len(d.head) != dropHeadBytes || !strings.HasPrefix(big, d.head) {
			t.Errorf("drop %d: head of %d bytes is not the line's first %d", i, len(d.head), dropHeadBytes)
		}
	}
	if drops[0].size != int64(len(big)) || drops[1].size != int64(len(big)-1) {
		t.Errorf("sizes %d, %d; want %d, %d", drops[0].size, drops[1].size, len(big), len(big)-1)
	}
	if f.mark() != 1 {
		t.Errorf("notifications forwarded %d, want 1", f.mark())
	}
}

func TestHeadString(t *testing.T) {
	tests := []struct {
		head, name, want string
	}{
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"abc-1","update":{"toolCallId":"t\"1"`, "sessionId", "abc-1"},
		{`{"params":{"sessionId":"abc-1","update":{"toolCallId":"t\"1","x"`, "toolCallId", `t"1`},
		{`{"params":{ "sessionId" : "sp ace" }}`, "sessionId", "sp ace"},
		{`{"params":{"update":{"content":{"text":"\"sessionId\":\"fake\""}}`, "sessionId", ""},
		{`{"params":{"sessionId":"cut off`, "sessionId", ""},
		{`{"params":{"sessionId":42}}`, "sessionId", ""},
		{`{"params":{"sessionId"`, "sessionId", ""},
		{`{"params":{"sessionId":"\u00e9"}}`, "sessionId", "é"},
		{`{"params":{"toolCallIds":["a"]}}`, "toolCallId", ""},
		{``, "sessionId", ""},
	}
	for _, tt := range tests {
		if got := headString([]byte(tt.head), tt.name); got != tt.want {
			t.Errorf("headString(%s, %s) = %q, want %q", tt.head, tt.name, got, tt.want)
		}
	}
}

func TestDroppedLineError(t *testing.T) {
	tests := []struct {
		size int64
		want string
	}{
		{64<<20 + 150, "agent sent a 64 MB line; it was dropped (limit 10 MB)"},
		{11<<20 + 120, "agent sent a 11 MB line; it was dropped (limit 10 MB)"},
		{10<<20 + 600<<10, "agent sent a 10.6 MB line; it was dropped (limit 10 MB)"},
	}
	for _, tt := range tests {
		if got := droppedLineError(tt.size); got != tt.want {
			t.Errorf("droppedLineError(%d) = %q, want %q", tt.size, got, tt.want)
		}
	}
}

// TestMapperDroppedLine checks the marker segments: a known tool is set to
// error keeping what it had, an unknown tool id is created, no tool id gives
// a segment of its own.
func TestMapperDroppedLine(t *testing.T) {
	const msg = "agent sent a 12 MB line; it was dropped (limit 10 MB)"
	m := newMapper(fakeClock())
	m.apply(mustUpdate(t, `{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read a.txt","kind":"read","status":"in_progress","rawInput":{"path":"a.txt"}}`), true)
	tests := []struct {
		name, id, toolCallID string
		want                 string
	}{
		{"known tool", "ochat-dropped-1", "t1",
			`{"type":"tool","id":"t1","name":"Read a.txt","status":"error","providerKind":"read","input":{"path":"a.txt"},"error":"` + msg + `","durationMs":10}`},
		{"unknown tool", "ochat-dropped-2", "t9",
			`{"type":"tool","id":"t9","name":"dropped agent message","status":"error","error":"` + msg + `"}`},
		{"no tool", "ochat-dropped-3", "",
			`{"type":"tool","id":"ochat-dropped-3","name":"dropped agent message","status":"error","error":"` + msg + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := m.droppedLine(tt.id, tt.toolCallID, msg)
			if len(evs) != 1 || evs[0].Type != transcript.EvActivityUpsert {
				t.Fatalf("events %+v", evs)
			}
			got, _ := json.Marshal(evs[0].Segment)
			if string(got) != tt.want {
				t.Errorf("segment\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	// The known tool is closed: a new turn forgets it, closeOpen leaves it.
	if evs := m.closeOpen(ToolErrTurnEnded); len(evs) != 0 {
		t.Errorf("closeOpen touched dropped-line tools: %+v", evs)
	}
}
