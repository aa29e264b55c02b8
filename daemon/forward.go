package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ochat-dev/ochat/history"
)

// DialOptions say how to reach (and if need be start) a workspace's daemon.
type DialOptions struct {
	// Workspace is the absolute workspace root (see ResolveWorkspace).
	Workspace string
	// Socket overrides SocketPath(Workspace).
	Socket string
	// AutoStart starts `Exe serve --workspace W ServeArgs…` detached when no
	// daemon answers.
	AutoStart bool
	// Exe is the ochatd binary to start; "" means os.Executable().
	Exe string
	// ServeArgs are extra `serve` flags (for example --idle 30s).
	ServeArgs []string
	// LogPath receives the started daemon's stdout and stderr; "" means
	// daemon.log beside the workspace store (history.DefaultPath).
	LogPath string
	// Timeout bounds the retries after a start (default 5 s).
	Timeout time.Duration
}

// Dial connects to the workspace daemon's socket. When no one answers there
// (and Socket is not set) it looks for the daemon's Record beside the
// workspace store: a live daemon on another socket (started with another
// XDG_RUNTIME_DIR or TMPDIR) is dialled there if that socket is this
// user's, else Dial returns an *UnreachableError naming its pid, socket and
// the variables that differ. With AutoStart, when no daemon is found it
// starts one (new session, stdio to LogPath) and retries with backoff until
// Timeout (the gopls -remote=auto pattern); if the started daemon exits
// first, Dial returns at once with its exit status and output — unless it
// exited with ExitStoreLocked, when it keeps looking for the daemon holding
// the store.
func Dial(ctx context.Context, o DialOptions) (net.Conn, error) {
	path := o.Socket
	if path == "" {
		p, err := SocketPath(o.Workspace)
		if err != nil {
			return nil, err
		}
		path = p
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		return c, nil
	}
	if o.Socket == "" {
		if c, found, derr := discover(ctx, o.Workspace, path); found {
			return c, derr
		}
	}
	if !o.AutoStart {
		return nil, fmt.Errorf("dial daemon at %s: %w (start it with `ochatd serve --workspace %s`)", path, err, o.Workspace)
	}
	exited, pid, logPath, logOff, serr := startDaemon(o)
	if serr != nil {
		return nil, serr
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	var exitErr error
	for {
		c, err = d.DialContext(ctx, "unix", path)
		if err == nil {
			// Another client's daemon came up first: ours is waiting for
			// the store's lock and would take over the workspace the moment
			// that one stops (say after `ochatd stop`). Nobody asked for a
			// second daemon: stop it.
			if peer, perr := peerPID(c); perr == nil && peer != pid && exited != nil {
				syscall.Kill(pid, syscall.SIGTERM)
			}
			return c, nil
		}
		select {
		case exitErr = <-exited:
			exited = nil // the daemon we started is gone
			if !storeLocked(exitErr) {
				// It failed on its own (a damaged store, a bad flag): say
				// so now rather than at the deadline.
				if c, err := d.DialContext(ctx, "unix", path); err == nil {
					return c, nil
				}
				msg := fmt.Sprintf("the daemon started for %s exited before answering (%v)", o.Workspace, exitErr)
				if out := logSince(logPath, logOff, 4096); out != "" {
					msg += "; its output (" + logPath + "):\n" + out
				}
				return nil, errors.New(msg)
			}
			// Another process holds the store: its daemon may be coming
			// up on this socket, or be recorded on another one.
		default:
		}
		if exited == nil && o.Socket == "" {
			if c, found, derr := discover(ctx, o.Workspace, path); found {
				return c, derr
			}
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("daemon for %s did not answer on %s within %v", o.Workspace, path, timeout)
			if storeLocked(exitErr) {
				msg += "; another process holds the workspace's store and does not answer on this socket: an ochatd started with another XDG_RUNTIME_DIR or TMPDIR? (`ochatd doctor` names the store; stop that process)"
			} else if exitErr != nil {
				msg += fmt.Sprintf(" (it exited: %v)", exitErr)
			}
			if tail := logSince(logPath, 0, 2048); tail != "" {
				msg += "; daemon log " + logPath + ":\n" + tail
			}
			return nil, errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		if wait < 200*time.Millisecond {
			wait *= 2
		}
	}
}

// storeLocked reports whether a started daemon's exit error is
// ExitStoreLocked.
func storeLocked(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == ExitStoreLocked
}

// startDaemon starts `ochatd serve` detached and returns a channel that
// receives its exit (it is reaped in the background), its pid, and its log
// with the offset where its output starts.
func startDaemon(o DialOptions) (exited <-chan error, pid int, logPath string, logOff int64, err error) {
	exe := o.Exe
	if exe == "" {
		e, err := os.Executable()
		if err != nil {
			return nil, 0, "", 0, fmt.Errorf("start daemon: find ochatd: %w", err)
		}
		exe = e
	}
	logPath = o.LogPath
	if logPath == "" {
		db, err := history.DefaultPath(o.Workspace)
		if err != nil {
			return nil, 0, "", 0, fmt.Errorf("start daemon: %w", err)
		}
		logPath = filepath.Join(filepath.Dir(db), "daemon.log")
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, 0, "", 0, fmt.Errorf("start daemon: %w", err)
	}
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, "", 0, fmt.Errorf("start daemon: open log: %w", err)
	}
	defer lf.Close()
	if fi, err := lf.Stat(); err == nil {
		logOff = fi.Size()
	}
	args := append([]string{"serve", "--workspace", o.Workspace}, o.ServeArgs...)
	cmd := exec.Command(exe, args...)
	cmd.Dir = o.Workspace
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, 0, logPath, 0, fmt.Errorf("start daemon %s: %w", exe, err)
	}
	ch := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		ch <- err
	}()
	return ch, cmd.Process.Pid, logPath, logOff, nil
}

// logSince is what was appended to the log at path from offset off, at
// most its last n bytes.
func logSince(path string, off, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= off {
		return ""
	}
	if fi.Size()-off > n {
		off = fi.Size() - n
	}
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Forward copies in → conn and conn → out until the daemon side closes; when
// in ends, it half-closes conn so the daemon sees the client go. It is the
// body of `ochatd connect`.
func Forward(ctx context.Context, conn net.Conn, in io.Reader, out io.Writer) error {
	down := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, conn)
		down <- err
	}()
	go func() {
		io.Copy(conn, in)
		if uc, ok := conn.(*net.UnixConn); ok {
			uc.CloseWrite()
		} else {
			conn.Close()
		}
	}()
	select {
	case err := <-down:
		conn.Close()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("forward: %w", err)
		}
		return nil
	case <-ctx.Done():
		conn.Close()
		return ctx.Err()
	}
}
