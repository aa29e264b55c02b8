package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCancelStopDoctor: `ochatd cancel` ends a running turn from another
// process, `ochatd doctor` names the running daemon and how to restart it,
// and `ochatd stop` makes it exit.
func TestCancelStopDoctor(t *testing.T) {
	e := newCLIEnv(t)
	ws := []string{"--workspace", e.ws}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	chat := exec.CommandContext(ctx, ochatdBin, append([]string{"chat", "--agent", "test"}, append(ws, "SLOW 2000")...)...)
	chat.Env, chat.Dir = e.env, e.ws
	var chatOut strings.Builder
	chat.Stdout, chat.Stderr = &chatOut, &chatOut
	if err := chat.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	for range 200 {
		out, _, _ := e.run("", append([]string{"conversations", "--json"}, ws...)...)
		var convs []struct {
			ID      string `json:"id"`
			Running bool   `json:"running"`
		}
		if json.Unmarshal([]byte(out), &convs) == nil && len(convs) == 1 && convs[0].Running {
			id = convs[0].ID
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("the chat turn never showed as running")
	}
	out, errs, code := e.run("", append([]string{"cancel"}, append(ws, id)...)...)
	if code != 0 || !strings.Contains(out, "cancelled the running turn") {
		t.Fatalf("cancel: exit %d\n%s%s", code, out, errs)
	}
	chat.Wait()
	if !strings.Contains(chatOut.String(), "cancelled") {
		t.Fatalf("chat output after cancel:\n%s", chatOut.String())
	}
	out, _, code = e.run("", append([]string{"cancel"}, append(ws, id)...)...)
	if code != 0 || !strings.Contains(out, "no turn is running") {
		t.Fatalf("second cancel: exit %d\n%s", code, out)
	}

	out, _, _ = e.run("", append([]string{"doctor"}, ws...)...)
	if !strings.Contains(out, "daemon pid ") || !strings.Contains(out, "ochatd stop") || !strings.Contains(out, "XDG_DATA_HOME") && !strings.Contains(out, "HOME=") {
		t.Fatalf("doctor does not describe the daemon:\n%s", out)
	}

	out, errs, code = e.run("", append([]string{"stop"}, ws...)...)
	if code != 0 || !strings.Contains(out, "stopped the daemon") {
		t.Fatalf("stop: exit %d\n%s%s", code, out, errs)
	}
	socks, _ := filepath.Glob(filepath.Join(e.root, "run", "ochat", "*.sock"))
	for range 100 {
		if len(socks) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
		socks, _ = filepath.Glob(filepath.Join(e.root, "run", "ochat", "*.sock"))
	}
	if len(socks) != 0 {
		t.Fatalf("daemon socket still there after stop: %v", socks)
	}
	out, _, code = e.run("", append([]string{"stop"}, ws...)...)
	if code != 0 || !strings.Contains(out, "no daemon is running") {
		t.Fatalf("stop with no daemon: exit %d\n%s", code, out)
	}
}
