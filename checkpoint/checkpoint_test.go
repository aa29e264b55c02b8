package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newStore(t *testing.T, mod func(*Options)) (*Store, string) {
	t.Helper()
	ws := t.TempDir()
	o := Options{Workspace: ws, Dir: filepath.Join(t.TempDir(), "state", "checkpoints")}
	if mod != nil {
		mod(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws
}

func write(t *testing.T, ws, rel, data string, perm os.FileMode) {
	t.Helper()
	p := filepath.Join(ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

func take(t *testing.T, s *Store) Checkpoint {
	t.Helper()
	cp, err := s.Take(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func TestChanges(t *testing.T) {
	long := strings.Repeat("a line that makes the file long enough to be a rename candidate\n", 20)
	cases := []struct {
		name   string
		before func(t *testing.T, ws string)
		turn   func(t *testing.T, ws string)
		want   []Change // compared on Path, OldPath, Kind, ModeChanged, Binary, Symlink, Additions, Deletions
	}{
		{"add", nil, func(t *testing.T, ws string) { write(t, ws, "new.txt", "x\ny\n", 0o644) },
			[]Change{{Path: "new.txt", Kind: Added, Additions: 2}}},
		{"overwrite shows modified", func(t *testing.T, ws string) { write(t, ws, "README.md", "one\ntwo\nthree\n", 0o644) },
			func(t *testing.T, ws string) { write(t, ws, "README.md", "rewritten\n", 0o644) },
			[]Change{{Path: "README.md", Kind: Modified, Additions: 1, Deletions: 3}}},
		{"delete", func(t *testing.T, ws string) { write(t, ws, "gone.txt", "a\n", 0o644) },
			func(t *testing.T, ws string) { os.Remove(filepath.Join(ws, "gone.txt")) },
			[]Change{{Path: "gone.txt", Kind: Deleted, Deletions: 1}}},
		{"rename", func(t *testing.T, ws string) { write(t, ws, "old.txt", long, 0o644) },
			func(t *testing.T, ws string) {
				os.Mkdir(filepath.Join(ws, "sub"), 0o755)
				os.Rename(filepath.Join(ws, "old.txt"), filepath.Join(ws, "sub", "new.txt"))
			},
			nil},
		{"mode change", func(t *testing.T, ws string) { write(t, ws, "run.sh", "echo hi\n", 0o644) },
			func(t *testing.T, ws string) { os.Chmod(filepath.Join(ws, "run.sh"), 0o755) },
			[]Change{{Path: "run.sh", Kind: Modified, ModeChanged: true}}},
		{"binary", nil, func(t *testing.T, ws string) { write(t, ws, "img.bin", "\x00\x01\x02", 0o644) },
			[]Change{{Path: "img.bin", Kind: Added, Binary: true}}},
		{"symlink out of the workspace is stored as a link", nil, func(t *testing.T, ws string) {
			os.Symlink("/etc/passwd", filepath.Join(ws, "link"))
		}, []Change{{Path: "link", Kind: Added, Symlink: true, Additions: 1}}},
		{"ignored and .git left out", func(t *testing.T, ws string) {
			write(t, ws, ".gitignore", "build/\n*.log\n", 0o644)
			write(t, ws, "sub/.gitignore", "local.txt\n", 0o644)
		}, func(t *testing.T, ws string) {
			write(t, ws, "build/out.o", "x", 0o644)
			write(t, ws, "debug.log", "x", 0o644)
			write(t, ws, "sub/local.txt", "x", 0o644)
			write(t, ws, "local.txt", "kept\n", 0o644) // the sub rule does not reach the root
			write(t, ws, "node_modules/a/index.js", "x", 0o644)
			write(t, ws, ".git/config", "x", 0o644)
		}, []Change{{Path: "local.txt", Kind: Added, Additions: 1}}},
		{"same-size edit right after a checkpoint", func(t *testing.T, ws string) { write(t, ws, "f.txt", "aaaa\n", 0o644) },
			func(t *testing.T, ws string) { write(t, ws, "f.txt", "bbbb\n", 0o644) },
			[]Change{{Path: "f.txt", Kind: Modified, Additions: 1, Deletions: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ws := newStore(t, nil)
			if c.before != nil {
				c.before(t, ws)
			}
			a := take(t, s)
			c.turn(t, ws)
			b := take(t, s)
			got, err := s.Changes(context.Background(), a.ID, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "rename" {
				if len(got) != 1 || got[0].Kind != Renamed || got[0].OldPath != "old.txt" || got[0].Path != "sub/new.txt" {
					t.Fatalf("got %+v, want one rename old.txt → sub/new.txt", got)
				}
				return
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d changes %+v, want %+v", len(got), got, c.want)
			}
			for i, w := range c.want {
				g := got[i]
				if g.Path != w.Path || g.OldPath != w.OldPath || g.Kind != w.Kind || g.ModeChanged != w.ModeChanged || g.Binary != w.Binary ||
					g.Symlink != w.Symlink || g.Additions != w.Additions || g.Deletions != w.Deletions {
					t.Errorf("change %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestOverwriteDiffShowsOldLines(t *testing.T) {
	s, ws := newStore(t, nil)
	write(t, ws, "README.md", "# Project\nold line\n", 0o644)
	a := take(t, s)
	write(t, ws, "README.md", "# New\n", 0o644)
	b := take(t, s)
	chs, err := s.Changes(context.Background(), a.ID, b.ID)
	if err != nil || len(chs) != 1 {
		t.Fatalf("changes %v %+v", err, chs)
	}
	if d := chs[0].Diff; !strings.Contains(d, "--- a/README.md") || !strings.Contains(d, "-old line") || strings.Contains(d, "/dev/null") {
		t.Errorf("diff = %q", d)
	}
}

func TestSkipped(t *testing.T) {
	s, ws := newStore(t, func(o *Options) { o.MaxFileBytes = 100 })
	write(t, ws, "big.bin", strings.Repeat("x", 200), 0o644)
	write(t, ws, "small.txt", "ok\n", 0o644)
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(ws, "secret.txt")
	write(t, ws, "secret.txt", "s\n", 0o000)
	a := take(t, s)
	reasons := map[string]string{}
	for _, sk := range a.Skipped {
		reasons[sk.Path] = sk.Reason
	}
	if !strings.Contains(reasons["big.bin"], "per-file cap") || !strings.Contains(reasons["pipe"], "FIFO") {
		t.Errorf("skipped = %+v", a.Skipped)
	}
	if os.Geteuid() != 0 && !strings.Contains(reasons["secret.txt"], "unreadable") {
		t.Errorf("unreadable file not reported: %+v", a.Skipped)
	}
	_ = unreadable
	if a.Files < 1 {
		t.Errorf("files = %d", a.Files)
	}
	// A skipped file that changed is reported, not shown as deleted.
	write(t, ws, "big.bin", strings.Repeat("y", 300), 0o644)
	b := take(t, s)
	chs, err := s.Changes(context.Background(), a.ID, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(chs) != 1 || chs[0].Path != "big.bin" || chs[0].Kind != Skipped {
		t.Errorf("changes = %+v", chs)
	}
	// Shrunk under the cap: recorded after, unknown before.
	write(t, ws, "big.bin", "now small\n", 0o644)
	c := take(t, s)
	chs, _ = s.Changes(context.Background(), b.ID, c.ID)
	if len(chs) != 1 || chs[0].Kind != Skipped {
		t.Errorf("changes = %+v", chs)
	}
}

func TestStatCache(t *testing.T) {
	s, ws := newStore(t, nil)
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{"a", "b", "c", "d"} {
		write(t, ws, n+".txt", n+"\n", 0o644)
		os.Chtimes(filepath.Join(ws, n+".txt"), old, old)
	}
	first := take(t, s)
	if first.Hashed != 4 {
		t.Fatalf("first hashed %d, want 4", first.Hashed)
	}
	second := take(t, s)
	if second.Hashed != 0 || second.ID != first.ID && second.Files != 4 {
		t.Fatalf("second hashed %d files %d", second.Hashed, second.Files)
	}
	write(t, ws, "b.txt", "B\n", 0o644)
	// A reopened store reads the saved cache.
	s.Close() // the cache is saved
	s2, err := Open(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	third := take(t, s2)
	if third.Hashed != 1 {
		t.Fatalf("third hashed %d, want 1 (only b.txt)", third.Hashed)
	}
}

func TestRestore(t *testing.T) {
	ctx := context.Background()
	s, ws := newStore(t, nil)
	write(t, ws, "README.md", "one\ntwo\r\nno final newline", 0o644)
	write(t, ws, "run.sh", "echo\n", 0o755)
	os.Symlink("README.md", filepath.Join(ws, "alias"))
	before := take(t, s)
	write(t, ws, "README.md", "agent text\n", 0o644)
	os.Chmod(filepath.Join(ws, "run.sh"), 0o644)
	os.Remove(filepath.Join(ws, "alias"))
	write(t, ws, "added.txt", "new\n", 0o644)
	after := take(t, s)
	paths := []string{"README.md", "run.sh", "alias", "added.txt"}

	// The user edits one file after the turn: the revert refuses.
	write(t, ws, "README.md", "user text\n", 0o644)
	_, err := s.Restore(ctx, before.ID, paths, RestoreOptions{Expect: after.ID})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "README.md" {
		t.Fatalf("err = %v, want a conflict on README.md", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != "user text\n" {
		t.Fatalf("a refused restore wrote: %q", b)
	}
	// Forced: a backup first, then exact bytes and mode.
	res, err := s.Restore(ctx, before.ID, paths, RestoreOptions{Expect: after.ID, Force: true})
	if err != nil || res.Backup == "" || len(res.Restored) != 4 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != "one\ntwo\r\nno final newline" {
		t.Errorf("README = %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "run.sh")); fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh mode %v", fi.Mode())
	}
	if l, err := os.Readlink(filepath.Join(ws, "alias")); err != nil || l != "README.md" {
		t.Errorf("alias %q %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "added.txt")); !os.IsNotExist(err) {
		t.Errorf("added.txt still there: %v", err)
	}
	// The backup undoes the forced restore: the user's text comes back.
	if _, err := s.Restore(ctx, res.Backup, []string{"README.md"}, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != "user text\n" {
		t.Errorf("after undo README = %q", b)
	}
	// Paths outside, or inside .git, are refused.
	for _, p := range []string{"../x", "/etc/passwd", ".git/config", "a/../b"} {
		if _, err := s.Restore(ctx, before.ID, []string{p}, RestoreOptions{}); err == nil {
			t.Errorf("restore %q: no error", p)
		}
	}
}

func TestRestoreAllAndUndo(t *testing.T) {
	ctx := context.Background()
	s, ws := newStore(t, nil)
	write(t, ws, "a.txt", "1\n", 0o644)
	var cps []Checkpoint
	cps = append(cps, take(t, s))
	for i, txt := range []string{"2\n", "3\n", "4\n"} {
		write(t, ws, "a.txt", txt, 0o644)
		write(t, ws, filepath.Join("turn", string(rune('a'+i))), txt, 0o644)
		cps = append(cps, take(t, s))
	}
	res, err := s.RestoreAll(ctx, cps[0].ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "1\n" {
		t.Errorf("a.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "turn", "c")); !os.IsNotExist(err) {
		t.Errorf("turn/c survived the rewind")
	}
	if _, err := s.RestoreAll(ctx, res.Backup, ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "turn", "c")); string(b) != "4\n" {
		t.Errorf("undo: turn/c = %q", b)
	}
}

func TestPrune(t *testing.T) {
	now := time.Now()
	s, ws := newStore(t, func(o *Options) { o.KeepCount = 2; o.Now = func() time.Time { return now } })
	var ids []string
	for i := 0; i < 4; i++ {
		write(t, ws, "f.txt", strings.Repeat("x", i+1), 0o644)
		now = now.Add(time.Minute)
		ids = append(ids, take(t, s).ID)
	}
	n, err := s.Prune(context.Background(), map[string]bool{ids[0]: true})
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1 (ids[0] is kept)", n, err)
	}
	if _, err := s.Get(ids[1]); !errors.Is(err, ErrNotFound) {
		t.Errorf("pruned checkpoint still readable: %v", err)
	}
	for _, id := range []string{ids[0], ids[2], ids[3]} {
		if _, err := s.File(id, "f.txt"); err != nil {
			t.Errorf("kept %s: %v", id, err)
		}
	}
}

func TestUserRepositoryUntouched(t *testing.T) {
	s, ws := newStore(t, nil)
	write(t, ws, ".git/HEAD", "ref: refs/heads/main\n", 0o644)
	write(t, ws, ".git/index", "INDEX", 0o644)
	write(t, ws, "f.txt", "x\n", 0o644)
	st, _ := os.Stat(filepath.Join(ws, ".git", "index"))
	a := take(t, s)
	write(t, ws, "f.txt", "y\n", 0o644)
	if _, err := s.RestoreAll(context.Background(), a.ID, ""); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(filepath.Join(ws, ".git", "index"))
	if !st.ModTime().Equal(st2.ModTime()) {
		t.Error("the user's index was touched")
	}
	if f, _ := s.File(a.ID, ".git/HEAD"); f.Exists {
		t.Error(".git was recorded")
	}
}
