package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
)

// TestCLIRevertApply reverts and re-applies the file a recorded Claude Code
// session created (its Write of hello.txt), opened as a conversation.
func TestCLIRevertApply(t *testing.T) {
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := daemon.Dial(ctx, daemon.DialOptions{Workspace: d.ws})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := daemon.NewClient(ctx, nc, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var open daemon.OpenSessionResult
	if err := cl.Call(ctx, daemon.MethodSessionsOpen, daemon.SessionRefParams{SessionID: fixtureClaudeID}, &open); err != nil {
		t.Fatal(err)
	}
	conv := open.ConversationID
	hello := filepath.Join(d.ws, "hello.txt")
	const content = "hello from fake llm\n"
	if err := os.WriteFile(hello, []byte(content), 0o644); err != nil { // as Claude Code left it
		t.Fatal(err)
	}

	code, out, errs := d.run(t, "", "revert", conv)
	if code != 0 || strings.TrimSpace(out) != "reverted hello.txt" {
		t.Fatalf("revert: %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(hello); !os.IsNotExist(err) {
		t.Fatalf("hello.txt after revert: %v", err)
	}
	if code, out, _ = d.run(t, "", "revert", conv); code != 0 || strings.TrimSpace(out) != "already reverted hello.txt" {
		t.Fatalf("second revert: %d %q", code, out)
	}
	code, out, errs = d.run(t, "", "apply", "--json", conv)
	var res []FileChangeJSON
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 || res[0].Result == nil || !res[0].Result.Applied || res[0].Result.Via != daemon.ViaDisk {
		t.Fatalf("apply --json: %d %s %s", code, out, errs)
	}
	if b, err := os.ReadFile(hello); err != nil || string(b) != content {
		t.Fatalf("hello.txt after apply: %q %v", b, err)
	}

	// Changed by hand: a conflict, unless --force.
	if err := os.WriteFile(hello, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs = d.run(t, "", "revert", conv); code != 1 || !strings.Contains(errs, "changed since the agent's edit; open the diff in VS Code or Neovim to overwrite it there (undoable), or edit the file by hand") || strings.Contains(errs, "force: true") {
		t.Fatalf("conflicting revert: %d %q", code, errs)
	}
	if code, _, errs = d.run(t, "", "revert", "--force", conv); code != 1 || !strings.Contains(errs, "force needs an editor") {
		t.Fatalf("forced revert on disk: %d %q", code, errs)
	}
	if b, err := os.ReadFile(hello); err != nil || string(b) != "mine\n" {
		t.Fatalf("hello.txt after a refused forced revert: %q %v", b, err)
	}
	if code, _, errs = d.run(t, "", "revert", conv, "no-such-message"); code != 1 || !strings.Contains(errs, "no file changes") {
		t.Fatalf("unknown message: %d %q", code, errs)
	}
	if code, _, _ = d.run(t, "", "revert"); code != 2 {
		t.Fatalf("no arguments: %d", code)
	}
}
