package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history/native"
)

// TestNativeThroughDaemon injects the native store faults under a running
// `ochatd serve` and checks them through the editor protocol
// (ochat/sessions/list, follow, read; ochat/sessionAppended and
// ochat/sessions/changed): 10,000 session files at once, a followed file
// growing by 1,000 appends/s, the followed file rewritten in place, and
// the store folder deleted and recreated.
func TestNativeThroughDaemon(t *testing.T) {
	w := newWorld(t, nil)
	enc, _ := native.ClaudeProjectDirName(w.ws)
	proj := filepath.Join(w.root, "home", ".claude", "projects", enc)
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(proj, "grow.jsonl")
	os.WriteFile(p, claudeLines("grow", w.ws, 0, 2), 0o600)
	d := w.start()
	c := w.dial("sessions")
	ctx := ctxFor(t, 10*time.Minute)
	nativeCount := func() int {
		l := call[daemon.SessionsListResult](t, c, daemon.MethodSessionsList, struct{}{})
		n := 0
		for _, s := range l.Sessions {
			if s.Kind == daemon.SessionKindNative {
				n++
			}
		}
		return n
	}
	if n := nativeCount(); n != 1 {
		t.Fatalf("listed %d native sessions, want 1", n)
	}
	fr := call[daemon.FollowResult](t, c, daemon.MethodSessionsFollow, daemon.SessionRefParams{Path: p})
	m := &mirror{}
	m.reset(fr.Messages)
	changed, appended := 0, 0
	// pump applies notifications until cond holds (checked after each).
	pump := func(what string, cond func(daemon.SessionAppendedParams, daemon.SessionsChangedParams) bool) {
		t.Helper()
		for {
			nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			n, err := c.Next(nctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var ap daemon.SessionAppendedParams
			var ch daemon.SessionsChangedParams
			switch n.Method {
			case daemon.NotifySessionAppended:
				json.Unmarshal(n.Params, &ap)
				if ap.Path == p {
					appended++
					m.apply(&native.TailUpdate{Reset: ap.Reset, Messages: ap.Messages})
				}
			case daemon.NotifySessionsChanged:
				json.Unmarshal(n.Params, &ch)
				changed++
			default:
				continue
			}
			if cond(ap, ch) {
				return
			}
		}
	}
	matchesRead := func(when string) {
		t.Helper()
		r := call[daemon.SessionReadResult](t, c, daemon.MethodSessionsRead, daemon.SessionRefParams{Path: p})
		if got, want := summary(m.msgs), summary(r.Messages); got != want {
			t.Fatalf("%s: the followed copy has %d messages, ochat/sessions/read %d", when, len(m.msgs), len(r.Messages))
		}
	}

	// 10,000 files at once.
	before := stats(t, d.pid())
	for i := 0; i < 10_000; i++ {
		id := fmt.Sprintf("bulk-%05d", i)
		if err := os.WriteFile(filepath.Join(proj, id+".jsonl"), claudeLines(id, w.ws, 0, 2), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	n := nativeCount()
	listed := time.Since(start)
	if n != 10_001 {
		t.Fatalf("after 10,000 new files ochat/sessions/list has %d native sessions, want 10,001", n)
	}
	start = time.Now()
	nativeCount()
	relisted := time.Since(start)
	figure(t, "via ochatd, 10,000 files at once: ochat/sessions/list found 10,001 in %v (again, cached: %v); daemon %v → %v", listed.Round(time.Millisecond), relisted.Round(time.Millisecond), before, stats(t, d.pid()))

	// 1,000 appends/s to the followed session.
	dur := time.Duration(pick(2, 10)) * time.Second
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	lines, target := 2, 2+int(dur/time.Millisecond)
	tick := time.NewTicker(time.Millisecond)
	start = time.Now()
	for lines < target {
		<-tick.C
		for due := 2 + int(time.Since(start)/time.Millisecond); lines < due && lines < target; lines++ {
			f.Write(claudeLines("grow", w.ws, lines, lines+1))
		}
	}
	tick.Stop()
	f.Close()
	elapsed := time.Since(start)
	appended = 0
	pump("the appends to arrive", func(daemon.SessionAppendedParams, daemon.SessionsChangedParams) bool { return len(m.msgs) >= lines })
	matchesRead("after the appends")
	figure(t, "via ochatd, file growing: %d appends in %v (%.0f/s) arrived as %d ochat/sessionAppended; the followed copy equals ochat/sessions/read", lines-2, elapsed.Round(time.Millisecond), float64(lines-2)/elapsed.Seconds(), appended)

	// Rewritten in place, shorter.
	g, _ := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	g.Write(claudeLines("grow", w.ws, 0, 6))
	g.Close()
	pump("the rewrite to arrive", func(ap daemon.SessionAppendedParams, _ daemon.SessionsChangedParams) bool {
		return ap.Reset && len(m.msgs) == 6
	})
	matchesRead("after the rewrite in place")

	// The store folder deleted and recreated with a new session.
	if err := os.RemoveAll(filepath.Join(w.root, "home", ".claude")); err != nil {
		t.Fatal(err)
	}
	pump("the loss of the store folder", func(_ daemon.SessionAppendedParams, ch daemon.SessionsChangedParams) bool {
		return len(ch.Removed) > 0 || len(ch.Problems) > 0
	})
	os.MkdirAll(proj, 0o700)
	again := filepath.Join(proj, "again.jsonl")
	os.WriteFile(again, claudeLines("again", w.ws, 0, 2), 0o600)
	seen := false
	deadline := time.Now().Add(20 * time.Second)
	for !seen && time.Now().Before(deadline) {
		l := call[daemon.SessionsListResult](t, c, daemon.MethodSessionsList, struct{}{})
		for _, s := range l.Sessions {
			seen = seen || s.ID == "again"
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !seen {
		t.Fatal("a session written after the store folder was recreated is not listed")
	}
	figure(t, "via ochatd: %d ochat/sessions/changed notifications in all; daemon at end %v", changed, stats(t, d.pid()))
	if !d.alive() {
		t.Fatal("daemon died")
	}
}
