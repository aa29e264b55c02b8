package cli

import (
	"os"
	"os/exec"
	"testing"
)

func TestProcessGone(t *testing.T) {
	if processGone(os.Getpid()) {
		t.Error("this process counts as gone")
	}
	if !processGone(0) {
		t.Error("pid 0 (unknown) does not count as gone")
	}
	// A child that has exited but is not reaped yet is a zombie: gone.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for i := 0; i < 200 && !processGone(pid); i++ {
		exec.Command("sleep", "0.01").Run()
	}
	if !processGone(pid) {
		t.Errorf("exited child %d (a zombie until reaped) does not count as gone", pid)
	}
	cmd.Wait()
	if !processGone(pid) {
		t.Errorf("reaped child %d does not count as gone", pid)
	}
}
