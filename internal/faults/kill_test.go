package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// scriptOutput is the whole answer text of a testagent scenario prompt.
func scriptOutput(prompt string) string {
	word, rest, _ := strings.Cut(strings.TrimSpace(prompt), " ")
	rest = strings.TrimSpace(rest)
	var b strings.Builder
	switch word {
	case "PLAIN":
		if rest == "" {
			return "ok"
		}
		return rest
	case "SLOW":
		n, _ := strconv.Atoi(rest)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "c%d ", i)
		}
	case "FLOOD":
		n, _ := strconv.Atoi(rest)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%d ", i)
		}
	case "WRITE":
		return "" // killed while its permission question is pending: no text
	default:
		return "echo: " + prompt
	}
	return b.String()
}

// killStats sums up a kill loop.
type killStats struct {
	kills, midStream, afterEnd, duringSend int
	seenBytes, keptBytes                   int
	pendingPermission, toolKept            int
}

// TestDaemonSIGKILL kills `ochatd serve` with SIGKILL at random moments of
// streaming turns (SLOW and FLOOD scenarios of the testagent, sometimes
// while ochat/chat/send is in flight) and checks, every time: the store
// opens and passes bbolt's consistency check; every turn a client saw
// finish is stored completed with its whole text; every other assistant
// message holds a prefix of its scenario's text; no agent outlives the
// daemon; after a restart the interrupted turn is marked interrupted with
// what had been stored, and the conversation continues in the same agent
// session history. 5 kills, 50 with OCHAT_LONG=1.
func TestDaemonSIGKILL(t *testing.T) {
	n := pick(5, 50)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	w := newWorld(t, nil)
	d := w.start()
	c := w.dial("killer")
	first, _ := runTurn(t, c, "", "test", "PLAIN first turn")
	conv := first.ConversationID
	finished := map[string]bool{first.AssistantMessageID: true}
	var st killStats
	for i := 0; i < n; i++ {
		prompt := "SLOW 100"
		maxDelay := 1500
		switch i % 3 {
		case 1:
			prompt, maxDelay = "FLOOD 5000", 800
		case 2:
			// Killed while a permission question is pending.
			prompt, maxDelay = fmt.Sprintf("WRITE killed-%d.txt never", i), 500
		}
		var res daemon.SendResult
		var view turnView
		if rng.IntN(8) == 0 {
			// Kill while ochat/chat/send is in flight.
			go c.Call(context.Background(), daemon.MethodChatSend, daemon.SendParams{ConversationID: conv, Agent: "test", Text: prompt}, nil)
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			d.kill()
			st.duringSend++
		} else {
			res = call[daemon.SendResult](t, c, daemon.MethodChatSend, daemon.SendParams{ConversationID: conv, Agent: "test", Text: prompt})
			got := make(chan turnView, 1)
			go func() {
				v, _ := await(context.Background(), c, res.TurnID)
				got <- v
			}()
			time.Sleep(time.Duration(rng.IntN(maxDelay)) * time.Millisecond)
			d.kill()
			view = <-got
			if view.terminal.Type == transcript.EvTurnCompleted {
				finished[res.TurnID] = true
				st.afterEnd++
			} else {
				st.midStream++
				st.seenBytes += len(text(reduce(res.TurnID, view.events)))
			}
		}
		st.kills++
		w.waitNoStrays(t, fmt.Sprintf("kill %d", i))

		// The store as the killed daemon left it.
		kept := verifyStore(t, w.dbPath, conv, finished, false)
		if strings.HasPrefix(prompt, "WRITE") && res.TurnID != "" {
			st.pendingPermission++
			if hasTool(t, w.dbPath, conv, res.TurnID) {
				st.toolKept++
			}
		}
		if res.TurnID != "" && !finished[res.TurnID] {
			st.keptBytes += len(kept[res.TurnID])
			if seen := text(reduce(res.TurnID, view.events)); !strings.HasPrefix(scriptOutput(prompt), kept[res.TurnID]) {
				t.Fatalf("kill %d: stored text of the interrupted turn is not a prefix of its script (seen %d bytes, stored %d)", i, len(seen), len(kept[res.TurnID]))
			}
		}

		// Restart: the interrupted turn is marked, the conversation goes on.
		d = w.start()
		c = w.dial(fmt.Sprintf("killer-%d", i))
		verifyStoreVia(t, c, conv, finished, kept)
		sub := call[daemon.SubscribeResult](t, c, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: conv})
		if sub.Running != nil || len(sub.Permissions) != 0 {
			t.Fatalf("kill %d: after the restart the conversation still shows a running turn (%v) or pending permissions (%d)", i, sub.Running != nil, len(sub.Permissions))
		}
		if strings.HasPrefix(prompt, "WRITE") {
			if _, err := os.Stat(filepath.Join(w.ws, fmt.Sprintf("killed-%d.txt", i))); err == nil {
				t.Fatalf("kill %d: a file whose permission was never granted was written", i)
			}
		}
	}
	last, v := runTurn(t, c, conv, "test", "PLAIN the conversation continues")
	if v.terminal.Type != transcript.EvTurnCompleted || text(getMessage(t, c, conv, last.AssistantMessageID)) != "the conversation continues" {
		t.Fatalf("turn after the kills: %+v", v.terminal)
	}
	finished[last.AssistantMessageID] = true
	d.stop()
	verifyStore(t, w.dbPath, conv, finished, true)
	figure(t, "SIGKILL: %d kills (%d mid-stream, %d after the turn ended, %d during ochat/chat/send; %d with a permission question pending, %d of them with the tool call already stored); interrupted turns: client saw %d bytes, store kept %d bytes",
		st.kills, st.midStream, st.afterEnd, st.duringSend, st.pendingPermission, st.toolKept, st.seenBytes, st.keptBytes)
}

// hasTool reports whether the stored message msgID of conv has a tool
// segment.
func hasTool(t *testing.T, path, conv, msgID string) bool {
	t.Helper()
	s, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Message(conv, msgID)
	if err != nil {
		return false
	}
	for _, seg := range m.Segments {
		if seg.Type == transcript.SegTool {
			return true
		}
	}
	return false
}

// waitNoStrays fails if an agent process still runs 5 s after the daemon
// died (its stdin is closed: it must exit).
func (w *world) waitNoStrays(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := w.strays()
		if len(s) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: processes outlived the daemon by 5 s: %v", when, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verifyStore opens the store file directly, runs bbolt's check and checks
// every message of conv against its script; it returns the stored text of
// every assistant message by id. finished turns must be completed with
// their whole text; a completed turn the client did not see finish joins
// finished. With settled, no message may still be streaming.
func verifyStore(t *testing.T, path, conv string, finished map[string]bool, settled bool) map[string]string {
	t.Helper()
	s, err := history.Open(path)
	if err != nil {
		t.Fatalf("open store after kill: %v", err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatalf("store check after kill: %v", err)
	}
	msgs, err := s.Messages(conv)
	if err != nil {
		t.Fatal(err)
	}
	return checkMessages(t, msgs, finished, settled)
}

func checkMessages(t *testing.T, msgs []transcript.Message, finished map[string]bool, settled bool) map[string]string {
	t.Helper()
	kept := map[string]string{}
	prompt := ""
	for _, m := range msgs {
		if m.Role == transcript.RoleUser {
			prompt = m.Content
			continue
		}
		want := scriptOutput(prompt)
		got := text(m)
		kept[m.ID] = got
		switch m.Status {
		case transcript.StatusCompleted:
			if got != want {
				t.Fatalf("completed message %s (%q) holds %d bytes, want %d", m.ID, prompt, len(got), len(want))
			}
			finished[m.ID] = true
		case transcript.StatusStreaming, transcript.StatusInterrupted:
			if finished[m.ID] {
				t.Fatalf("message %s finished but stored %s", m.ID, m.Status)
			}
			if settled && m.Status == transcript.StatusStreaming {
				t.Fatalf("message %s still streaming after a restart", m.ID)
			}
			if !strings.HasPrefix(want, got) {
				t.Fatalf("%s message %s is not a prefix of its script %q", m.Status, m.ID, prompt)
			}
		default:
			t.Fatalf("message %s (%q) has status %s (error %q)", m.ID, prompt, m.Status, m.Error)
		}
	}
	return kept
}

// verifyStoreVia checks the conversation through the restarted daemon: no
// message streaming, interrupted ones with the text the store had kept.
func verifyStoreVia(t *testing.T, c *daemon.Client, conv string, finished map[string]bool, kept map[string]string) {
	t.Helper()
	got := call[daemon.GetConversationResult](t, c, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv})
	checkMessages(t, got.Messages, finished, true)
	for _, m := range got.Messages {
		if m.Role == transcript.RoleAssistant && m.Status == transcript.StatusInterrupted {
			if k, ok := kept[m.ID]; ok && text(m) != k {
				t.Fatalf("interrupted message %s: %d bytes after restart, %d stored before", m.ID, len(text(m)), len(k))
			}
		}
	}
}
