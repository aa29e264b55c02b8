package demo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoStopsCleanly runs the real `ochatd demo --yes` and stops it two
// ways — its reader goes away (`| head`), and Ctrl-C — and checks that the
// daemon is gone, the temporary folder removed, and no "signal: killed" is
// printed. It needs npm and the demo's cached codex-acp install (the first
// `ochatd demo` makes it); otherwise it is skipped.
func TestDemoStopsCleanly(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not on PATH")
	}
	cache, err := CacheDir()
	if err != nil {
		t.Skip(err)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "demo-*", "node_modules")); len(m) == 0 {
		t.Skip("codex-acp not cached in " + cache + " (run `ochatd demo` once)")
	}
	bin := filepath.Join(t.TempDir(), "ochatd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ochat-dev/ochat/cmd/ochatd").CombinedOutput(); err != nil {
		t.Fatalf("build ochatd: %v\n%s", err, out)
	}
	tests := []struct {
		name string
		stop func(t *testing.T, cmd *exec.Cmd, out io.ReadCloser)
	}{
		{"reader goes away", func(t *testing.T, cmd *exec.Cmd, out io.ReadCloser) { out.Close() }},
		{"interrupt", func(t *testing.T, cmd *exec.Cmd, out io.ReadCloser) {
			// A terminal's Ctrl-C reaches the whole foreground group.
			syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			go io.Copy(io.Discard, out)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp, err := os.MkdirTemp("", "od") // short: the socket path must fit
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(tmp)
			cmd := exec.Command(bin, "demo", "--yes")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "OCHAT_CACHE="+cache)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			running := false
			for !running && sc.Scan() {
				running = strings.Contains(sc.Text(), "ochatd serve is running")
			}
			if !running {
				cmd.Wait()
				t.Fatalf("the demo never started its daemon; stderr:\n%s", errb.String())
			}
			tt.stop(t, cmd, out)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Fatalf("demo did not stop; stderr:\n%s", errb.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1", err)
			}
			if strings.Contains(errb.String(), "signal: killed") || !strings.Contains(errb.String(), "temporary folder removed") {
				t.Errorf("stderr:\n%s", errb.String())
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "ochat-demo-*")); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
			if pids := processesMentioning(tmp); len(pids) != 0 {
				for _, p := range pids {
					syscall.Kill(p, syscall.SIGKILL)
				}
				t.Errorf("processes still running under %s: %v", tmp, pids)
			}
		})
	}
}

// processesMentioning lists the pids whose command line contains s.
func processesMentioning(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestPipeWriterAndPlural(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	var cause error
	pw := &pipeWriter{w: w, cancel: func(err error) { cause = err }}
	if _, err := pw.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) || cause != errOutputClosed {
		t.Errorf("write to a closed pipe: err %v, cause %v", err, cause)
	}
	w.Close()
	for n, want := range map[int]string{0: "0 requests", 1: "1 request", 2: "2 requests"} {
		if got := plural(n, "request"); got != want {
			t.Errorf("plural(%d) = %q", n, got)
		}
	}
}

// TestDemoRejected runs the real `ochatd demo` answering "n" to the
// permission question: the user's own rejection is not a failure, so it
// ends with a friendly line and exit status 0. Skipped like
// TestDemoStopsCleanly without npm or the cached codex-acp.
func TestDemoRejected(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not on PATH")
	}
	cache, err := CacheDir()
	if err != nil {
		t.Skip(err)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "demo-*", "node_modules")); len(m) == 0 {
		t.Skip("codex-acp not cached in " + cache + " (run `ochatd demo` once)")
	}
	bin := filepath.Join(t.TempDir(), "ochatd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ochat-dev/ochat/cmd/ochatd").CombinedOutput(); err != nil {
		t.Fatalf("build ochatd: %v\n%s", err, out)
	}
	tmp, err := os.MkdirTemp("", "od") // short: the socket path must fit
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(bin, "demo")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "OCHAT_CACHE="+cache)
	cmd.Stdin = strings.NewReader("n\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Errorf("exit: %v, want 0\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	all := out.String() + errb.String()
	for _, want := range []string{"(stopped: you rejected the permission request)", "you rejected the write: nothing was created"} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "cancelled by another client") || strings.Contains(all, "exit status") {
		t.Errorf("the rejection reads as a failure:\n%s", all)
	}
}
