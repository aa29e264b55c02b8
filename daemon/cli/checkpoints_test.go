package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/daemon"
)

// TestChangesRevertRewind: a shell command overwrites README.md through
// the CLI; `changes` shows it modified with the old lines, `revert --force`
// after a hand edit keeps that edit in a checkpoint, `restore` brings it
// back, and `rewind` / `rewind --undo` move the files both ways.
func TestChangesRevertRewind(t *testing.T) {
	cw := newChatWorld(t, false, daemon.Options{})
	readme := filepath.Join(cw.ws, "README.md")
	orig := "# Title\nold line\nlast\n"
	if err := os.WriteFile(readme, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cw.run(t, "chat", "--agent", "test", "SHELL printf 'new\\n' > README.md"); code != 0 {
		t.Fatalf("chat: %d %s", code, errs)
	}
	var list daemon.ListConversationsResult
	if err := cw.direct(t).Call(context.Background(), daemon.MethodConversationsList, nil, &list); err != nil || len(list.Conversations) != 1 {
		t.Fatalf("conversations %v %+v", err, list)
	}
	conv := list.Conversations[0].ID
	code, out, errs := cw.run(t, "changes", conv, "1")
	if code != 0 || !strings.Contains(out, "modified  README.md +1 -3") || !strings.Contains(out, "by shell") || !strings.Contains(out, "-old line") {
		t.Fatalf("changes: %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := cw.run(t, "changes", conv, "2"); code == 0 || !strings.Contains(errs, "has 1 turns") {
		t.Errorf("changes of a missing turn: %d %s", code, errs)
	}
	os.WriteFile(readme, []byte("by hand\n"), 0o644)
	if code, _, errs := cw.run(t, "revert", conv); code != 1 || !strings.Contains(errs, "again with --force") {
		t.Fatalf("revert over a hand edit: %d %s", code, errs)
	}
	code, out, errs = cw.run(t, "revert", "--force", conv)
	if b, _ := os.ReadFile(readme); code != 0 || string(b) != orig || !strings.Contains(out, "undo: ochatd restore ") {
		t.Fatalf("forced revert: %d %q\n%s\n%s", code, b, out, errs)
	}
	undo := strings.Fields(strings.TrimSuffix(strings.TrimSpace(out[strings.Index(out, "undo: ")+len("undo: "):strings.Index(out, ")\n")]), ")"))
	if code, _, errs := cw.run(t, undo[1:]...); code != 0 {
		t.Fatalf("%v: %s", undo, errs)
	}
	if b, _ := os.ReadFile(readme); string(b) != "by hand\n" {
		t.Fatalf("after restore: %q", b)
	}
	code, out, errs = cw.run(t, "rewind", "--code-only", conv, "1")
	if b, _ := os.ReadFile(readme); code != 0 || string(b) != orig || !strings.Contains(out, "ochatd rewind --undo "+conv) {
		t.Fatalf("rewind: %d %q\n%s\n%s", code, b, out, errs)
	}
	if code, _, errs := cw.run(t, "rewind", "--undo", conv); code != 0 {
		t.Fatalf("rewind --undo: %s", errs)
	}
	if b, _ := os.ReadFile(readme); string(b) != "by hand\n" {
		t.Fatalf("after rewind --undo: %q", b)
	}
}
