package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/ochat-dev/ochat/transcript"
)

func TestLSPPosition(t *testing.T) {
	tests := []struct {
		name, text string
		off        int // -1: end of text
		want       protocol.Position
	}{
		{"empty", "", -1, protocol.Position{}},
		{"ascii", "abc", -1, protocol.Position{Line: 0, Character: 3}},
		{"after newline", "abc\n", -1, protocol.Position{Line: 1}},
		{"second line", "ab\ncd", -1, protocol.Position{Line: 1, Character: 2}},
		{"crlf", "ab\r\ncd", -1, protocol.Position{Line: 1, Character: 2}},
		{"lone cr", "ab\rcd", -1, protocol.Position{Line: 1, Character: 2}},
		{"mixed breaks", "a\r\nb\rc\nd", -1, protocol.Position{Line: 3, Character: 1}},
		{"latin-1 is one unit", "héllo", -1, protocol.Position{Character: 5}},
		{"cjk is one unit", "日本語", -1, protocol.Position{Character: 3}},
		{"astral is two units", "a😀b", -1, protocol.Position{Character: 4}},
		{"offset inside", "héllo\nwörld 😀 x", len("héllo\nwörld 😀"), protocol.Position{Line: 1, Character: 8}},
		{"invalid byte is one unit", "a\xffb", -1, protocol.Position{Character: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off := tt.off
			if off < 0 {
				off = len(tt.text)
			}
			if got := lspPosition(tt.text, off); got != tt.want {
				t.Fatalf("lspPosition(%q, %d) = %+v, want %+v", tt.text, off, got, tt.want)
			}
		})
	}
}

func TestWholeEnd(t *testing.T) {
	tests := []struct {
		cur, next string
		want      protocol.Position
	}{
		{"a\nb\n", "x\n", protocol.Position{Line: 2}},
		{"a\nb\n", "x", protocol.Position{Line: 2}},
		{"a\nzwei 😀 ü", "x", protocol.Position{Line: 1, Character: 9}},
		// No final break now, one after: end past the last line.
		{"a\nzwei 😀", "x\n", protocol.Position{Line: 2}},
		{"", "x\n", protocol.Position{Line: 1}},
		{"", "x", protocol.Position{}},
	}
	for _, tt := range tests {
		if got := wholeEnd(tt.cur, tt.next); got != tt.want {
			t.Errorf("wholeEnd(%q, %q) = %+v, want %+v", tt.cur, tt.next, got, tt.want)
		}
	}
}

func sp(s string) *string { return &s }

func TestPlanChange(t *testing.T) {
	tests := []struct {
		name          string
		cur, from, to *string
		want          changePlan
	}{
		{"whole: at start", sp("old\n"), sp("old\n"), sp("new\n"), changePlan{kind: planWhole}},
		{"whole: at target", sp("new\n"), sp("old\n"), sp("new\n"), changePlan{kind: planAlready}},
		{"whole: neither", sp("mine\n"), sp("old\n"), sp("new\n"), changePlan{kind: planConflict}},
		{"create", nil, nil, sp("new\n"), changePlan{kind: planWhole}},
		{"create: file exists", sp("x"), nil, sp("new\n"), changePlan{kind: planConflict}},
		{"delete", sp("new\n"), sp("new\n"), nil, changePlan{kind: planWhole}},
		{"delete: gone already", nil, sp("new\n"), nil, changePlan{kind: planAlready}},
		{"delete: file changed", sp("mine"), sp("new\n"), nil, changePlan{kind: planConflict}},
		{"empty old text is a file", sp(""), sp(""), sp("x"), changePlan{kind: planWhole}},
		{"snippet", sp("a foo b"), sp("foo"), sp("bar"), changePlan{kind: planSnippet, start: 2, end: 5}},
		{"snippet applied", sp("a bar b"), sp("foo"), sp("bar"), changePlan{kind: planAlready}},
		{"snippet twice", sp("foo foo"), sp("foo"), sp("bar"), changePlan{kind: planConflict}},
		{"snippet both present", sp("foo bar"), sp("foo"), sp("bar"), changePlan{kind: planConflict}},
		{"snippet growing", sp("x a y"), sp("a"), sp("a b"), changePlan{kind: planSnippet, start: 2, end: 3}},
		{"snippet grown", sp("x a b y"), sp("a"), sp("a b"), changePlan{kind: planAlready}},
		{"snippet shrinking", sp("x a b y"), sp("a b"), sp("a"), changePlan{kind: planSnippet, start: 2, end: 5}},
		{"snippet shrunk", sp("x a y"), sp("a b"), sp("a"), changePlan{kind: planAlready}},
		{"snippet deletion", sp("x a y"), sp("a "), sp(""), changePlan{kind: planSnippet, start: 2, end: 4}},
		{"snippet deletion gone", sp("x y"), sp("a "), sp(""), changePlan{kind: planConflict}},
		{"snippet across crlf", sp("a\r\nb"), sp("\nb"), sp("c"), changePlan{kind: planConflict}},
		{"same text present", sp("x a y"), sp("a"), sp("a"), changePlan{kind: planAlready}},
		{"no file for a snippet", nil, sp("a"), sp("b"), changePlan{kind: planConflict}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planChange(tt.cur, tt.from, tt.to); got != tt.want {
				t.Fatalf("planChange = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBuildEditJSON(t *testing.T) {
	const path = "/ws/dir with space/é.txt"
	u := string(uri.File(path))
	tests := []struct {
		name    string
		cur, to *string
		pl      changePlan
		want    string
	}{
		{"replace", sp("a\nb\n"), sp("c\n"), changePlan{kind: planWhole},
			`{"documentChanges":[{"textDocument":{"uri":"` + u + `"},"edits":[{"range":{"start":{"line":0,"character":0},"end":{"line":2,"character":0}},"newText":"c\n"}]}]}`},
		{"create", nil, sp("c\n"), changePlan{kind: planWhole},
			`{"documentChanges":[{"kind":"create","uri":"` + u + `","options":{"ignoreIfExists":true}},{"textDocument":{"uri":"` + u + `"},"edits":[{"range":{"start":{"line":0,"character":0},"end":{"line":1,"character":0}},"newText":"c\n"}]}]}`},
		{"create empty", nil, sp(""), changePlan{kind: planWhole},
			`{"documentChanges":[{"kind":"create","uri":"` + u + `","options":{"ignoreIfExists":true}}]}`},
		{"delete", sp("c\n"), nil, changePlan{kind: planWhole},
			`{"documentChanges":[{"kind":"delete","uri":"` + u + `","options":{"ignoreIfNotExists":true}}]}`},
		{"snippet", sp("x\nwörld 😀 foo y"), sp("bar"), changePlan{kind: planSnippet, start: len("x\nwörld 😀 "), end: len("x\nwörld 😀 foo")},
			`{"documentChanges":[{"textDocument":{"uri":"` + u + `"},"edits":[{"range":{"start":{"line":1,"character":9},"end":{"line":1,"character":12}},"newText":"bar"}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(buildEdit(path, tt.cur, tt.to, tt.pl))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("got  %s\nwant %s", b, tt.want)
			}
			var back WorkspaceEdit
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("read back: %v", err)
			}
			if again, _ := json.Marshal(back); string(again) != string(b) {
				t.Fatalf("round trip %s", again)
			}
		})
	}
}

// ---- a fake editor: a JSON-RPC client that declares applyEdit ----

// editorLog is what a fake editor received as workspace/applyEdit.
type editorLog struct {
	mu    sync.Mutex
	raw   []json.RawMessage
	edits []ApplyEditParams
}

func (l *editorLog) all() ([]json.RawMessage, []ApplyEditParams) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]json.RawMessage(nil), l.raw...), append([]ApplyEditParams(nil), l.edits...)
}

// dialEditor connects a client that declares
// capabilities.workspace.applyEdit and answers workspace/applyEdit with
// answer (nil: apply the edit to disk with applyToDisk and answer
// applied). Notifications are queued as by Client.
func (e *testEnv) dialEditor(name string, answer func(ApplyEditParams) protocol.ApplyWorkspaceEditResponse) (*Client, *editorLog) {
	t := e.t
	t.Helper()
	nc, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	log := &editorLog{}
	c := &Client{conn: jsonrpc2.NewConn(jsonrpc2.NewStream(nc)), signal: make(chan struct{}, 1)}
	c.conn.Go(context.Background(), func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
		if req.Method() != protocol.MethodWorkspaceApplyEdit {
			return c.handle(ctx, reply, req)
		}
		var p ApplyEditParams
		if err := json.Unmarshal(req.Params(), &p); err != nil {
			return reply(ctx, nil, jsonrpc2.Errorf(jsonrpc2.InvalidParams, "%v", err))
		}
		log.mu.Lock()
		log.raw = append(log.raw, append(json.RawMessage(nil), req.Params()...))
		log.edits = append(log.edits, p)
		log.mu.Unlock()
		var res protocol.ApplyWorkspaceEditResponse
		if answer != nil {
			res = answer(p)
		} else if err := applyToDisk(p.Edit); err != nil {
			res = protocol.ApplyWorkspaceEditResponse{FailureReason: err.Error()}
		} else {
			res.Applied = true
		}
		return reply(ctx, res, nil)
	})
	params := protocol.InitializeParams{
		ClientInfo:   &protocol.ClientInfo{Name: name, Version: "test"},
		Capabilities: protocol.ClientCapabilities{Workspace: &protocol.WorkspaceClientCapabilities{ApplyEdit: true}},
	}
	if err := c.Call(ctxT(t), protocol.MethodInitialize, params, &c.Init); err != nil {
		t.Fatal(err)
	}
	if err := c.Notify(ctxT(t), protocol.MethodInitialized, struct{}{}); err != nil {
		t.Fatal(err)
	}
	return c, log
}

// applyToDisk applies a WorkspaceEdit the way an LSP client does, written
// here independently of buildEdit: positions are found by walking lines
// (split at \n, \r\n, \r) and UTF-16 units; a line past the end means the
// end of the document.
func applyToDisk(we WorkspaceEdit) error {
	for _, dc := range we.DocumentChanges {
		switch {
		case dc.Create != nil:
			p := uri.URI(dc.Create.URI).Filename()
			if _, err := os.Stat(p); err == nil {
				if dc.Create.Options == nil || !dc.Create.Options.IgnoreIfExists {
					return errors.New("create: exists")
				}
				continue
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
		case dc.Delete != nil:
			if err := os.Remove(uri.URI(dc.Delete.URI).Filename()); err != nil {
				return err
			}
		case dc.Edit != nil:
			p := uri.URI(dc.Edit.TextDocument.URI).Filename()
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			text := string(b)
			for i := len(dc.Edit.Edits) - 1; i >= 0; i-- {
				te := dc.Edit.Edits[i]
				s, e := offsetOf(text, te.Range.Start), offsetOf(text, te.Range.End)
				text = text[:s] + te.NewText + text[e:]
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func offsetOf(text string, pos protocol.Position) int {
	var lines []string // with their terminators; the last one has none
	rest := text
	for {
		i := strings.IndexAny(rest, "\r\n")
		if i < 0 {
			lines = append(lines, rest)
			break
		}
		n := 1
		if rest[i] == '\r' && i+1 < len(rest) && rest[i+1] == '\n' {
			n = 2
		}
		lines = append(lines, rest[:i+n])
		rest = rest[i+n:]
	}
	if int(pos.Line) >= len(lines) {
		return len(text)
	}
	off := 0
	for _, l := range lines[:pos.Line] {
		off += len(l)
	}
	line := strings.TrimRight(lines[pos.Line], "\r\n")
	units := 0
	for i, r := range line {
		if units >= int(pos.Character) {
			return off + i
		}
		units += len(utf16.Encode([]rune{r}))
	}
	return off + len(line)
}

// detach closes c and waits until the daemon has dropped the client named
// name.
func (e *testEnv) detach(c *Client, name string) {
	e.t.Helper()
	c.Close()
	ctx := ctxT(e.t)
	for {
		e.srv.mu.Lock()
		found := false
		for sc := range e.srv.clients {
			found = found || sc.name == name
		}
		e.srv.mu.Unlock()
		if !found {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("the daemon still has client %s", name)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ---- through a real daemon and the scripted testagent ----

// writeTurn runs a testagent WRITE turn from c, allowing its permission,
// and returns the assistant message id and its fileChange segment.
func writeTurn(t *testing.T, c *Client, convID, rel, escaped string) (string, string, transcript.Segment) {
	t.Helper()
	res := call[SendResult](t, c, MethodChatSend, SendParams{ConversationID: convID, Agent: "test", Text: "WRITE " + rel + " " + escaped})
	collect(t, c, res.TurnID, func(n Notification) {
		if n.Method == NotifyPermission {
			var p PermissionParams
			json.Unmarshal(n.Params, &p)
			call[struct{}](t, c, MethodPermissionRespond, RespondParams{PermissionID: p.PermissionID, OptionID: "allow"})
		}
	})
	return res.ConversationID, res.AssistantMessageID, storedFileChange(t, c, res.ConversationID, res.AssistantMessageID)
}

func storedFileChange(t *testing.T, c *Client, convID, msgID string) transcript.Segment {
	t.Helper()
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: convID})
	for _, m := range got.Messages {
		if m.ID != msgID {
			continue
		}
		for _, s := range m.Segments {
			if s.Type == transcript.SegFileChange {
				return s
			}
		}
	}
	t.Fatalf("message %s has no fileChange: %+v", msgID, got.Messages)
	return transcript.Segment{}
}

func readFileOrNil(t *testing.T, p string) *string {
	t.Helper()
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return &s
}

func TestFileChangeApplyRevert(t *testing.T) {
	e := newRealEnv(t)
	cli := e.dial("cli") // no applyEdit: the daemon writes the disk
	ed, edLog := e.dialEditor("editor", nil)
	path := filepath.Join(e.ws, "notes", "a.txt")
	first := "héllo wörld 😀\neins 😀"
	second := "héllo wörld 😀\nzwei 😀 ü"

	conv, msg1, fc1 := writeTurn(t, cli, "", "notes/a.txt", `héllo wörld 😀\neins 😀`)
	if fc1.OldText != nil || fc1.NewText == nil || *fc1.NewText != first || fc1.Path != path {
		t.Fatalf("first fileChange %+v", fc1)
	}
	p1 := FileChangeParams{ConversationID: conv, MessageID: msg1, Path: fc1.Path}

	// Another client watches the conversation.
	watcher := e.dial("watcher")
	call[SubscribeResult](t, watcher, MethodSubscribe, ConversationParams{ConversationID: conv})

	// The agent wrote the file itself: applying finds it done.
	r := call[FileChangeResult](t, cli, MethodFileChangeApply, p1)
	if r.Applied || r.Reason != "already applied" || r.Status != FileChangeApplied {
		t.Fatalf("apply of a written change: %+v", r)
	}
	if s := storedFileChange(t, cli, conv, msg1); s.Status != FileChangeApplied {
		t.Fatalf("status after already-applied: %q", s.Status)
	}

	// Reverting a change that created the file deletes it, in the editor.
	r = call[FileChangeResult](t, ed, MethodFileChangeRevert, p1)
	if !r.Applied || r.Via != ViaEditor || r.Status != FileChangeReverted {
		t.Fatalf("revert through the editor: %+v", r)
	}
	raws, edits := edLog.all()
	if len(edits) != 1 || len(edits[0].Edit.DocumentChanges) != 1 || edits[0].Edit.DocumentChanges[0].Delete == nil ||
		uri.URI(edits[0].Edit.DocumentChanges[0].Delete.URI).Filename() != path {
		t.Fatalf("revert edit %s", raws)
	}
	if readFileOrNil(t, path) != nil {
		t.Fatal("the file survived the revert")
	}
	if s := storedFileChange(t, cli, conv, msg1); s.Status != FileChangeReverted {
		t.Fatalf("status after revert: %q", s.Status)
	}
	var seen []FileChangeStatusParams
	for len(seen) < 2 {
		n, err := watcher.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if n.Method == NotifyFileChangeStatus {
			var sp FileChangeStatusParams
			json.Unmarshal(n.Params, &sp)
			seen = append(seen, sp)
		}
	}
	if w := (FileChangeStatusParams{ConversationID: conv, MessageID: msg1, Path: path, Status: FileChangeReverted}); seen[0].Status != FileChangeApplied || seen[1] != w {
		t.Fatalf("watcher saw %+v", seen)
	}
	r = call[FileChangeResult](t, cli, MethodFileChangeRevert, p1)
	if r.Applied || r.Reason != "already reverted" {
		t.Fatalf("second revert: %+v", r)
	}

	// Applying it again in the editor creates the file and inserts the text.
	r = call[FileChangeResult](t, ed, MethodFileChangeApply, p1)
	if !r.Applied || r.Via != ViaEditor {
		t.Fatalf("apply through the editor: %+v", r)
	}
	raws, edits = edLog.all()
	dcs := edits[1].Edit.DocumentChanges
	if len(dcs) != 2 || dcs[0].Create == nil || dcs[1].Edit == nil || string(dcs[1].Edit.TextDocument.URI) != string(uri.File(path)) {
		t.Fatalf("create edit %s", raws[1])
	}
	if te := dcs[1].Edit.Edits[0]; te.Range != (protocol.Range{}) || te.NewText != first {
		t.Fatalf("insert into the new file: %+v", te)
	}
	if got := readFileOrNil(t, path); got == nil || *got != first {
		t.Fatalf("after apply in the editor: %v", got)
	}

	// A second write over it: its old text is the first content.
	_, msg2, fc2 := writeTurn(t, cli, conv, "notes/a.txt", `héllo wörld 😀\nzwei 😀 ü`)
	if fc2.OldText == nil || *fc2.OldText != first || *fc2.NewText != second {
		t.Fatalf("second fileChange %+v", fc2)
	}
	p2 := FileChangeParams{ConversationID: conv, MessageID: msg2, Path: "notes/a.txt"} // relative paths match too

	// Revert in the editor: one TextEdit over the whole (non-ASCII) file.
	r = call[FileChangeResult](t, ed, MethodFileChangeRevert, p2)
	if !r.Applied || r.Via != ViaEditor {
		t.Fatalf("revert of the second change: %+v", r)
	}
	raws, edits = edLog.all()
	if strings.Contains(string(raws[2]), "version") {
		t.Fatalf("the edit names a version: %s", raws[2])
	}
	dcs = edits[2].Edit.DocumentChanges
	want := protocol.Range{End: protocol.Position{Line: 1, Character: 9}} // "zwei 😀 ü" is 9 UTF-16 units
	if len(dcs) != 1 || dcs[0].Edit == nil || len(dcs[0].Edit.Edits) != 1 || dcs[0].Edit.Edits[0].Range != want || dcs[0].Edit.Edits[0].NewText != first {
		t.Fatalf("full-range edit %s", raws[2])
	}
	if got := readFileOrNil(t, path); got == nil || *got != first {
		t.Fatalf("after revert: %v", got)
	}

	// The file changed by hand: a conflict, unless forced.
	if err := os.WriteFile(path, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	msg := callErr(t, cli, MethodFileChangeApply, p2, CodeConflict)
	if !strings.Contains(msg, "changed since the turn") || !strings.Contains(msg, "force: true") {
		t.Fatalf("conflict message %q", msg)
	}
	if got := readFileOrNil(t, path); got == nil || *got != "mine\n" {
		t.Fatalf("after refused apply: %v", got)
	}
	// Forced on disk: the user's text is kept in a checkpoint first, so the
	// forced apply can be undone; the file gets the turn's exact bytes.
	p2.Force = true
	r = call[FileChangeResult](t, cli, MethodFileChangeApply, p2)
	if !r.Applied || r.Via != ViaDisk || r.Checkpoint == "" {
		t.Fatalf("forced apply on disk: %+v", r)
	}
	if got := readFileOrNil(t, path); got == nil || *got != second {
		t.Fatalf("after forced apply on disk: %v", got)
	}
	st, err := e.srv.checkpoints()
	if err != nil {
		t.Fatal(err)
	}
	if f, err := st.File(r.Checkpoint, "notes/a.txt"); err != nil || string(f.Data) != "mine\n" {
		t.Fatalf("backup of the user's text: %q %v", f.Data, err)
	}
	if s := storedFileChange(t, cli, conv, msg2); s.Status != FileChangeApplied {
		t.Fatalf("status after forced apply: %q", s.Status)
	}

	// Unknown conversation, message or path.
	callErr(t, cli, MethodFileChangeApply, FileChangeParams{ConversationID: "nope", MessageID: msg2, Path: path}, CodeNotFound)
	callErr(t, cli, MethodFileChangeApply, FileChangeParams{ConversationID: conv, MessageID: "nope", Path: path}, CodeNotFound)
	callErr(t, cli, MethodFileChangeRevert, FileChangeParams{ConversationID: conv, MessageID: msg2, Path: "other.txt"}, CodeNotFound)
	callErr(t, cli, MethodFileChangeApply, FileChangeParams{ConversationID: conv, MessageID: msg2}, jsonrpc2.InvalidParams)
}

func TestFileChangeEditorRefusesAndOutside(t *testing.T) {
	e := newRealEnv(t)
	cli := e.dial("cli")
	ed, edLog := e.dialEditor("refusing", func(ApplyEditParams) protocol.ApplyWorkspaceEditResponse {
		return protocol.ApplyWorkspaceEditResponse{FailureReason: "buffer is read-only"}
	})
	conv, msg, fc := writeTurn(t, cli, "", "b.txt", `one\n`)
	p := FileChangeParams{ConversationID: conv, MessageID: msg, Path: fc.Path}
	r := call[FileChangeResult](t, ed, MethodFileChangeRevert, p)
	if r.Applied || r.Via != ViaEditor || r.Reason != "buffer is read-only" {
		t.Fatalf("refused revert: %+v", r)
	}
	if _, edits := edLog.all(); len(edits) != 1 {
		t.Fatalf("editor got %d edits", len(edits))
	}
	if got := readFileOrNil(t, fc.Path); got == nil || *got != "one\n" {
		t.Fatalf("file after a refused revert: %v", got)
	}
	if s := storedFileChange(t, cli, conv, msg); s.Status == FileChangeReverted {
		t.Fatal("a refused revert was recorded")
	}

	// The scripted agent writes outside the workspace; ochat refuses to
	// touch that file.
	_, msg, fc = writeTurn(t, cli, conv, "../outside.txt", `theirs\n`)
	if pathWithin(e.ws, fc.Path) {
		t.Fatalf("path %s is inside the workspace", fc.Path)
	}
	m := callErr(t, cli, MethodFileChangeRevert, FileChangeParams{ConversationID: conv, MessageID: msg, Path: fc.Path}, jsonrpc2.InvalidParams)
	if !strings.Contains(m, "outside the workspace") {
		t.Fatalf("refusal %q", m)
	}
	if got := readFileOrNil(t, fc.Path); got == nil || *got != "theirs\n" {
		t.Fatalf("outside file after the refusal: %v", got)
	}
	// A symlink inside the workspace that leads out is refused as well.
	if err := os.Symlink(filepath.Dir(e.ws), filepath.Join(e.ws, "up")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.confine("up/outside.txt"); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Fatalf("confine through a symlink: %v", err)
	}
	if got, err := e.srv.confine("new/dir/x.txt"); err != nil || !strings.HasSuffix(got, filepath.Join("new", "dir", "x.txt")) {
		t.Fatalf("confine of a new path: %q %v", got, err)
	}
}

// TestAgentWriteThroughEditor: fs/write_text_file lands in an attached
// editor that declared applyEdit; without one it is written to disk.
func TestAgentWriteThroughEditor(t *testing.T) {
	e := newRealEnv(t)
	ed, edLog := e.dialEditor("editor", nil)
	path := filepath.Join(e.ws, "c.txt")
	res := call[SendResult](t, ed, MethodChatSend, SendParams{Agent: "test", Text: `FSWRITE c.txt hello\nwörld\n`})
	log := collect(t, ed, res.TurnID, nil)
	if log.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("turn %+v", log.terminal())
	}
	got := call[GetConversationResult](t, ed, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	a := got.Messages[1]
	said, fc := false, transcript.Segment{}
	for _, sg := range a.Segments {
		said = said || strings.Contains(sg.Content, "written")
		if sg.Type == transcript.SegFileChange {
			fc = sg
		}
	}
	if !said || fc.Change != "added" || fc.Origin != OriginAgent {
		t.Fatalf("agent says %+v (want \"written\" and an added fileChange by the agent)", a.Segments)
	}
	raws, edits := edLog.all()
	if len(edits) != 1 || len(edits[0].Edit.DocumentChanges) != 2 || edits[0].Edit.DocumentChanges[0].Create == nil || strings.Contains(string(raws[0]), "version") {
		t.Fatalf("agent write edit %s", raws)
	}
	if s := readFileOrNil(t, path); s == nil || *s != "hello\nwörld\n" {
		t.Fatalf("file %v", s)
	}

	// An editor that applies without saving: the daemon writes the disk too.
	e.detach(ed, "editor")
	unsaved, unsavedLog := e.dialEditor("unsaved", func(ApplyEditParams) protocol.ApplyWorkspaceEditResponse {
		return protocol.ApplyWorkspaceEditResponse{Applied: true}
	})
	res = call[SendResult](t, unsaved, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: `FSWRITE c.txt second\n`})
	collect(t, unsaved, res.TurnID, nil)
	if _, edits := unsavedLog.all(); len(edits) != 1 || edits[0].Edit.DocumentChanges[0].Edit == nil {
		t.Fatalf("edits %+v", edits)
	}
	if s := readFileOrNil(t, path); s == nil || *s != "second\n" {
		t.Fatalf("file after an unsaved apply %v", s)
	}

	// An editor that refuses: the agent is told why.
	e.detach(unsaved, "unsaved")
	refusing, _ := e.dialEditor("refusing", func(ApplyEditParams) protocol.ApplyWorkspaceEditResponse {
		return protocol.ApplyWorkspaceEditResponse{FailureReason: "user said no"}
	})
	res = call[SendResult](t, refusing, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: `FSWRITE c.txt third\n`})
	collect(t, refusing, res.TurnID, nil)
	got = call[GetConversationResult](t, refusing, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	if a := got.Messages[len(got.Messages)-1]; !strings.Contains(a.Segments[len(a.Segments)-1].Content, "user said no") {
		t.Fatalf("agent says %+v", a.Segments)
	}
	if s := readFileOrNil(t, path); s == nil || *s != "second\n" {
		t.Fatalf("file after a refused write %v", s)
	}

	// No editor attached: the agents package writes the disk.
	e.detach(refusing, "refusing")
	cli := e.dial("cli")
	res = call[SendResult](t, cli, MethodChatSend, SendParams{ConversationID: res.ConversationID, Text: `FSWRITE c.txt fourth\n`})
	collect(t, cli, res.TurnID, nil)
	if s := readFileOrNil(t, path); s == nil || *s != "fourth\n" {
		t.Fatalf("file written without an editor %v", s)
	}
}

// nvimApplyScript applies the WorkspaceEdit in $OCHAT_EDIT with Neovim's own
// vim.lsp.util.apply_workspace_edit (UTF-16 offsets) and writes the
// buffers it changed, as the Neovim plugin's workspace/applyEdit handler does.
const nvimApplyScript = `
local ok, err = pcall(function()
  local f = assert(io.open(os.getenv('OCHAT_EDIT'), 'r'))
  local edit = vim.fn.json_decode(f:read('*a'))
  f:close()
  vim.lsp.util.apply_workspace_edit(edit, 'utf-16')
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.api.nvim_buf_get_name(b) ~= '' and vim.api.nvim_buf_get_option(b, 'modified') then
      vim.api.nvim_buf_call(b, function() vim.cmd('silent write!') end)
    end
  end
end)
if not ok then
  io.stderr:write(tostring(err) .. '\n')
  vim.cmd('cquit 1')
end
vim.cmd('qall!')
`

// TestNeovimAppliesEdits hands the daemon's WorkspaceEdits to a real
// Neovim (skipped when nvim is not installed) and checks the file it
// writes: whole-file ranges, files without a final newline, new and
// deleted files, snippets and CRLF files, with non-ASCII text.
func TestNeovimAppliesEdits(t *testing.T) {
	nvim, err := exec.LookPath("nvim")
	if err != nil {
		t.Skip("nvim not installed")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "apply.lua")
	if err := os.WriteFile(script, []byte(nvimApplyScript), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		cur, from, to *string
		want          *string // nil: no file
	}{
		{"replace", sp("a\nb\n"), sp("a\nb\n"), sp("x\ny\n"), sp("x\ny\n")},
		{"no final newline before", sp("a\nb"), sp("a\nb"), sp("x\n"), sp("x\n")},
		{"empty file", sp(""), sp(""), sp("x\n"), sp("x\n")},
		{"create", nil, nil, sp("héllo\nwörld 😀\n"), sp("héllo\nwörld 😀\n")},
		{"delete", sp("x 😀 y\n"), sp("x 😀 y\n"), nil, nil},
		{"non-ascii whole", sp("héllo 😀\nzwei 😀 ü\n"), sp("héllo 😀\nzwei 😀 ü\n"), sp("eins\n"), sp("eins\n")},
		{"snippet", sp("fn a() {\n  old 😀 call(ü)\n}\n"), sp("old 😀 call(ü)"), sp("new 😀\n  call()"), sp("fn a() {\n  new 😀\n  call()\n}\n")},
		{"snippet after astral", sp("😀😀 x = 1\n"), sp("x = 1"), sp("y = 22"), sp("😀😀 y = 22\n")},
		{"crlf", sp("a\r\nb\r\n"), sp("a\r\nb\r\n"), sp("x\r\ny\r\n"), sp("x\r\ny\r\n")},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("f%d.txt", i))
			if tt.cur != nil {
				if err := os.WriteFile(path, []byte(*tt.cur), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			pl := planChange(tt.cur, tt.from, tt.to)
			if pl.kind != planWhole && pl.kind != planSnippet {
				t.Fatalf("plan %+v", pl)
			}
			b, err := json.Marshal(buildEdit(path, tt.cur, tt.to, pl))
			if err != nil {
				t.Fatal(err)
			}
			editFile := filepath.Join(dir, fmt.Sprintf("edit%d.json", i))
			if err := os.WriteFile(editFile, b, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", "luafile "+script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "OCHAT_EDIT="+editFile)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("nvim: %v\n%s\nedit: %s", err, out, b)
			}
			got := readFileOrNil(t, path)
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Fatalf("file after Neovim applied %s:\n got %q\nwant %q", b, deref(got), deref(tt.want))
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<no file>"
	}
	return *s
}

// BenchmarkFileChangeRoundTrip alternates revert and apply of one stored
// whole-file change (a 2,000-line file) through the daemon: b/disk by the
// daemon's atomic write, b/editor through workspace/applyEdit to a fake
// editor that applies it to disk. One op is one method call answered.
func BenchmarkFileChangeRoundTrip(b *testing.B) {
	for _, via := range []string{ViaDisk, ViaEditor} {
		b.Run(via, func(b *testing.B) {
			e := newEnv(b, nil)
			var c *Client
			if via == ViaEditor {
				c, _ = e.dialEditor("editor", nil)
			} else {
				c = e.dial("cli")
			}
			conv := call[ConversationResult](b, c, MethodConversationsCreate, CreateConversationParams{}).Conversation.ID
			var old, next strings.Builder
			for i := range 2000 {
				fmt.Fprintf(&old, "line %d: héllo 😀\n", i)
				fmt.Fprintf(&next, "line %d: wörld 😀\n", i)
			}
			path := filepath.Join(e.ws, "big.txt")
			if err := os.WriteFile(path, []byte(next.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			msg := transcript.Message{ID: e.srv.newID(), Role: transcript.RoleAssistant, Agent: "fake", Status: transcript.StatusCompleted,
				Segments: []transcript.Segment{{Type: transcript.SegFileChange, Path: path, OldText: sp(old.String()), NewText: sp(next.String())}}}
			if err := e.store.PutMessage(conv, msg, nowMs()); err != nil {
				b.Fatal(err)
			}
			p := FileChangeParams{ConversationID: conv, MessageID: msg.ID, Path: path}
			b.ResetTimer()
			for i := range b.N {
				method := MethodFileChangeRevert
				if i%2 == 1 {
					method = MethodFileChangeApply
				}
				if r := call[FileChangeResult](b, c, method, p); !r.Applied || r.Via != via {
					b.Fatalf("%s: %+v", method, r)
				}
			}
		})
	}
}
