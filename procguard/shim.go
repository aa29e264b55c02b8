package procguard

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// ShimArg is the hidden ochatd subcommand that runs RunShim.
const ShimArg = "__agent-shim"

// shimPoll is how often the shim checks that its parent still lives (the
// backstop for a Pdeathsig lost because the parent's forking thread ended).
const shimPoll = 250 * time.Millisecond

// exitRecheck is how long the shim waits after its child ended before it
// checks its parent one last time.
const exitRecheck = 100 * time.Millisecond

// Command returns the argv that runs command args under the shim of
// executable exe; with exe "" it is command args unchanged.
func Command(exe, command string, args []string) (string, []string) {
	if exe == "" {
		return command, args
	}
	return exe, append([]string{ShimArg, "--", command}, args...)
}

// RunShim runs args ("--", command, its args) as a child sharing the shim's
// stdio, cwd, environment and process group, and returns its exit status
// (a signal death is re-raised on the shim). When the shim's parent dies
// (SIGTERM from Pdeathsig, or getppid changing) it SIGKILLs its whole
// process group: the command and everything it started.
func RunShim(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "ochatd "+ShimArg+": no command")
		return 2
	}
	ppid := os.Getppid()
	_ = setPdeathsig(syscall.SIGTERM)
	if os.Getppid() != ppid || ppid == 1 { // the parent died before the line above
		killGroup()
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "ochatd %s: %v\n", ShimArg, err)
		return 127
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	tick := time.NewTicker(shimPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-waited:
			// The child may have ended because the daemon died (its stdin
			// closed) a moment before the shim was reparented: look again
			// shortly, so its own children are not left behind.
			time.Sleep(exitRecheck)
			if os.Getppid() != ppid {
				killGroup()
			}
			return exitStatus(err)
		case <-sigs:
			// A SIGTERM to the group (the daemon's Close) reaches the child
			// too; only a dead parent makes the shim end the group.
			if os.Getppid() != ppid {
				killGroup()
			}
		case <-tick.C:
			if os.Getppid() != ppid {
				killGroup()
			}
		}
	}
}

// killGroup SIGKILLs the shim's process group, the shim included.
func killGroup() {
	_ = syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
	os.Exit(137)
}

// setPdeathsig asks for sig when the parent (its forking thread) ends.
func setPdeathsig(sig syscall.Signal) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(sig), 0)
	if e != 0 {
		return e
	}
	return nil
}

// exitStatus maps the child's end to the shim's: its exit code, or its
// signal raised on the shim so the daemon sees "signal: killed" as before.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		time.Sleep(time.Second)
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
