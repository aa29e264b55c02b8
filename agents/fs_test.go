package agents

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fsTree builds a workspace with files, a subdirectory, symlinks in and out,
// and a sibling directory outside it.
func fsTree(t testing.TB) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "a.txt"), "one\ntwo\nthree\nfour\n")
	write(filepath.Join(root, "sub", "b.txt"), "b\n")
	write(filepath.Join(outside, "secret.txt"), "secret\n")
	links := map[string]string{
		filepath.Join(root, "in-link"):       filepath.Join(root, "sub"),
		filepath.Join(root, "rel-link"):      "sub/b.txt",
		filepath.Join(root, "out-link"):      outside,
		filepath.Join(root, "out-file-link"): filepath.Join(outside, "secret.txt"),
		filepath.Join(root, "dangling-out"):  filepath.Join(outside, "new.txt"),
		filepath.Join(root, "dangling-in"):   filepath.Join(root, "sub", "later.txt"),
	}
	for l, target := range links {
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

func TestResolvePath(t *testing.T) {
	root, outside := fsTree(t)
	real, _ := filepath.EvalSymlinks(root)
	tests := []struct {
		path string
		want string // resolved, relative to real root; "" = refused
	}{
		{filepath.Join(root, "a.txt"), "a.txt"},
		{"a.txt", "a.txt"},
		{"sub/b.txt", "sub/b.txt"},
		{filepath.Join(root, "sub", "..", "a.txt"), "a.txt"},
		{filepath.Join(root, "new", "deep", "file.txt"), "new/deep/file.txt"},
		{filepath.Join(root, "in-link", "b.txt"), "sub/b.txt"},
		{filepath.Join(root, "rel-link"), "sub/b.txt"},
		{filepath.Join(root, "dangling-in"), "sub/later.txt"},
		{root, "."},
		{filepath.Join(root, "..", "outside", "secret.txt"), ""},
		{"../outside/secret.txt", ""},
		{filepath.Join(outside, "secret.txt"), ""},
		{"/etc/passwd", ""},
		{filepath.Join(root, "out-link", "secret.txt"), ""},
		{filepath.Join(root, "out-link", "new.txt"), ""},
		{filepath.Join(root, "out-file-link"), ""},
		{filepath.Join(root, "dangling-out"), ""},
		{"", ""},
		{"a\x00b", ""},
		{root + "-sibling/x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := resolvePath(root, real, tt.path)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("resolved to %s, want a refusal", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if want := filepath.Join(real, tt.want); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	s := "1\n2\n3\n4\n"
	ip := func(n int) *int { return &n }
	tests := []struct {
		line, limit *int
		want        string
	}{
		{nil, nil, s},
		{ip(1), nil, s},
		{ip(2), nil, "2\n3\n4\n"},
		{ip(2), ip(2), "2\n3\n"},
		{nil, ip(1), "1\n"},
		{ip(4), ip(10), "4\n"},
		{ip(9), nil, ""},
		{ip(0), ip(0), ""},
	}
	for _, tt := range tests {
		if got := window(s, tt.line, tt.limit); got != tt.want {
			t.Errorf("window(line=%v, limit=%v) = %q, want %q", deref(tt.line), deref(tt.limit), got, tt.want)
		}
	}
	if got := window("a\nb", new(2), nil); got != "b" {
		t.Errorf("last line without newline: %q", got)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x", "y.txt")
	if err := writeAtomic(dir, p, "hello"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(dir, p, "again"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "again" || fi.Mode().Perm() != 0o600 {
		t.Errorf("content %q mode %v", b, fi.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
	if err := writeAtomic(dir, dir, "x"); err == nil {
		t.Error("writing over a directory succeeded")
	}
}

// TestClientFS drives fs/read_text_file and fs/write_text_file through the
// scripted agent.
func TestClientFS(t *testing.T) {
	var hooked []string
	f := start(t, nil, func(o *Options) {
		o.WriteFile = func(ctx context.Context, sid, path, content string) (bool, error) {
			if strings.HasSuffix(path, "editor.txt") {
				hooked = append(hooked, path+"="+content)
				return true, nil
			}
			return false, nil
		}
	})
	root, outside := f.ws, filepath.Join(filepath.Dir(f.ws), "outside-"+filepath.Base(f.ws))
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644)
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Mkdir(filepath.Join(root, "dir"), 0o755)

	tests := []struct {
		prompt string
		want   string // answer prefix
	}{
		{"FSREAD " + filepath.Join(root, "a.txt"), "one\ntwo\nthree\n"},
		{"FSREAD " + filepath.Join(root, "a.txt") + " 2 1", "two\n"},
		{"FSREAD " + filepath.Join(root, "missing.txt"), "error -32002: Resource not found: " + filepath.Join(root, "missing.txt")},
		{"FSREAD " + filepath.Join(outside, "secret.txt"), "error -32602: Invalid params: " + filepath.Join(outside, "secret.txt") + " is outside the workspace"},
		{"FSREAD " + filepath.Join(root, "out", "secret.txt"), "error -32602"},
		{"FSREAD " + filepath.Join(root, "..", filepath.Base(outside), "secret.txt"), "error -32602"},
		{"FSREAD " + filepath.Join(root, "dir"), "error -32602: Invalid params: " + filepath.Join(root, "dir") + " is not a regular file"},
		{"FSWRITE " + filepath.Join(root, "new", "w.txt") + ` hi\nthere`, "written"},
		{"FSWRITE " + filepath.Join(root, "out", "w.txt") + " x", "error -32602"},
		{"FSWRITE " + filepath.Join(root, "editor.txt") + " via editor", "written"},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			info := f.session(t)
			f.prompt(t, info.ID, tt.prompt)
			got := text(f.rec.eventsOf(info.ID), "content.delta")
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("answer = %q, want prefix %q", got, tt.want)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(root, "new", "w.txt")); err != nil || string(b) != "hi\nthere" {
		t.Errorf("written file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "w.txt")); err == nil {
		t.Error("write escaped through a symlink")
	}
	if _, err := os.Stat(filepath.Join(root, "editor.txt")); err == nil {
		t.Error("hooked write also reached the disk")
	}
	if len(hooked) != 1 || !strings.HasSuffix(hooked[0], "editor.txt=via editor") {
		t.Errorf("hook saw %v", hooked)
	}
}

func TestFSCapabilitiesAdvertised(t *testing.T) {
	caps := func(fs *bool) map[string]any {
		rec := newRecorder()
		spec := testSpec(nil)
		spec.FSCapabilities = fs
		c, err := Start(context.Background(), spec, Options{Workspace: t.TempDir(), Handler: rec, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		f := &fixture{conn: c, rec: rec}
		info := f.session(t)
		f.prompt(t, info.ID, "CAPS")
		var m map[string]any
		if err := json.Unmarshal([]byte(text(rec.eventsOf(info.ID), "content.delta")), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if fs, _ := caps(nil)["fs"].(map[string]any); fs["readTextFile"] != true || fs["writeTextFile"] != true {
		t.Errorf("default fs caps = %v", fs)
	}
	if fs, _ := caps(new(false))["fs"].(map[string]any); len(fs) != 0 {
		t.Errorf("fsCapabilities false still advertised %v", fs)
	}
}

// FuzzResolvePath: whatever path an agent sends, an accepted path lies in the
// workspace once symlinks are resolved.
func FuzzResolvePath(f *testing.F) {
	root, outside := fsTree(f)
	real, _ := filepath.EvalSymlinks(root)
	for _, s := range []string{"a.txt", "../outside/secret.txt", root + "/out-link/x", root + "/in-link/../a.txt",
		outside, "/", root + "/sub/../../ws/a.txt", "dangling-out", "rel-link", "./././a.txt", root + "//sub"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := resolvePath(root, real, p)
		if err != nil {
			return
		}
		if !within(real, got) {
			t.Fatalf("resolvePath(%q) = %s, outside %s", p, got, real)
		}
		// Following every existing link of the result stays inside too.
		if resolved, err := filepath.EvalSymlinks(got); err == nil && !within(real, resolved) {
			t.Fatalf("resolvePath(%q) = %s resolves to %s", p, got, resolved)
		}
	})
}
