package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// runCancel is `ochatd cancel [--workspace DIR] CONVERSATION_ID`: it cancels
// the conversation's running turn (ochat/chat/cancel), for example one left
// waiting on a permission by a client that went away, then waits until the
// turn has ended (an agent that ignores the cancel is stopped by the
// daemon after its cancel grace) and says how it ended. Exit 1 if the turn
// is still running after cancelWait.
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
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	id := pos[0]
	// Subscribe first, so the end of the turn cannot slip by unseen.
	var sub daemon.SubscribeResult
	if err := call(ctx, cl, quickCall, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: id}, &sub); err != nil {
		return fail(env, "cancel: %v", err)
	}
	var res daemon.CancelResult
	if err := call(ctx, cl, quickCall, daemon.MethodChatCancel, daemon.ConversationParams{ConversationID: id}, &res); err != nil {
		return fail(env, "cancel: %v", err)
	}
	if !res.Cancelled || sub.Running == nil {
		fmt.Fprintf(env.Stdout, "no turn is running in %s\n", id)
		return 0
	}
	how, err := waitTurnEnd(ctx, env, cl, id, *sub.Running)
	if err != nil {
		return fail(env, "cancel: %v", err)
	}
	fmt.Fprintf(env.Stdout, "cancelled the running turn of %s (it ended: %s)\n", id, how)
	return 0
}

// cancelWait bounds how long `ochatd cancel` waits for the turn to end: the
// daemon's default cancel grace (after which it abandons the prompt and
// stops the agent) and a margin.
const cancelWait = daemon.DefaultCancelGrace + 5*time.Second

// waitTurnEnd waits (at most cancelWait) until the running turn rt of
// conversation id has ended, from its terminal ochat/event or, should
// events be dropped (ochat/resync), from the conversation as stored; it
// prints "waiting for the agent to stop…" if that takes a moment. It
// returns how the turn ended: "cancelled", "completed (STOP_REASON)",
// "failed: MESSAGE".
func waitTurnEnd(ctx context.Context, env *Env, cl *daemon.Client, id string, rt daemon.RunningTurn) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	notes := make(chan daemon.Notification)
	go func() {
		defer close(notes)
		for {
			n, err := cl.Next(ctx)
			if err != nil {
				return
			}
			select {
			case notes <- n:
			case <-ctx.Done():
				return
			}
		}
	}()
	patience := time.NewTimer(500 * time.Millisecond)
	defer patience.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case n, ok := <-notes:
			if !ok {
				if ctx.Err() != nil {
					return "", fmt.Errorf("the turn of %s is still running after %s; the daemon stops its agent (see the daemon log)", id, cancelWait)
				}
				return "", errDaemonGone
			}
			switch n.Method {
			case daemon.NotifyEvent:
				var p daemon.EventParams
				if json.Unmarshal(n.Params, &p) == nil && p.TurnID == rt.TurnID && p.Event.Terminal() {
					return describeEnd(p.Event.Type == transcript.EvTurnFailed, p.Event.StopReason, p.Event.Message), nil
				}
			case daemon.NotifyResync:
				if how, done, err := storedEnd(ctx, cl, id, rt); err != nil || done {
					return how, err
				}
			}
		case <-check.C:
			if how, done, err := storedEnd(ctx, cl, id, rt); err != nil || done {
				return how, err
			}
		case <-patience.C:
			fmt.Fprintln(env.Stdout, "waiting for the agent to stop…")
		}
	}
}

// storedEnd re-subscribes to conversation id: done when rt no longer runs,
// with how it ended from its stored message.
func storedEnd(ctx context.Context, cl *daemon.Client, id string, rt daemon.RunningTurn) (string, bool, error) {
	var sub daemon.SubscribeResult
	if err := call(ctx, cl, quickCall, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: id}, &sub); err != nil {
		return "", false, err
	}
	if sub.Running != nil && sub.Running.TurnID == rt.TurnID {
		return "", false, nil
	}
	for _, m := range sub.Messages {
		if m.ID == rt.TurnID || m.ID == rt.AssistantMessageID {
			return describeEnd(m.Status == transcript.StatusFailed, m.StopReason, m.Error), true, nil
		}
	}
	return "ended", true, nil
}

// describeEnd names how a turn ended for `ochatd cancel`.
func describeEnd(failed bool, stopReason, msg string) string {
	switch {
	case failed:
		return "failed: " + oneLine(msg)
	case stopReason == "cancelled":
		return "cancelled"
	case stopReason == "":
		return "completed"
	}
	return "completed (" + stopReason + ")"
}

// runStop is `ochatd stop [--workspace DIR] [--force]`: the workspace
// daemon cancels its running turns, stops its agents and exits
// (ochat/daemon/stop). While a turn is running it refuses (exit 1, naming
// the conversations) unless --force. It never starts a daemon; with none
// running it says so and succeeds. A daemon started with another
// XDG_RUNTIME_DIR is found through its record (daemon.Dial); one recorded
// but unreachable is an error naming its pid and socket.
func runStop(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "stop", &c, false)
	force := fs.Bool("force", false, "stop even while turns are running (they are cancelled)")
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 0 {
		fmt.Fprintln(env.Stderr, "usage: ochatd stop [--workspace DIR] [--force]")
		return 2
	}
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	cl, err := dialRunning(ctx, env, ws)
	var ue *daemon.UnreachableError
	if errors.As(err, &ue) {
		return fail(env, "stop: %v", err)
	}
	if err != nil {
		fmt.Fprintf(env.Stdout, "no daemon is running for %s\n", ws)
		return 0
	}
	defer cl.Close()
	pid := cl.Init.Daemon.PID
	if !*force {
		var list daemon.ListConversationsResult
		if err := call(ctx, cl, quickCall, daemon.MethodConversationsList, nil, &list); err != nil {
			return fail(env, "stop: list conversations: %v", err)
		}
		if msg := runningTurns(list.Conversations); msg != "" {
			fmt.Fprintf(env.Stderr, "ochatd stop: %s: stop anyway with --force (the turns are cancelled)\n", msg)
			return 1
		}
	}
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
	// The connection closes a moment before the daemon has exited (and a
	// stopping daemon turns new clients away, so a refused connection proves
	// nothing): "stopped" means process pid is gone.
	for !processGone(pid) {
		select {
		case <-t.C:
			return fail(env, "stop: daemon %d is still running after %s", pid, stopTimeout)
		case <-ctx.Done():
			return fail(env, "stop: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Fprintf(env.Stdout, "stopped the daemon of %s (pid %d)\n", ws, pid)
	return 0
}

// runningTurns describes the running turns of convs for `ochatd stop`
// ("1 turn running in conversation ID (title)"), "" if none. The daemon does
// not tell which editors are attached, so only turns are counted.
func runningTurns(convs []daemon.ConversationInfo) string {
	var ids []string
	for _, c := range convs {
		if !c.Running {
			continue
		}
		id := c.ID
		if t := oneLine(c.Title); t != "" {
			id += " (" + t + ")"
		}
		ids = append(ids, id)
	}
	switch len(ids) {
	case 0:
		return ""
	case 1:
		return "1 turn running in conversation " + ids[0]
	}
	return fmt.Sprintf("%d turns running in conversations %s", len(ids), strings.Join(ids, ", "))
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
// Exit status: 0 when every check passed, 1 when any printed FAIL, 2 for
// a usage error.
func runDoctorDaemon(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "doctor", &c, false)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if extraArgs(env, "doctor", pos) {
		return 2
	}
	code := runDoctor(ctx, env, c)
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
	var set []string
	for _, k := range storeEnvKeys(d) {
		if v, ok := d.StoreEnv[k]; ok {
			set = append(set, k+"="+v)
		}
	}
	differ := storeEnvDiffer(env, d)
	fmt.Fprintf(w, "note  the daemon's store environment: %s\n", strings.Join(set, " "))
	if len(differ) > 0 {
		fmt.Fprintf(w, "note  this shell sets %s differently; the daemon keeps the environment it started with\n", strings.Join(differ, ", "))
	}
	fmt.Fprintln(w, "      restart it with `ochatd stop` to pick up a changed environment (the next command starts a new one)")
}

// storeEnvKeys are the variables the native stores are found by, then any
// other the daemon reported.
func storeEnvKeys(d daemon.DaemonInfo) []string {
	keys := []string{"HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_DATA_HOME", "OPENCODE_DATA_DIR", "PI_CODING_AGENT_SESSION_DIR", "PI_CODING_AGENT_DIR"}
	for _, k := range slices.Sorted(maps.Keys(d.StoreEnv)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// storeEnvDiffer names the native-store variables this shell sets
// differently from the daemon d (which resolved its stores from the
// environment it started with); nil for an older daemon that does not say.
func storeEnvDiffer(env *Env, d daemon.DaemonInfo) []string {
	if d.PID == 0 || env.Getenv == nil {
		return nil
	}
	var differ []string
	for _, k := range storeEnvKeys(d) {
		if env.Getenv(k) != d.StoreEnv[k] {
			differ = append(differ, k)
		}
	}
	return differ
}

// notFoundHint is what `show`/`export` add when a native id is not found
// and the daemon reads the native stores with another environment than
// this shell's; "" when they agree.
func notFoundHint(env *Env, d daemon.DaemonInfo) string {
	differ := storeEnvDiffer(env, d)
	if len(differ) == 0 {
		return ""
	}
	return fmt.Sprintf("; this shell sets %s differently from the daemon (pid %d), which looks for terminal sessions with the environment it started with: `ochatd stop` and the next command starts one with yours (see `ochatd doctor`)", strings.Join(differ, ", "), d.PID)
}

// processGone reports whether process pid has exited: it does not exist, or
// it is a zombie nobody has reaped yet (/proc/PID/stat state Z). pid 0 (a
// daemon that did not say) counts as gone.
func processGone(pid int) bool {
	if pid <= 0 {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH || os.IsNotExist(err)
	}
	// The state follows the command name, which is in parentheses and may
	// hold spaces: read after the last ')'.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}
