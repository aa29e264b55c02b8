package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// This file turns recorded ACP traffic (testdata/acp) into live events the
// way agents/ does, so that the reducer, history and event-log functions are
// tested on what real agents send. It is a test harness, not the product
// mapping (that lives in agents/).

type acpLine struct {
	Dir string `json:"dir"`
	Msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
	} `json:"msg"`
}

type acpToolCall struct {
	SessionUpdate string          `json:"sessionUpdate"`
	ToolCallID    string          `json:"toolCallId"`
	Title         *string         `json:"title"`
	Kind          *string         `json:"kind"`
	Status        *string         `json:"status"`
	RawInput      json.RawMessage `json:"rawInput"`
	RawOutput     json.RawMessage `json:"rawOutput"`
	Content       []struct {
		Type    string  `json:"type"`
		Path    string  `json:"path"`
		OldText *string `json:"oldText"`
		NewText *string `json:"newText"`
		Content *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"content"`
}

// acpTurn is one prompt turn: the live events an agents/ mapping emits.
type acpTurn struct {
	prompt string
	events []Event
}

var acpToolStatus = map[string]ToolStatus{"pending": ToolPending, "in_progress": ToolRunning, "completed": ToolCompleted, "failed": ToolError}

// acpTurns reads one recorded ACP file into turns.
func acpTurns(t testing.TB, data []byte) []acpTurn {
	var turns []acpTurn
	tools := map[string]*Segment{} // merged per toolCallId, like agents/
	var cur *acpTurn
	var prompts = map[string]bool{}
	upsertTool := func(u acpToolCall) {
		s := tools[u.ToolCallID]
		if s == nil {
			s = &Segment{Type: SegTool, ID: u.ToolCallID, Status: string(ToolPending)}
			tools[u.ToolCallID] = s
		}
		if u.Title != nil {
			s.Name = *u.Title
		}
		if u.Kind != nil {
			s.ProviderKind = *u.Kind
		}
		if u.Status != nil {
			if st, ok := acpToolStatus[*u.Status]; ok {
				s.Status = string(st)
			}
		}
		if len(u.RawInput) > 0 && string(u.RawInput) != "{}" {
			s.Input = u.RawInput
		}
		if len(u.RawOutput) > 0 {
			var str string
			if json.Unmarshal(u.RawOutput, &str) == nil {
				s.Output = str
			} else {
				s.Output = string(u.RawOutput)
			}
		}
		var fcs []Segment
		for _, c := range u.Content {
			switch c.Type {
			case "diff":
				a, d := CountLines(c.OldText, c.NewText)
				fcs = append(fcs, Segment{Type: SegFileChange, Path: c.Path, Additions: &a, Deletions: &d, OldText: c.OldText, NewText: c.NewText,
					Diff: UnifiedDiff(c.Path, c.OldText, c.NewText), ToolCallID: u.ToolCallID, Status: "applied"})
			case "content":
				if c.Content != nil && c.Content.Type == "text" {
					s.Output = c.Content.Text
				}
			}
		}
		if cur == nil {
			return
		}
		seg := *s
		cur.events = append(cur.events, Event{Type: EvActivityUpsert, Segment: &seg})
		for i := range fcs {
			cur.events = append(cur.events, Event{Type: EvActivityUpsert, Segment: &fcs[i]})
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l acpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("acp line %q: %v", sc.Text(), err)
		}
		switch l.Msg.Method {
		case "session/prompt":
			var p struct {
				Prompt []struct{ Text string } `json:"prompt"`
			}
			_ = json.Unmarshal(l.Msg.Params, &p)
			text := ""
			for _, b := range p.Prompt {
				text += b.Text
			}
			turns = append(turns, acpTurn{prompt: text})
			cur = &turns[len(turns)-1]
			prompts[string(l.Msg.ID)] = true
			clear(tools)
		case "session/update":
			var p struct {
				Update json.RawMessage `json:"update"`
			}
			_ = json.Unmarshal(l.Msg.Params, &p)
			var u struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
				Entries []PlanEntry `json:"entries"`
			}
			_ = json.Unmarshal(p.Update, &u)
			if cur == nil {
				continue
			}
			switch u.SessionUpdate {
			case "agent_message_chunk":
				cur.events = append(cur.events, Event{Type: EvContentDelta, Delta: u.Content.Text})
			case "agent_thought_chunk":
				cur.events = append(cur.events, Event{Type: EvReasoningDelta, Delta: u.Content.Text})
			case "plan":
				cur.events = append(cur.events, Event{Type: EvPlanUpdated, Entries: u.Entries})
			case "tool_call", "tool_call_update":
				var tc acpToolCall
				_ = json.Unmarshal(p.Update, &tc)
				upsertTool(tc)
			}
		case "session/request_permission":
			var p struct {
				ToolCall acpToolCall `json:"toolCall"`
			}
			_ = json.Unmarshal(l.Msg.Params, &p)
			upsertTool(p.ToolCall)
		case "":
			if cur == nil || !prompts[string(l.Msg.ID)] || l.Msg.Result == nil {
				continue
			}
			var r struct {
				StopReason string `json:"stopReason"`
			}
			_ = json.Unmarshal(l.Msg.Result, &r)
			m := Message{}
			for _, ev := range cur.events {
				Apply(&m, ev)
			}
			reason := ""
			if r.StopReason == "cancelled" {
				reason = "cancelled"
			}
			cur.events = append(cur.events, CloseOpenTools(m, ToolError, reason)...)
			cur.events = append(cur.events, Event{Type: EvTurnCompleted, StopReason: r.StopReason})
			cur = nil
		}
	}
	for i := range turns {
		for j := range turns[i].events {
			turns[i].events[j].Seq = int64(j + 1)
		}
	}
	return turns
}

// fixtureConversations returns, per recorded agent, the conversation its
// traffic builds live.
func fixtureConversations(t testing.TB) map[string][]Message {
	files, err := filepath.Glob("testdata/acp/*.ndjson")
	if err != nil || len(files) == 0 {
		t.Fatalf("no ACP fixtures: %v", err)
	}
	out := map[string][]Message{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		agent := strings.TrimSuffix(filepath.Base(f), ".ndjson")
		var msgs []Message
		for i, turn := range acpTurns(t, data) {
			msgs = append(msgs, Message{ID: agent + "-u" + string(rune('0'+i)), Timestamp: int64(1000 * (i + 1)), Role: RoleUser, Content: turn.prompt})
			r := NewReducer(Message{ID: agent + "-a" + string(rune('0'+i)), Timestamp: int64(1000*(i+1) + 1), Role: RoleAssistant, Agent: agent, Status: StatusStreaming})
			for _, ev := range turn.events {
				r.Apply(ev)
			}
			msgs = append(msgs, r.Message())
		}
		out[agent] = msgs
	}
	return out
}

// TestInvariantsOnRecordedAgents checks issue 3's invariants and parity on
// the traffic of four real agents.
func TestInvariantsOnRecordedAgents(t *testing.T) {
	for agent, msgs := range fixtureConversations(t) {
		t.Run(agent, func(t *testing.T) {
			users, assistants := 0, 0
			sawTool, sawFile := false, false
			for _, m := range msgs {
				if m.Role == RoleUser {
					users++
					continue
				}
				assistants++
				// (2) adjacent fragments merged, (3) one tool segment per id, canonical.
				if err := checkCanonical(m); err != nil {
					t.Error(err)
				}
				for _, s := range m.Segments {
					if s.Type == SegTool {
						sawTool = true
						if s.Status == string(ToolPending) || s.Status == string(ToolRunning) {
							t.Errorf("tool %s left %s after the turn", s.ID, s.Status)
						}
					}
					if s.Type == SegFileChange && strings.HasSuffix(s.Path, "hello-go.txt") && deref(s.Additions) == 1 {
						sawFile = true
					}
				}
				if m.Status != StatusCompleted && m.Status != StatusCancelled {
					t.Errorf("message %s status %q", m.ID, m.Status)
				}
			}
			// (1) one provider turn → one assistant message.
			if users != assistants || users < 2 {
				t.Errorf("%d prompts, %d assistant messages", users, assistants)
			}
			if !sawTool || !sawFile {
				t.Errorf("fixture should hold the WRITE_FILE tool call and its file change (tool %v, file %v)", sawTool, sawFile)
			}
			// (5) parity: live == regrouped history, also through JSON.
			recs := Flatten(msgs)
			data, _ := json.Marshal(recs)
			var back []Record
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if got := Regroup(back); !reflect.DeepEqual(got, msgs) {
				t.Errorf("regrouped history differs from live:\n got %+v\nwant %+v", got, msgs)
			}
			// (4) a tool result never becomes a user message, in history and
			// in the event log.
			var log bytes.Buffer
			if _, err := ExportEvents(&log, ConversationMeta{Title: agent}, msgs); err != nil {
				t.Fatal(err)
			}
			if v := Validate(log.Bytes()); v != nil {
				t.Errorf("export invalid: %v", v)
			}
			imp := Import(log.Bytes())
			for _, got := range [][]Message{Regroup(recs), imp.Messages} {
				n := 0
				for _, m := range got {
					if m.Role == RoleUser {
						n++
					}
				}
				if n != users {
					t.Errorf("%d user messages, want %d", n, users)
				}
			}
		})
	}
}
