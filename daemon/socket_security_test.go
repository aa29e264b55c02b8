package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// peerHelperEnv names the socket TestPeerHelperProcess connects to when the
// test binary runs as the helper child.
const peerHelperEnv = "OCHAT_PEER_HELPER_SOCK"

// TestPeerHelperProcess is not a test: run as a child (with peerHelperEnv
// set, possibly as another uid), it connects to the socket, sends an
// initialize frame and prints what came back: "dial: <error>", "EOF" (the
// daemon closed the connection unanswered) or "answered".
func TestPeerHelperProcess(t *testing.T) {
	sock := os.Getenv(peerHelperEnv)
	if sock == "" {
		return
	}
	defer os.Exit(0)
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer c.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"peer"}}}`
	fmt.Fprintf(c, "Content-Length: %d\r\n\r\n%s", len(body), body)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b := make([]byte, 64)
	n, err := c.Read(b)
	switch {
	case n > 0:
		fmt.Println("answered")
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		fmt.Println("EOF")
	default:
		fmt.Println("read:", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the daemon's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPeerOfAnotherUser: as root, a process of another uid (nobody, 65534)
// is refused by each layer on its own: the 0600 socket file, and — with the
// file opened to everyone — the SO_PEERCRED check, which closes the
// connection unanswered and logs it. The same helper as our own uid is
// answered.
func TestPeerOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another uid")
	}
	const other = 65534
	var logs syncBuffer
	e := newEnv(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	if fi, err := os.Stat(e.sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	// The helper binary where the other uid can run it; the socket's
	// directory open to it.
	binDir, err := os.MkdirTemp("", "odpeer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "peer.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{binDir, filepath.Dir(e.sock)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(uid int) string {
		t.Helper()
		cmd := exec.Command(bin, "-test.run=^TestPeerHelperProcess$")
		cmd.Env = append(os.Environ(), peerHelperEnv+"="+e.sock)
		cmd.Dir = binDir
		if uid != os.Getuid() {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper as uid %d: %v\n%s", uid, err, out)
		}
		return strings.TrimSpace(string(out))
	}

	tests := []struct {
		name string
		mode os.FileMode // of the socket file
		uid  int
		want string // prefix of the helper's report
	}{
		{"own uid", 0o600, os.Getuid(), "answered"},
		{"other uid, socket 0600", 0o600, other, "dial:"},
		{"other uid, socket open to all", 0o666, other, "EOF"},
		{"own uid again", 0o666, os.Getuid(), "answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.Chmod(e.sock, tt.mode); err != nil {
				t.Fatal(err)
			}
			got := run(tt.uid)
			if !strings.HasPrefix(got, tt.want) {
				t.Fatalf("helper as uid %d = %q, want %q", tt.uid, got, tt.want)
			}
			if tt.want == "dial:" && !strings.Contains(got, "permission denied") {
				t.Errorf("dial refused for another reason: %s", got)
			}
		})
	}
	if !strings.Contains(logs.String(), "refusing connection") || !strings.Contains(logs.String(), fmt.Sprintf("peerUid=%d", other)) {
		t.Errorf("daemon log does not name the refused peer:\n%s", logs.String())
	}
}

// TestSocketDirRefusals: SocketDir makes a loose directory private and
// refuses one another user owns.
func TestSocketDirRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string // error substring; "" = accepted with mode 0700
	}{
		{"created", func(t *testing.T, dir string) {}, ""},
		{"group and others could enter", func(t *testing.T, dir string) { os.MkdirAll(dir, 0o777); os.Chmod(dir, 0o777) }, ""},
		{"owned by another uid", func(t *testing.T, dir string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to chown")
			}
			os.MkdirAll(dir, 0o700)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Skip(err)
			}
		}, "owned by uid 65534"},
		{"a file", func(t *testing.T, dir string) { os.WriteFile(dir, nil, 0o600) }, "socket dir"},
		{"a symlink to a directory", func(t *testing.T, dir string) {
			target := t.TempDir()
			os.Symlink(target, dir)
		}, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := t.TempDir()
			t.Setenv("XDG_RUNTIME_DIR", rt)
			dir := filepath.Join(rt, "ochat")
			tt.setup(t, dir)
			got, err := SocketDir()
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("SocketDir = %s, %v; want an error with %q", got, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Lstat(got); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v %v, want a 0700 directory", got, fi.Mode(), err)
			}
		})
	}
}
