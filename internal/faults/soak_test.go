package faults

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// soakPrompt is the i-th prompt of a soak conversation and the text its
// answer must have ("" = not checked beyond completing).
func soakPrompt(conv, i int) (prompt, want string) {
	switch i % 4 {
	case 0:
		p := fmt.Sprintf("PLAIN soak %d turn %d", conv, i)
		return p, scriptOutput(p)
	case 1:
		return "FLOOD 300", scriptOutput("FLOOD 300")
	case 2:
		return "THINK", "Answer."
	default:
		return "TOOLS", "Read it."
	}
}

// soak runs turns prompt turns spread over convs conversations streaming at
// once, each conversation on its own client, through the daemon on w's
// socket; warm is called after one warm-up turn per conversation (clients
// connected, agents started, no turn running) and done in the same state
// after the last turn, so the two measures compare like with like.
func soak(t *testing.T, w *world, convs, turns int, warm, done func()) {
	t.Helper()
	per := turns / convs
	clients := make([]*daemon.Client, convs)
	ids := make([]string, convs)
	for i := range clients {
		clients[i] = w.dial(fmt.Sprintf("soak-%d", i))
		res, v := runTurn(t, clients[i], "", "test", fmt.Sprintf("PLAIN warm-up %d", i))
		if v.terminal.Type != transcript.EvTurnCompleted {
			t.Fatalf("warm-up %d: %+v", i, v.terminal)
		}
		ids[i] = res.ConversationID
	}
	warm()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, convs)
	for i := range clients {
		wg.Add(1)
		go func(ci int) {
			defer wg.Done()
			c := clients[ci]
			for k := 0; k < per; k++ {
				prompt, want := soakPrompt(ci, k)
				var res daemon.SendResult
				if err := c.Call(ctxFor(t, time.Minute), daemon.MethodChatSend, daemon.SendParams{ConversationID: ids[ci], Agent: "test", Text: prompt}, &res); err != nil {
					errs <- fmt.Errorf("conversation %d turn %d: send: %w", ci, k, err)
					return
				}
				f := newFollower(c, ids[ci], res.TurnID)
				if err := f.run(ctxFor(t, 2*time.Minute), nil); err != nil {
					errs <- fmt.Errorf("conversation %d turn %d: %w", ci, k, err)
					return
				}
				if f.m.Status != transcript.StatusCompleted {
					errs <- fmt.Errorf("conversation %d turn %d (%s): %s %q", ci, k, prompt, f.m.Status, f.m.Error)
					return
				}
				if want != "" && text(f.m) != want {
					errs <- fmt.Errorf("conversation %d turn %d (%s): text %q, want %q", ci, k, prompt, truncate(text(f.m), 100), truncate(want, 100))
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	// Every conversation holds all its turns, each completed.
	for i, c := range clients {
		got := call[daemon.GetConversationResult](t, c, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: ids[i]})
		if len(got.Messages) != 2*(per+1) {
			t.Fatalf("conversation %d holds %d messages, want %d", i, len(got.Messages), 2*(per+1))
		}
		for _, m := range got.Messages {
			if m.Role == transcript.RoleAssistant && m.Status != transcript.StatusCompleted {
				t.Fatalf("conversation %d: message %s is %s", i, m.ID, m.Status)
			}
		}
	}
	figure(t, "soak: %d turns over %d conversations streaming at once in %v (%.1f turns/s)", per*convs, convs, elapsed.Round(time.Millisecond), float64(per*convs)/elapsed.Seconds())
	done()
	for _, c := range clients {
		c.Close()
	}
}

// TestSoakDaemonProcess runs 100 turns (1,000 with OCHAT_LONG=1) through
// one `ochatd serve` child, 10 conversations streaming at once, and reports
// its RSS and open file descriptors after warm-up and at the end; the fd
// count must come back to where it was.
func TestSoakDaemonProcess(t *testing.T) {
	w := newWorld(t, nil)
	// Room for one agent per conversation: the soak looks for leaks, and the
	// --max-agents cap (8 by default) would otherwise stop and restart agents
	// of the 10 conversations, changing the live count between the samples.
	d := w.start("--max-agents", "16")
	var before procStats
	soak(t, w, 10, pick(100, 1000), func() {
		before = stats(t, d.pid())
	}, func() {
		after := settle(func() int { return stats(t, d.pid()).FDs }, before.FDs)
		s := stats(t, d.pid())
		var dbSize int64
		if fi, err := os.Stat(w.dbPath); err == nil {
			dbSize = fi.Size()
		}
		figure(t, "soak (ochatd process): after warm-up %v; at the end %v; store file %.1fMB (mapped by bbolt, so part of RSS)", before, s, float64(dbSize)/(1<<20))
		if after > before.FDs {
			t.Errorf("open fds grew from %d to %d over the soak", before.FDs, after)
		}
	})
}

// TestSoakInProcess runs the same soak through a daemon.Server in this
// process (real testagent processes) to count goroutines: the count after
// the soak must come back to the count after warm-up (same clients and
// agents connected, no turn running), and so must open fds.
func TestSoakInProcess(t *testing.T) {
	w := newWorld(t, nil)
	w.startInproc(func(o *daemon.Options) { o.MaxAgents = 16 }) // as in TestSoakDaemonProcess
	var g0, fd0 int
	var m0 runtime.MemStats
	soak(t, w, 10, pick(100, 1000), func() {
		g0, fd0 = runtime.NumGoroutine(), selfFDs(t)
		runtime.GC()
		runtime.ReadMemStats(&m0)
	}, func() {
		g1 := settle(runtime.NumGoroutine, g0)
		fd1 := settle(func() int { return selfFDs(t) }, fd0)
		runtime.GC()
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		figure(t, "soak (in process): goroutines %d after warm-up, %d at the end; fds %d → %d; heap in use %.1fMB → %.1fMB",
			g0, g1, fd0, fd1, float64(m0.HeapInuse)/(1<<20), float64(m1.HeapInuse)/(1<<20))
		if g1 > g0 {
			t.Errorf("goroutines grew from %d to %d over the soak", g0, g1)
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
		if fd1 > fd0 {
			t.Errorf("open fds grew from %d to %d over the soak", fd0, fd1)
		}
	})
}

// settle polls f for up to 5 s until it is at most want (closing
// connections take a moment to be reaped) and returns its last value.
func settle(f func() int, want int) int {
	deadline := time.Now().Add(5 * time.Second)
	v := f()
	for v > want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		v = f()
	}
	return v
}

// selfFDs counts this process's open file descriptors.
func selfFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
