package daemon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestAgentProgress: while an agent starts slowly (initialize takes 1.5 s)
// the sender hears what happens as it happens: starting (sent before the
// spawn, so long before initialize answers), then the session, then ready,
// all before the turn's first event. The delay is logged as a figure.
func TestAgentProgress(t *testing.T) {
	e := newRealEnvWith(t, map[string]string{"TESTAGENT_INIT_DELAY_MS": "1500"}, nil)
	c := e.dial("a")
	sent := time.Now()
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "test", Text: "PLAIN hi"})
	var stages []string
	var first time.Duration
	log := collect(t, c, res.TurnID, func(n Notification) {
		if n.Method == NotifyEvent && len(stages) == 0 {
			t.Errorf("an event came before any ochat/agentProgress")
		}
		if n.Method != NotifyAgentProgress {
			return
		}
		var p AgentProgressParams
		if err := json.Unmarshal(n.Params, &p); err != nil || p.ConversationID != res.ConversationID || p.Agent != "test" || p.Message == "" {
			t.Errorf("progress %s: %+v, %v", n.Params, p, err)
		}
		if len(stages) == 0 {
			first = time.Since(sent)
			if !strings.Contains(p.Message, "starting test") {
				t.Errorf("first progress %q", p.Message)
			}
		}
		stages = append(stages, p.Stage)
	})
	if log.terminal().StopReason != "end_turn" {
		t.Fatalf("turn: %+v", log.terminal())
	}
	if strings.Join(stages, ",") != "starting,session,ready" {
		t.Errorf("stages %v", stages)
	}
	t.Logf("figure: first ochat/agentProgress %v after chat/send (initialize takes 1.5 s)", first.Round(time.Millisecond))
}
