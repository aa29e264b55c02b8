package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/internal/gcpolicy"
	"github.com/ochat-dev/ochat/procguard"
)

// runServe is `ochatd serve [--workspace DIR] [--idle 10m] [--log-level L]`:
// the daemon in the foreground, logging to stderr.
func runServe(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "serve", &c, false)
	idle := fs.Duration("idle", 10*time.Minute, "exit after this long with no client and no running turn (0: never)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	var to daemon.Options
	fs.DurationVar(&to.AgentInitTimeout, "agent-init-timeout", 60*time.Second, "how long an agent may take to start and answer initialize")
	fs.DurationVar(&to.SessionTimeout, "session-timeout", daemon.DefaultSessionTimeout, "how long an agent may take to answer session/new or session/load")
	fs.DurationVar(&to.TurnIdleTimeout, "turn-idle-timeout", 0, "cancel a turn whose agent has sent nothing for this long (0: never)")
	fs.DurationVar(&to.CancelGrace, "cancel-grace", daemon.DefaultCancelGrace, "how long a cancelled turn may take to end before the agent is stopped")
	fs.DurationVar(&to.AgentIdleTimeout, "agent-idle", daemon.DefaultAgentIdleTimeout, "stop an agent process that has served no turn for this long (negative: never)")
	fs.DurationVar(&to.PermissionTimeout, "permission-timeout", daemon.DefaultPermissionTimeout, "cancel a turn whose permission request is pending this long with no client connected (negative: never)")
	fs.BoolVar(&to.NoCheckpoints, "no-checkpoints", false, "take no code checkpoints before and after turns (docs/checkpoints.md)")
	fs.IntVar(&to.MaxAgents, "max-agents", daemon.DefaultMaxAgents, "most live agent processes; one more stops the least recently used idle one (negative: no cap)")
	if _, err := parse(fs, args); err != nil {
		return exitFlag(err)
	}
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	gcpolicy.Apply(env.Getenv)
	log, err := newLogger(env.Stderr, *level)
	if err != nil {
		return fail(env, "%v", err)
	}
	to.IdleTimeout = *idle
	if err := serve(ctx, env, ws, to, log); err != nil {
		log.Error("serve", "workspace", ws, "err", err)
		fail(env, "%v", err)
		if errors.Is(err, history.ErrLocked) {
			return daemon.ExitStoreLocked
		}
		return 1
	}
	return 0
}

// serve runs the daemon for ws with the timeouts of o until ctx ends, a
// signal arrives or it is idle.
func serve(ctx context.Context, env *Env, ws string, o daemon.Options, log *slog.Logger) error {
	dbPath, err := history.DefaultPath(ws)
	if err != nil {
		return err
	}
	st, err := history.Open(dbPath)
	if errors.Is(err, history.ErrLocked) {
		who := "another ochatd"
		if rp, rerr := daemon.RecordPath(ws); rerr == nil {
			if r, rerr := daemon.ReadRecord(rp); rerr == nil {
				who = fmt.Sprintf("ochatd pid %d (socket %s)", r.PID, r.Socket)
			}
		}
		return fmt.Errorf("%s already serves %s (store %s: %w): use `ochatd connect`, or `ochatd stop` first", who, ws, dbPath, history.ErrLocked)
	}
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	if n, err := st.MarkInterrupted(time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("mark interrupted turns: %w", err)
	} else if n > 0 {
		log.Info("marked turns interrupted by an earlier daemon", "count", n)
	}
	// Before serving no prompt is being assembled, so an unreferenced blob
	// is one an earlier daemon stored for a send that never landed.
	if n, err := st.PruneBlobs(); err != nil {
		log.Warn("prune unreferenced attachment blobs", "err", err)
	} else if n > 0 {
		log.Info("pruned attachment blobs no message refers to", "count", n)
	}
	sock, err := daemon.SocketPath(ws)
	if err != nil {
		return err
	}
	ln, err := daemon.Listen(sock)
	if err != nil {
		return err
	}
	// The record lets a client whose socket path differs (another
	// XDG_RUNTIME_DIR or TMPDIR) find this daemon; written once the socket
	// answers, removed on the way out.
	if rp, err := daemon.RecordPath(ws); err != nil {
		log.Warn("daemon record", "err", err)
	} else if err := daemon.WriteRecord(rp, daemon.NewRecord(sock)); err != nil {
		log.Warn("daemon record", "err", err)
	} else {
		defer daemon.RemoveRecord(rp, os.Getpid())
	}
	// Agents a dead daemon left (its shims killed too) are swept before
	// any new one starts.
	ledger := procguard.OpenLedger(filepath.Join(filepath.Dir(dbPath), "agents.pids"))
	if killed, err := ledger.Sweep(); err != nil {
		log.Warn("sweep agent processes of an earlier daemon", "err", err)
	} else if len(killed) > 0 {
		log.Info("killed agent process groups an earlier daemon left", "groups", killed)
	}
	o.Workspace, o.Store, o.Logger, o.Version = ws, st, log, env.Version
	o.AgentShim, o.ProcLedger = env.Shim, ledger
	srv := daemon.New(o)
	srv.StartNative()
	// The first SIGTERM/SIGINT stops gracefully (turns cancelled, clients
	// told how they ended); a second one stops at once.
	ctx, hardStop := context.WithCancel(ctx)
	defer hardStop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case sig := <-sigs:
			log.Info("signal: stopping", "signal", sig.String())
			srv.Shutdown()
		case <-ctx.Done():
			return
		}
		select {
		case <-sigs:
			hardStop()
		case <-ctx.Done():
		}
	}()
	log.Info("serving", "workspace", ws, "socket", sock, "store", dbPath, "pid", os.Getpid(), "idle", o.IdleTimeout)
	serr := srv.Serve(ctx, ln)
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(cctx); err != nil {
		log.Warn("close", "err", err)
	}
	log.Info("stopped", "workspace", ws)
	return serr
}
