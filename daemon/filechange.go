package daemon

// File changes (docs/protocol.md "File changes"): ochat/fileChange/apply and
// ochat/fileChange/revert, the LSP workspace/applyEdit request the daemon
// sends to an editor, and the editor route for agents' fs/write_text_file.
//
// Agents such as Claude Code and Codex edit the disk themselves and only
// report old/new text, so an apply or revert is always computed from what
// the file holds now, never replayed blindly: the current content must be
// the change's starting point (or already its result), else the call is a
// conflict unless forced.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// ApplyEditTimeout bounds how long the daemon waits for an editor's answer
// to workspace/applyEdit.
const ApplyEditTimeout = 30 * time.Second

// maxChangeFileBytes is the largest file (bytes) an apply or revert reads
// or writes; the same cap as agents' fs/write_text_file.
const maxChangeFileBytes = 10 << 20

// fileChange segment statuses recorded by apply and revert.
const (
	FileChangeApplied  = "applied"
	FileChangeReverted = "reverted"
)

// How a file change reached the file (FileChangeResult.Via).
const (
	ViaEditor = "editor"
	ViaDisk   = "disk"
)

// FileChangeParams are the params of ochat/fileChange/apply and
// ochat/fileChange/revert: the fileChange segment with Path in assistant
// message MessageID of ConversationID. Path is matched exactly, else after
// making it absolute against the workspace and cleaning it. Force (only
// through an editor, or for a file that no longer exists) skips the
// conflict check: the whole file is overwritten with the change's target
// text (for an excerpt change, the excerpt alone).
type FileChangeParams struct {
	ConversationID string `json:"conversationId"`
	MessageID      string `json:"messageId"`
	Path           string `json:"path"`
	Force          bool   `json:"force,omitempty"`
	// Dirty is sent by an editor whose buffer of Path has unsaved edits: a
	// checkpoint-backed apply or revert then refuses (-32003) instead of
	// mixing the two texts.
	Dirty bool `json:"dirty,omitempty"`
}

func (p *FileChangeParams) validate() error {
	for _, f := range [][2]string{{"conversationId", p.ConversationID}, {"messageId", p.MessageID}, {"path", p.Path}} {
		if err := required(f[0], f[1]); err != nil {
			return err
		}
	}
	return nil
}

// FileChangeResult answers ochat/fileChange/apply and revert.
//
// Applied is true when the file was changed, through the requesting editor
// (Via "editor", by workspace/applyEdit) or by the daemon (Via "disk", an
// atomic write or a delete). Applied false comes with Reason: "already
// applied" / "already reverted" (the file already holds the target; Status
// is then recorded all the same), or the editor's failureReason (Via
// "editor"). Status is the segment's status after the call.
type FileChangeResult struct {
	Applied bool   `json:"applied"`
	Via     string `json:"via,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Status  string `json:"status,omitempty"`
	// Checkpoint is the code checkpoint a forced apply or revert took of the
	// current content first: restoring it undoes the forced call.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// FileChangeStatusParams are an ochat/fileChangeStatus notification's
// params, sent to every client subscribed to the conversation when apply or
// revert recorded a new status on a fileChange segment.
type FileChangeStatusParams struct {
	ConversationID string `json:"conversationId"`
	MessageID      string `json:"messageId"`
	Path           string `json:"path"`
	Status         string `json:"status"`
}

// ApplyEditParams are the params of the workspace/applyEdit request the
// daemon sends (LSP 3.17 ApplyWorkspaceEditParams). The daemon's own shape
// rather than protocol.ApplyWorkspaceEditParams, because that package's
// WorkspaceEdit has no resource operations and always writes a JSON null
// "version" (Neovim's apply_workspace_edit fails on it).
type ApplyEditParams struct {
	Label string        `json:"label,omitempty"`
	Edit  WorkspaceEdit `json:"edit"`
}

// WorkspaceEdit is an LSP WorkspaceEdit that uses documentChanges only.
type WorkspaceEdit struct {
	DocumentChanges []DocumentChange `json:"documentChanges"`
}

// DocumentChange is one entry of WorkspaceEdit.documentChanges: exactly one
// of Edit (a TextDocumentEdit), Create (a CreateFile) or Delete (a
// DeleteFile) is set; it is marshalled as that object alone.
type DocumentChange struct {
	Edit   *TextDocumentEdit
	Create *protocol.CreateFile
	Delete *protocol.DeleteFile
}

// MarshalJSON writes the one set member.
func (d DocumentChange) MarshalJSON() ([]byte, error) {
	switch {
	case d.Edit != nil:
		return json.Marshal(d.Edit)
	case d.Create != nil:
		return json.Marshal(d.Create)
	case d.Delete != nil:
		return json.Marshal(d.Delete)
	}
	return nil, errors.New("marshal document change: no member set")
}

// UnmarshalJSON reads a TextDocumentEdit, or a CreateFile/DeleteFile by its
// "kind".
func (d *DocumentChange) UnmarshalJSON(b []byte) error {
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	*d = DocumentChange{}
	switch probe.Kind {
	case "":
		d.Edit = new(TextDocumentEdit)
		return json.Unmarshal(b, d.Edit)
	case string(protocol.CreateResourceOperation):
		d.Create = new(protocol.CreateFile)
		return json.Unmarshal(b, d.Create)
	case string(protocol.DeleteResourceOperation):
		d.Delete = new(protocol.DeleteFile)
		return json.Unmarshal(b, d.Delete)
	}
	return fmt.Errorf("unsupported document change kind %q", probe.Kind)
}

// TextDocumentEdit is LSP's TextDocumentEdit with the version left out of
// textDocument (an OptionalVersionedTextDocumentIdentifier whose version is
// absent: the disk is the master).
type TextDocumentEdit struct {
	TextDocument protocol.TextDocumentIdentifier `json:"textDocument"`
	Edits        []protocol.TextEdit             `json:"edits"`
}

// ---- ochat/fileChange/apply, ochat/fileChange/revert ----

// fileChange serves ochat/fileChange/apply (revert false) and revert. It
// answers from its own goroutine: an editor's answer to workspace/applyEdit
// arrives on this client's read loop, which must not wait.
func (s *Server) fileChange(c *client, params json.RawMessage, revert bool, reply jsonrpc2.Replier) (any, error) {
	var p FileChangeParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	editor := c.canApplyEdit()
	go func() {
		var (
			res any
			err error
		)
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("panic in file change", "panic", v)
				res, err = nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "internal error applying %s: %v", p.Path, v)
			}
			c.queueReply(reply, res, err)
		}()
		ctx, cancel := c.requestContext(s.baseCtx)
		defer cancel()
		var ed *client
		if editor {
			ed = c
		}
		res, err = s.doFileChange(ctx, ed, p, revert)
		if err != nil {
			var je *jsonrpc2.Error
			if !errors.As(err, &je) {
				s.log.Error("file change failed", "path", p.Path, "err", err)
				err = jsonrpc2.Errorf(jsonrpc2.InternalError, "%v", err)
			}
		}
	}()
	return nil, errReplied
}

// doFileChange applies or reverts one stored fileChange through ed (nil:
// on disk) and records the segment's new status.
func (s *Server) doFileChange(ctx context.Context, ed *client, p FileChangeParams, revert bool) (FileChangeResult, error) {
	action, status := "apply", FileChangeApplied
	if revert {
		action, status = "revert", FileChangeReverted
	}
	s.mu.Lock()
	running := false
	if t := s.topics[p.ConversationID]; t != nil && t.run != nil && t.run.turnID == p.MessageID {
		running = true
	}
	s.mu.Unlock()
	if running {
		return FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "the turn that made this change is still running: %s it once the turn has ended", action)
	}
	seg, err := s.findFileChange(p)
	if err != nil {
		return FileChangeResult{}, err
	}
	if handled, res, err := s.checkpointFileChange(ctx, ed, p, seg, revert); handled {
		return res, err
	}
	abs, err := s.confine(seg.Path)
	if err != nil {
		return FileChangeResult{}, jsonrpc2.Errorf(jsonrpc2.InvalidParams, "refusing to %s %s: %v", action, seg.Path, err)
	}
	from, to := seg.OldText, seg.NewText
	if revert {
		from, to = to, from
	} else if to == nil {
		return FileChangeResult{}, jsonrpc2.Errorf(jsonrpc2.InvalidParams, "the change to %s has no new text to apply", seg.Path)
	}
	cur, err := readCurrent(abs)
	if err != nil {
		return FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "cannot %s %s: %v", action, seg.Path, err)
	}
	pl := planChange(cur, from, to)
	switch {
	case pl.kind == planAlready:
		if err := s.recordFileChange(p, seg.Path, status); err != nil {
			return FileChangeResult{}, err
		}
		return FileChangeResult{Applied: false, Reason: "already " + status, Status: status}, nil
	case pl.kind == planConflict && !p.Force:
		return FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "%s changed since the agent's edit; review the diff (or %s with force: true to overwrite it)", seg.Path, action)
	case pl.kind == planConflict && ed == nil && cur != nil:
		// Forcing replaces the whole file with the target text, which for an
		// excerpt change (Claude's Edit) is only the excerpt: on disk that
		// would lose the rest of the file for good, so force needs an editor,
		// where the edit is one undo step.
		return FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "%s changed since the agent's edit and force needs an editor (where the edit can be undone): open the diff in VS Code or Neovim, or edit the file by hand", seg.Path)
	case pl.kind == planConflict:
		pl = changePlan{kind: planWhole}
	}
	via := ViaDisk
	if ed != nil {
		via = ViaEditor
		// The editor gets the path as the agent named it (its buffers are
		// named so), not the one with symlinks resolved.
		shown := s.absPath(seg.Path)
		label := fmt.Sprintf("ochat: %s the change to %s", action, s.relPath(shown))
		res, err := ed.applyEdit(ctx, label, buildEdit(shown, cur, to, pl))
		if err != nil {
			return FileChangeResult{}, jsonrpc2.Errorf(jsonrpc2.InternalError, "%s %s in the editor: %v", action, seg.Path, err)
		}
		if !res.Applied {
			reason := res.FailureReason
			if reason == "" {
				reason = "the editor did not apply the edit"
			}
			return FileChangeResult{Applied: false, Via: via, Reason: reason, Status: seg.Status}, nil
		}
	} else if err := writeResult(abs, cur, to, pl); err != nil {
		return FileChangeResult{}, jsonrpc2.Errorf(jsonrpc2.InternalError, "%s %s: %v", action, seg.Path, err)
	}
	if err := s.recordFileChange(p, seg.Path, status); err != nil {
		return FileChangeResult{}, err
	}
	return FileChangeResult{Applied: true, Via: via, Status: status}, nil
}

// findFileChange returns the fileChange segment p names.
func (s *Server) findFileChange(p FileChangeParams) (transcript.Segment, error) {
	m, err := s.store.Message(p.ConversationID, p.MessageID)
	if errors.Is(err, history.ErrNotFound) {
		return transcript.Segment{}, notFound("no message %s in conversation %s", p.MessageID, p.ConversationID)
	}
	if err != nil {
		return transcript.Segment{}, err
	}
	i := s.fileChangeIndex(m, p.Path)
	if i < 0 {
		return transcript.Segment{}, notFound("message %s has no file change for %s", p.MessageID, p.Path)
	}
	return m.Segments[i], nil
}

// fileChangeIndex returns the index of m's fileChange segment for path, or
// -1: an exact match first, else equal absolute cleaned paths.
func (s *Server) fileChangeIndex(m transcript.Message, path string) int {
	for i, sg := range m.Segments {
		if sg.Type == transcript.SegFileChange && sg.Path == path {
			return i
		}
	}
	want := s.absPath(path)
	for i, sg := range m.Segments {
		if sg.Type == transcript.SegFileChange && s.absPath(sg.Path) == want {
			return i
		}
	}
	return -1
}

func (s *Server) absPath(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.opts.Workspace, p)
	}
	return filepath.Clean(p)
}

// relPath is p relative to the workspace when inside it, else p.
func (s *Server) relPath(p string) string {
	if rel, err := filepath.Rel(s.opts.Workspace, p); err == nil && pathWithin(s.opts.Workspace, p) {
		return rel
	}
	return p
}

// recordFileChange sets the status of the fileChange segment for path in
// the stored message and, when it changed, tells the conversation's
// subscribers (ochat/fileChangeStatus).
func (s *Server) recordFileChange(p FileChangeParams, path, status string) error {
	m, err := s.store.Message(p.ConversationID, p.MessageID)
	if err != nil {
		return fmt.Errorf("record file change status: %w", err)
	}
	i := s.fileChangeIndex(m, path)
	if i < 0 || m.Segments[i].Status == status {
		return nil
	}
	m.Segments[i].Status = status
	if err := s.store.PutMessage(p.ConversationID, m, nowMs()); err != nil {
		return fmt.Errorf("record file change status: %w", err)
	}
	s.mu.Lock()
	if t := s.topics[p.ConversationID]; t != nil {
		s.broadcastLocked(t, NotifyFileChangeStatus, FileChangeStatusParams{ConversationID: p.ConversationID, MessageID: p.MessageID, Path: path, Status: status})
	}
	s.mu.Unlock()
	return nil
}

// ---- agents' fs/write_text_file ----

// editorWriteFile returns the agents.Options.WriteFile hook of conversation
// convID's agents: when an editor that declared
// capabilities.workspace.applyEdit is attached (one subscribed to the
// conversation first, else any), the write is sent to it as a
// workspace/applyEdit replacing the whole file, so it lands in the buffer
// and can be undone. When the editor leaves the disk without the content
// (it did not save), the daemon writes the file too, so the agent reads
// what it wrote. No such editor, or one that does not answer (timeout,
// disconnect, error): handled=false, and agents writes the disk atomically.
// An editor that answers applied=false fails the write with its reason.
func (s *Server) editorWriteFile(convID string) func(ctx context.Context, sessionID, path, content string) (bool, error) {
	return func(ctx context.Context, _ string, path, content string) (bool, error) {
		s.noteAgentWrite(convID, path)
		ed := s.applyEditor(convID)
		if ed == nil {
			return false, nil
		}
		cur, err := readCurrent(path)
		if err != nil {
			return false, nil // agents' own write reports what is wrong
		}
		if cur != nil && *cur == content {
			return true, nil
		}
		ctx, cancel := ed.requestContext(ctx)
		defer cancel()
		label := "ochat: agent writes " + s.relPath(path)
		res, err := ed.applyEdit(ctx, label, buildEdit(path, cur, &content, changePlan{kind: planWhole}))
		if err != nil {
			s.log.Info("editor did not apply an agent write; writing the disk", "path", path, "client", ed.name, "err", err)
			return false, nil
		}
		if !res.Applied {
			reason := res.FailureReason
			if reason == "" {
				reason = "no reason given"
			}
			return true, fmt.Errorf("the editor refused the write to %s: %s", path, reason)
		}
		if now, err := readCurrent(path); err != nil || now == nil || *now != content {
			s.log.Debug("editor applied an agent write without saving; writing the disk", "path", path, "client", ed.name)
			return false, nil
		}
		return true, nil
	}
}

// applyEditor picks the editor for an agent write of conversation convID:
// a client subscribed to it that declared applyEdit, else any such client.
func (s *Server) applyEditor(convID string) *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.topics[convID]; t != nil {
		for c := range t.subs {
			if c.canApplyEdit() {
				return c
			}
		}
	}
	for c := range s.clients {
		if c.canApplyEdit() {
			return c
		}
	}
	return nil
}

// ---- the server→client request ----

// canApplyEdit reports whether the client declared
// capabilities.workspace.applyEdit in initialize and is still connected.
func (c *client) canApplyEdit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyOK && !c.stopped
}

// requestContext derives a context from parent that ends after
// ApplyEditTimeout or when the client's connection ends.
func (c *client) requestContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, ApplyEditTimeout)
	go func() {
		select {
		case <-c.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// applyEdit sends workspace/applyEdit to the client and waits for its
// ApplyWorkspaceEditResult (LSP 3.17 "Applies a WorkspaceEdit"). It must not
// be called from the client's own read loop (the answer arrives there).
func (c *client) applyEdit(ctx context.Context, label string, edit WorkspaceEdit) (protocol.ApplyWorkspaceEditResponse, error) {
	var res protocol.ApplyWorkspaceEditResponse
	_, err := c.conn.Call(ctx, protocol.MethodWorkspaceApplyEdit, ApplyEditParams{Label: label, Edit: edit}, &res)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return res, fmt.Errorf("workspace/applyEdit: the editor did not answer within %v", ApplyEditTimeout)
		}
		if errors.Is(err, context.Canceled) {
			return res, errors.New("workspace/applyEdit: the editor disconnected")
		}
		return res, fmt.Errorf("workspace/applyEdit: %w", err)
	}
	return res, nil
}

// ---- planning and building the edit ----

// planKind says how a file gets from its current content to the target.
type planKind int

const (
	planAlready  planKind = iota // the file holds the target
	planWhole                    // replace (create, delete) the whole file
	planSnippet                  // replace cur[start:end] with the target text
	planConflict                 // the file holds neither the start nor the target
)

// changePlan is the outcome of planChange.
type changePlan struct {
	kind       planKind
	start, end int // planSnippet: byte offsets in the current content
}

// planChange compares the current content cur (nil: no file) with the
// change's starting text from and its target to (nil: no file).
//
// Whole-file texts (Write-style diffs) match by equality. Snippet texts
// (Edit-style diffs, such as Claude Code's old_string/new_string) match
// when from occurs exactly once in cur and to does not stand on its own
// (to's occurrences of from are accounted for); the file is already at the
// target when the reverse holds. Anything else is a conflict.
func planChange(cur, from, to *string) changePlan {
	switch {
	case sameText(cur, to):
		return changePlan{kind: planAlready}
	case sameText(cur, from):
		return changePlan{kind: planWhole}
	case cur == nil || from == nil || to == nil || *from == "":
		return changePlan{kind: planConflict}
	}
	c, f, t := *cur, *from, *to
	if f == t {
		if strings.Contains(c, t) {
			return changePlan{kind: planAlready}
		}
		return changePlan{kind: planConflict}
	}
	nf := strings.Count(c, f)
	nt := 0
	if t != "" {
		nt = strings.Count(c, t)
	}
	// Occurrences of from inside each occurrence of to, and of to inside
	// from, so that "a" → "a b" is judged by the longer text.
	fInT, tInF := 0, 0
	if t != "" {
		fInT = strings.Count(t, f)
		tInF = strings.Count(f, t)
	}
	switch {
	case t != "" && nt == 1 && nf == fInT && (tInF == 0 || nf == 0):
		return changePlan{kind: planAlready}
	case nf == 1 && nt == tInF && (fInT == 0 || nt == 0):
		i := strings.Index(c, f)
		if splitsCRLF(c, i) || splitsCRLF(c, i+len(f)) {
			return changePlan{kind: planConflict}
		}
		return changePlan{kind: planSnippet, start: i, end: i + len(f)}
	}
	return changePlan{kind: planConflict}
}

// splitsCRLF reports whether offset i lies between a "\r" and a "\n".
func splitsCRLF(s string, i int) bool {
	return i > 0 && i < len(s) && s[i-1] == '\r' && s[i] == '\n'
}

func sameText(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// buildEdit returns the WorkspaceEdit that takes the file at abs from cur
// (nil: no file) to to (nil: no file) by plan pl (planWhole or planSnippet).
//
//	to == nil:            DeleteFile (ignoreIfNotExists)
//	cur == nil:           CreateFile (ignoreIfExists) + insert of *to
//	planWhole:            one TextEdit over the whole document
//	planSnippet:          one TextEdit over cur[start:end]
//
// Positions are LSP's: zero-based lines split at "\n", "\r\n" or "\r", and
// characters in UTF-16 code units. A whole-document range ends where the
// document ends, except that when the current text lacks a final line break
// and the new text has one, it ends at the start of the line after the last
// (LSP Position: a line past the end means the end of the document), which
// makes Neovim's apply_text_edits keep exactly one final newline.
func buildEdit(abs string, cur, to *string, pl changePlan) WorkspaceEdit {
	u := protocol.DocumentURI(uri.File(abs))
	if to == nil {
		return WorkspaceEdit{DocumentChanges: []DocumentChange{{Delete: &protocol.DeleteFile{
			Kind: protocol.DeleteResourceOperation, URI: u, Options: &protocol.DeleteFileOptions{IgnoreIfNotExists: true},
		}}}}
	}
	var changes []DocumentChange
	text := ""
	if cur == nil {
		changes = append(changes, DocumentChange{Create: &protocol.CreateFile{
			Kind: protocol.CreateResourceOperation, URI: u, Options: &protocol.CreateFileOptions{IgnoreIfExists: true},
		}})
		if *to == "" {
			return WorkspaceEdit{DocumentChanges: changes}
		}
	} else {
		text = *cur
	}
	var te protocol.TextEdit
	if pl.kind == planSnippet {
		te = protocol.TextEdit{Range: protocol.Range{Start: lspPosition(text, pl.start), End: lspPosition(text, pl.end)}, NewText: *to}
	} else {
		te = protocol.TextEdit{Range: protocol.Range{End: wholeEnd(text, *to)}, NewText: *to}
	}
	changes = append(changes, DocumentChange{Edit: &TextDocumentEdit{
		TextDocument: protocol.TextDocumentIdentifier{URI: u},
		Edits:        []protocol.TextEdit{te},
	}})
	return WorkspaceEdit{DocumentChanges: changes}
}

// wholeEnd is the end of a range covering all of text when it is replaced
// by next (see buildEdit).
func wholeEnd(text, next string) protocol.Position {
	end := lspPosition(text, len(text))
	if !endsWithBreak(text) && endsWithBreak(next) {
		return protocol.Position{Line: end.Line + 1}
	}
	return end
}

func endsWithBreak(s string) bool {
	return strings.HasSuffix(s, "\n") || strings.HasSuffix(s, "\r")
}

// lspPosition is the LSP position of byte offset off in text: the line
// (line breaks "\n", "\r\n", "\r" before off) and the UTF-16 code units
// from the line's start to off. A byte that is not valid UTF-8 counts as
// one unit (it decodes to U+FFFD).
func lspPosition(text string, off int) protocol.Position {
	line, start := 0, 0
	for i := 0; i < off; i++ {
		switch text[i] {
		case '\n':
			line, start = line+1, i+1
		case '\r':
			if i+1 < len(text) && text[i+1] == '\n' {
				continue // counted at the '\n'
			}
			line, start = line+1, i+1
		}
	}
	return protocol.Position{Line: uint32(line), Character: uint32(utf16Len(text[start:off]))}
}

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// ---- the disk ----

// readCurrent returns the content of the regular file abs, nil when it does
// not exist. Other file types and files over maxChangeFileBytes are errors.
func readCurrent(abs string) (*string, error) {
	f, err := os.Open(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", abs)
	}
	if fi.Size() > maxChangeFileBytes {
		return nil, fmt.Errorf("%s is %d bytes; at most %d are handled", abs, fi.Size(), maxChangeFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxChangeFileBytes+1))
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// writeResult makes the file at abs hold what pl makes of cur and to on
// disk: deleted (to nil), the snippet replaced, or the whole text written
// atomically.
func writeResult(abs string, cur, to *string, pl changePlan) error {
	if to == nil {
		err := os.Remove(abs)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	text := *to
	if pl.kind == planSnippet {
		text = (*cur)[:pl.start] + *to + (*cur)[pl.end:]
	}
	if len(text) > maxChangeFileBytes {
		return fmt.Errorf("the result is %d bytes; at most %d are written", len(text), maxChangeFileBytes)
	}
	return writeFileAtomic(abs, text)
}

// writeFileAtomic replaces (or creates, with missing parent directories)
// the regular file path with content: a temp file in the same directory,
// synced, then renamed over it. An existing file keeps its permission bits;
// a new one gets 0644.
func writeFileAtomic(path, content string) error {
	mode := fs.FileMode(0o644)
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case err == nil:
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".ochat-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	err = func() error {
		if _, err := tmp.WriteString(content); err != nil {
			return err
		}
		if err := tmp.Chmod(mode); err != nil {
			return err
		}
		if err := tmp.Sync(); err != nil {
			return err
		}
		return tmp.Close()
	}()
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		tmp.Close()
		os.Remove(name)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// confine resolves p (absolute, or relative to the workspace) and refuses it
// unless it lies inside the workspace, both as written and once the
// symlinks of its longest existing prefix are resolved (the rule agents
// applies to fs/*; a dangling symlink fails to resolve and is refused).
func (s *Server) confine(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	root := filepath.Clean(s.opts.Workspace)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", root, err)
	}
	abs := s.absPath(p)
	if !pathWithin(root, abs) && !pathWithin(realRoot, abs) {
		return "", fmt.Errorf("%s is outside the workspace %s", p, root)
	}
	// Resolve the longest existing prefix; the rest does not exist yet.
	existing, rest := abs, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	if !pathWithin(realRoot, resolved) {
		return "", fmt.Errorf("%s leads outside the workspace %s (through a symlink)", p, root)
	}
	return filepath.Join(resolved, rest), nil
}

// pathWithin reports whether p is root or below it (both clean, absolute).
func pathWithin(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
