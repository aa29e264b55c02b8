package agents

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// confineTree is fsTree plus the special files an agent must not reach: a
// character device node (when mknod is allowed), a unix socket, a link to
// /dev/null, a large file and a private file.
func confineTree(t *testing.T) (root, real, outside string, hasDev bool) {
	t.Helper()
	root, outside = fsTree(t)
	real, _ = filepath.EvalSymlinks(root)
	hasDev = syscall.Mknod(filepath.Join(root, "null"), syscall.S_IFCHR|0o666, int(mkdev(1, 3))) == nil
	ln, err := net.Listen("unix", filepath.Join(root, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Symlink("/dev/null", filepath.Join(root, "dev-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "big.txt"), make([]byte, maxReadBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "private.txt"), []byte("p"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, real, outside, hasDev
}

func mkdev(major, minor uint32) uint64 {
	return uint64(major)<<8 | uint64(minor)
}

// fsConn is a Conn with only what the fs handlers use: no process.
func fsConn(root, real string) *Conn {
	return &Conn{root: root, realRoot: real, log: quietLogger()}
}

func fsCall(t *testing.T, h func(context.Context, json.RawMessage) (any, *acp.RequestError), params any) (any, *acp.RequestError) {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return h(context.Background(), b)
}

// TestFSReadConfinement: fs/read_text_file serves regular files inside the
// workspace only, and refuses without blocking on FIFOs or touching devices.
func TestFSReadConfinement(t *testing.T) {
	root, real, outside, hasDev := confineTree(t)
	c := fsConn(root, real)
	tests := []struct {
		name    string
		path    string
		want    string // content, or the error's substring when code != 0
		code    int
		needDev bool
	}{
		{"relative", "a.txt", "one\ntwo\nthree\nfour\n", 0, false},
		{"absolute inside", filepath.Join(root, "sub", "b.txt"), "b\n", 0, false},
		{"symlink inside", filepath.Join(root, "in-link", "b.txt"), "b\n", 0, false},
		{"dot-dot out", "../outside/secret.txt", "outside the workspace", -32602, false},
		{"dot-dot through sub", "sub/../../outside/secret.txt", "outside the workspace", -32602, false},
		{"absolute elsewhere", filepath.Join(outside, "secret.txt"), "outside the workspace", -32602, false},
		{"system file", "/etc/passwd", "outside the workspace", -32602, false},
		{"symlinked dir out", filepath.Join(root, "out-link", "secret.txt"), "leads outside the workspace", -32602, false},
		{"symlinked file out", "out-file-link", "leads outside the workspace", -32602, false},
		{"symlink to a device", "dev-link", "leads outside the workspace", -32602, false},
		{"FIFO", "fifo", "a named pipe (FIFO)", -32602, false},
		{"socket", "sock", "a socket", -32602, false},
		{"device node", "null", "a character device", -32602, true},
		{"directory", "sub", "a directory", -32602, false},
		{"workspace root", ".", "a directory", -32602, false},
		{"too large", "big.txt", "at most 10485760 can be read", -32602, false},
		{"missing", "nope.txt", "Resource not found", -32002, false},
		{"NUL byte", "a\x00b", "NUL", -32602, false},
		{"empty", "", "empty path", -32602, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needDev && !hasDev {
				t.Skip("mknod not permitted here")
			}
			res, rerr := fsCall(t, c.onReadFile, map[string]any{"sessionId": "s", "path": tt.path})
			if tt.code == 0 {
				if rerr != nil {
					t.Fatalf("refused: %v", rerr.Message)
				}
				if got := res.(acp.ReadTextFileResponse).Content; got != tt.want {
					t.Errorf("content = %q, want %q", got, tt.want)
				}
				return
			}
			if rerr == nil {
				t.Fatalf("served %v, want error %d", res, tt.code)
			}
			if rerr.Code != tt.code || !strings.Contains(rerr.Message, tt.want) {
				t.Errorf("error %d %q, want %d containing %q", rerr.Code, rerr.Message, tt.code, tt.want)
			}
		})
	}
}

// TestFSWriteConfinement: fs/write_text_file writes regular files inside the
// workspace only, atomically, within the size cap, and leaves everything it
// refuses untouched.
func TestFSWriteConfinement(t *testing.T) {
	root, real, outside, hasDev := confineTree(t)
	c := fsConn(root, real)
	tests := []struct {
		name    string
		path    string
		content string
		want    string // error substring; "" = written
		check   string // file (relative to real) that must then hold content
		mode    os.FileMode
		needDev bool
	}{
		{"new file, new dirs", "new/deep/w.txt", "hi\nthere", "", "new/deep/w.txt", 0o644, false},
		{"replace keeps mode", "private.txt", "changed", "", "private.txt", 0o600, false},
		{"through symlink inside", filepath.Join(root, "in-link", "c.txt"), "c", "", "sub/c.txt", 0o644, false},
		{"dangling link inside", "dangling-in", "later", "", "sub/later.txt", 0o644, false},
		{"empty content", "empty.txt", "", "", "empty.txt", 0o644, false},
		{"at the cap", "cap.txt", strings.Repeat("x", maxWriteBytes), "", "cap.txt", 0o644, false},
		{"over the cap", "over.txt", strings.Repeat("x", maxWriteBytes+1), "at most 10485760 can be written", "", 0, false},
		{"dot-dot out", "../outside/w.txt", "x", "outside the workspace", "", 0, false},
		{"absolute elsewhere", filepath.Join(outside, "w.txt"), "x", "outside the workspace", "", 0, false},
		{"symlinked dir out", filepath.Join(root, "out-link", "w.txt"), "x", "leads outside the workspace", "", 0, false},
		{"symlinked file out", "out-file-link", "x", "leads outside the workspace", "", 0, false},
		{"dangling link out", "dangling-out", "x", "leads outside the workspace", "", 0, false},
		{"symlink to a device", "dev-link", "x", "leads outside the workspace", "", 0, false},
		{"FIFO", "fifo", "x", "a named pipe (FIFO)", "", 0, false},
		{"socket", "sock", "x", "a socket", "", 0, false},
		{"device node", "null", "x", "a character device", "", 0, true},
		{"directory", "sub", "x", "a directory", "", 0, false},
		{"workspace root", root, "x", "a directory", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needDev && !hasDev {
				t.Skip("mknod not permitted here")
			}
			_, rerr := fsCall(t, c.onWriteFile, map[string]any{"sessionId": "s", "path": tt.path, "content": tt.content})
			if tt.want != "" {
				if rerr == nil || rerr.Code != -32602 || !strings.Contains(rerr.Message, tt.want) {
					t.Fatalf("error = %+v, want -32602 containing %q", rerr, tt.want)
				}
				return
			}
			if rerr != nil {
				t.Fatalf("refused: %s", rerr.Message)
			}
			p := filepath.Join(real, tt.check)
			b, err := os.ReadFile(p)
			if err != nil || string(b) != tt.content {
				t.Errorf("%s holds %d bytes (%v), want %d", tt.check, len(b), err, len(tt.content))
			}
			if fi, err := os.Lstat(p); err != nil || fi.Mode() != tt.mode {
				t.Errorf("%s mode = %v, want %v", tt.check, fi.Mode(), tt.mode)
			}
		})
	}
	// Nothing outside changed, nothing was created there, no temp file is
	// left anywhere.
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 || entries[0].Name() != "secret.txt" {
		t.Errorf("outside now holds %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret\n" {
		t.Errorf("outside secret.txt = %q", b)
	}
	filepath.WalkDir(real, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".ochat-") {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
}

// TestFSRootLayer: the os.Root layer holds even when a directory is
// swapped for a symlink out after resolvePath looked (a path it returned
// that now crosses a link out is refused, not followed).
func TestFSRootLayer(t *testing.T) {
	root, outside := fsTree(t)
	real, _ := filepath.EvalSymlinks(root)
	swapped := filepath.Join(real, "out-link", "secret.txt") // as if out-link was a plain dir at resolve time
	if _, err := readRegular(real, swapped); err == nil || !strings.Contains(err.Error(), "leads outside the workspace") {
		t.Errorf("read through a swapped link: %v", err)
	}
	if err := writeAtomic(real, filepath.Join(real, "out-link", "w.txt"), "x"); err == nil || !strings.Contains(err.Error(), "leads outside") {
		t.Errorf("write through a swapped link: %v", err)
	}
	if err := writeAtomic(real, filepath.Join(real, "out-file-link"), "x"); err == nil || !strings.Contains(err.Error(), "a symlink") {
		t.Errorf("write over a final link out: %v", err)
	}
	if _, err := readRegular(real, "/etc/passwd"); err == nil {
		t.Error("read of a path outside the root")
	}
	if _, err := os.Stat(filepath.Join(outside, "w.txt")); err == nil {
		t.Error("write escaped")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret\n" {
		t.Errorf("outside secret.txt = %q", b)
	}
}

// FuzzFSWrite: whatever path an agent sends to fs/write_text_file, nothing
// outside the workspace is created or changed, and a refusal is -32602.
func FuzzFSWrite(f *testing.F) {
	for _, s := range []string{"a.txt", "new/x.txt", "../outside/x", "out-link/x", "out-file-link", "dangling-out",
		"dangling-in", "fifo", "sub/../../outside/secret.txt", "/etc/x", ".", "in-link/../../outside/y", "rel-link"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		root, outside := fsTree(t)
		real, _ := filepath.EvalSymlinks(root)
		c := fsConn(root, real)
		b, _ := json.Marshal(map[string]any{"sessionId": "s", "path": p, "content": "fuzz"})
		if _, rerr := c.onWriteFile(context.Background(), b); rerr != nil && rerr.Code != -32602 {
			t.Fatalf("write %q: error %d %s", p, rerr.Code, rerr.Message)
		}
		entries, _ := os.ReadDir(outside)
		if len(entries) != 1 {
			t.Fatalf("write %q created files outside: %v", p, entries)
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret\n" {
			t.Fatalf("write %q changed a file outside: %q", p, b)
		}
	})
}
