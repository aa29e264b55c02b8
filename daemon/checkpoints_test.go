package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/transcript"
)

// turnFiles runs one testagent turn and returns its stored fileChange
// segments by workspace-relative path.
func turnFiles(t *testing.T, e *testEnv, c *Client, convID, text string, during func()) (SendResult, map[string]transcript.Segment) {
	t.Helper()
	res := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: convID, Agent: "test", Text: text})
	if during != nil {
		during()
	}
	collect(t, c, res.TurnID, func(n Notification) {
		if n.Method == NotifyPermission {
			var p PermissionParams
			json.Unmarshal(n.Params, &p)
			call[struct{}](t, c, MethodPermissionRespond, RespondParams{PermissionID: p.PermissionID, OptionID: "allow"})
		}
	})
	got := call[ChangesResult](t, c, MethodChanges, ChangesParams{ConversationID: res.ConversationID})
	last := got.Turns[len(got.Turns)-1]
	if last.AssistantMessageID != res.AssistantMessageID || last.Checkpoints == nil || last.Checkpoints.Before == "" || last.Checkpoints.After == "" {
		t.Fatalf("turn %+v has no checkpoints", last)
	}
	files := map[string]transcript.Segment{}
	for _, sg := range last.Files {
		rel, _ := filepath.Rel(e.ws, sg.Path)
		files[rel] = sg
	}
	return res, files
}

func TestTurnCheckpoints(t *testing.T) {
	e := newRealEnv(t)
	cli := e.dial("cli")
	ws := e.ws
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	orig := "# Project\r\nline two\nline three\n"
	must(os.WriteFile(filepath.Join(ws, "README.md"), []byte(orig), 0o644))
	must(os.WriteFile(filepath.Join(ws, "gone.txt"), []byte("bye\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "old.txt"), []byte(strings.Repeat("content that moves\n", 10)), 0o644))
	must(os.WriteFile(filepath.Join(ws, "run.sh"), []byte("echo hi\n"), 0o644))

	// Turn 1: a shell command overwrites README.md; the agent reports no diff.
	res, files := turnFiles(t, e, cli, "", "SHELL printf 'rewritten\\n' > README.md", nil)
	conv := res.ConversationID
	rd := files["README.md"]
	if rd.Change != "modified" || rd.Origin != OriginShell || rd.ToolCallID == "" || rd.Deletions == nil || *rd.Deletions != 3 || *rd.Additions != 1 ||
		!strings.Contains(rd.Diff, "-line two") || strings.Contains(rd.Diff, "/dev/null") {
		t.Fatalf("README.md change %+v", rd)
	}

	// Turn 2: a delete, a rename and a mode change, all by a command.
	_, files = turnFiles(t, e, cli, conv, "SHELL rm gone.txt && mv old.txt new.txt && chmod +x run.sh", nil)
	if files["gone.txt"].Change != "deleted" || files["new.txt"].Change != "renamed" || !strings.HasSuffix(files["new.txt"].OldPath, "old.txt") ||
		files["run.sh"].ModeChange == "" {
		t.Fatalf("turn 2 files %+v", files)
	}

	// Turn 3: the user saves a file while the turn runs and no tool could
	// have written it.
	_, files = turnFiles(t, e, cli, conv, "SLOW 6", func() {
		time.Sleep(100 * time.Millisecond)
		must(os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("user\n"), 0o644))
	})
	if files["mine.txt"].Origin != OriginUser || files["mine.txt"].Change != "added" {
		t.Fatalf("turn 3 files %+v", files)
	}

	// Revert of turn 1's README.md: refused while the user has changed it,
	// forced (the user's text kept first), then that undone.
	must(os.WriteFile(filepath.Join(ws, "README.md"), []byte("edited by hand\n"), 0o644))
	p := FileChangeParams{ConversationID: conv, MessageID: res.AssistantMessageID, Path: rd.Path}
	if msg := callErr(t, cli, MethodFileChangeRevert, p, CodeConflict); !strings.Contains(msg, "changed since the turn") {
		t.Fatalf("refusal %q", msg)
	}
	p.Force = true
	r := call[FileChangeResult](t, cli, MethodFileChangeRevert, p)
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); !r.Applied || r.Checkpoint == "" || string(b) != orig {
		t.Fatalf("forced revert %+v, README %q", r, b)
	}
	call[RewindResult](t, cli, MethodCheckpointRestore, CheckpointRestoreParams{Checkpoint: r.Checkpoint, Paths: []string{"README.md"}})
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != "edited by hand\n" {
		t.Fatalf("undo of the forced revert: README %q", b)
	}
	must(os.WriteFile(filepath.Join(ws, "README.md"), []byte("rewritten\n"), 0o644))
	p.Force = false
	if r := call[FileChangeResult](t, cli, MethodFileChangeRevert, p); !r.Applied {
		t.Fatalf("plain revert %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != orig {
		t.Fatalf("reverted README %q, want the exact original bytes", b)
	}

	// Rewind to before turn 1: three turns of code and conversation undone.
	rw := call[RewindResult](t, cli, MethodRewind, RewindParams{ConversationID: conv, Turn: 1})
	if rw.Backup == "" || !rw.Truncated {
		t.Fatalf("rewind %+v", rw)
	}
	check := func(rel, want string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(ws, rel))
		if want == "" {
			if !os.IsNotExist(err) {
				t.Errorf("%s still exists", rel)
			}
			return
		}
		if string(b) != want {
			t.Errorf("%s = %q, want %q", rel, b, want)
		}
	}
	check("README.md", orig)
	check("gone.txt", "bye\n")
	check("new.txt", "")
	check("mine.txt", "")
	if fi, _ := os.Stat(filepath.Join(ws, "run.sh")); fi.Mode().Perm()&0o111 != 0 {
		t.Errorf("run.sh still executable")
	}
	if got := call[ChangesResult](t, cli, MethodChanges, ChangesParams{ConversationID: conv}); len(got.Turns) != 0 {
		t.Errorf("turns after rewind: %+v", got.Turns)
	}
	// And its undo brings the files back.
	call[RewindResult](t, cli, MethodRewindUndo, ConversationParams{ConversationID: conv})
	check("README.md", orig) // reverted by hand before the rewind
	check("mine.txt", "user\n")
	check("gone.txt", "")
	check("new.txt", strings.Repeat("content that moves\n", 10))
}

// TestEditRestoresCode: an edit with restoreCode puts the files back to
// before the edited turn, and ochat/rewind/undo brings the turn's files back.
func TestEditRestoresCode(t *testing.T) {
	e := newRealEnv(t)
	cli := e.dial("cli")
	f := filepath.Join(e.ws, "a.txt")
	os.WriteFile(f, []byte("before\n"), 0o644)
	res, _ := turnFiles(t, e, cli, "", "SHELL printf 'after\\n' > a.txt", nil)
	ed := call[SendResult](t, cli, MethodChatEdit, EditParams{ConversationID: res.ConversationID, MessageID: res.UserMessageID, Text: "PLAIN instead", RestoreCode: true})
	collect(t, cli, ed.TurnID, nil)
	if b, _ := os.ReadFile(f); string(b) != "before\n" {
		t.Fatalf("after edit with restoreCode: %q", b)
	}
	call[RewindResult](t, cli, MethodRewindUndo, ConversationParams{ConversationID: res.ConversationID})
	if b, _ := os.ReadFile(f); string(b) != "after\n" {
		t.Fatalf("after undo: %q", b)
	}
	// A retry that cannot start (unknown agent) restores nothing.
	msgs := call[GetConversationResult](t, cli, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID}).Messages
	callErr(t, cli, MethodChatRetry, RetryParams{ConversationID: res.ConversationID, MessageID: msgs[0].ID, RestoreCode: true, Agent: "nope"}, CodeAgentUnavailable)
	if b, _ := os.ReadFile(f); string(b) != "after\n" {
		t.Fatalf("a failed retry changed the files: %q", b)
	}
}
