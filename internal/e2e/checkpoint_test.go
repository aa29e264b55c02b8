package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// TestCheckpointReadmeOverwrite is the case in
// /work/shared/cases/revert-overwrite: the real codex-acp rewrites an
// existing README.md with an apply_patch "Add File" (the fake model's
// WRITE_FILE), which the agent reports as a new file. The turn's change
// must come from the checkpoints (README.md modified, its old lines as
// deletions) and the revert must restore the original bytes, not delete it.
func TestCheckpointReadmeOverwrite(t *testing.T) {
	need(t)
	in := adapters(t)
	ochatd(t)
	root := realpath(t, t.TempDir())
	ws := filepath.Join(root, "work")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(ws, "README.md")
	orig := "# demo\n\nThree lines of a README the user wrote.\n" // the case's 3-line README
	if err := os.WriteFile(readme, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	s := fakeModel(t)
	a := setupAgent(t, "codex", s, in, root)
	d := newDaemonEnv(t, []agentSetup{a}, root, ws)
	d.start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := d.client(ctx)

	tr := runTurn(ctx, t, c, "", "codex", "WRITE_FILE "+readme, a.allowKind, nil)
	if f := tr.final(); f.Type != transcript.EvTurnCompleted {
		t.Fatalf("turn ended with %+v", f)
	}
	if b, _ := os.ReadFile(readme); string(b) == orig {
		t.Fatalf("codex did not rewrite README.md")
	}
	var ch daemon.ChangesResult
	if err := c.Call(ctx, daemon.MethodChanges, daemon.ChangesParams{ConversationID: tr.send.ConversationID, Turn: 1}, &ch); err != nil {
		t.Fatal(err)
	}
	if len(ch.Turns) != 1 || len(ch.Turns[0].Files) != 1 {
		t.Fatalf("changes %+v", ch)
	}
	fc := ch.Turns[0].Files[0]
	if fc.Path != readme || fc.Change != "modified" || fc.Origin != daemon.OriginAgent || fc.Deletions == nil || *fc.Deletions != 3 ||
		strings.Contains(fc.Diff, "/dev/null") || !strings.Contains(fc.Diff, "-Three lines of a README") {
		t.Fatalf("README.md change %+v", fc)
	}
	var r daemon.FileChangeResult
	if err := c.Call(ctx, daemon.MethodFileChangeRevert, daemon.FileChangeParams{ConversationID: tr.send.ConversationID, MessageID: tr.send.AssistantMessageID, Path: readme}, &r); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(readme); err != nil || string(b) != orig || !r.Applied {
		t.Fatalf("after revert %+v: README.md %q, %v (want the original bytes)", r, b, err)
	}
}
