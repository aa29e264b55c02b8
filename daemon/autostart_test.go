package daemon

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDialStopsRedundantDaemon: when the daemon Dial started is not the one
// that answers (another client's came up first), Dial stops its own, which
// would otherwise wait for the store's lock and take over the workspace the
// moment the answering daemon stops.
func TestDialStopsRedundantDaemon(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	pidfile := filepath.Join(dir, "started.pid")
	// A stand-in for `ochatd serve` that records its pid (whole, by rename:
	// the listener below starts when the file appears) and waits, as a
	// daemon blocked on the store's lock does.
	exe := filepath.Join(dir, "fake-ochatd")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho $$ > "+pidfile+".tmp && mv "+pidfile+".tmp "+pidfile+"\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The other client's daemon: this process listens once the stand-in runs.
	go func() {
		for i := 0; i < 500; i++ {
			if _, err := os.Stat(pidfile); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		ln, err := net.Listen("unix", sock)
		if err != nil {
			return
		}
		t.Cleanup(func() { ln.Close() })
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialOptions{Workspace: dir, Socket: sock, AutoStart: true, Exe: exe, LogPath: filepath.Join(dir, "log"), Timeout: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ { // poll, not a timing assertion
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
			return
		}
		if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && len(st) > 0 {
			if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) && st[i+2] == 'Z' {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the daemon Dial started (pid %d) is still running though another one answered", pid)
}
