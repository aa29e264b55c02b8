package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ochat-dev/ochat/daemon"
)

// runCancel is `ochatd cancel [--workspace DIR] CONVERSATION_ID`: it cancels
// the conversation's running turn (ochat/chat/cancel), for example one left
// waiting on a permission by a client that went away.
func runCancel(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "cancel", &c, false)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd cancel [--workspace DIR] CONVERSATION_ID")
		return 2
	}
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	cl, err := dial(ctx, env, ws)
	if err != nil {
		return fail(env, "%v", err)
	}
	defer cl.Close()
	var res daemon.CancelResult
	if err := call(ctx, cl, quickCall, daemon.MethodChatCancel, daemon.ConversationParams{ConversationID: pos[0]}, &res); err != nil {
		return fail(env, "cancel: %v", err)
	}
	if res.Cancelled {
		fmt.Fprintf(env.Stdout, "cancelled the running turn of %s\n", pos[0])
	} else {
		fmt.Fprintf(env.Stdout, "no turn is running in %s\n", pos[0])
	}
	return 0
}

// runStop is `ochatd stop [--workspace DIR]`: the workspace daemon cancels
// its running turns, stops its agents and exits (ochat/daemon/stop). It
// never starts a daemon; with none running it says so and succeeds.
func runStop(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "stop", &c, false)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 0 {
		fmt.Fprintln(env.Stderr, "usage: ochatd stop [--workspace DIR]")
		return 2
	}
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	cl, err := dialRunning(ctx, env, ws)
	if err != nil {
		fmt.Fprintf(env.Stdout, "no daemon is running for %s\n", ws)
		return 0
	}
	defer cl.Close()
	pid := cl.Init.Daemon.PID
	// The daemon may exit before its answer reaches us: a closed
	// connection is success too.
	if err := call(ctx, cl, stopTimeout, daemon.MethodDaemonStop, nil, nil); err != nil && !errors.Is(err, errDaemonGone) {
		return fail(env, "stop: %v", err)
	}
	// Wait for the daemon to close the connection (it exits), at most
	// stopTimeout; its turns get the cancel grace to end.
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-cl.Done():
	case <-t.C:
		return fail(env, "stop: daemon %d is still running after %s", pid, stopTimeout)
	case <-ctx.Done():
		return fail(env, "stop: %v", ctx.Err())
	}
	// The connection closes a moment before the daemon stops listening:
	// "stopped" means no daemon of this pid answers any more.
	for gone := false; !gone; {
		other, err := dialRunning(ctx, env, ws)
		switch {
		case err != nil:
			gone = true
		case other.Init.Daemon.PID != pid: // another client already started a new one
			other.Close()
			gone = true
		default:
			other.Close()
			select {
			case <-t.C:
				return fail(env, "stop: daemon %d is still running after %s", pid, stopTimeout)
			case <-ctx.Done():
				return fail(env, "stop: %v", ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	fmt.Fprintf(env.Stdout, "stopped the daemon of %s (pid %d)\n", ws, pid)
	return 0
}

// stopTimeout bounds `ochatd stop`'s request and its wait for the daemon to
// exit.
const stopTimeout = 30 * time.Second

// dialRunning connects to the workspace daemon without starting one.
func dialRunning(ctx context.Context, env *Env, ws string) (*daemon.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	nc, err := daemon.Dial(dctx, daemon.DialOptions{Workspace: ws})
	if err != nil {
		return nil, err
	}
	cl, err := daemon.NewClient(dctx, nc, "ochatd-cli", env.Version)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to daemon: %w", err)
	}
	return cl, nil
}

// runDoctorDaemon is `ochatd doctor`: runDoctor's checks, then the running
// daemon's pid, start time and the environment it resolved the native
// stores from, with the variables that differ from this shell's.
func runDoctorDaemon(ctx context.Context, env *Env, args []string) int {
	code := runDoctor(ctx, env, args)
	if code == 2 {
		return code
	}
	var c common
	fs := newFlags(env, "doctor", &c, false)
	if _, err := parse(fs, args); err != nil {
		return code
	}
	ws, err := c.resolve()
	if err != nil {
		return code
	}
	cl, err := dialRunning(ctx, env, ws)
	if err != nil {
		return code
	}
	defer cl.Close()
	printDaemonInfo(env, cl.Init.Daemon)
	return code
}

// printDaemonInfo prints the daemon's pid, start time and store
// environment, and the variables this shell sets differently.
func printDaemonInfo(env *Env, d daemon.DaemonInfo) {
	w := env.Stdout
	if d.PID == 0 {
		fmt.Fprintln(w, "note  the running daemon is older than this ochatd: restart it with `ochatd stop`")
		return
	}
	fmt.Fprintf(w, "note  daemon pid %d, started %s\n", d.PID, time.UnixMilli(d.StartedAt).Local().Format("2006-01-02 15:04:05"))
	keys := []string{"HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_DATA_HOME", "OPENCODE_DATA_DIR", "PI_CODING_AGENT_SESSION_DIR", "PI_CODING_AGENT_DIR"}
	for k := range d.StoreEnv {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var set, differ []string
	for _, k := range keys {
		v, ok := d.StoreEnv[k]
		if ok {
			set = append(set, k+"="+v)
		}
		if here := env.Getenv(k); here != v {
			differ = append(differ, k)
		}
	}
	fmt.Fprintf(w, "note  the daemon's store environment: %s\n", strings.Join(set, " "))
	if len(differ) > 0 {
		fmt.Fprintf(w, "note  this shell sets %s differently; the daemon keeps the environment it started with\n", strings.Join(differ, ", "))
	}
	fmt.Fprintln(w, "      restart it with `ochatd stop` to pick up a changed environment (the next command starts a new one)")
}
