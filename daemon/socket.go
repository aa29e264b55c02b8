package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ochat-dev/ochat/history"
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

// MaxSocketPath is the longest unix socket path Linux binds, in bytes:
// sockaddr_un.sun_path is 108 bytes including the terminating NUL (unix(7)).
const MaxSocketPath = 107

// ErrSocketPathTooLong is wrapped by SocketPath and Listen for a socket
// path longer than MaxSocketPath.
var ErrSocketPathTooLong = errors.New("socket path too long")

// socketDirPath is the per-user socket directory (not created):
// $XDG_RUNTIME_DIR/ochat, else os.TempDir()/ochat-<uid>.
func socketDirPath() string {
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		return filepath.Join(rt, "ochat")
	}
	return filepath.Join(os.TempDir(), "ochat-"+strconv.Itoa(os.Getuid()))
}

// checkSocketPathLen refuses a socket path the kernel would not bind,
// saying which variable to shorten.
func checkSocketPathLen(path string) error {
	if len(path) <= MaxSocketPath {
		return nil
	}
	fix := "set a shorter XDG_RUNTIME_DIR"
	if os.Getenv("XDG_RUNTIME_DIR") == "" {
		fix = "set XDG_RUNTIME_DIR to a short directory only you can access (TMPDIR is used without it)"
	}
	return fmt.Errorf("%w: %s is %d bytes, more than the %d a unix socket path may have: %s", ErrSocketPathTooLong, path, len(path), MaxSocketPath, fix)
}

// SocketDir returns (creating it, mode 0700) the per-user directory of
// daemon sockets: $XDG_RUNTIME_DIR/ochat, else os.TempDir()/ochat-<uid>. It
// refuses a directory that another user owns or that others can access.
func SocketDir() (string, error) {
	dir := socketDirPath()
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
// SocketDir()/<first 16 hex digits of sha256(abs workspace)>.sock. A path
// longer than MaxSocketPath is an error wrapping ErrSocketPathTooLong that
// says to set a shorter XDG_RUNTIME_DIR (checked before the directory is
// created).
func SocketPath(workspace string) (string, error) {
	path := filepath.Join(socketDirPath(), WorkspaceHash(workspace)+".sock")
	if err := checkSocketPathLen(path); err != nil {
		return "", err
	}
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
	if err := checkSocketPathLen(path); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
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

// ExitStoreLocked is `ochatd serve`'s exit status when another process
// holds the workspace's store (history.ErrLocked): a client that started it
// keeps looking for the daemon that holds it rather than failing at once.
const ExitStoreLocked = 3

// RecordFile is the name of the daemon record beside the workspace's store.
const RecordFile = "daemon.json"

// Record is what a serving daemon writes to RecordPath(workspace) once it
// listens (and removes when it exits cleanly), so that a client whose own
// socket path differs (another XDG_RUNTIME_DIR or TMPDIR) still finds it —
// the store path does not depend on those variables. JSON:
// {"pid":123,"socket":"/run/user/1000/ochat/ab12….sock","env":{"XDG_RUNTIME_DIR":"/run/user/1000","TMPDIR":""},"startedAt":1764500000000}.
type Record struct {
	// PID is the daemon's process id.
	PID int `json:"pid"`
	// Socket is the absolute path of the socket it listens on.
	Socket string `json:"socket"`
	// Env holds the daemon's values of the variables its socket path
	// depends on (XDG_RUNTIME_DIR, TMPDIR), "" for unset.
	Env map[string]string `json:"env"`
	// StartedAt is when it started listening, Unix ms.
	StartedAt int64 `json:"startedAt"`
}

// socketEnv are the variables SocketPath depends on.
func socketEnv() []string { return []string{"XDG_RUNTIME_DIR", "TMPDIR"} }

// NewRecord is this process's record for a daemon listening on socket.
func NewRecord(socket string) Record {
	r := Record{PID: os.Getpid(), Socket: socket, Env: map[string]string{}, StartedAt: time.Now().UnixMilli()}
	for _, k := range socketEnv() {
		r.Env[k] = os.Getenv(k)
	}
	return r
}

// RecordPath is the daemon record of workspace: RecordFile in the
// directory of its store (history.DefaultPath).
func RecordPath(workspace string) (string, error) {
	db, err := history.DefaultPath(workspace)
	if err != nil {
		return "", fmt.Errorf("daemon record: %w", err)
	}
	return filepath.Join(filepath.Dir(db), RecordFile), nil
}

// WriteRecord writes r to path atomically (a temporary file in the same
// directory, mode 0600, renamed over path).
func WriteRecord(path string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("write daemon record: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".daemon-*.json")
	if err != nil {
		return fmt.Errorf("write daemon record: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("write daemon record %s: %w", path, werr)
	}
	return nil
}

// ReadRecord reads the daemon record at path. A record file that is not
// ours (owned by another uid) or not JSON is an error; a missing one wraps
// os.ErrNotExist.
func ReadRecord(path string) (Record, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return Record{}, fmt.Errorf("read daemon record: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || !fi.Mode().IsRegular() || int(st.Uid) != os.Getuid() {
		return Record{}, fmt.Errorf("read daemon record %s: not a regular file of yours", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Record{}, fmt.Errorf("read daemon record: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("read daemon record %s: %w", path, err)
	}
	if r.PID <= 0 || !filepath.IsAbs(r.Socket) {
		return Record{}, fmt.Errorf("read daemon record %s: no pid or socket", path)
	}
	return r, nil
}

// RemoveRecord removes the record at path if it is pid's (a daemon that
// took over since has written its own).
func RemoveRecord(path string, pid int) error {
	r, err := ReadRecord(path)
	if err != nil || r.PID != pid {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove daemon record: %w", err)
	}
	return nil
}

// processAlive reports whether pid is a live process of this user (a
// zombie counts as gone).
func processAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// servesLike reports whether process pid was started as a daemon (an
// argument "serve", as `ochatd serve` and auto-start run it), so that a
// record whose pid was reused by an unrelated process is ignored rather
// than reported. Without /proc it cannot tell and says yes.
func servesLike(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return true
	}
	return slices.Contains(strings.Split(string(b), "\x00"), "serve")
}

// checkOwnSocket checks that path is a unix socket owned by this user in a
// directory owned by this user that others cannot write: the same trust
// SocketDir gives the socket directory.
func checkOwnSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Type() != os.ModeSocket || !ok {
		return fmt.Errorf("%s is not a socket", path)
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("socket %s is owned by uid %d, not by you (uid %d)", path, st.Uid, os.Getuid())
	}
	dfi, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		return err
	}
	dst, ok := dfi.Sys().(*syscall.Stat_t)
	if !dfi.IsDir() || !ok || int(dst.Uid) != os.Getuid() || dfi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("socket directory %s is not a directory only you can write", filepath.Dir(path))
	}
	return nil
}
