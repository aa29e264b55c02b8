package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrAlreadyRunning is returned by Listen when a daemon already answers on
// the workspace's socket.
var ErrAlreadyRunning = errors.New("a daemon is already running for this workspace")

// ResolveWorkspace returns the workspace root for dir: the nearest enclosing
// directory with a .git entry, else dir itself; absolute, symlinks resolved.
func ResolveWorkspace(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve workspace %s: %w", dir, err)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("resolve workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("resolve workspace: %s is not a directory", abs)
	}
	for d := abs; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return abs, nil
		}
		d = parent
	}
}

// SocketDir returns (creating it, mode 0700) the per-user directory of
// daemon sockets: $XDG_RUNTIME_DIR/ochat, else os.TempDir()/ochat-<uid>. It
// refuses a directory that another user owns or that others can access.
func SocketDir() (string, error) {
	var dir string
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		dir = filepath.Join(rt, "ochat")
	} else {
		dir = filepath.Join(os.TempDir(), "ochat-"+strconv.Itoa(os.Getuid()))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("socket dir: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("socket dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return "", fmt.Errorf("socket dir %s is not a directory", dir)
	}
	if int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("socket dir %s is owned by uid %d, not by you (uid %d): remove it or set XDG_RUNTIME_DIR", dir, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", fmt.Errorf("socket dir %s has mode %v: %w", dir, fi.Mode().Perm(), err)
		}
	}
	return dir, nil
}

// SocketPath is the unix socket of the workspace's daemon:
// SocketDir()/<first 16 hex digits of sha256(abs workspace)>.sock.
func SocketPath(workspace string) (string, error) {
	dir, err := SocketDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, WorkspaceHash(workspace)+".sock"), nil
}

// WorkspaceHash is the first 16 hex digits of sha256 of the workspace path.
func WorkspaceHash(workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	return hex.EncodeToString(sum[:])[:16]
}

// Listen listens on the unix socket path with mode 0600. A socket file no one
// answers on is stale and removed; one that answers gives ErrAlreadyRunning.
func Listen(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		d := net.Dialer{Timeout: 500 * time.Millisecond}
		if c, err := d.DialContext(context.Background(), "unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: %w", path, ErrAlreadyRunning)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	return ln, nil
}

// PeerUID returns the uid of the process at the other end of a unix socket
// connection (SO_PEERCRED). Non-unix connections report -1 and an error.
func PeerUID(c net.Conn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return -1, fmt.Errorf("peer uid: %w", err)
	}
	return int(cred.Uid), nil
}

// peerPID returns the pid of the process at the other end of a unix socket
// connection (SO_PEERCRED: the process that created the listening socket).
func peerPID(c net.Conn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return -1, fmt.Errorf("peer pid: %w", err)
	}
	return int(cred.Pid), nil
}

func peerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("not a unix socket (%T)", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return cred, nil
}

// AbsWorkspace returns dir as an absolute path with symlinks resolved (an
// explicit --workspace: no git-root search).
func AbsWorkspace(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", dir, err)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workspace %s is not a directory", abs)
	}
	return abs, nil
}
