package daemon

// ochat/changes, ochat/rewind, ochat/rewind/undo and ochat/checkpoint/restore
// (docs/protocol.md "Checkpoints"): a turn's real changes, the workspace and
// conversation back to before turn N, and the undo of that.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/checkpoint"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// Method names of this file.
const (
	MethodChanges           = "ochat/changes"
	MethodRewind            = "ochat/rewind"
	MethodRewindUndo        = "ochat/rewind/undo"
	MethodCheckpointRestore = "ochat/checkpoint/restore"
)

// ChangesParams are ochat/changes params: every turn of the conversation,
// or only turn Turn (counted from 1 over its user messages, hidden ones
// left out).
type ChangesParams struct {
	ConversationID string `json:"conversationId"`
	Turn           int    `json:"turn,omitempty"`
}

// TurnChanges is one turn in ChangesResult: its messages, checkpoints and
// fileChange segments (as reconciled with the disk at the turn's end).
// Note says why a turn has no checkpoints.
type TurnChanges struct {
	Turn               int                         `json:"turn"`
	UserMessageID      string                      `json:"userMessageId"`
	AssistantMessageID string                      `json:"assistantMessageId,omitempty"`
	Prompt             string                      `json:"prompt"`
	Checkpoints        *transcript.TurnCheckpoints `json:"checkpoints,omitempty"`
	Files              []transcript.Segment        `json:"files"`
	Note               string                      `json:"note,omitempty"`
}

// ChangesResult answers ochat/changes.
type ChangesResult struct {
	ConversationID string        `json:"conversationId"`
	Turns          []TurnChanges `json:"turns"`
}

// RewindParams are ochat/rewind params. Mode "" restores code and
// conversation, "code" only the workspace's files, "conversation" only the
// conversation (turn Turn and every later message are dropped).
type RewindParams struct {
	ConversationID string `json:"conversationId"`
	Turn           int    `json:"turn"`
	Mode           string `json:"mode,omitempty"`
}

// RewindResult answers ochat/rewind and ochat/rewind/undo. Backup is the
// checkpoint of the workspace taken before its files were restored
// (ochat/rewind/undo restores it); Restored the paths written or removed.
type RewindResult struct {
	Backup    string   `json:"backup,omitempty"`
	Restored  []string `json:"restored"`
	Truncated bool     `json:"truncated,omitempty"`
}

// CheckpointRestoreParams are ochat/checkpoint/restore params: make Paths
// (relative to the workspace; none: every file) hold what they held in
// Checkpoint, after a backup of the current state.
type CheckpointRestoreParams struct {
	Checkpoint string   `json:"checkpoint"`
	Paths      []string `json:"paths,omitempty"`
}

// turnsOf pairs each visible user message with the assistant message after
// it, numbered from 1.
func turnsOf(msgs []transcript.Message) []TurnChanges {
	var out []TurnChanges
	for i, m := range msgs {
		if m.Role != transcript.RoleUser || m.Hidden {
			continue
		}
		tc := TurnChanges{Turn: len(out) + 1, UserMessageID: m.ID, Prompt: m.Content, Files: []transcript.Segment{}}
		if i+1 < len(msgs) && msgs[i+1].Role == transcript.RoleAssistant {
			a := msgs[i+1]
			tc.AssistantMessageID, tc.Checkpoints = a.ID, a.Checkpoints
			for _, sg := range a.Segments {
				if sg.Type == transcript.SegFileChange {
					tc.Files = append(tc.Files, sg)
				}
			}
		}
		switch {
		case tc.Checkpoints != nil && tc.Checkpoints.Note != "" && tc.Checkpoints.After == "":
			tc.Note = "no checkpoints: " + tc.Checkpoints.Note + "; the changes shown are what the agent reported"
		case tc.Checkpoints == nil:
			tc.Note = "no checkpoints (a turn imported from a terminal session, or made before checkpoints); the changes shown are what the agent reported"
		}
		out = append(out, tc)
	}
	return out
}

func (s *Server) changes(p ChangesParams) (any, error) {
	if err := required("conversationId", p.ConversationID); err != nil {
		return nil, err
	}
	msgs, err := s.store.Messages(p.ConversationID)
	if err != nil {
		return nil, storeErr("changes", p.ConversationID, err)
	}
	turns := turnsOf(msgs)
	if p.Turn != 0 {
		if p.Turn < 0 || p.Turn > len(turns) {
			return nil, jsonrpc2.Errorf(jsonrpc2.InvalidParams, "conversation %s has %d turns; turn %d does not exist", p.ConversationID, len(turns), p.Turn)
		}
		turns = turns[p.Turn-1 : p.Turn]
	}
	return ChangesResult{ConversationID: p.ConversationID, Turns: turns}, nil
}

func (s *Server) rewind(ctx context.Context, p RewindParams) (any, error) {
	if err := required("conversationId", p.ConversationID); err != nil {
		return nil, err
	}
	if p.Mode != "" && p.Mode != "code" && p.Mode != "conversation" {
		return nil, jsonrpc2.Errorf(jsonrpc2.InvalidParams, "mode %q: use \"\" (code and conversation), \"code\" or \"conversation\"", p.Mode)
	}
	if s.turnRunning(p.ConversationID) {
		return nil, jsonrpc2.Errorf(CodeConflict, "a turn is running in conversation %s: cancel it or wait, then rewind", p.ConversationID)
	}
	msgs, err := s.store.Messages(p.ConversationID)
	if err != nil {
		return nil, storeErr("rewind", p.ConversationID, err)
	}
	turns := turnsOf(msgs)
	if p.Turn < 1 || p.Turn > len(turns) {
		return nil, jsonrpc2.Errorf(jsonrpc2.InvalidParams, "conversation %s has %d turns; turn %d does not exist", p.ConversationID, len(turns), p.Turn)
	}
	tc := turns[p.Turn-1]
	res := RewindResult{Restored: []string{}}
	if p.Mode != "conversation" {
		if tc.Checkpoints == nil || tc.Checkpoints.Before == "" {
			return nil, jsonrpc2.Errorf(CodeConflict, "turn %d has no checkpoint to restore the code from (%s); rewind with mode \"conversation\" to drop the turns only", p.Turn, tc.Note)
		}
		st, err := s.checkpoints()
		if err != nil {
			return nil, jsonrpc2.Errorf(CodeConflict, "cannot restore the code: %v", err)
		}
		rr, err := st.RestoreAll(ctx, tc.Checkpoints.Before, fmt.Sprintf("before rewind of %s to turn %d", p.ConversationID, p.Turn))
		if rr.Backup != "" {
			res.Backup = rr.Backup
			if merr := st.SetMark("rewind-"+p.ConversationID, rr.Backup); merr != nil {
				s.log.Error("keep rewind backup", "err", merr)
			}
		}
		if err != nil {
			return nil, restoreErr("rewind", err)
		}
		res.Restored = append(res.Restored, rr.Restored...)
	}
	if p.Mode != "code" {
		err := s.store.Update(func(w *history.Writer) error {
			if err := w.TruncateFrom(p.ConversationID, tc.UserMessageID); err != nil {
				return err
			}
			return w.ResetAgentSessions(p.ConversationID)
		})
		if err != nil {
			return nil, storeErr("rewind", p.ConversationID, err)
		}
		res.Truncated = true
		s.closeSessions(ctx, p.ConversationID)
		s.mu.Lock()
		if t := s.topics[p.ConversationID]; t != nil {
			s.resyncOthersLocked(t, nil, fmt.Sprintf("conversation rewound to before turn %d", p.Turn))
		}
		s.mu.Unlock()
	}
	return res, nil
}

func (s *Server) rewindUndo(ctx context.Context, p ConversationParams) (any, error) {
	if err := required("conversationId", p.ConversationID); err != nil {
		return nil, err
	}
	st, err := s.checkpoints()
	if err != nil {
		return nil, jsonrpc2.Errorf(CodeConflict, "%v", err)
	}
	mark := st.Mark("rewind-" + p.ConversationID)
	if mark == "" {
		return nil, notFound("conversation %s has no rewind to undo", p.ConversationID)
	}
	rr, err := st.RestoreAll(ctx, mark, "before undo of the rewind of "+p.ConversationID)
	if err != nil {
		return nil, restoreErr("undo rewind", err)
	}
	// The undo can itself be undone.
	if err := st.SetMark("rewind-"+p.ConversationID, rr.Backup); err != nil {
		s.log.Error("keep rewind backup", "err", err)
	}
	return RewindResult{Backup: rr.Backup, Restored: append([]string{}, rr.Restored...)}, nil
}

func (s *Server) checkpointRestore(ctx context.Context, p CheckpointRestoreParams) (any, error) {
	if err := required("checkpoint", p.Checkpoint); err != nil {
		return nil, err
	}
	st, err := s.checkpoints()
	if err != nil {
		return nil, jsonrpc2.Errorf(CodeConflict, "%v", err)
	}
	var rr checkpoint.RestoreResult
	if len(p.Paths) == 0 {
		rr, err = st.RestoreAll(ctx, p.Checkpoint, "")
	} else {
		rr, err = st.Restore(ctx, p.Checkpoint, p.Paths, checkpoint.RestoreOptions{Backup: true})
	}
	if err != nil {
		return nil, restoreErr("restore", err)
	}
	return RewindResult{Backup: rr.Backup, Restored: append([]string{}, rr.Restored...)}, nil
}

func restoreErr(op string, err error) error {
	var ce *checkpoint.ConflictError
	switch {
	case errors.As(err, &ce):
		return jsonrpc2.Errorf(CodeConflict, "%s: %v", op, err)
	case errors.Is(err, checkpoint.ErrNotFound):
		return notFound("%s: %v", op, err)
	}
	return jsonrpc2.Errorf(jsonrpc2.InternalError, "%s: %v", op, err)
}

func (s *Server) turnRunning(convID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[convID]
	return t != nil && t.run != nil
}

// checkpointMethod serves the methods of this file from their own
// goroutine: a restore may take a while and must not hold the client's read
// loop.
func (s *Server) checkpointMethod(c *client, method string, params json.RawMessage, reply jsonrpc2.Replier) (any, error) {
	var run func(ctx context.Context) (any, error)
	switch method {
	case MethodChanges:
		var p ChangesParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.changes(p)
	case MethodRewind:
		var p RewindParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		run = func(ctx context.Context) (any, error) { return s.rewind(ctx, p) }
	case MethodRewindUndo:
		var p ConversationParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		run = func(ctx context.Context) (any, error) { return s.rewindUndo(ctx, p) }
	default:
		var p CheckpointRestoreParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		run = func(ctx context.Context) (any, error) { return s.checkpointRestore(ctx, p) }
	}
	go func() {
		var (
			res any
			err error
		)
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("panic in "+method, "panic", v)
				res, err = nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "internal error in %s: %v", method, v)
			}
			c.queueReply(reply, res, err)
		}()
		res, err = run(s.baseCtx)
	}()
	return nil, errReplied
}

// restorePoint is the code checkpoint an edit or retry with restoreCode
// restores: the one before the turn user message msgs[i] started.
func restorePoint(want bool, msgs []transcript.Message, i int) (string, error) {
	if !want {
		return "", nil
	}
	if i+1 >= len(msgs) || msgs[i+1].Checkpoints == nil || msgs[i+1].Checkpoints.Before == "" {
		return "", jsonrpc2.Errorf(CodeConflict, "that turn has no code checkpoint (imported from a terminal session, or made before checkpoints): send without restoreCode")
	}
	return msgs[i+1].Checkpoints.Before, nil
}

// restoreCodeFor puts the workspace back to checkpoint id ("" : nothing to
// do) once startTurn holds the conversation's run slot, after a backup that
// ochat/rewind/undo restores.
func (s *Server) restoreCodeFor(convID, id string) error {
	if id == "" {
		return nil
	}
	st, err := s.checkpoints()
	if err != nil {
		return jsonrpc2.Errorf(CodeConflict, "cannot restore the code: %v", err)
	}
	rr, err := st.RestoreAll(s.baseCtx, id, "before edit/retry of "+convID)
	if rr.Backup != "" {
		if merr := st.SetMark("rewind-"+convID, rr.Backup); merr != nil {
			s.log.Error("keep restore backup", "err", merr)
		}
	}
	if err != nil {
		return restoreErr("restore the code", err)
	}
	return nil
}
