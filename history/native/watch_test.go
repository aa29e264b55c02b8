package native

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// next waits for the first event that satisfies pred (other events are
// skipped). The timeout only bounds a broken test; it asserts nothing about
// speed.
func next(t *testing.T, w *Watcher, pred func(WatchEvent) bool) WatchEvent {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatal("watcher stopped")
			}
			if pred(ev) {
				return ev
			}
			t.Logf("skipped event %s %s %s", ev.Kind, ev.Path, ev.Message)
		case <-deadline:
			t.Fatal("no matching watcher event")
		}
	}
}

func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func kind(k WatchKind, path string) func(WatchEvent) bool {
	return func(ev WatchEvent) bool { return ev.Kind == k && (path == "" || ev.Path == path) }
}

func TestWatchClaudeFollow(t *testing.T) {
	home := t.TempDir()
	ws := cleanAbs(t.TempDir())
	enc, _ := ClaudeProjectDirName(ws)
	proj := filepath.Join(home, ".claude", "projects", enc)
	path := filepath.Join(proj, "s1.jsonl")
	writeFile(t, path, claudeSessionLines("s1", ws, "first", "2026-01-01T00:00:00Z"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := NewWatcher(ctx, WatchOptions{Env: Env{Home: home}, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tr, err := w.Follow(path)
	if err != nil || len(tr.Messages) != 2 {
		t.Fatalf("follow: %v %v", err, tr)
	}

	// an append: only the new messages come
	more := claudeSessionLines("s1b", ws, "second", "2026-01-01T00:01:00Z")
	more = []byte(strings.ReplaceAll(string(more), `"parentUuid":null`, `"parentUuid":"s1-a"`))
	appendFile(t, path, more)
	ev := next(t, w, kind(WatchUpdate, path))
	if ev.Update.Reset || len(ev.Update.Messages) != 2 || ev.Update.Messages[0].Content != "second" {
		t.Fatalf("update = %+v", ev.Update)
	}

	// a partial line is held back until its newline arrives
	line := claudeSessionLines("s1c", ws, "third", "2026-01-01T00:02:00Z")
	line = []byte(strings.ReplaceAll(string(line), `"parentUuid":null`, `"parentUuid":"s1b-a"`))
	first := line[:strings.IndexByte(string(line), '\n')+1]
	appendFile(t, path, first[:40])
	next(t, w, kind(WatchChanged, path))
	appendFile(t, path, first[40:])
	ev = next(t, w, kind(WatchUpdate, path))
	if len(ev.Update.Messages) != 1 || ev.Update.Messages[0].Content != "third" {
		t.Fatalf("update after partial line = %+v", ev.Update)
	}

	// the assistant line of the same turn updates that turn in place
	appendFile(t, path, line[len(first):])
	ev = next(t, w, kind(WatchUpdate, path))
	if len(ev.Update.Messages) != 1 || ev.Update.Messages[0].Role != "assistant" {
		t.Fatalf("assistant update = %+v", ev.Update)
	}

	// rewritten shorter (truncation): reset with the whole transcript
	writeFile(t, path, claudeSessionLines("s1", ws, "rewritten", "2026-01-01T00:00:00Z"))
	ev = next(t, w, kind(WatchUpdate, path))
	if !ev.Update.Reset || len(ev.Update.Messages) != 2 || ev.Update.Messages[0].Content != "rewritten" {
		t.Fatalf("reset = %+v", ev.Update)
	}

	// a new session file, then its deletion
	p2 := filepath.Join(proj, "s2.jsonl")
	writeFile(t, p2, claudeSessionLines("s2", ws, "other", "2026-01-02T00:00:00Z"))
	next(t, w, kind(WatchChanged, p2))
	os.Remove(p2)
	next(t, w, kind(WatchRemoved, p2))

	// a session file replaced by a directory
	os.Remove(path)
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	next(t, w, func(ev WatchEvent) bool { return ev.Kind == WatchProblem && ev.Path == path })
}

func TestWatchNewFoldersAndCodexCompression(t *testing.T) {
	home := t.TempDir()
	ws := cleanAbs(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// no store exists yet: the watcher waits on the home directory
	w, err := NewWatcher(ctx, WatchOptions{Env: Env{Home: home}, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	trap, _ := os.ReadFile(codexTrap)
	mine := []byte(strings.ReplaceAll(string(trap), `"/w/app"`, `"`+ws+`"`))
	day := filepath.Join(home, ".codex", "sessions", "2026", "02", "01")
	// created level by level right before the file, as Codex does: the
	// watcher must add each new folder and pick up what is already in it
	for _, d := range []string{filepath.Join(home, ".codex"), filepath.Join(home, ".codex", "sessions"), filepath.Join(home, ".codex", "sessions", "2026"),
		filepath.Join(home, ".codex", "sessions", "2026", "02"), day} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(day, "rollout-2026-02-01T00-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl")
	writeFile(t, p, mine)
	next(t, w, kind(WatchChanged, p))
	// another workspace's rollout in the same date folder: no notice for it
	other := filepath.Join(day, "rollout-2026-02-01T00-00-00-0199cccc-0000-7000-8000-000000000003.jsonl")
	writeFile(t, other, trap)

	if _, err := w.Follow(p); err != nil {
		t.Fatal(err)
	}
	// compressed in place of the plain file
	writeZst(t, p+".zst", p)
	os.Remove(p)
	ev := next(t, w, func(ev WatchEvent) bool { return ev.Kind == WatchUpdate && ev.Path == p+".zst" })
	if !ev.Update.Reset || len(ev.Update.Messages) != 4 {
		t.Fatalf("after compression: %+v", ev.Update)
	}

	// the store folder deleted while watched
	os.RemoveAll(filepath.Join(home, ".codex"))
	next(t, w, func(ev WatchEvent) bool { return ev.Kind == WatchProblem && strings.Contains(ev.Message, "removed") })
	_ = other
}

// A store folder deleted and made again (CLI reinstall, cleanup): the loss
// is reported and sessions written into the new folder are seen.
func TestWatchFolderRecreated(t *testing.T) {
	home := t.TempDir()
	ws := cleanAbs(t.TempDir())
	enc, _ := ClaudeProjectDirName(ws)
	proj := filepath.Join(home, ".claude", "projects", enc)
	writeFile(t, filepath.Join(proj, "s0.jsonl"), claudeSessionLines("s0", ws, "zero", "2026-01-01T00:00:00Z"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := NewWatcher(ctx, WatchOptions{Env: Env{Home: home}, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i, gone := range []string{proj, filepath.Join(home, ".claude"), proj} {
		if err := os.RemoveAll(gone); err != nil {
			t.Fatal(err)
		}
		next(t, w, func(ev WatchEvent) bool { return ev.Kind == WatchProblem || ev.Kind == WatchRemoved })
		p := filepath.Join(proj, fmt.Sprintf("s%d.jsonl", i+1))
		writeFile(t, p, claudeSessionLines("x", ws, "again", "2026-01-02T00:00:00Z"))
		next(t, w, kind(WatchChanged, p))
	}
}

// A store root deleted and made again while the watcher is behind: its
// resolve runs when the new ~/.claude exists but not yet projects/, so it
// watches the new ~/.claude; fsnotify then drops the old projects/ watch's
// IN_DELETE_SELF (its parent path is watched), and no event says that the
// projects/ watch is dead. The events that do come (~/.claude deleted,
// created) must make the watcher drop it and watch the new folder, so a
// project folder deleted and made again later is still seen. The order is
// fixed: the events queue in the kernel while the loop is not yet running
// (fsnotify handles them one at a time as the loop takes them).
func TestWatchRootReplacedWhileBehind(t *testing.T) {
	home := cleanAbs(t.TempDir())
	ws := cleanAbs(t.TempDir())
	enc, _ := ClaudeProjectDirName(ws)
	claude := filepath.Join(home, ".claude")
	proj := filepath.Join(claude, "projects", enc)
	writeFile(t, filepath.Join(proj, "s0.jsonl"), claudeSessionLines("s0", ws, "zero", "2026-01-01T00:00:00Z"))
	w, err := newWatcher(WatchOptions{Env: Env{Home: home}, Workspace: ws, Recheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	if err := os.RemoveAll(claude); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(claude, 0o755); err != nil {
		t.Fatal(err)
	}
	w.rescan(time.Now().UnixMilli()) // behind: sees ~/.claude, no projects/ yet
	s1 := filepath.Join(proj, "s1.jsonl")
	writeFile(t, s1, claudeSessionLines("s1", ws, "one", "2026-01-02T00:00:00Z"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.loop(ctx)
	next(t, w, kind(WatchChanged, s1))

	// The project folder alone, deleted: the loss is reported, and only
	// once the watcher has handled it (the removed notice comes after the
	// debounce) is the folder made again, so only a live watch on
	// projects/ can see it.
	if err := os.RemoveAll(proj); err != nil {
		t.Fatal(err)
	}
	next(t, w, kind(WatchRemoved, s1))
	s2 := filepath.Join(proj, "s2.jsonl")
	writeFile(t, s2, claudeSessionLines("s2", ws, "two", "2026-01-03T00:00:00Z"))
	next(t, w, kind(WatchChanged, s2))
}

// The periodic re-check is the backstop for a watch lost without any
// event: a store folder that is not watched is found and its files are
// reported.
func TestWatchRecheck(t *testing.T) {
	home := cleanAbs(t.TempDir())
	ws := cleanAbs(t.TempDir())
	enc, _ := ClaudeProjectDirName(ws)
	proj := filepath.Join(home, ".claude", "projects", enc)
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := newWatcher(WatchOptions{Env: Env{Home: home}, Workspace: ws, Recheck: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// lose the watch of the project folder without an event
	w.unwatch(proj)
	p := filepath.Join(proj, "s1.jsonl")
	writeFile(t, p, claudeSessionLines("s1", ws, "one", "2026-01-02T00:00:00Z"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.loop(ctx)
	next(t, w, kind(WatchChanged, p))
	// watched again: an append is seen as it happens
	appendFile(t, p, claudeSessionLines("s1b", ws, "more", "2026-01-02T00:01:00Z"))
	next(t, w, kind(WatchChanged, p))
}
