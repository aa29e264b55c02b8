package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

// TestCancelShiftThroughDaemon: SLOW → cancel → WRITE → three plain turns
// against a scripted agent that answers one prompt behind after a cancel,
// like claude-agent-acp 0.23 (shared/cases/claude-cancel-shift). Every turn
// must hold its own answer, live and stored; the write turn shows its
// permission and writes the file.
func TestCancelShiftThroughDaemon(t *testing.T) {
	e := newRealEnvWith(t, map[string]string{"TESTAGENT_CANCEL_SHIFT": "1"}, nil)
	c := e.dial("a")
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "test", Text: "SLOW 200"})
	conv := res.ConversationID
	cancelled := false
	log := collect(t, c, res.TurnID, func(n Notification) {
		if n.Method == NotifyEvent && !cancelled {
			cancelled = true
			call[CancelResult](t, c, MethodChatCancel, ConversationParams{ConversationID: conv})
		}
	})
	if log.terminal().StopReason != "cancelled" {
		t.Fatalf("slow turn: %+v", log.terminal())
	}

	res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Text: "WRITE after.txt written"})
	perms := 0
	log = collect(t, c, res.TurnID, func(n Notification) {
		if n.Method == NotifyPermission {
			perms++
			var p PermissionParams
			json.Unmarshal(n.Params, &p)
			call[struct{}](t, c, MethodPermissionRespond, RespondParams{PermissionID: p.PermissionID, OptionID: "allow"})
		}
	})
	if f := log.terminal(); f.Type != transcript.EvTurnCompleted || f.StopReason != "end_turn" || perms != 1 {
		t.Fatalf("write turn: %+v, %d permissions shown", f, perms)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "after.txt")); err != nil || string(b) != "written" {
		t.Fatalf("after the write turn the file is %q, %v", b, err)
	}
	want := []string{"first", "second", "third"}
	for _, w := range want {
		res = call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: conv, Text: "PLAIN " + w})
		log = collect(t, c, res.TurnID, nil)
		var text strings.Builder
		for _, ev := range log.events {
			if ev.Type == transcript.EvContentDelta {
				text.WriteString(ev.Delta)
			}
		}
		if text.String() != w {
			t.Errorf("turn %q answered %q live", w, text.String())
		}
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: conv})
	var answers []string
	for _, m := range got.Messages {
		if m.Role != transcript.RoleAssistant {
			continue
		}
		answers = append(answers, transcript.MergeContent(m.Segments))
	}
	if len(answers) != 5 || !strings.Contains(answers[1], "after.txt") || answers[2] != "first" || answers[3] != "second" || answers[4] != "third" {
		t.Errorf("stored answers %q", answers)
	}
}
