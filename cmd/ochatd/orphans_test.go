package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
)

// TestKill9NoOrphans: after `kill -9` of the daemon, the agent it started
// (under the procguard shim) — a stubborn one that ignores the end of its
// stdin and SIGTERM — and the agent's own child end within 5 s.
func TestKill9NoOrphans(t *testing.T) {
	e := newCLIEnv(t)
	pidFile := filepath.Join(e.root, "child.pid")
	settings, _ := json.Marshal(map[string]any{"agent_servers": map[string]any{
		"test": map[string]any{"command": testagentBin, "env": map[string]string{
			"TESTAGENT_STATE": filepath.Join(e.root, "agent"), "TESTAGENT_CHILD_PIDFILE": pidFile,
			// A stubborn adapter: it ignores the end of its stdin and SIGTERM.
			"TESTAGENT_IGNORE_EOF": "1", "TESTAGENT_IGNORE_TERM": "1"}},
	}})
	if err := os.WriteFile(filepath.Join(e.root, "config", "ochat", "settings.json"), settings, 0o600); err != nil {
		t.Fatal(err)
	}

	// spawn starts a daemon and a turn; it returns the daemon and the pids
	// of the shim, the agent and the agent's child.
	spawn := func() (serve *exec.Cmd, shim, agent, child int) {
		os.Remove(pidFile)
		serve = exec.Command(ochatdBin, "serve", "--workspace", e.ws, "--idle", "0")
		serve.Env = e.env
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sock := filepath.Join(e.root, "run", "ochat", daemon.WorkspaceHash(e.ws)+".sock")
		nc, err := daemon.Dial(ctx, daemon.DialOptions{Workspace: e.ws, Socket: sock})
		for i := 0; err != nil && i < 100; i++ {
			time.Sleep(100 * time.Millisecond)
			nc, err = daemon.Dial(ctx, daemon.DialOptions{Workspace: e.ws, Socket: sock})
		}
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { nc.Close() })
		cl, err := daemon.NewClient(ctx, nc, "test", "0")
		if err != nil {
			t.Fatal(err)
		}
		var res daemon.SendResult
		if err := cl.Call(ctx, daemon.MethodChatSend, daemon.SendParams{Agent: "test", Text: "HANG"}, &res); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Next(ctx); err != nil {
			t.Fatal(err)
		}
		child = waitPID(t, pidFile)
		agent = ppid(t, child)
		shim = ppid(t, agent)
		if ppid(t, shim) != serve.Process.Pid {
			t.Fatalf("process tree: daemon %d → %d → agent %d → child %d", serve.Process.Pid, shim, agent, child)
		}
		if pg, _ := syscall.Getpgid(child); pg != shim {
			t.Fatalf("child in group %d, want the shim's %d", pg, shim)
		}
		return serve, shim, agent, child
	}
	gone := func(what string, pids ...int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for _, pid := range pids {
			for !processGone(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: pid %d still runs 5 s later", what, pid)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}

	serve, shim, agent, child := spawn()
	killed := time.Now()
	serve.Process.Signal(syscall.SIGKILL)
	serve.Wait()
	gone("after kill -9 of the daemon", shim, agent, child)
	// (A killed daemon leaves its socket file; the cleanup waits for it.)
	os.Remove(filepath.Join(e.root, "run", "ochat", daemon.WorkspaceHash(e.ws)+".sock"))
	t.Logf("metric: agent group gone %v after kill -9 of the daemon", time.Since(killed).Round(time.Millisecond))

	// The daemon recorded the group beside the store, for the next
	// daemon's sweep (procguard's own tests cover the sweep).
	matches, _ := filepath.Glob(filepath.Join(e.root, "state", "ochat", "workspaces", "*", "agents.pids"))
	if len(matches) != 1 {
		t.Fatalf("agent process ledger: %v", matches)
	}
	if b, _ := os.ReadFile(matches[0]); !strings.HasPrefix(string(b), strconv.Itoa(shim)+" ") {
		t.Errorf("ledger %s holds %q, want the shim's group %d", matches[0], b, shim)
	}
}

func waitPID(t *testing.T, path string) int {
	t.Helper()
	for range 500 {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// ppid returns the parent pid of pid (field 4 of /proc/<pid>/stat).
func ppid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	p, _ := strconv.Atoi(f[1])
	return p
}

// processGone reports that pid no longer runs (absent, or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}
