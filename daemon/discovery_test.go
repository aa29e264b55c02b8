package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSocketPathLength: a socket path of up to MaxSocketPath bytes is
// used; a longer one is refused up front, saying to set a shorter
// XDG_RUNTIME_DIR, without creating the socket directory.
func TestSocketPathLength(t *testing.T) {
	base, err := os.MkdirTemp("", "sp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// SocketPath is XDG_RUNTIME_DIR + "/ochat/" + 16 hex + ".sock".
	const extra = len("/ochat/") + 16 + len(".sock")
	runtimeDir := func(n int) string { // a path of n bytes under base
		return base + "/" + strings.Repeat("r", n-len(base)-1)
	}
	tests := []struct {
		name   string
		dirLen int
		ok     bool
	}{
		{"at the limit", MaxSocketPath - extra, true},
		{"one byte over", MaxSocketPath - extra + 1, false},
		{"114-byte XDG_RUNTIME_DIR", 114, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := runtimeDir(tt.dirLen)
			t.Setenv("XDG_RUNTIME_DIR", rt)
			p, err := SocketPath("/some/workspace")
			if tt.ok {
				if err != nil || len(p) != MaxSocketPath {
					t.Fatalf("SocketPath = %q (%d bytes), %v", p, len(p), err)
				}
				ln, err := Listen(p)
				if err != nil {
					t.Fatalf("Listen at %d bytes: %v", len(p), err)
				}
				ln.Close()
				return
			}
			if !errors.Is(err, ErrSocketPathTooLong) || !strings.Contains(err.Error(), "set a shorter XDG_RUNTIME_DIR") {
				t.Fatalf("SocketPath = %q, %v; want ErrSocketPathTooLong saying to set a shorter XDG_RUNTIME_DIR", p, err)
			}
			if _, err := os.Stat(rt); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the socket directory was created: %v", err)
			}
			long := filepath.Join(base, strings.Repeat("l", MaxSocketPath))
			if _, err := Listen(long); !errors.Is(err, ErrSocketPathTooLong) {
				t.Errorf("Listen(long path) = %v", err)
			}
		})
	}
}

// TestRecord: a record round-trips, is written atomically (no temporary
// file left) and is removed only by the daemon it names.
func TestRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), RecordFile)
	r := NewRecord("/run/user/1/ochat/x.sock")
	if err := WriteRecord(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRecord(path)
	if err != nil || got.PID != os.Getpid() || got.Socket != r.Socket || got.StartedAt != r.StartedAt {
		t.Fatalf("ReadRecord = %+v, %v", got, err)
	}
	if _, ok := got.Env["XDG_RUNTIME_DIR"]; !ok {
		t.Errorf("record lacks XDG_RUNTIME_DIR: %+v", got.Env)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the record", len(ents))
	}
	if err := RemoveRecord(path, os.Getpid()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("another pid removed the record: %v", err)
	}
	if err := RemoveRecord(path, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecord(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after RemoveRecord: %v", err)
	}
	for _, bad := range []string{"not json", `{"pid":0,"socket":"/x"}`, `{"pid":5,"socket":"rel.sock"}`} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := ReadRecord(path); err == nil {
			t.Errorf("ReadRecord(%q) accepted it", bad)
		}
	}
}

// deadPID is the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// standIn starts a process whose arguments look like `ochatd serve` (as a
// live daemon's do) and returns its pid; it is killed when the test ends.
func standIn(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60; :", "ochatd", "serve")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestDialFindsRecordedDaemon: a client whose XDG_RUNTIME_DIR differs from
// the daemon's reaches it through the record beside the store; a live
// daemon whose recorded socket cannot be used is an *UnreachableError
// naming its pid, socket and the variable that differs; a dead daemon's
// record is ignored.
func TestDialFindsRecordedDaemon(t *testing.T) {
	tests := []struct {
		name string
		// record changes the daemon's record before the client dials.
		record func(t *testing.T, r *Record)
		// want: "conn", "unreachable: <text>" or "plain".
		want string
	}{
		{"other XDG_RUNTIME_DIR", nil, "conn"},
		{"socket gone", func(t *testing.T, r *Record) { r.Socket = filepath.Join(filepath.Dir(r.Socket), "gone.sock") }, "unreachable: XDG_RUNTIME_DIR differently"},
		{"not a socket", func(t *testing.T, r *Record) {
			f := filepath.Join(filepath.Dir(r.Socket), "file.sock")
			os.WriteFile(f, nil, 0o600)
			r.Socket = f
		}, "unreachable: is not a socket"},
		{"dead daemon", func(t *testing.T, r *Record) { r.PID = deadPID(t) }, "plain"},
		{"pid reused by another program", func(t *testing.T, r *Record) {
			r.PID = os.Getpid() // the test binary: no "serve" argument
			r.Socket = filepath.Join(filepath.Dir(r.Socket), "gone.sock")
		}, "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, err := os.MkdirTemp("", "disc")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			ws := filepath.Join(base, "ws")
			os.MkdirAll(ws, 0o700)
			t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
			t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "a"))
			sock, err := SocketPath(ws)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := Listen(sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan struct{}, 1)
			go func() {
				c, err := ln.Accept()
				if err == nil {
					accepted <- struct{}{}
					c.Close()
				}
			}()
			r := NewRecord(sock)
			r.PID = standIn(t)
			if tt.record != nil {
				tt.record(t, &r)
			}
			rp, err := RecordPath(ws)
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Dir(rp), 0o700)
			if err := WriteRecord(rp, r); err != nil {
				t.Fatal(err)
			}

			t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "b")) // the other shell
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := Dial(ctx, DialOptions{Workspace: ws})
			var ue *UnreachableError
			switch {
			case tt.want == "conn":
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				c.Close()
				select {
				case <-accepted:
				case <-ctx.Done():
					t.Fatal("the recorded daemon never saw the connection")
				}
			case strings.HasPrefix(tt.want, "unreachable: "):
				if !errors.As(err, &ue) || ue.PID != r.PID || ue.Socket != r.Socket {
					t.Fatalf("Dial = %v, want *UnreachableError for pid %d socket %s", err, r.PID, r.Socket)
				}
				for _, want := range []string{strings.TrimPrefix(tt.want, "unreachable: "), r.Socket, "pid " + itoa(r.PID), "here " + filepath.Join(base, "b"), "the daemon's " + filepath.Join(base, "a")} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error lacks %q: %v", want, err)
					}
				}
			default:
				if err == nil || errors.As(err, &ue) {
					t.Fatalf("Dial = %v, want the plain dial error", err)
				}
			}
		})
	}
}

// TestDialStartedDaemonExits: when the daemon Dial started exits before
// answering, Dial says so with its exit status and output instead of
// waiting for Timeout — unless it exited because another process holds the
// store (ExitStoreLocked), when Dial keeps looking until Timeout and then
// says the store is held.
func TestDialStartedDaemonExits(t *testing.T) {
	tests := []struct {
		name, script string
		timeout      time.Duration
		want, never  string
	}{
		{"damaged store", "echo 'old line' >&2\nexit 1", time.Hour, "exited before answering (exit status 1); its output", "did not answer"},
		{"store locked", "echo locked >&2\nexit 3", 500 * time.Millisecond, "another process holds the workspace's store", "exited before answering"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "fake-ochatd")
			os.WriteFile(exe, []byte("#!/bin/sh\necho \"serve failed: $1\" >&2\n"+tt.script+"\n"), 0o755)
			log := filepath.Join(dir, "daemon.log")
			os.WriteFile(log, []byte("a line from an earlier daemon\n"), 0o600)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := Dial(ctx, DialOptions{Workspace: dir, Socket: filepath.Join(dir, "d.sock"), AutoStart: true, Exe: exe, LogPath: log, Timeout: tt.timeout})
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), tt.never) {
				t.Fatalf("Dial = %v\nwant %q, never %q", err, tt.want, tt.never)
			}
			if tt.timeout == time.Hour && (!strings.Contains(err.Error(), "serve failed: serve") || strings.Contains(err.Error(), "earlier daemon")) {
				t.Errorf("error should carry this start's output only: %v", err)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
