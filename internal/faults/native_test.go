package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/transcript"
)

// The native store faults run history/native's Watcher and List directly:
// the editor protocol has no ochat/sessions/… method yet (docs/protocol.md).
// The store is Claude Code's (~/.claude/projects/<encoded cwd>/<id>.jsonl),
// written by the test in the shape the reader documents.

// claudeLines returns Claude Code session lines from..to-1 of one session:
// even lines are user prompts "q<i>", odd lines assistant answers "a<i>",
// each parented on the line before.
func claudeLines(session, cwd string, from, to int) []byte {
	var b strings.Builder
	for i := from; i < to; i++ {
		var parent any
		if i > 0 {
			parent = fmt.Sprintf("%s-%d", session, i-1)
		}
		ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
		r := map[string]any{"uuid": fmt.Sprintf("%s-%d", session, i), "parentUuid": parent, "cwd": cwd, "sessionId": session, "timestamp": ts}
		if i%2 == 0 {
			r["type"] = "user"
			r["message"] = map[string]any{"role": "user", "content": fmt.Sprintf("q%d", i)}
		} else {
			r["type"] = "assistant"
			r["message"] = map[string]any{"id": fmt.Sprintf("msg_%s_%d", session, i), "role": "assistant", "model": "claude-x",
				"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("a%d", i)}}}
		}
		j, _ := json.Marshal(r)
		b.Write(j)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// nativeWorld is a home with a Claude projects folder for one workspace.
type nativeWorld struct {
	home, ws, proj string
	env            native.Env
}

func newNativeWorld(t *testing.T) *nativeWorld {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nw := &nativeWorld{home: filepath.Join(root, "home"), ws: filepath.Join(root, "ws")}
	enc, _ := native.ClaudeProjectDirName(nw.ws)
	nw.proj = filepath.Join(nw.home, ".claude", "projects", enc)
	for _, d := range []string{nw.ws, nw.proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	nw.env = native.Env{Home: nw.home}
	return nw
}

func (nw *nativeWorld) path(id string) string { return filepath.Join(nw.proj, id+".jsonl") }

// watch starts a watcher whose events are drained by a goroutine into a
// channel the test reads (so the watcher never blocks on the test).
type watchTap struct {
	w      *native.Watcher
	mu     sync.Mutex
	events []native.WatchEvent
	signal chan struct{}
}

func (nw *nativeWorld) watch(t *testing.T) *watchTap {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := native.NewWatcher(ctx, native.WatchOptions{Env: nw.env, Workspace: nw.ws})
	if err != nil {
		t.Fatal(err)
	}
	tap := &watchTap{w: w, signal: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.Events() {
			tap.mu.Lock()
			tap.events = append(tap.events, ev)
			tap.mu.Unlock()
			select {
			case tap.signal <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Close(); <-done })
	return tap
}

// wait returns the first event at index ≥ *from matching pred, advancing
// *from past it; it fails after 20 s (a broken watcher, not a speed test).
func (tap *watchTap) wait(t *testing.T, from *int, what string, pred func(native.WatchEvent) bool) native.WatchEvent {
	t.Helper()
	ev, ok := tap.tryWait(from, 20*time.Second, pred)
	if !ok {
		t.Fatalf("no watcher event: %s", what)
	}
	return ev
}

// tryWait is wait that reports a timeout instead of failing.
func (tap *watchTap) tryWait(from *int, d time.Duration, pred func(native.WatchEvent) bool) (native.WatchEvent, bool) {
	deadline := time.After(d)
	for {
		tap.mu.Lock()
		for i := *from; i < len(tap.events); i++ {
			if pred(tap.events[i]) {
				ev := tap.events[i]
				*from = i + 1
				tap.mu.Unlock()
				return ev, true
			}
		}
		tap.mu.Unlock()
		select {
		case <-tap.signal:
		case <-deadline:
			return native.WatchEvent{}, false
		}
	}
}

func (tap *watchTap) count(pred func(native.WatchEvent) bool) int {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	n := 0
	for _, ev := range tap.events {
		if pred(ev) {
			n++
		}
	}
	return n
}

func (tap *watchTap) len() int {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return len(tap.events)
}

// mirror is a follower's copy of a session, kept from WatchUpdate events.
type mirror struct {
	msgs  []transcript.Message
	index map[string]int
}

func newMirror(tr *native.Transcript) *mirror {
	m := &mirror{}
	m.reset(tr.Messages)
	return m
}

func (m *mirror) reset(msgs []transcript.Message) {
	m.msgs = append([]transcript.Message(nil), msgs...)
	m.index = map[string]int{}
	for i, x := range m.msgs {
		m.index[x.ID] = i
	}
}

func (m *mirror) apply(u *native.TailUpdate) {
	if u.Reset {
		m.reset(u.Messages)
		return
	}
	for _, x := range u.Messages {
		if i, ok := m.index[x.ID]; ok {
			m.msgs[i] = x
		} else {
			m.index[x.ID] = len(m.msgs)
			m.msgs = append(m.msgs, x)
		}
	}
}

// summary is a comparable digest of messages: id, role and text.
func summary(msgs []transcript.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s|%s|%s%s\n", m.ID, m.Role, m.Content, text(m))
	}
	return b.String()
}

// applyUpdates applies every WatchUpdate of path at index ≥ *from.
func (tap *watchTap) applyUpdates(m *mirror, path string, from *int) int {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	n := 0
	for ; *from < len(tap.events); *from++ {
		ev := tap.events[*from]
		if ev.Kind == native.WatchUpdate && ev.Path == path {
			m.apply(ev.Update)
			n++
		}
	}
	return n
}

// TestNativeStoreFolderDeleted deletes the watched store folder (the
// project folder, or all of ~/.claude) and recreates it with a new session,
// 3 times (20 with OCHAT_LONG=1): the watcher reports the loss and sees
// the new session; List lists exactly the new one.
func TestNativeStoreFolderDeleted(t *testing.T) {
	nw := newNativeWorld(t)
	os.WriteFile(nw.path("s0"), claudeLines("s0", nw.ws, 0, 2), 0o644)
	tap := nw.watch(t)
	from := 0
	n := pick(3, 20)
	for i := 1; i <= n; i++ {
		gone := nw.proj
		if i%2 == 0 {
			gone = filepath.Join(nw.home, ".claude")
		}
		if err := os.RemoveAll(gone); err != nil {
			t.Fatal(err)
		}
		tap.wait(t, &from, fmt.Sprintf("cycle %d: loss of %s", i, gone), func(ev native.WatchEvent) bool {
			return ev.Kind == native.WatchProblem || ev.Kind == native.WatchRemoved
		})
		id := fmt.Sprintf("s%d", i)
		if err := os.MkdirAll(nw.proj, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(nw.path(id), claudeLines(id, nw.ws, 0, 2), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := tap.tryWait(&from, 10*time.Second, func(ev native.WatchEvent) bool {
			return ev.Kind == native.WatchChanged && ev.Path == nw.path(id)
		}); !ok {
			// Is the folder watched at all now? A later file tells.
			later := id + "-later"
			os.WriteFile(nw.path(later), claudeLines(later, nw.ws, 0, 2), 0o644)
			_, seen := tap.tryWait(&from, 10*time.Second, func(ev native.WatchEvent) bool {
				return ev.Kind == native.WatchChanged && ev.Path == nw.path(later)
			})
			t.Fatalf("history/native Watcher: after %s was deleted and recreated at once (cycle %d), the new session %s was never reported; a file written 10 s later was %s",
				gone, i, id, map[bool]string{true: "reported (the first file was missed)", false: "not reported either (the folder is no longer watched)"}[seen])
		}
		ss, _ := native.List(context.Background(), nw.env, nw.ws)
		if len(ss) != 1 || ss[0].ID != id {
			t.Fatalf("cycle %d: List = %+v, want only %s", i, ss, id)
		}
	}
	figure(t, "store folder deleted and recreated %d times: every loss reported, every new session seen (%d watcher events)", n, tap.len())
}

// TestNativeFileRewrittenInPlace truncates a followed session file and
// rewrites it in place (same inode) shorter, with the same length, and
// longer; after each the follower's copy must equal a fresh read.
func TestNativeFileRewrittenInPlace(t *testing.T) {
	nw := newNativeWorld(t)
	p := nw.path("s1")
	os.WriteFile(p, claudeLines("s1", nw.ws, 0, 10), 0o644)
	tap := nw.watch(t)
	tr, err := tap.w.Follow(p)
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(tr)
	from, applied := 0, 0
	var defects []string
	cases := []struct {
		name string
		data []byte
	}{
		{"shorter", claudeLines("s2", nw.ws, 0, 4)},
		{"same length, other content", []byte(strings.ReplaceAll(string(claudeLines("s1", nw.ws, 0, 4)), `"q2"`, `"Q2"`))},
		{"longer", claudeLines("s3", nw.ws, 0, 30)},
		{"emptied", nil},
		{"refilled", claudeLines("s4", nw.ws, 0, 6)},
	}
	for _, tc := range cases {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(tc.data)
		f.Close()
		tap.wait(t, &from, tc.name+": change notice", func(ev native.WatchEvent) bool { return ev.Kind == native.WatchChanged && ev.Path == p })
		tap.applyUpdates(m, p, &applied)
		fresh, err := native.ReadClaude(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := summary(m.msgs), summary(fresh.Messages); got != want {
			defects = append(defects, fmt.Sprintf("rewritten in place %s: the follower holds %d messages, a fresh read %d", tc.name, len(m.msgs), len(fresh.Messages)))
		}
	}
	figure(t, "file rewritten in place: %d rewrites, %d follower mismatches", len(cases), len(defects))
	if len(defects) > 0 {
		t.Skip("defect: history/native tail: " + strings.Join(defects, "; "))
	}
}

// TestNativeTenThousandFiles writes 10,000 session files into the watched
// folder at once: the watcher survives (it may report a lost-events
// problem), List lists every file, and a followed session still updates.
func TestNativeTenThousandFiles(t *testing.T) {
	const n = 10_000
	nw := newNativeWorld(t)
	followed := nw.path("followed")
	os.WriteFile(followed, claudeLines("followed", nw.ws, 0, 2), 0o644)
	tap := nw.watch(t)
	tr, err := tap.w.Follow(followed)
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(tr)
	start := time.Now()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("bulk-%05d", i)
		if err := os.WriteFile(nw.path(id), claudeLines(id, nw.ws, 0, 2), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wrote := time.Since(start)
	// The followed session still updates after the burst.
	f, _ := os.OpenFile(followed, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(claudeLines("followed", nw.ws, 2, 4))
	f.Close()
	from := 0
	tap.wait(t, &from, "update of the followed session after 10,000 new files", func(ev native.WatchEvent) bool {
		return ev.Kind == native.WatchUpdate && ev.Path == followed
	})
	applied := 0
	tap.applyUpdates(m, followed, &applied)
	if len(m.msgs) != 4 {
		t.Fatalf("followed session after the burst: %d messages, want 4", len(m.msgs))
	}
	ls := time.Now()
	ss, diags := native.List(context.Background(), nw.env, nw.ws)
	listed := time.Since(ls)
	if len(ss) != n+1 {
		t.Fatalf("List after the burst: %d sessions, want %d (diagnostics %v)", len(ss), n+1, diags)
	}
	seen := map[string]bool{}
	tap.mu.Lock()
	problems := []string{}
	for _, ev := range tap.events {
		switch ev.Kind {
		case native.WatchChanged:
			seen[ev.Path] = true
		case native.WatchProblem:
			problems = append(problems, ev.Message)
		}
	}
	tap.mu.Unlock()
	figure(t, "10,000 files at once: written in %v; watcher reported %d distinct new files and %d problems %v; List found %d sessions in %v",
		wrote.Round(time.Millisecond), len(seen), len(problems), problems, len(ss), listed.Round(time.Millisecond))
	if len(seen) < n && len(problems) == 0 {
		t.Errorf("the watcher missed %d of %d new files without reporting a problem", n-len(seen), n)
	}
}

// TestNativeAppends1000PerSecond appends one line per millisecond to a
// followed session for 2 s (10 s with OCHAT_LONG=1); the follower's copy
// must end equal to a fresh read.
func TestNativeAppends1000PerSecond(t *testing.T) {
	nw := newNativeWorld(t)
	p := nw.path("grow")
	os.WriteFile(p, claudeLines("grow", nw.ws, 0, 2), 0o644)
	tap := nw.watch(t)
	tr, err := tap.w.Follow(p)
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(tr)
	dur := time.Duration(pick(2, 10)) * time.Second
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(time.Millisecond)
	start := time.Now()
	lines := 2
	target := 2 + int(dur/time.Millisecond)
	for lines < target {
		<-tick.C
		// Catch up when the ticker lagged: the rate is per wall-clock ms.
		due := 2 + int(time.Since(start)/time.Millisecond)
		for lines < due && lines < target {
			if _, err := f.Write(claudeLines("grow", nw.ws, lines, lines+1)); err != nil {
				t.Fatal(err)
			}
			lines++
		}
	}
	tick.Stop()
	f.Close()
	elapsed := time.Since(start)
	want := lines / 2 * 2 // user + assistant messages
	applied := 0
	deadline := time.Now().Add(20 * time.Second)
	updates := 0
	for len(m.msgs) < want && time.Now().Before(deadline) {
		updates += tap.applyUpdates(m, p, &applied)
		time.Sleep(20 * time.Millisecond)
	}
	updates += tap.applyUpdates(m, p, &applied)
	fresh, err := native.ReadClaude(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, exp := summary(m.msgs), summary(fresh.Messages); got != exp || len(fresh.Messages) != want {
		t.Fatalf("after %d appends: follower %d messages, fresh read %d, want %d", lines-2, len(m.msgs), len(fresh.Messages), want)
	}
	figure(t, "file growing: %d appends in %v (%.0f/s) arrived as %d updates; follower equals a fresh read (%d messages)",
		lines-2, elapsed.Round(time.Millisecond), float64(lines-2)/elapsed.Seconds(), updates, want)
}
