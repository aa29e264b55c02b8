package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

func TestPlainTurn(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	if c.Init.Workspace != e.ws || c.Init.ProtocolVersion != ProtocolVersion || c.Init.ServerInfo == nil || c.Init.ServerInfo.Name != "ochatd" {
		t.Fatalf("initialize result %+v", c.Init)
	}
	res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "PLAIN\nplease say hello to the whole wide world of agents today"})
	if res.ConversationID == "" || res.UserMessageID == "" || res.TurnID != res.AssistantMessageID || res.UserMessageID >= res.AssistantMessageID {
		t.Fatalf("send result %+v", res)
	}
	log := collect(t, c, res.TurnID, nil)
	checkSeq(t, log.events, 1)
	if got := log.terminal(); got.Type != transcript.EvTurnCompleted || got.StopReason != "end_turn" {
		t.Fatalf("terminal %+v", got)
	}
	if len(log.events) != 4 {
		t.Fatalf("want 3 deltas + completed, got %+v", log.events)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	if got.Conversation.Title != "PLAIN" {
		t.Errorf("title %q", got.Conversation.Title)
	}
	if len(got.Messages) != 2 || got.Messages[0].Role != transcript.RoleUser || got.Messages[1].Role != transcript.RoleAssistant {
		t.Fatalf("messages %+v", got.Messages)
	}
	a := got.Messages[1]
	if a.Status != transcript.StatusCompleted || a.Agent != "fake" || a.StopReason != "end_turn" || len(a.Segments) != 2 ||
		a.Segments[0].Content != "thinking" || a.Segments[1].Content != "Hello, world" {
		t.Fatalf("assistant message %+v", a)
	}
	// The live reduction equals what a client reduces from the events.
	m := transcript.Message{ID: a.ID, Role: transcript.RoleAssistant}
	for _, ev := range log.events {
		transcript.Apply(&m, ev)
	}
	if m.Segments[1].Content != a.Segments[1].Content || m.Status != a.Status {
		t.Fatalf("client reduction %+v != stored %+v", m, a)
	}
	list := call[ListConversationsResult](t, c, MethodConversationsList, nil)
	if len(list.Conversations) != 1 || list.Conversations[0].Running || list.Conversations[0].Agents[0] != "fake" {
		t.Fatalf("list %+v", list)
	}
	hist := call[HistoryResult](t, c, MethodHistory, ConversationParams{ConversationID: res.ConversationID})
	if len(hist.Records) < 3 {
		t.Fatalf("history records %+v", hist.Records)
	}
	// A second turn in the same conversation reuses the agent process.
	res2 := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: "PLAIN again"})
	collect(t, c, res2.TurnID, nil)
	if n := e.fake.startCount(); n != 1 {
		t.Fatalf("agent started %d times, want 1", n)
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t, nil)
	nc, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	raw := bufio.NewReader(nc)
	send := func(body string) {
		fmt.Fprintf(nc, "Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	type resp struct {
		ID    json.RawMessage `json:"id"`
		Error *jsonrpc2.Error `json:"error"`
	}
	recv := func() resp {
		t.Helper()
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		n := 0
		for {
			line, err := raw.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			line = strings.TrimSpace(line)
			if line == "" {
				break
			}
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(raw, b); err != nil {
			t.Fatal(err)
		}
		var r resp
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return r
	}
	cases := []struct {
		body string
		code jsonrpc2.Code
		want string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ochat/conversations/list"}`, CodeNotInitialized, "initialize"},
		{`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"processId":"x"}}`, jsonrpc2.InvalidParams, "processId"},
		{`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}}`, jsonrpc2.InvalidRequest, "already"},
		{`{"jsonrpc":"2.0","id":5,"method":"ochat/foo"}`, jsonrpc2.MethodNotFound, `"ochat/foo"`},
		{`{not json`, jsonrpc2.ParseError, "parse"},
		{`[1,2]`, jsonrpc2.InvalidRequest, "object"},
		{`{"jsonrpc":"1.0","id":6,"method":"x"}`, jsonrpc2.InvalidRequest, "2.0"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"x"}`, jsonrpc2.InvalidRequest, "id"},
		{`{"jsonrpc":"2.0","id":7,"method":"ochat/conversations/get","params":{"conversationId":7}}`, jsonrpc2.InvalidParams, "conversationId"},
		{`{"jsonrpc":"2.0","id":8,"method":"ochat/conversations/get","params":{}}`, jsonrpc2.InvalidParams, "conversationId is required"},
		{`{"jsonrpc":"2.0","id":9,"method":"ochat/conversations/get","params":[1]}`, jsonrpc2.InvalidParams, "object"},
		{`{"jsonrpc":"2.0","id":10,"method":"ochat/conversations/get","params":{"conversationId":"01NOPE"}}`, CodeNotFound, "01NOPE"},
		{`{"jsonrpc":"2.0","id":11,"method":"ochat/chat/send","params":{"text":""}}`, jsonrpc2.InvalidParams, "text"},
		{`{"jsonrpc":"2.0","id":12,"method":"ochat/chat/send","params":{"text":"hi","attachments":"no"}}`, jsonrpc2.InvalidParams, "attachments"},
		{`{"jsonrpc":"2.0","id":13,"method":"ochat/chat/send","params":{"text":"hi","agent":"nope"}}`, CodeAgentUnavailable, "agent_servers"},
		{`{"jsonrpc":"2.0","id":14,"method":"ochat/chat/send","params":{"text":"hi","conversationId":"01NOPE"}}`, CodeNotFound, "01NOPE"},
		{`{"jsonrpc":"2.0","id":15,"method":"ochat/permission/respond","params":{"permissionId":"p1","optionId":"allow"}}`, CodeNotFound, "p1"},
		{`{"jsonrpc":"2.0","id":16,"method":"ochat/permission/respond","params":{"permissionId":"p1"}}`, jsonrpc2.InvalidParams, "optionId"},
		{`{"jsonrpc":"2.0","id":17,"method":"ochat/chat/cancel","params":{"conversationId":"01NOPE"}}`, CodeNotFound, "01NOPE"},
		{`{"jsonrpc":"2.0","id":18,"method":"ochat/conversations/rename","params":{"conversationId":"01NOPE"}}`, jsonrpc2.InvalidParams, "title"},
		{`{"jsonrpc":"2.0","id":19,"method":"ochat/subscribe","params":{"conversationId":true}}`, jsonrpc2.InvalidParams, "conversationId"},
		{`{"jsonrpc":"2.0","id":20,"method":"shutdown"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":21,"method":"ochat/conversations/list"}`, jsonrpc2.InvalidRequest, "shutdown"},
	}
	for _, tc := range cases {
		send(tc.body)
		r := recv()
		if tc.code == 0 {
			if r.Error != nil {
				t.Fatalf("%s: unexpected error %+v", tc.body, r.Error)
			}
			continue
		}
		if r.Error == nil || r.Error.Code != tc.code || !strings.Contains(r.Error.Message, tc.want) {
			t.Fatalf("%s: want code %d containing %q, got %+v", tc.body, tc.code, tc.want, r.Error)
		}
	}
	// A notification of an unknown method gets no answer; exit closes.
	send(`{"jsonrpc":"2.0","method":"ochat/whatever","params":{"a":1}}`)
	send(`{"jsonrpc":"2.0","method":"exit"}`)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(raw); err != nil || len(b) != 0 {
		t.Fatalf("after exit: %q %v", b, err)
	}
	// The daemon is still up.
	c := e.dial("after")
	call[ListConversationsResult](t, c, MethodConversationsList, nil)
	// A broken frame header ends only that connection.
	for _, frame := range []string{"Content-Length: nope\r\n\r\n{}", "Content-Type: application/json\r\n\r\n{}", "garbage\r\n\r\n", "Content-Length: 999999999999\r\n\r\n"} {
		nc2, _ := net.Dial("unix", e.sock)
		fmt.Fprint(nc2, frame)
		nc2.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(nc2); err != nil {
			t.Fatalf("%q: connection not closed: %v", frame, err)
		}
		nc2.Close()
		call[ListConversationsResult](t, c, MethodConversationsList, nil)
	}
}

func TestConversationMethods(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	cr := call[ConversationResult](t, c, MethodConversationsCreate, CreateConversationParams{Title: "first"})
	id := cr.Conversation.ID
	if id == "" || cr.Conversation.Title != "first" {
		t.Fatalf("create %+v", cr)
	}
	call[struct{}](t, c, MethodConversationsRename, map[string]any{"conversationId": id, "title": "renamed"})
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: id})
	if got.Conversation.Title != "renamed" || got.Messages == nil || len(got.Messages) != 0 {
		t.Fatalf("get %+v", got)
	}
	res := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: id, Agent: "other", Text: "PLAIN"})
	if res.ConversationID != id {
		t.Fatal("send made a new conversation")
	}
	collect(t, c, res.TurnID, nil)
	// No agent named: the conversation's last agent answers.
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: id, Text: "PLAIN"})
	collect(t, c, res.TurnID, nil)
	got = call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: id})
	if got.Messages[3].Agent != "other" {
		t.Fatalf("agent %q, want other", got.Messages[3].Agent)
	}
	agentsList := call[AgentsListResult](t, c, MethodAgentsList, nil)
	if len(agentsList.Agents) != 3 || !agentsList.Agents[0].Available {
		t.Fatalf("agents %+v", agentsList)
	}
	call[struct{}](t, c, MethodConversationsDelete, ConversationParams{ConversationID: id})
	callErr(t, c, MethodConversationsGet, ConversationParams{ConversationID: id}, CodeNotFound)
}

func TestPermissionTwoClients(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial("a"), e.dial("b")
	res := call[SendResult](t, a, MethodChatSend, SendParams{Text: "WRITE hello.txt"})
	sub := call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: res.ConversationID})
	// b may have subscribed before or after the request: it sees it either
	// in the subscribe answer or as a notification.
	var permID string
	if len(sub.Permissions) == 1 {
		permID = sub.Permissions[0].PermissionID
	}
	answered := false
	answer := func(n Notification) {
		if n.Method == NotifyPermission && !answered {
			var p PermissionParams
			json.Unmarshal(n.Params, &p)
			permID = p.PermissionID
		}
		if permID != "" && !answered {
			answered = true
			call[struct{}](t, b, MethodPermissionRespond, RespondParams{PermissionID: permID, OptionID: "allow"})
		}
	}
	if permID != "" {
		answer(Notification{})
	}
	logB := collect(t, b, res.TurnID, answer)
	logA := collect(t, a, res.TurnID, nil)
	var sawPerm, sawResolved bool
	for _, n := range logA.others {
		switch n.Method {
		case NotifyPermission:
			var p PermissionParams
			json.Unmarshal(n.Params, &p)
			sawPerm = p.PermissionID == permID && len(p.Options) == 2 && len(p.FileChanges) == 1 && p.ToolCall.ID == "tool_1"
		case NotifyPermissionResolved:
			var p PermissionResolvedParams
			json.Unmarshal(n.Params, &p)
			sawResolved = p.PermissionID == permID && p.OptionID == "allow" && p.Outcome == "selected"
		}
	}
	if !sawPerm || !sawResolved {
		t.Fatalf("client a: permission %v resolved %v (%+v)", sawPerm, sawResolved, logA.others)
	}
	callErr(t, a, MethodPermissionRespond, RespondParams{PermissionID: permID, OptionID: "reject"}, CodeNotFound)
	if logB.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("terminal %+v", logB.terminal())
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "hello.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("file: %q %v", b, err)
	}
	got := call[GetConversationResult](t, a, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	var tool, fc *transcript.Segment
	for i, s := range got.Messages[1].Segments {
		switch s.Type {
		case transcript.SegTool:
			tool = &got.Messages[1].Segments[i]
		case transcript.SegFileChange:
			fc = &got.Messages[1].Segments[i]
		}
	}
	if tool == nil || tool.Status != string(transcript.ToolCompleted) || fc == nil || fc.Path != filepath.Join(e.ws, "hello.txt") || *fc.Additions != 1 {
		t.Fatalf("segments %+v", got.Messages[1].Segments)
	}
}

func TestRejectAndCancelPermission(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	for _, tc := range []struct {
		name   string
		answer RespondParams
		stop   string
		status transcript.MessageStatus
	}{
		{"reject", RespondParams{OptionID: "reject"}, "end_turn", transcript.StatusCompleted},
		{"cancelled", RespondParams{Cancelled: true}, "cancelled", transcript.StatusCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "WRITE " + tc.name + ".txt"})
			log := collect(t, c, res.TurnID, func(n Notification) {
				if n.Method == NotifyPermission {
					var p PermissionParams
					json.Unmarshal(n.Params, &p)
					callErr(t, c, MethodPermissionRespond, RespondParams{PermissionID: p.PermissionID, OptionID: "bogus"}, jsonrpc2.InvalidParams)
					r := tc.answer
					r.PermissionID = p.PermissionID
					call[struct{}](t, c, MethodPermissionRespond, r)
				}
			})
			if log.terminal().StopReason != tc.stop {
				t.Fatalf("terminal %+v", log.terminal())
			}
			got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
			if got.Messages[1].Status != tc.status {
				t.Fatalf("status %q", got.Messages[1].Status)
			}
			if _, err := os.Stat(filepath.Join(e.ws, tc.name+".txt")); err == nil {
				t.Fatal("file written without permission")
			}
		})
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "SLOW"})
	callErr(t, c, MethodChatRetry, RetryParams{ConversationID: res.ConversationID, MessageID: res.UserMessageID}, CodeConflict)
	callErr(t, c, MethodConversationsDelete, ConversationParams{ConversationID: res.ConversationID}, CodeConflict)
	cancelled := false
	log := collect(t, c, res.TurnID, func(n Notification) {
		if n.Method == NotifyEvent && !cancelled {
			cancelled = true
			r := call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: res.ConversationID})
			if !r.Cancelled {
				t.Error("cancel of a running turn reported false")
			}
		}
	})
	checkSeq(t, log.events, 1)
	if got := log.terminal(); got.Type != transcript.EvTurnCompleted || got.StopReason != "cancelled" {
		t.Fatalf("terminal %+v", got)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	if got.Messages[1].Status != transcript.StatusCancelled || got.Messages[1].DurationMs <= 0 && got.Messages[1].StopReason != "cancelled" {
		t.Fatalf("message %+v", got.Messages[1])
	}
	if r := call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: res.ConversationID}); r.Cancelled {
		t.Fatal("cancel with no turn running reported true")
	}
}

func TestCrashThenNextSend(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "CRASH"})
	log := collect(t, c, res.TurnID, nil)
	term := log.terminal()
	if term.Type != transcript.EvTurnFailed || !strings.Contains(term.Message, "boom") {
		t.Fatalf("terminal %+v", term)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	if m := got.Messages[1]; m.Status != transcript.StatusFailed || !strings.Contains(m.Error, "boom") || m.Segments[0].Content != "partial" {
		t.Fatalf("failed message %+v", m)
	}
	res2 := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: "PLAIN"})
	if log := collect(t, c, res2.TurnID, nil); log.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("after crash %+v", log.terminal())
	}
	if n := e.fake.startCount(); n != 2 {
		t.Fatalf("agent started %d times, want 2 (respawn after crash)", n)
	}
}

// TestSubscribeMidTurn: a second client attaching mid-turn gets the buffered
// events and then the live ones: together seq 1..n, no gap, no duplicate.
func TestSubscribeMidTurn(t *testing.T) {
	for _, bufCap := range []int{0, 50} {
		t.Run(fmt.Sprintf("cap%d", bufCap), func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.BufferCap = bufCap })
			a, b := e.dial("a"), e.dial("b")
			res := call[SendResult](t, a, MethodChatSend, SendParams{Text: "STREAM 3000 200"})
			// Wait until some events were sent.
			for {
				n, err := a.Next(ctxT(t))
				if err != nil {
					t.Fatal(err)
				}
				var p EventParams
				json.Unmarshal(n.Params, &p)
				if p.Event.Seq >= 100 {
					break
				}
			}
			sub := call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: res.ConversationID})
			if sub.Running == nil || sub.Running.TurnID != res.TurnID {
				t.Fatalf("running %+v", sub.Running)
			}
			log := collect(t, b, res.TurnID, nil)
			var m transcript.Message
			for _, msg := range sub.Messages {
				if msg.ID == res.TurnID {
					m = msg
				}
			}
			first := int64(1)
			if sub.Running.Truncated {
				if bufCap != 50 || sub.Running.Message == nil || len(sub.Running.Events) != 0 {
					t.Fatalf("truncated running %+v", sub.Running)
				}
				first = sub.Running.LastSeq + 1
			} else {
				if len(m.Segments) != 0 {
					t.Fatal("running message should come without segments when events replay")
				}
				checkSeq(t, sub.Running.Events, 1)
				if sub.Running.LastSeq != int64(len(sub.Running.Events)) {
					t.Fatalf("lastSeq %d, %d events", sub.Running.LastSeq, len(sub.Running.Events))
				}
				for _, ev := range sub.Running.Events {
					transcript.Apply(&m, ev)
				}
				first = sub.Running.LastSeq + 1
			}
			checkSeq(t, log.events, first)
			for _, ev := range log.events {
				transcript.Apply(&m, ev)
			}
			got := call[GetConversationResult](t, a, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
			if m.Segments[0].Content != strings.Repeat("x", 3000) || m.Status != got.Messages[1].Status || m.Segments[0].Content != got.Messages[1].Segments[0].Content {
				t.Fatalf("b rebuilt %d chars, status %s", len(m.Segments[0].Content), m.Status)
			}
		})
	}
}

// TestDisconnectKeepsTurn: the sender going away does not cancel its turn.
func TestDisconnectKeepsTurn(t *testing.T) {
	e := newEnv(t, nil)
	nc, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewClient(ctxT(t), nc, "a", "test")
	if err != nil {
		t.Fatal(err)
	}
	res := call[SendResult](t, a, MethodChatSend, SendParams{Text: "STREAM 200 1000"})
	nc.Close()
	b := e.dial("b")
	sub := call[SubscribeResult](t, b, MethodSubscribe, ConversationParams{ConversationID: res.ConversationID})
	if sub.Running == nil {
		t.Skip("turn finished before the second client subscribed")
	}
	log := collect(t, b, res.TurnID, nil)
	if log.terminal().Type != transcript.EvTurnCompleted || log.terminal().Seq != 201 {
		t.Fatalf("terminal %+v", log.terminal())
	}
}

// TestSlowClientResync: a client that stops reading is dropped from live
// events and told to resync; the turn and other clients are unaffected.
func TestSlowClientResync(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ClientQueue = 64 })
	nc, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	body := func(s string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(s), s) }
	fmt.Fprint(nc, body(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	fmt.Fprint(nc, body(`{"jsonrpc":"2.0","id":2,"method":"ochat/chat/send","params":{"text":"STREAM 50000"}}`))
	// Do not read: the socket buffer fills, the queue grows, the daemon drops us.
	// A second client (not subscribed) waits for the turn to end.
	b := e.dial("b")
	var convID string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		list := call[ListConversationsResult](t, b, MethodConversationsList, nil)
		if len(list.Conversations) == 0 {
			continue
		}
		convID = list.Conversations[0].ID
		got := call[GetConversationResult](t, b, MethodConversationsGet, ConversationParams{ConversationID: convID})
		if len(got.Messages) == 2 && got.Messages[1].Status == transcript.StatusCompleted {
			break
		}
	}
	// Now read everything the slow client got: ends with a resync.
	dec := bufio.NewReader(nc)
	sawResync := false
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for !sawResync {
		line, err := dec.ReadString('\n')
		if err != nil {
			t.Fatalf("slow client: %v", err)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Content-Length: "); ok {
			n, _ := strconv.Atoi(v)
			dec.ReadString('\n')
			buf := make([]byte, n)
			io.ReadFull(dec, buf)
			sawResync = strings.Contains(string(buf), NotifyResync)
		}
	}
	got := call[GetConversationResult](t, b, MethodConversationsGet, ConversationParams{ConversationID: convID})
	if len(got.Messages[1].Segments[0].Content) != 50000 {
		t.Fatalf("turn lost text: %d", len(got.Messages[1].Segments[0].Content))
	}
}

// TestRestart: conversations survive a daemon restart; a message left
// streaming by a killed daemon is marked interrupted on start.
func TestRestart(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "PLAIN"})
	collect(t, c, res.TurnID, nil)
	// What a killed daemon leaves: a streaming assistant message.
	stuck := transcript.Message{ID: e.srv.newID(), Timestamp: nowMs(), Role: transcript.RoleAssistant, Agent: "fake",
		Status: transcript.StatusStreaming, Segments: []transcript.Segment{{Type: transcript.SegContent, Content: "half"}}}
	if err := e.store.PutMessage(res.ConversationID, stuck, nowMs()); err != nil {
		t.Fatal(err)
	}
	e.restart(nil)
	c = e.dial("a2")
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	if len(got.Messages) != 3 || got.Messages[1].Status != transcript.StatusCompleted || got.Messages[2].Status != transcript.StatusInterrupted || got.Messages[2].Segments[0].Content != "half" {
		t.Fatalf("after restart %+v", got.Messages)
	}
	res2 := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: "PLAIN"})
	collect(t, c, res2.TurnID, nil)
}

func TestListenRefusesSecondDaemon(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := Listen(e.sock); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second listen: %v", err)
	}
	if _, err := history.Open(e.dbPath); err == nil {
		t.Fatal("second store open succeeded")
	}
	// A stale socket file is replaced.
	stale := filepath.Join(shortTempDir(t), "x.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln2, err := Listen(stale)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	fi, _ := os.Stat(stale)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v", fi.Mode().Perm())
	}
	ln2.Close()
}

func TestIdleExit(t *testing.T) {
	base := shortTempDir(t)
	st, err := history.Open(filepath.Join(base, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := New(Options{Workspace: base, Store: st, IdleTimeout: 50 * time.Millisecond})
	ln, err := Listen(filepath.Join(base, "s"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(t.Context(), ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not exit when idle")
	}
}

func TestTitleFrom(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"fix the parser", "fix the parser"},
		{"\n\n  add   a README \nand more", "add a README"},
		{strings.Repeat("word ", 20), "word word word word word word word word word word word word…"},
		{strings.Repeat("é", 70), strings.Repeat("é", 60) + "…"},
	} {
		if got := titleFrom(tc.in); got != tc.want {
			t.Errorf("titleFrom(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestResolveWorkspace(t *testing.T) {
	root := shortTempDir(t)
	os.MkdirAll(filepath.Join(root, "repo", ".git"), 0o755)
	os.MkdirAll(filepath.Join(root, "repo", "a", "b"), 0o755)
	os.MkdirAll(filepath.Join(root, "plain"), 0o755)
	real, _ := filepath.EvalSymlinks(root)
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(root, "repo", "a", "b"), filepath.Join(real, "repo")},
		{filepath.Join(root, "plain"), filepath.Join(real, "plain")},
	} {
		if got, err := ResolveWorkspace(tc.dir); err != nil || got != tc.want {
			t.Errorf("ResolveWorkspace(%s) = %s, %v; want %s", tc.dir, got, err, tc.want)
		}
	}
}

// TestSessionHang: session/new that never answers ends the turn (cancel, or
// SessionTimeout which also stops the process); the agent's next turn works.
func TestSessionHang(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		want    transcript.EventType
		starts  int
	}{
		// A cancel during session/new stops the process: the next turn
		// starts another.
		{"cancel", time.Hour, true, transcript.EvTurnCompleted, 2},
		{"timeout", 100 * time.Millisecond, false, transcript.EvTurnFailed, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.SessionTimeout = tc.timeout })
			c := e.dial("a")
			res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "hang", Text: "PLAIN"})
			if tc.cancel {
				time.Sleep(50 * time.Millisecond)
				call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: res.ConversationID})
			}
			log := collect(t, c, res.TurnID, nil)
			if term := log.terminal(); term.Type != tc.want || (tc.cancel && term.StopReason != "cancelled") || (!tc.cancel && !strings.Contains(term.Message, "did not answer session/new")) {
				t.Fatalf("terminal %+v", term)
			}
			res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: "PLAIN"})
			if log := collect(t, c, res.TurnID, nil); log.terminal().Type != transcript.EvTurnCompleted {
				t.Fatalf("next turn %+v", log.terminal())
			}
			if n := e.fake.startCount(); n != tc.starts {
				t.Fatalf("%d agent starts, want %d", n, tc.starts)
			}
		})
	}
}

// TestTurnIdleTimeout: an agent silent for TurnIdleTimeout is cancelled; one
// that ignores the cancel too is stopped after CancelGrace and respawned on
// the next send.
func TestTurnIdleTimeout(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.TurnIdleTimeout = 100 * time.Millisecond; o.CancelGrace = 100 * time.Millisecond })
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Text: "HOLD 3"})
	log := collect(t, c, res.TurnID, nil)
	// The turn fails naming the timeout (not a plain cancel), and so does the stored message.
	if term := log.terminal(); term.Type != transcript.EvTurnFailed || !strings.Contains(term.Message, "sent nothing for 100ms") || term.Seq != 4 {
		t.Fatalf("terminal %+v", term)
	}
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: "IGNORE"})
	log = collect(t, c, res.TurnID, nil)
	if term := log.terminal(); term.Type != transcript.EvTurnFailed || !strings.Contains(term.Message, "turn idle timeout") {
		t.Fatalf("terminal %+v", term)
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	if last := got.Messages[len(got.Messages)-1]; last.Status != transcript.StatusFailed || !strings.Contains(last.Error, "turn idle timeout") {
		t.Fatalf("stored %+v", last)
	}
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: "PLAIN"})
	if log := collect(t, c, res.TurnID, nil); log.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("next %+v", log.terminal())
	}
	if n := e.fake.startCount(); n != 2 {
		t.Fatalf("%d starts, want 2 (the agent that ignored the cancel is replaced)", n)
	}
}

// TestHandoff: an agent gets, before the user's text, the messages its
// session has not seen — everything for a new session, only what came after
// its cursor for a live one.
func TestHandoff(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "fake", Text: "PLAIN first question"})
	collect(t, c, res.TurnID, nil)
	conv := res.ConversationID
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "other", Text: "PLAIN second question"})
	collect(t, c, res.TurnID, nil)
	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Agent: "fake", Text: "PLAIN third question"})
	collect(t, c, res.TurnID, nil)
	prompts := func(i int) []string {
		e.fake.mu.Lock()
		defer e.fake.mu.Unlock()
		a := e.fake.agents[i]
		a.mu.Lock()
		defer a.mu.Unlock()
		var out []string
		for _, p := range a.prompts {
			var texts []string
			for _, b := range p {
				if b.Text != nil {
					texts = append(texts, b.Text.Text)
				}
			}
			out = append(out, strings.Join(texts, "\n---\n"))
		}
		return out
	}
	fake, other := prompts(0), prompts(1)
	if fake[0] != "PLAIN first question" {
		t.Fatalf("first prompt %q", fake[0])
	}
	// other is new: it gets the first exchange.
	if !strings.Contains(other[0], "first question") || !strings.Contains(other[0], "Hello, world") || !strings.HasSuffix(other[0], "PLAIN second question") {
		t.Fatalf("other's prompt %q", other[0])
	}
	// fake is live: it gets only what it has not seen (other's turn).
	if strings.Contains(fake[1], "first question") || !strings.Contains(fake[1], "second question") || !strings.HasSuffix(fake[1], "PLAIN third question") {
		t.Fatalf("fake's second prompt %q", fake[1])
	}
}

func TestSocketDirAndPeer(t *testing.T) {
	rt := shortTempDir(t)
	t.Setenv("XDG_RUNTIME_DIR", rt)
	if err := os.Mkdir(filepath.Join(rt, "ochat"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := SocketPath("/some/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(rt, "ochat", WorkspaceHash("/some/workspace")+".sock"); p != want {
		t.Fatalf("socket path %s, want %s", p, want)
	}
	if fi, _ := os.Stat(filepath.Dir(p)); fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v, want 0700", fi.Mode().Perm())
	}
	ln, err := Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			peer <- err
			return
		}
		defer c.Close()
		uid, err := PeerUID(c)
		if err == nil && uid != os.Getuid() {
			err = fmt.Errorf("peer uid %d, want %d", uid, os.Getuid())
		}
		peer <- err
	}()
	c, err := Dial(t.Context(), DialOptions{Workspace: "/some/workspace"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-peer; err != nil {
		t.Fatal(err)
	}
	c.Close()
	_, err = Dial(t.Context(), DialOptions{Workspace: "/other/workspace"})
	if err == nil || !strings.Contains(err.Error(), "ochatd serve --workspace /other/workspace") {
		t.Fatalf("dial without a daemon: %v", err)
	}
}

// A stop that arrives before Serve (a signal during start-up) ends the
// daemon: Serve returns at once instead of serving a closed daemon forever.
func TestShutdownBeforeServe(t *testing.T) {
	base := t.TempDir()
	st, err := history.Open(filepath.Join(base, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := New(Options{Workspace: base, Store: st})
	ln, err := Listen(filepath.Join(base, "s"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(t.Context(), ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctxT(t).Done():
		t.Fatal("Serve kept serving after a stop that came before it")
	}
}
