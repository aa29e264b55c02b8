package transcript

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Fuzz targets: go test -fuzz=FuzzReducer ./transcript (and FuzzRegroup,
// FuzzEventLog, FuzzUnifiedDiff). Seeds come from the recorded ACP traffic
// of four real agents (testdata/acp, see testdata/SOURCES.md).

// ndjson renders values one JSON per line.
func ndjson[T any](vs []T) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		data, _ := json.Marshal(v)
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// decodeLines decodes each line of data into a T, skipping lines that are
// not one.
func decodeLines[T any](data []byte) []T {
	var out []T
	for line := range bytes.Lines(data) {
		var v T
		if json.Unmarshal(line, &v) == nil {
			out = append(out, v)
		}
	}
	return out
}

// FuzzReducer applies arbitrary event streams (one Event JSON per line).
// Invariants: no panic; the Reducer and Apply agree; right after a terminal
// event the message is canonical, has the terminal status, and its history
// records regroup to it.
func FuzzReducer(f *testing.F) {
	for _, name := range []string{"claude-agent-acp", "codex-acp", "gemini", "opencode"} {
		data, err := os.ReadFile("testdata/acp/" + name + ".ndjson")
		if err != nil {
			f.Fatal(err)
		}
		for _, turn := range acpTurns(f, data) {
			f.Add(ndjson(turn.events))
		}
	}
	f.Add([]byte(`{"type":"content.delta","delta":"a<files>\nx\n</fi"}
{"type":"content.delta","delta":"les>b"}
{"type":"activity.upsert","segment":{"type":"plan","entries":[{"content":"p","status":"pending"}]}}
{"type":"activity.upsert","segment":{"type":"content","content":"c"}}
{"type":"activity.upsert","segment":{"type":"weird"}}
{"type":"turn.failed","message":"x"}
`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs := decodeLines[Event](data)
		start := Message{ID: "A", Timestamp: 1, Role: RoleAssistant, Agent: "x", Status: StatusStreaming}
		m := start
		r := NewReducer(start)
		for i, ev := range evs {
			Apply(&m, ev)
			r.Apply(ev)
			if !ev.Terminal() {
				continue
			}
			if got := r.Message(); !reflect.DeepEqual(got, m) {
				t.Fatalf("event %d: reducer %+v, Apply %+v", i, got, m)
			}
			if err := checkCanonical(m); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			want := StatusCompleted
			switch {
			case ev.Type == EvTurnFailed:
				want = StatusFailed
			case ev.StopReason == "cancelled":
				want = StatusCancelled
			}
			if m.Status != want {
				t.Fatalf("status %q after %s", m.Status, ev.Type)
			}
			if got := Regroup(Flatten([]Message{m})); !reflect.DeepEqual(got, []Message{m}) {
				t.Fatalf("event %d: regrouped %+v\nlive %+v", i, got, m)
			}
		}
		if got := r.Message(); !reflect.DeepEqual(got, m) {
			t.Fatalf("end: reducer %+v, Apply %+v", got, m)
		}
	})
}

// FuzzRegroup regroups arbitrary history records (one Record JSON per
// line). Invariants: no panic; one user message per user record and no
// other (a tool result never becomes a user message); no empty or adjacent
// same-kind text; tools unique by id, fileChanges by path; at most one plan
// per message.
func FuzzRegroup(f *testing.F) {
	for _, msgs := range fixtureConversations(f) {
		f.Add(ndjson(Flatten(msgs)))
	}
	f.Add([]byte(`{"kind":"content","content":"x"}
{"kind":"tool","toolId":"t","status":"running"}
{"kind":"user","id":"U","content":"q"}
{"kind":"tool","messageId":"A","toolId":"t","status":"completed","output":"o"}
{"kind":"content","messageId":"A","content":"<files>\na\nerror: e\n</files>"}
{"kind":"plan","messageId":"B","entries":[{"content":"p","status":"completed"}]}
{"kind":"","messageId":"B"}
`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs := decodeLines[Record](data)
		msgs := Regroup(recs)
		users := 0
		for _, r := range recs {
			if r.Kind == KindUser {
				users++
			}
		}
		n := 0
		for _, m := range msgs {
			if m.Role == RoleUser {
				n++
				if len(m.Segments) > 0 {
					t.Fatalf("user message with segments: %+v", m)
				}
				continue
			}
			if err := checkCanonical(m); err != nil && !strings.Contains(err.Error(), "<files>") {
				t.Fatal(err)
			}
		}
		if n != users {
			t.Fatalf("%d user messages from %d user records", n, users)
		}
		if len(msgs) > len(recs) {
			t.Fatalf("%d messages from %d records", len(msgs), len(recs))
		}
	})
}

// FuzzEventLog validates and imports arbitrary logs. Invariants: no panic;
// a valid log imports with nothing skipped; the messages of any import
// export to a valid log; user messages come only from user/message lines.
func FuzzEventLog(f *testing.F) {
	for agent, msgs := range fixtureConversations(f) {
		var b bytes.Buffer
		if _, err := ExportEvents(&b, ConversationMeta{Title: agent}, msgs); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte("{\"seq\":1,\"type\":\"turn/start\"}\n{\"seq\":3,\"type\":\"tool/result\",\"toolCallId\":\"x\"}\n{\"seq\":3}\nnot json\n{\"seq\":4,\"type\":\"x/y\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v := Validate(data)
		imp := Import(data)
		if v == nil && (len(imp.Skipped) > 0 || len(imp.Repaired) > 0) {
			t.Fatalf("valid log, but import skipped %v repaired %v", imp.Skipped, imp.Repaired)
		}
		userLines := 0
		for _, e := range decodeLines[LogEvent](data) {
			if e.Type == LogUserMessage {
				userLines++
			}
		}
		users := 0
		for _, m := range imp.Messages {
			if m.Role == RoleUser {
				users++
			}
		}
		if users > userLines {
			t.Fatalf("%d user messages from %d user/message lines", users, userLines)
		}
		var b bytes.Buffer
		if _, err := ExportEvents(&b, ConversationMeta{Title: imp.Title}, imp.Messages); err != nil {
			t.Fatal(err)
		}
		if v := Validate(b.Bytes()); v != nil {
			t.Fatalf("re-export invalid: %v\n%s", v, b.String())
		}
	})
}

// FuzzUnifiedDiff: the diff of any two texts turns the first into the
// second and agrees with CountLines.
func FuzzUnifiedDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n")
	f.Add("", "x")
	f.Add("x\ny", "x\ny\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := UnifiedDiff("f", &a, &b)
		got, err := applyUnified(a, d)
		if err != nil || got != b {
			t.Fatalf("apply = %q, %v; want %q\n%s", got, err, b, d)
		}
		adds, dels := CountLines(&a, &b)
		if adds > countTextLines(b) || dels > countTextLines(a) || (a != b && adds+dels == 0) {
			t.Fatalf("CountLines = +%d -%d for %q → %q", adds, dels, a, b)
		}
	})
}
