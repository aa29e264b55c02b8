package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
)

// TestChatHintWhenDaemonDies: `ochatd chat` whose daemon is killed
// mid-turn exits 1 with the `hint:` line the README promises. The daemon
// is named before the command (`ochatd --workspace DIR serve`).
func TestChatHintWhenDaemonDies(t *testing.T) {
	e := newCLIEnv(t)
	serve := exec.Command(ochatdBin, "--workspace", e.ws, "serve", "--idle", "0")
	serve.Env = e.env
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	sock := filepath.Join(e.root, "run", "ochat", daemon.WorkspaceHash(e.ws)+".sock")
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	chat := exec.Command(ochatdBin, "chat", "--workspace", e.ws, "--agent", "test", "HANG")
	chat.Env, chat.Dir = e.env, e.ws
	var out, errb syncBuffer
	chat.Stdout, chat.Stderr = &out, &errb
	if err := chat.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200 && !strings.Contains(out.String(), "hang"); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	serve.Process.Signal(syscall.SIGKILL)
	serve.Wait()
	os.Remove(sock)
	err := chat.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("chat exit: %v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "\nhint: the daemon stopped") || !strings.Contains(errb.String(), "ochatd show ") {
		t.Errorf("chat stderr has no hint line:\n%s", errb.String())
	}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
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
