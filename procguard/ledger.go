package procguard

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ledger is the file beside the store that lists the process groups the
// daemon started and has not reaped yet, one "pgid starttime" per line
// (starttime: field 22 of /proc/<pid>/stat, clock ticks since boot).
type Ledger struct {
	path string
	mu   sync.Mutex
	live map[int]uint64
}

// OpenLedger returns the ledger at path; nothing is read or written yet.
func OpenLedger(path string) *Ledger {
	return &Ledger{path: path, live: map[int]uint64{}}
}

// Path returns the ledger's file.
func (l *Ledger) Path() string { return l.path }

// Add records the group led by pid.
func (l *Ledger) Add(pid int) error {
	st, err := StartTime(pid)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live[pid] = st
	return l.writeLocked()
}

// Remove forgets the group led by pid (it was reaped).
func (l *Ledger) Remove(pid int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.live[pid]; !ok {
		return nil
	}
	delete(l.live, pid)
	return l.writeLocked()
}

func (l *Ledger) writeLocked() error {
	var b bytes.Buffer
	for pid, st := range l.live {
		fmt.Fprintf(&b, "%d %d\n", pid, st)
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("agent process ledger: %w", err)
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("agent process ledger: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("agent process ledger: %w", err)
	}
	return nil
}

// Sweep kills, with SIGKILL, every process group a dead daemon recorded,
// unless its leader's pid now runs with another start time (a pid reused
// by another process is left alone), then empties the ledger. It returns the
// groups it killed. Call it before the daemon starts any agent.
func (l *Ledger) Sweep() ([]int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent process ledger: %w", err)
	}
	var killed []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		st, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil || pid <= 1 {
			continue
		}
		// A leader still running with another start time is a reused pid:
		// left alone. A dead leader's group id cannot be reused while any
		// member lives (the kernel keeps the pid while it names a group), so
		// whatever is left in that group is what the dead daemon started.
		if now, err := StartTime(pid); err == nil && now != st {
			continue
		}
		if err := syscall.Kill(-pid, syscall.SIGKILL); err == nil {
			killed = append(killed, pid)
		}
	}
	clear(l.live)
	return killed, l.writeLocked()
}

// StartTime returns the start time of pid (field 22 of /proc/<pid>/stat).
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("start time of pid %d: %w", pid, err)
	}
	// comm (field 2) may hold spaces and parentheses: count from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("start time of pid %d: malformed stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("start time of pid %d: malformed stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
