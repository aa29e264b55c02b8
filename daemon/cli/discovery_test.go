package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/daemon"
)

// discoveryWorld is a private workspace, state, config and home, with
// XDG_RUNTIME_DIR set to base/a; commands auto-start the daemon (this test
// binary as `ochatd serve`, see TestMain).
func discoveryWorld(t *testing.T) (base, ws string) {
	t.Helper()
	base, err := os.MkdirTemp("", "ocd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ws = filepath.Join(base, "ws")
	for _, d := range []string{"a", "b", "state", "config", "home", "ws"} {
		os.MkdirAll(filepath.Join(base, d), 0o700)
	}
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "a"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(base, "config"))
	t.Setenv("HOME", filepath.Join(base, "home"))
	t.Setenv("OCHATD_IDLE", "2m")
	return base, ws
}

// TestCLIOtherRuntimeDir: a daemon started with XDG_RUNTIME_DIR=a serves
// and stops from a shell with another XDG_RUNTIME_DIR, or none, through the
// record it writes beside the store (and removes when it exits).
func TestCLIOtherRuntimeDir(t *testing.T) {
	tests := []struct {
		name  string
		shell func(base string) // the other shell's environment
	}{
		{"other dir", func(base string) { os.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "b")) }},
		{"unset", func(string) { os.Unsetenv("XDG_RUNTIME_DIR") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, ws := discoveryWorld(t)
			if code, out, errs := runMain(t, "conversations", "--workspace", ws); code != 0 || !strings.Contains(out, "no conversations yet") {
				t.Fatalf("conversations (auto-start): exit %d\n%s%s", code, out, errs)
			}
			t.Cleanup(func() {
				os.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "a"))
				runMain(t, "stop", "--force", "--workspace", ws)
			})
			rp, err := daemon.RecordPath(ws)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := daemon.ReadRecord(rp)
			if err != nil || rec.Env["XDG_RUNTIME_DIR"] != filepath.Join(base, "a") {
				t.Fatalf("daemon record: %+v %v", rec, err)
			}

			tt.shell(base)
			if code, out, errs := runMain(t, "conversations", "--workspace", ws); code != 0 || !strings.Contains(out, "no conversations yet") {
				t.Fatalf("conversations from the other shell: exit %d\n%s%s", code, out, errs)
			}
			if code, out, errs := runMain(t, "doctor", "--workspace", ws); !strings.Contains(out, "daemon answers on the socket recorded in") || strings.Contains(out, "FAIL  store") {
				t.Errorf("doctor from the other shell: exit %d\n%s%s", code, out, errs)
			}
			code, out, errs := runMain(t, "stop", "--workspace", ws)
			if code != 0 || !strings.Contains(out, "stopped the daemon") || !strings.Contains(out, "pid "+strconv.Itoa(rec.PID)) {
				t.Fatalf("stop from the other shell: exit %d\n%s%s", code, out, errs)
			}
			if _, err := os.Stat(rp); !os.IsNotExist(err) {
				t.Errorf("the record outlived the daemon: %v", err)
			}
		})
	}
}

// TestCLIRecordedDaemonUnreachable: a live daemon recorded on a socket this
// shell cannot use is an error naming its pid, socket and the variable that
// differs — for stop (exit 1, not "no daemon is running") and for commands.
func TestCLIRecordedDaemonUnreachable(t *testing.T) {
	base, ws := discoveryWorld(t)
	abs, _ := daemon.AbsWorkspace(ws)
	rp, err := daemon.RecordPath(abs)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(rp), 0o700)
	gone := filepath.Join(base, "a", "ochat", "gone.sock")
	r := daemon.NewRecord(gone)
	// A live process whose arguments look like a daemon's stands in for it.
	standIn := exec.Command("sh", "-c", "sleep 60; :", "ochatd", "serve")
	if err := standIn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standIn.Process.Kill(); standIn.Wait() })
	r.PID = standIn.Process.Pid
	if err := daemon.WriteRecord(rp, r); err != nil {
		t.Fatal(err)
	}
	os.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "b"))
	for _, cmd := range []string{"stop", "conversations"} {
		code, out, errs := runMain(t, cmd, "--workspace", ws)
		for _, want := range []string{"pid " + strconv.Itoa(r.PID), gone, "XDG_RUNTIME_DIR differently"} {
			if code != 1 || !strings.Contains(errs, want) {
				t.Errorf("%s: exit %d, stderr lacks %q:\n%s%s", cmd, code, want, out, errs)
			}
		}
	}
}

// TestCLIDaemonFailsToStart: a daemon that cannot start (a damaged store)
// is reported with its own error as soon as it exits; a socket path that
// is too long is refused before anything starts.
func TestCLIDaemonFailsToStart(t *testing.T) {
	t.Run("damaged store", func(t *testing.T) {
		_, ws := discoveryWorld(t)
		db := storePath(t, ws)
		os.MkdirAll(filepath.Dir(db), 0o700)
		os.WriteFile(db, []byte("not a bbolt file"), 0o600)
		code, _, errs := runMain(t, "conversations", "--workspace", ws)
		if code != 1 || !strings.Contains(errs, "exited before answering") || !strings.Contains(errs, db) || strings.Contains(errs, "did not answer") {
			t.Fatalf("exit %d:\n%s", code, errs)
		}
	})
	t.Run("socket path too long", func(t *testing.T) {
		base, ws := discoveryWorld(t)
		rt := filepath.Join(base, strings.Repeat("x", 114-len(base)-1))
		t.Setenv("XDG_RUNTIME_DIR", rt)
		code, _, errs := runMain(t, "conversations", "--workspace", ws)
		if code != 1 || !strings.Contains(errs, "more than the 107") || !strings.Contains(errs, "set a shorter XDG_RUNTIME_DIR") {
			t.Fatalf("exit %d:\n%s", code, errs)
		}
	})
}
