package procguard

import (
	"os/exec"
	"runtime"
	"syscall"
)

// SpawnLocked starts cmd in its own process group with Pdeathsig sig, from
// a goroutine locked to its OS thread that keeps the thread until done is
// closed (the process was reaped): Pdeathsig fires when the forking thread
// ends, so that thread must outlive the child.
func SpawnLocked(cmd *exec.Cmd, sig syscall.Signal, done <-chan struct{}) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = sig
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			<-done
		}
	}()
	return <-started
}
