package daemon

// Code checkpoints (docs/checkpoints.md): the daemon asks package checkpoint
// for one at turn start and one at turn end, stores both ids with the
// assistant message, and rewrites the turn's fileChange segments from the
// real difference between them. The agent's reported diffs only attribute a
// change to a tool call.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/checkpoint"
	"github.com/ochat-dev/ochat/transcript"
)

// Origins of a fileChange segment (transcript.Segment.Origin).
const (
	OriginAgent = "agent"
	OriginShell = "shell"
	OriginUser  = "user"
)

// codeCheckpoints opens the workspace's checkpoint store once, on first use.
type codeCheckpoints struct {
	once  sync.Once
	store *checkpoint.Store
	err   error
}

// checkpoints returns the workspace's checkpoint store, nil (with the
// reason) when checkpoints are off or the store could not be opened.
func (s *Server) checkpoints() (*checkpoint.Store, error) {
	s.ckpts.once.Do(func() {
		if s.opts.NoCheckpoints {
			s.ckpts.err = fmt.Errorf("checkpoints are off (--no-checkpoints)")
			return
		}
		dir := s.opts.CheckpointDir
		if dir == "" {
			if s.store == nil {
				s.ckpts.err = fmt.Errorf("no store")
				return
			}
			dir = checkpoint.DefaultDir(s.store.Path())
		}
		st, err := checkpoint.Open(checkpoint.Options{Workspace: filepath.Clean(s.opts.Workspace), Dir: dir,
			MaxFileBytes: s.opts.CheckpointMaxFileBytes, Logger: s.log})
		if err != nil {
			s.log.Error("checkpoints unavailable", "err", err)
			s.ckpts.err = err
			return
		}
		s.ckpts.store = st
		go func() {
			if n, err := st.Prune(s.baseCtx, nil); err != nil {
				s.log.Info("prune checkpoints", "err", err)
			} else if n > 0 {
				s.log.Info("pruned checkpoints", "count", n)
			}
		}()
	})
	return s.ckpts.store, s.ckpts.err
}

// takeCheckpoint records the workspace; failures are logged and returned
// as a note for the turn, never fatal.
func (s *Server) takeCheckpoint(ctx context.Context, label string) (checkpoint.Checkpoint, string) {
	st, err := s.checkpoints()
	if err != nil {
		return checkpoint.Checkpoint{}, err.Error()
	}
	cp, err := st.Take(ctx, label)
	if err != nil {
		s.log.Error("checkpoint failed", "label", label, "err", err)
		return checkpoint.Checkpoint{}, "checkpoint failed: " + err.Error()
	}
	return cp, ""
}

// noteAgentWrite remembers that the running turn of convID wrote path
// through fs/write_text_file, so its change is the agent's.
func (s *Server) noteAgentWrite(convID, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.topics[convID]; t != nil && t.run != nil {
		if t.run.agentWrote == nil {
			t.run.agentWrote = map[string]bool{}
		}
		t.run.agentWrote[s.absPath(path)] = true
	}
}

// turnStartCheckpoint records the workspace before r's prompt is sent.
func (s *Server) turnStartCheckpoint(r *run) {
	cp, note := s.takeCheckpoint(r.ctx, "before turn "+r.turnID)
	s.mu.Lock()
	r.ckBefore, r.ckNote = cp.ID, note
	s.mu.Unlock()
}

// turnEndCheckpoint records the workspace after r, stores both ids in final
// and rewrites its fileChange segments from the real change. It returns the
// segments it changed or added (for live clients).
func (s *Server) turnEndCheckpoint(r *run, final *transcript.Message) []transcript.Segment {
	s.mu.Lock()
	before, note := r.ckBefore, r.ckNote
	s.mu.Unlock()
	if before == "" {
		if note != "" {
			final.Checkpoints = &transcript.TurnCheckpoints{Note: note}
		}
		return nil
	}
	// Not r.ctx: a cancelled turn's changes are recorded all the same.
	after, note := s.takeCheckpoint(s.baseCtx, "after turn "+r.turnID)
	final.Checkpoints = &transcript.TurnCheckpoints{Before: before, After: after.ID, Note: note}
	if after.ID == "" {
		return nil
	}
	st, _ := s.checkpoints()
	chs, err := st.Changes(s.baseCtx, before, after.ID)
	if err != nil {
		s.log.Error("turn changes", "turn", r.turnID, "err", err)
		final.Checkpoints.Note = "changes unknown: " + err.Error()
		return nil
	}
	return s.reconcile(r, final, chs)
}

// reconcile makes m's fileChange segments say what the disk shows: a
// segment the agent reported for a changed path gets the real texts, counts
// and diff (and keeps its tool call); a change no tool reported is added,
// attributed to the turn's execute tool (Origin "shell") when one ran, else
// to the user (nothing of the agent's could have made it).
func (s *Server) reconcile(r *run, m *transcript.Message, chs []checkpoint.Change) []transcript.Segment {
	var shells []string
	for _, sg := range m.Segments {
		if sg.Type == transcript.SegTool && sg.ProviderKind == "execute" {
			shells = append(shells, sg.ID)
		}
	}
	s.mu.Lock()
	wrote := r.agentWrote
	s.mu.Unlock()
	var touched []transcript.Segment
	for _, c := range chs {
		abs := filepath.Join(s.opts.Workspace, filepath.FromSlash(c.Path))
		i := s.fileChangeIndex(*m, abs)
		if i < 0 && c.OldPath != "" {
			i = s.fileChangeIndex(*m, filepath.Join(s.opts.Workspace, filepath.FromSlash(c.OldPath)))
		}
		var sg transcript.Segment
		if i >= 0 {
			sg = m.Segments[i]
			sg.Origin = OriginAgent
		} else {
			sg = transcript.Segment{Type: transcript.SegFileChange, Path: abs, Status: FileChangeApplied}
			switch {
			case wrote[abs]:
				sg.Origin = OriginAgent
			case len(shells) == 1:
				sg.Origin, sg.ToolCallID = OriginShell, shells[0]
			case len(shells) > 1:
				sg.Origin = OriginShell
			default:
				sg.Origin = OriginUser
			}
		}
		sg.Path = abs
		if sg.Status == FileRejected {
			sg.Status = FileChangeApplied // it did happen: the disk says so
		}
		fillSegment(&sg, c, s.opts.Workspace)
		if i >= 0 {
			m.Segments[i] = sg
		} else {
			m.Segments = append(m.Segments, sg)
		}
		touched = append(touched, sg)
	}
	return touched
}

// fillSegment copies a checkpoint change into a fileChange segment.
func fillSegment(sg *transcript.Segment, c checkpoint.Change, ws string) {
	sg.Change = string(c.Kind)
	sg.OldPath = ""
	if c.OldPath != "" {
		sg.OldPath = filepath.Join(ws, filepath.FromSlash(c.OldPath))
	}
	sg.Binary = c.Binary
	sg.ModeChange = ""
	if c.ModeChanged {
		sg.ModeChange = c.OldMode + " → " + c.NewMode
	}
	sg.Note = c.Reason
	adds, dels := c.Additions, c.Deletions
	sg.Additions, sg.Deletions = &adds, &dels
	sg.OldText, sg.NewText, sg.Diff = c.Old, c.New, c.Diff
	if c.Binary || c.Kind == checkpoint.Skipped {
		sg.OldText, sg.NewText, sg.Diff = nil, nil, ""
	}
}

// relToWorkspace is p (absolute, or relative to the workspace) as a
// slash-separated path relative to the workspace; false when outside.
func (s *Server) relToWorkspace(p string) (string, bool) {
	abs := s.absPath(p)
	root := filepath.Clean(s.opts.Workspace)
	if !pathWithin(root, abs) || abs == root {
		return "", false
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// checkpointFileChange applies or reverts one fileChange from the turn's
// checkpoints: the exact bytes and mode before (revert) or after (apply)
// the turn, never a reconstruction from the agent's diff. handled is false
// when the turn has no checkpoints or the path is outside the workspace
// (the caller falls back to the reported diff).
func (s *Server) checkpointFileChange(ctx context.Context, ed *client, p FileChangeParams, seg transcript.Segment, revert bool) (handled bool, _ FileChangeResult, _ error) {
	m, err := s.store.Message(p.ConversationID, p.MessageID)
	if err != nil || m.Checkpoints == nil || m.Checkpoints.Before == "" || m.Checkpoints.After == "" {
		return false, FileChangeResult{}, nil
	}
	rel, ok := s.relToWorkspace(seg.Path)
	if !ok {
		return false, FileChangeResult{}, nil
	}
	st, err := s.checkpoints()
	if err != nil {
		return false, FileChangeResult{}, nil
	}
	action, status := "apply", FileChangeApplied
	from, to := m.Checkpoints.Before, m.Checkpoints.After
	if revert {
		action, status = "revert", FileChangeReverted
		from, to = to, from
	}
	paths := []string{rel}
	if seg.OldPath != "" {
		if o, ok := s.relToWorkspace(seg.OldPath); ok {
			paths = append(paths, o)
		}
	}
	if p.Dirty {
		return true, FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "%s has unsaved edits in the editor: save or discard them, then %s again (the two texts are never mixed)", rel, action)
	}
	var conflicts []string
	already := true
	targets := make([]checkpoint.File, len(paths))
	curs := make([]checkpoint.File, len(paths))
	for i, rp := range paths {
		target, err := st.File(to, rp)
		if err != nil {
			return true, FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "cannot %s %s: %v", action, rp, err)
		}
		if target.Skipped {
			return true, FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "cannot %s %s: the checkpoint did not record it (%s)", action, rp, target.Reason)
		}
		want, err := st.File(from, rp)
		if err != nil {
			return true, FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "cannot %s %s: %v", action, rp, err)
		}
		cur, err := st.Current(rp)
		if err != nil {
			return true, FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "cannot %s %s: %v", action, rp, err)
		}
		targets[i], curs[i] = target, cur
		if checkpoint.SameContent(cur, target) {
			continue
		}
		already = false
		if !checkpoint.SameContent(cur, want) {
			conflicts = append(conflicts, rp)
		}
	}
	if already {
		if err := s.recordFileChange(p, seg.Path, status); err != nil {
			return true, FileChangeResult{}, err
		}
		return true, FileChangeResult{Reason: "already " + status, Status: status}, nil
	}
	var backup string
	if len(conflicts) > 0 {
		if !p.Force {
			return true, FileChangeResult{}, jsonrpc2.Errorf(CodeConflict, "%s changed since the turn (by you or a later turn); review it, or %s with force: true (the current content is kept in a checkpoint first, so the forced %s can be undone)",
				strings.Join(conflicts, ", "), action, action)
		}
		cp, note := s.takeCheckpoint(ctx, fmt.Sprintf("before forced %s of %s", action, rel))
		if cp.ID == "" {
			return true, FileChangeResult{}, jsonrpc2.Errorf(jsonrpc2.InternalError, "not forcing the %s of %s: the current content could not be kept first (%s)", action, rel, note)
		}
		backup = cp.ID
	}
	via := ViaDisk
	disk := paths
	t0, c0 := targets[0], curs[0]
	textual := func(f checkpoint.File) bool {
		return !f.Exists || !f.Symlink() && utf8.Valid(f.Data) && !strings.ContainsRune(string(f.Data), 0)
	}
	if ed != nil && textual(t0) && textual(c0) {
		via = ViaEditor
		var cur, tgt *string
		if c0.Exists {
			t := string(c0.Data)
			cur = &t
		}
		if t0.Exists {
			t := string(t0.Data)
			tgt = &t
		}
		shown := s.absPath(seg.Path)
		label := fmt.Sprintf("ochat: %s the change to %s", action, rel)
		res, err := ed.applyEdit(ctx, label, buildEdit(shown, cur, tgt, changePlan{kind: planWhole}))
		if err != nil {
			return true, FileChangeResult{}, jsonrpc2.Errorf(jsonrpc2.InternalError, "%s %s in the editor: %v", action, rel, err)
		}
		if !res.Applied {
			reason := res.FailureReason
			if reason == "" {
				reason = "the editor did not apply the edit"
			}
			return true, FileChangeResult{Via: via, Reason: reason, Status: seg.Status, Checkpoint: backup}, nil
		}
		if t0.Exists && c0.Exists && t0.Mode != c0.Mode {
			if err := os.Chmod(s.absPath(seg.Path), execPerm(s.absPath(seg.Path), t0.Mode == filemode.Executable)); err != nil {
				s.log.Info("restore mode", "path", rel, "err", err)
			}
		}
		disk = paths[1:]
	}
	if len(disk) > 0 {
		if _, err := st.Restore(ctx, to, disk, checkpoint.RestoreOptions{}); err != nil {
			return true, FileChangeResult{}, jsonrpc2.Errorf(jsonrpc2.InternalError, "%s %s: %v", action, rel, err)
		}
	}
	if err := s.recordFileChange(p, seg.Path, status); err != nil {
		return true, FileChangeResult{}, err
	}
	return true, FileChangeResult{Applied: true, Via: via, Status: status, Checkpoint: backup}, nil
}

// execPerm is abs's permission bits with the executable bits set (where
// readable) or cleared.
func execPerm(abs string, exec bool) fs.FileMode {
	perm := fs.FileMode(0o644)
	if fi, err := os.Stat(abs); err == nil {
		perm = fi.Mode().Perm()
	}
	perm &^= 0o111
	if exec {
		perm |= (perm & 0o444) >> 2
	}
	return perm
}
