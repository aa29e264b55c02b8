package procguard

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is its own shim, as ochatd is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ShimArg {
		os.Exit(RunShim(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	for range 250 {
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

func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0] == "Z" || f[0] == "X"
}

func waitGone(t *testing.T, what string, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: pid %d still runs after %v", what, pid, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShimKillsGroupWhenParentDies: a parent runs the shim over a command
// whose child forks a grandchild; kill -9 of the parent ends them all.
func TestShimKillsGroupWhenParentDies(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gpid := filepath.Join(dir, "grandchild")
	shimCmd, shimArgs := Command(exe, "sh", []string{"-c", "sleep 600 & echo $! > " + gpid + "; wait"})
	// parent: a process that starts the shim and can be killed alone.
	parent := exec.Command("sh", "-c", "\""+shimCmd+"\" "+quote(shimArgs)+" & wait")
	parent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-parent.Process.Pid, syscall.SIGKILL); parent.Wait() })
	grandchild := readPID(t, gpid)
	time.Sleep(100 * time.Millisecond)
	parent.Process.Signal(syscall.SIGKILL)
	parent.Wait()
	waitGone(t, "grandchild after kill -9 of the shim's parent", grandchild, 5*time.Second)
}

func quote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// TestShimExitStatus: the shim passes its child's exit code on.
func TestShimExitStatus(t *testing.T) {
	exe, _ := os.Executable()
	name, args := Command(exe, "sh", []string{"-c", "exit 3"})
	err := exec.Command(name, args...).Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("shim exit: %v", err)
	}
	name, args = Command(exe, "sh", []string{"-c", "kill -9 $$"})
	err = exec.Command(name, args...).Run()
	if ee, ok := err.(*exec.ExitError); !ok || !strings.Contains(ee.Error(), "signal: killed") {
		t.Fatalf("shim after its child was killed: %v", err)
	}
}

// TestLedgerSweep: a recorded group left running is killed by the next
// Sweep; a record whose pid now runs with another start time is not.
func TestLedgerSweep(t *testing.T) {
	dir := t.TempDir()
	gpid := filepath.Join(dir, "grandchild")
	leader := exec.Command("sh", "-c", "sleep 600 & echo $! > "+gpid+"; wait")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-leader.Process.Pid, syscall.SIGKILL); leader.Wait() })
	grandchild := readPID(t, gpid)

	path := filepath.Join(dir, "state", "agents.pids")
	l := OpenLedger(path)
	if err := l.Add(leader.Process.Pid); err != nil {
		t.Fatal(err)
	}
	// A stranger: this test process, recorded with a wrong start time.
	st, err := StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	b = append(b, []byte(strconv.Itoa(os.Getpid())+" "+strconv.FormatUint(st+1, 10)+"\n")...)
	os.WriteFile(path, b, 0o600)

	// The next daemon's ledger.
	killed, err := OpenLedger(path).Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if len(killed) != 1 || killed[0] != leader.Process.Pid {
		t.Errorf("swept %v, want [%d]", killed, leader.Process.Pid)
	}
	leader.Wait()
	waitGone(t, "grandchild after the sweep", grandchild, 5*time.Second)
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Errorf("ledger after the sweep: %q", b)
	}
	if _, err := OpenLedger(filepath.Join(dir, "none")).Sweep(); err != nil {
		t.Errorf("sweep without a ledger: %v", err)
	}
}
