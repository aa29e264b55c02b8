package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/transcript"
)

// Linked conversations (issue 4 §3; docs/protocol.md "Linked
// conversations"): a conversation opened from a native session
// (ochat/sessions/open) keeps a mark in its history.NativeRef — the native
// id of the last native message it holds and the file's size and mtime at
// that point. Turns appended to the native session after the mark (the
// user went on with `claude --resume` in a terminal) are imported as
// ordinary messages when a client opens, gets or subscribes to the
// conversation, before a prompt is sent in it, and, while it has
// subscribers, when the native watcher sees the file change. Turns ochat itself runs
// in the same native session (same agent, session/load of the native id)
// are written to the native file by the agent: the mark moves past them
// when the turn ends, so they are never imported twice. A rewind or
// rollback in the terminal is followed from the newest native message the
// conversation still shares with the session (NativeRef.Links); what the
// session lost stays in the conversation, recorded in NativeRef.Rewinds.
// Interruptions and errors the reader gives as markers become turn
// statuses (nativeMessages). Native files are only read.

// NativeSync reports what syncing a linked conversation with its native
// session did (OpenSessionResult.Sync, GetConversationResult.Sync).
// Imported counts the native messages appended to the conversation;
// Updated reports that the last message imported before had grown (a
// terminal turn still being written) and was replaced in place. Rewound
// counts the conversation messages the native session no longer holds (it
// was rewound or rolled back in the terminal): they stay, and the new
// native messages are imported after them. Note says what the user should
// know: such a rewind, or why nothing could be imported although the
// session may have changed (a turn is running in the conversation, the
// session cannot be read, no message of the conversation is left in it,
// or the conversation predates marks).
type NativeSync struct {
	Imported int    `json:"imported"`
	Updated  bool   `json:"updated,omitempty"`
	Rewound  int    `json:"rewound,omitempty"`
	Note     string `json:"note,omitempty"`
}

// maxNativeLinks bounds history.NativeRef.Links: a rewind further back
// than the last maxNativeLinks native messages held finds no common
// message and re-marks at the native session's end.
const maxNativeLinks = 64

// maxNativeRewinds bounds history.NativeRef.Rewinds.
const maxNativeRewinds = 16

// linkedSyncDebounce merges the changes of one native file before the
// subscribed conversations linked to it are synced.
const linkedSyncDebounce = 100 * time.Millisecond

// errMarkMoved aborts an import whose mark was moved meanwhile.
var errMarkMoved = errors.New("the native mark moved meanwhile")

// fileStamp is a native session file's size (bytes) and mtime (Unix ns).
type fileStamp struct{ size, modNs int64 }

// nativeStamp stats a native session file; ok is false for OpenCode's
// "<db>#<ses_id>" (the database changes with every session) and for a file
// that cannot be stat'ed.
func nativeStamp(path string) (st fileStamp, ok bool) {
	if path == "" || strings.Contains(path, "#") {
		return fileStamp{}, false
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return fileStamp{}, false
	}
	return fileStamp{fi.Size(), fi.ModTime().UnixNano()}, true
}

// importedMessage is native message m of a session of agent as a
// conversation message with id: an assistant turn gets the agent when the
// reader left it empty and status completed when it was streaming (the
// terminal may still be writing it; a later sync replaces it as it grows).
func importedMessage(m transcript.Message, agent, id string) transcript.Message {
	m.ID = id
	if m.Role == transcript.RoleAssistant {
		if m.Agent == "" {
			m.Agent = agent
		}
		if m.Status == transcript.StatusStreaming || m.Status == "" {
			m.Status = transcript.StatusCompleted
		}
	}
	return m
}

// nativeMessages is the messages of tr as a conversation holds them: the
// reader's messages with the turn endings its markers record folded in
// (native.Marker; the canonical transcript has no marker of its own). An
// "interrupted" marker after an assistant turn makes it cancelled (stop
// reason "cancelled"); one after a prompt that got no answer adds a
// cancelled assistant message with no segments, id "<prompt id>#interrupted".
// An "error" marker after a prompt that got no answer before the next
// prompt adds a failed assistant message carrying the error text, id
// "<prompt id>#error" (an error followed by an answer was a retry and is
// left out). Compaction, notice and rollback markers have no place in a
// conversation and are left out. The added ids are stable, so a mark can
// point at them.
func nativeMessages(tr *native.Transcript) []transcript.Message {
	if len(tr.Markers) == 0 {
		return tr.Messages
	}
	after := map[string][]native.Marker{}
	for _, mk := range tr.Markers {
		if mk.AfterID != "" && (mk.Kind == "interrupted" || mk.Kind == "error") {
			after[mk.AfterID] = append(after[mk.AfterID], mk)
		}
	}
	if len(after) == 0 {
		return tr.Messages
	}
	out := make([]transcript.Message, 0, len(tr.Messages)+len(after))
	for i, m := range tr.Messages {
		out = append(out, m)
		mks := after[m.ID]
		if len(mks) == 0 {
			continue
		}
		var intr, fail *native.Marker
		for k := range mks {
			switch mks[k].Kind {
			case "interrupted":
				intr = &mks[k]
			case "error":
				fail = &mks[k]
			}
		}
		last := &out[len(out)-1]
		if m.Role == transcript.RoleAssistant {
			if intr != nil && last.Status != transcript.StatusFailed {
				last.Status = transcript.StatusCancelled
				if last.StopReason == "" {
					last.StopReason = "cancelled"
				}
			}
			continue
		}
		unanswered := i+1 == len(tr.Messages) || tr.Messages[i+1].Role == transcript.RoleUser
		switch {
		case intr != nil && unanswered:
			out = append(out, transcript.Message{ID: m.ID + "#interrupted", Timestamp: intr.Timestamp, Role: transcript.RoleAssistant,
				Agent: tr.Agent, Segments: []transcript.Segment{}, Status: transcript.StatusCancelled, StopReason: "cancelled"})
		case fail != nil && i+1 < len(tr.Messages) && tr.Messages[i+1].Role == transcript.RoleUser:
			out = append(out, transcript.Message{ID: m.ID + "#error", Timestamp: fail.Timestamp, Role: transcript.RoleAssistant,
				Agent: tr.Agent, Segments: []transcript.Segment{}, Status: transcript.StatusFailed, Error: fail.Text})
		}
	}
	return out
}

// withLinks is ref with links appended to its Links, the oldest dropped
// beyond maxNativeLinks. A link whose native id is the newest's replaces it.
func withLinks(ref history.NativeRef, links ...history.NativeLink) history.NativeRef {
	out := slices.Clone(ref.Links)
	for _, l := range links {
		if l.NativeID == "" || l.MessageID == "" {
			continue
		}
		if n := len(out); n > 0 && out[n-1].NativeID == l.NativeID {
			out[n-1] = l
			continue
		}
		out = append(out, l)
	}
	if len(out) > maxNativeLinks {
		out = slices.Clone(out[len(out)-maxNativeLinks:])
	}
	ref.Links = out
	return ref
}

// commonLink is the newest link of links whose native message msgs still
// holds, with that message's index; -1 when there is none.
func commonLink(links []history.NativeLink, msgs []transcript.Message) (int, history.NativeLink) {
	for k := len(links) - 1; k >= 0; k-- {
		if i := messageIndex(msgs, links[k].NativeID); i >= 0 {
			return i, links[k]
		}
	}
	return -1, history.NativeLink{}
}

// lastMessageID is the id of conversation convID's last message; after
// ("" = none) is one it is known not to precede, to read fewer messages.
func (s *Server) lastMessageID(convID, after string) string {
	rest, err := s.store.MessagesAfter(convID, after)
	if err != nil || len(rest) == 0 {
		return after
	}
	return rest[len(rest)-1].ID
}

// lastLinked is the conversation message id of ref's newest link, else
// its LastMessageID.
func lastLinked(ref history.NativeRef) string {
	if n := len(ref.Links); n > 0 && ref.Links[n-1].MessageID > ref.LastMessageID {
		return ref.Links[n-1].MessageID
	}
	return ref.LastMessageID
}

// markAt is ref with its mark at message i of msgs (-1: before the first)
// imported as conversation message msgID ("" for a turn ochat ran), the
// file as stamped before the read.
func markAt(ref history.NativeRef, msgs []transcript.Message, i int, msgID string, st fileStamp) history.NativeRef {
	ref.LastNativeID, ref.LastMessageID, ref.Count = "", msgID, i+1
	if i >= 0 {
		ref.LastNativeID = msgs[i].ID
	}
	ref.Size, ref.ModTimeNs, ref.MarkedAt = st.size, st.modNs, nowMs()
	return ref
}

// nativeSource is what native.Read takes for ref: its path, else its id.
func nativeSource(ref history.NativeRef) string {
	if ref.Path != "" {
		return ref.Path
	}
	return ref.SessionID
}

// readLinked reads the native session of ref, linked to conversation
// convID, by its path; a file that is gone (Codex compresses a finished
// rollout to .jsonl.zst, archives it) is looked up again by session id. The
// transcript's Path is where it was found; st is that file's stamp taken
// before the read (zero when the file was found by id: the next sync reads
// again). A session that is not found by id either is remembered as gone
// (sessionsHub.gone): later reads return the same error without searching
// the native store again, until the watcher reports a change in that
// agent's store or the session is opened again (forgetGone).
func (s *Server) readLinked(ctx context.Context, convID string, ref history.NativeRef) (tr *native.Transcript, st fileStamp, stamped bool, err error) {
	st, stamped = nativeStamp(ref.Path)
	tr, err = native.Read(ctx, s.nativeEnv(), nativeSource(ref))
	if err == nil || ref.Path == "" || !errors.Is(err, os.ErrNotExist) {
		if err != nil {
			err = fmt.Errorf("read native session %s: %w", nativeSource(ref), err)
		}
		return tr, st, stamped, err
	}
	if err := s.goneErr(convID, ref); err != nil {
		return nil, fileStamp{}, false, err
	}
	tr, err = native.Read(ctx, s.nativeEnv(), ref.SessionID)
	if err == nil && tr.Agent != ref.Agent {
		err = fmt.Errorf("read native session %s: gone from %s; the %s session of that id is another", ref.SessionID, ref.Path, tr.Agent)
	} else if err != nil {
		err = fmt.Errorf("read native session %s (gone from %s): %w", ref.SessionID, ref.Path, err)
	}
	if err != nil {
		if ctx.Err() == nil {
			s.setGone(convID, ref, err)
		}
		return nil, fileStamp{}, false, err
	}
	return tr, fileStamp{}, false, nil
}

// goneSession is a linked conversation's native session that was not found:
// its agent and path as the mark has them, and the error the search gave.
type goneSession struct {
	agent, path string
	err         error
}

// goneErr is the error remembered for conversation convID's native session
// at ref's path, or nil.
func (s *Server) goneErr(convID string, ref history.NativeRef) error {
	h := &s.native
	h.mu.Lock()
	defer h.mu.Unlock()
	if g, ok := h.gone[convID]; ok && g.agent == ref.Agent && g.path == ref.Path {
		return g.err
	}
	return nil
}

// setGone remembers that conversation convID's native session at ref's
// path was not found (err).
func (s *Server) setGone(convID string, ref history.NativeRef, err error) {
	h := &s.native
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone == nil {
		h.gone = map[string]goneSession{}
	}
	h.gone[convID] = goneSession{agent: ref.Agent, path: ref.Path, err: err}
}

// forgetGone makes the next sync of conversation convID search for its
// native session again (sessions/open of it).
func (s *Server) forgetGone(convID string) {
	h := &s.native
	h.mu.Lock()
	delete(h.gone, convID)
	h.mu.Unlock()
}

// nativeSyncWait is how long a prompt to a linked conversation waits for a
// sync of it that is under way (sessionsHub.syncWait overrides it).
const nativeSyncWait = 10 * time.Second

// errTurnRunning is beginSync's answer while a turn runs in the conversation.
var errTurnRunning = errors.New("a turn is running in the conversation; its native session is synced after it")

// errSyncBusy is beginSync's answer when another sync of the conversation
// took longer than nativeSyncWait.
var errSyncBusy = errors.New("another sync of the conversation with its native session is under way")

// beginSync claims conversation convID for a sync with its native session:
// under s.mu, no turn may run in it (errTurnRunning) and no other sync; it
// waits for one under way, until ctx ends or for nativeSyncWait at most
// (errSyncBusy). While claimed, startTurn waits (waitSyncLocked), so the
// sync does its reads and writes without s.mu and no turn runs meanwhile;
// done ends the claim.
func (s *Server) beginSync(ctx context.Context, convID string) (done func(), err error) {
	h := &s.native
	var timeout <-chan time.Time
	for {
		s.mu.Lock()
		if t := s.topics[convID]; t != nil && t.run != nil {
			s.mu.Unlock()
			return nil, errTurnRunning
		}
		ch := h.syncing[convID]
		if ch == nil {
			if h.syncing == nil {
				h.syncing = map[string]chan struct{}{}
			}
			ch = make(chan struct{})
			h.syncing[convID] = ch
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(h.syncing, convID)
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		if timeout == nil {
			timer := time.NewTimer(s.syncWaitLocked())
			defer timer.Stop()
			timeout = timer.C
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			return nil, errSyncBusy
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the running sync of conversation %s: %w", convID, ctx.Err())
		}
	}
}

// syncWaitLocked is how long to wait for a sync under way: nativeSyncWait
// unless the hub's syncWait overrides it. s.mu is held.
func (s *Server) syncWaitLocked() time.Duration {
	if w := s.native.syncWait; w > 0 {
		return w
	}
	return nativeSyncWait
}

// waitSyncLocked returns once no sync of conversation convID is under
// way, s.mu held as on entry (it is released while waiting). It gives up
// after nativeSyncWait: the error says a sync holds the conversation.
func (s *Server) waitSyncLocked(convID string) error {
	h := &s.native
	if h.syncing[convID] == nil {
		return nil
	}
	timer := time.NewTimer(s.syncWaitLocked())
	defer timer.Stop()
	for {
		ch := h.syncing[convID]
		if ch == nil {
			return nil
		}
		s.mu.Unlock()
		select {
		case <-ch:
			s.mu.Lock()
		case <-timer.C:
			s.mu.Lock()
			if h.syncing[convID] != nil {
				return fmt.Errorf("conversation %s is being synced with its native session: try again", convID)
			}
			return nil
		}
	}
}

// syncLinked is syncNative for the hooks (get, subscribe, send, open, the
// watcher): an error is logged and returned as the Note, never failing the
// request. except (may be nil) is a client not to send ochat/resync: the
// one subscribing, which gets the new snapshot in its answer.
func (s *Server) syncLinked(ctx context.Context, convID string, except *client) NativeSync {
	res, err := s.syncNative(ctx, convID, except)
	if err != nil {
		s.log.Warn("sync linked conversation with its native session", "conversation", convID, "err", err)
		res.Note = err.Error()
	}
	return res
}

// syncNative imports into conversation convID, when it is linked to a
// native session, the native messages after its mark, and moves the mark.
// Nothing happens for an unknown or unlinked conversation, while a turn
// runs in it, or when the session file's size and mtime are those of the
// mark. The sync holds only the conversation (beginSync: no turn starts
// in it meanwhile) and does its store and file I/O without s.mu or any
// lock of other conversations; it waits for another sync of the
// conversation under way, for nativeSyncWait at most (then the Note says
// so). The messages get new sortable ids after every stored one, through
// the store's ordinary write path, together with the mark in one
// transaction; the native agent's cursor moves past them when it had seen
// the whole conversation (its native session holds these turns). The
// conversation's subscribers but except are sent ochat/resync.
//
// If the native session no longer holds the marked message (a rewind or
// rollback in the terminal), the sync goes on from the newest message of
// NativeRef.Links it still holds: the conversation's messages after that
// one stay (NativeSync.Rewound counts them, NativeRef.Rewinds records
// them, the Note says so) and the native messages after it are imported
// after them. When it holds none of them, the mark moves to its end and
// nothing is imported (the Note says so).
func (s *Server) syncNative(ctx context.Context, convID string, except *client) (NativeSync, error) {
	conv, err := s.store.Conversation(convID)
	if err != nil || conv.Native == nil {
		return NativeSync{}, nil // an unknown conversation is the caller's error to report
	}
	done, err := s.beginSync(ctx, convID)
	switch {
	case errors.Is(err, errTurnRunning), errors.Is(err, errSyncBusy):
		return NativeSync{Note: err.Error()}, nil
	case err != nil:
		return NativeSync{}, err
	}
	defer done()
	if conv, err = s.store.Conversation(convID); err != nil || conv.Native == nil {
		return NativeSync{}, nil // deleted or unlinked meanwhile
	}
	ref := *conv.Native
	if st, ok := nativeStamp(ref.Path); ok && ref.MarkedAt != 0 && st.size == ref.Size && st.modNs == ref.ModTimeNs {
		return NativeSync{}, nil
	}
	tr, st, _, err := s.readLinked(ctx, convID, ref)
	if err != nil {
		return NativeSync{}, err
	}
	if ref.Path != "" && tr.Path != "" && tr.Path != ref.Path {
		s.log.Info("linked native session moved", "conversation", convID, "from", ref.Path, "to", tr.Path)
		ref.Path = tr.Path // the mark set below records where it is now
	}
	msgs := nativeMessages(tr)
	if ref.MarkedAt == 0 {
		// Opened before marks were recorded: which native messages the
		// snapshot covered is unknown, so nothing is guessed.
		nr := markAt(ref, msgs, len(msgs)-1, "", st)
		if err := s.store.SetNative(convID, &nr); err != nil {
			return NativeSync{}, fmt.Errorf("set native mark: %w", err)
		}
		return NativeSync{Note: "the conversation was opened before ochat recorded how much of its native session it holds: nothing imported now; turns the native session gains from now on are"}, nil
	}
	idx, lastMsgID := -1, ref.LastMessageID
	var rewound []transcript.Message // conversation messages the native session no longer holds
	rewind := false                  // the marked message is gone: going on from a link
	if ref.LastNativeID != "" {
		if idx = messageIndex(msgs, ref.LastNativeID); idx < 0 {
			var link history.NativeLink
			if idx, link = commonLink(ref.Links, msgs); idx < 0 {
				nr := markAt(ref, msgs, len(msgs)-1, "", st)
				nr.Links, nr.AwaitPrompt = nil, ""
				if n := len(msgs); n > 0 {
					nr = withLinks(nr, history.NativeLink{NativeID: msgs[n-1].ID, MessageID: s.lastMessageID(convID, lastLinked(ref))})
				}
				if err := s.store.SetNative(convID, &nr); err != nil {
					return NativeSync{}, fmt.Errorf("set native mark: %w", err)
				}
				note := fmt.Sprintf("native %s session %s was rewound or rolled back in the terminal past every message of the conversation it held: nothing imported, the conversation is left as it is and now follows the session from its end (%d messages)",
					ref.Agent, ref.SessionID, len(msgs))
				s.log.Info("linked conversation re-marked", "conversation", convID, "reason", note)
				return NativeSync{Note: note}, nil
			}
			rewind, lastMsgID = true, link.MessageID
			if rewound, err = s.store.MessagesAfter(convID, link.MessageID); err != nil {
				return NativeSync{}, fmt.Errorf("read messages after the rewind: %w", err)
			}
		}
	}
	fresh := msgs[idx+1:]
	// Messages to import: fresh without ochat's own late-written turn. A
	// prompt of it whose answer is not written yet (pending) is left after
	// the mark, which stays before it, still awaited.
	out, skippedTail, pending, end := fresh, false, false, len(msgs)-1
	if ref.AwaitPrompt != "" {
		var at int
		var answered bool
		out, at, skippedTail, answered = withoutTurn(fresh, ref.AwaitPrompt)
		if at >= 0 && skippedTail && !answered {
			skippedTail, pending, end = false, true, idx+at
		}
	}
	var grown *transcript.Message
	if idx >= 0 && lastMsgID != "" && !rewind {
		if old, err := s.store.Message(convID, lastMsgID); err == nil {
			if m := importedMessage(msgs[idx], ref.Agent, lastMsgID); !sameMessage(old, m) {
				grown = &m
			}
		}
	}
	if (len(fresh) == 0 || pending && len(out) == 0) && grown == nil && !rewind {
		// Nothing new, or only ochat's prompt waiting for its answer: the
		// mark stays (at idx), stamped anew.
		if nr := markAt(ref, msgs, idx, ref.LastMessageID, st); nr.Size != ref.Size || nr.ModTimeNs != ref.ModTimeNs {
			if err := s.store.SetNative(convID, &nr); err != nil {
				return NativeSync{}, fmt.Errorf("set native mark: %w", err)
			}
		}
		return NativeSync{}, nil
	}
	if len(out) == 0 && grown == nil && !rewind { // only ochat's own turn, written late
		nr := markAt(ref, msgs, len(msgs)-1, "", st)
		nr.AwaitPrompt = ""
		nr = withLinks(nr, history.NativeLink{NativeID: msgs[len(msgs)-1].ID, MessageID: s.lastMessageID(convID, lastLinked(ref))})
		if err := s.store.SetNative(convID, &nr); err != nil {
			return NativeSync{}, fmt.Errorf("set native mark: %w", err)
		}
		return NativeSync{}, nil
	}

	// While the sync holds the conversation (beginSync) no turn runs or
	// starts in it, so no message is stored in it between the ids taken
	// here and the write: the imported turns sort after everything stored.
	as, aerr := s.store.AgentSession(convID, ref.Agent)
	moveCursor := false
	if aerr == nil && as.SessionID == ref.SessionID {
		rest, err := s.store.MessagesAfter(convID, as.Cursor)
		moveCursor = err == nil && len(rest) == 0
	}
	imported := make([]transcript.Message, 0, len(out))
	for _, m := range out {
		imported = append(imported, importedMessage(m, ref.Agent, s.newID()))
	}
	lastMsg := lastMsgID
	switch n := len(imported); {
	case skippedTail:
		lastMsg = "" // the native session ends with ochat's own turn
	case n > 0:
		lastMsg = imported[n-1].ID
	}
	nr := markAt(ref, msgs, end, lastMsg, st)
	if len(fresh) > 0 && !pending {
		nr.AwaitPrompt = "" // the awaited turn was skipped, or is not coming
	}
	if rewind {
		nr = withLinks(nr, history.NativeLink{NativeID: msgs[idx].ID, MessageID: lastMsgID})
	}
	for i, m := range imported {
		nr = withLinks(nr, history.NativeLink{NativeID: out[i].ID, MessageID: m.ID})
	}
	if skippedTail {
		var held string
		if n := len(imported); n > 0 {
			held = imported[n-1].ID
		} else {
			held = s.lastMessageID(convID, lastLinked(ref))
		}
		nr = withLinks(nr, history.NativeLink{NativeID: msgs[len(msgs)-1].ID, MessageID: held})
	}
	now := nowMs()
	if n := len(rewound); n > 0 {
		nr.Rewinds = append(slices.Clone(nr.Rewinds), history.NativeRewind{At: now, Kept: lastMsgID, First: rewound[0].ID, Last: rewound[n-1].ID, Count: n})
		if len(nr.Rewinds) > maxNativeRewinds {
			nr.Rewinds = nr.Rewinds[len(nr.Rewinds)-maxNativeRewinds:]
		}
	}
	err = s.store.Update(func(w *history.Writer) error {
		cur, err := w.Conversation(convID)
		if err != nil {
			return err
		}
		if cur.Native == nil || cur.Native.MarkedAt != ref.MarkedAt || cur.Native.LastNativeID != ref.LastNativeID {
			return errMarkMoved
		}
		if grown != nil {
			if err := w.PutMessage(convID, *grown, at(*grown, now)); err != nil {
				return err
			}
		}
		for _, m := range imported {
			if err := w.PutMessage(convID, m, at(m, now)); err != nil {
				return err
			}
		}
		if n := len(imported); moveCursor && n > 0 {
			as.Cursor = imported[n-1].ID
			if err := w.PutAgentSession(convID, ref.Agent, as); err != nil {
				return err
			}
		}
		return w.SetNative(convID, &nr)
	})
	switch {
	case errors.Is(err, errMarkMoved):
		return NativeSync{}, nil
	case err != nil:
		return NativeSync{}, fmt.Errorf("import native turns: %w", err)
	}
	res := NativeSync{Imported: len(imported), Updated: grown != nil, Rewound: len(rewound)}
	switch {
	case len(rewound) > 0:
		res.Note = fmt.Sprintf("native %s session %s was rewound or rolled back in the terminal: it no longer holds the conversation's last %d message(s) (%s), which stay in the conversation; %d new message(s) imported after them",
			ref.Agent, ref.SessionID, len(rewound), idSpan(rewound), len(imported))
	case rewind:
		res.Note = fmt.Sprintf("native %s session %s was rewound or rolled back in the terminal to a message the conversation holds; %d new message(s) imported after it",
			ref.Agent, ref.SessionID, len(imported))
	}
	if len(imported) > 0 || grown != nil || rewind {
		reason := fmt.Sprintf("native session changed: %d message(s) imported from %s session %s", res.Imported, ref.Agent, ref.SessionID)
		if len(rewound) > 0 {
			reason += fmt.Sprintf(" after %d message(s) it no longer holds (rewound in the terminal)", len(rewound))
		}
		s.mu.Lock()
		if t := s.topics[convID]; t != nil {
			s.resyncOthersLocked(t, except, reason)
		}
		s.mu.Unlock()
	}
	s.log.Info("linked conversation synced", "conversation", convID, "agent", ref.Agent, "session", ref.SessionID, "imported", res.Imported, "updated", res.Updated, "rewound", res.Rewound)
	return res, nil
}

// idSpan names the first and last of msgs: "ID" or "ID1 … ID2"; "none"
// when msgs is empty.
func idSpan(msgs []transcript.Message) string {
	switch n := len(msgs); n {
	case 0:
		return "none"
	case 1:
		return msgs[0].ID
	default:
		return msgs[0].ID + " … " + msgs[n-1].ID
	}
}

// at is the time a message is stored at: its own timestamp, else now.
func at(m transcript.Message, now int64) int64 {
	if m.Timestamp != 0 {
		return m.Timestamp
	}
	return now
}

// sameMessage reports whether two messages encode alike.
func sameMessage(a, b transcript.Message) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// nativeTurnEnded moves the mark of linked conversation convID past the turn
// agent just ran in session sessionID with prompt text prompt, when that is
// the native session itself (the same agent continued it through
// session/load or session/resume, so the agent wrote the turn to the native
// file): the mark becomes the native session's last message, and those
// messages are not imported again. An agent may write its log after it
// answers: when accepted (the agent answered the prompt with a stop
// reason) and the native session does not yet hold the prompt and an
// answer after it, the mark stays before the prompt's message (if written)
// and NativeRef.AwaitPrompt makes a later sync skip the turn. A turn that
// failed (the agent may never have seen the prompt) and is not in the
// native session leaves the mark alone, so nothing the terminal writes is
// skipped for it. A turn of another agent (a handoff, or a session/new
// after a failed load) leaves the native file and the mark alone. finish
// calls it after storing the answer, while the turn still holds the
// conversation: no sync of it runs then (beginSync refuses while a turn
// runs, and startTurn waited for any sync under way), so it needs no lock
// of its own and holds up no other conversation.
func (s *Server) nativeTurnEnded(convID, agent, sessionID, prompt string, accepted bool) {
	if sessionID == "" {
		return
	}
	conv, err := s.store.Conversation(convID)
	if err != nil || conv.Native == nil || conv.Native.Agent != agent || conv.Native.SessionID != sessionID {
		return
	}
	ref := *conv.Native
	tr, st, _, err := s.readLinked(s.baseCtx, convID, ref)
	if err != nil {
		s.log.Warn("native mark not moved past an ochat turn", "conversation", convID, "session", sessionID, "err", err)
		return
	}
	if ref.Path != "" && tr.Path != "" {
		ref.Path = tr.Path
	}
	msgs := nativeMessages(tr)
	from := messageIndex(msgs, ref.LastNativeID) + 1 // 0 when the mark is gone or empty
	end, await := len(msgs)-1, ""
	if strings.TrimSpace(prompt) != "" {
		i := promptIndex(msgs[from:], prompt)
		switch {
		case i < 0 && !accepted: // failed, and not logged: nothing to move past
			return
		case i < 0: // not written yet
			await = prompt
		default:
			if j, answered := turnEnd(msgs, from+i); accepted && j == len(msgs) && !answered { // the prompt is written, its answer not yet
				end, await = from+i-1, prompt
			}
		}
	}
	nr := markAt(ref, msgs, end, "", st)
	nr.AwaitPrompt = await
	if await == "" && end >= 0 {
		// The native session holds the turn: its end is the conversation's.
		nr = withLinks(nr, history.NativeLink{NativeID: msgs[end].ID, MessageID: s.lastMessageID(convID, lastLinked(ref))})
	}
	if err := s.store.SetNative(convID, &nr); err != nil {
		s.log.Warn("native mark not moved past an ochat turn", "conversation", convID, "session", sessionID, "err", err)
	}
}

// promptIndex is the index of the first visible user message of msgs that
// is prompt (promptIs), or -1.
func promptIndex(msgs []transcript.Message, prompt string) int {
	for i, m := range msgs {
		if m.Role == transcript.RoleUser && !m.Hidden && promptIs(m.Content, prompt) {
			return i
		}
	}
	return -1
}

// firstPrompt is the index of the first visible user message of msgs, or -1.
func firstPrompt(msgs []transcript.Message) int {
	for i, m := range msgs {
		if m.Role == transcript.RoleUser && !m.Hidden {
			return i
		}
	}
	return -1
}

// handoffOpen and handoffClose delimit the block transcript.RenderHandoff
// puts before the user's text in a prompt.
const (
	handoffOpen  = "<handoff>\n"
	handoffClose = "</handoff>"
)

// promptIs reports whether content, the text of a native user message, is
// the prompt ochat sent: equal to it but for surrounding whitespace and a
// leading handoff block (transcript.RenderHandoff: "<handoff>\n…</handoff>\n",
// which the agent may log as part of the prompt's text).
func promptIs(content, prompt string) bool {
	c, p := strings.TrimSpace(content), strings.TrimSpace(prompt)
	if c == p {
		return true
	}
	if !strings.HasPrefix(c, handoffOpen) {
		return false
	}
	// The block's own text may hold "</handoff>": try every end.
	for rest := c[len(handoffOpen):]; ; {
		k := strings.Index(rest, handoffClose)
		if k < 0 {
			return false
		}
		rest = rest[k+len(handoffClose):]
		if strings.TrimSpace(rest) == p {
			return true
		}
	}
}

// withoutTurn is msgs without the turn of ochat's awaited prompt: when the
// first visible user message of msgs is prompt (promptIs), that message
// and the messages after it up to the next visible user message. at is
// that message's index in msgs (-1: the first prompt is another, or there
// is none, and msgs is returned as is); tail reports that the turn ended
// msgs, answered that it holds an answer (a message that is not a user
// message). Only the first prompt is looked at: the agent logs ochat's
// turn right after the mark, so a terminal prompt before it means the
// awaited turn was never logged.
func withoutTurn(msgs []transcript.Message, prompt string) (out []transcript.Message, at int, tail, answered bool) {
	i := firstPrompt(msgs)
	if i < 0 || !promptIs(msgs[i].Content, prompt) {
		return msgs, -1, false, false
	}
	j, answered := turnEnd(msgs, i)
	out = append(append(make([]transcript.Message, 0, len(msgs)-(j-i)), msgs[:i]...), msgs[j:]...)
	return out, i, j == len(msgs), answered
}

// turnEnd is the index of the next visible user message after the prompt
// at i of msgs (len(msgs) when there is none), and whether the messages in
// between hold an answer (a message that is not a user message).
func turnEnd(msgs []transcript.Message, i int) (j int, answered bool) {
	for j = i + 1; j < len(msgs) && (msgs[j].Role != transcript.RoleUser || msgs[j].Hidden); j++ {
		if msgs[j].Role != transcript.RoleUser {
			answered = true
		}
	}
	return j, answered
}

// nativeFileChanged is called for every change the native watcher reports
// in agent's store ("" = any): the native sessions of that agent found gone
// are searched for again on their next sync, and linkedSyncDebounce later,
// every conversation that has subscribers and is linked to path is synced,
// so an editor showing it sees the terminal's turns as they are written
// (its subscribers get ochat/resync).
func (s *Server) nativeFileChanged(agent, path string) {
	h := &s.native
	h.mu.Lock()
	for id, g := range h.gone {
		if agent == "" || g.agent == agent {
			delete(h.gone, id)
		}
	}
	if h.linkedPending == nil {
		h.linkedPending = map[string]bool{}
	}
	if h.linkedPending[path] {
		h.mu.Unlock()
		return
	}
	h.linkedPending[path] = true
	h.mu.Unlock()
	time.AfterFunc(linkedSyncDebounce, func() {
		h.mu.Lock()
		delete(h.linkedPending, path)
		h.mu.Unlock()
		if s.baseCtx.Err() != nil {
			return
		}
		if agent == "" || agent == native.AgentClaude {
			s.followFork(s.baseCtx, path)
		}
		for _, id := range s.subscribedLinked(path) {
			s.syncLinked(s.baseCtx, id, nil)
		}
	})
}

// subscribedLinked lists the conversations with subscribers that are linked
// to the native session file path.
func (s *Server) subscribedLinked(path string) []string {
	s.mu.Lock()
	ids := make([]string, 0, len(s.topics))
	for id, t := range s.topics {
		if len(t.subs) > 0 {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	var out []string
	want := ""
	for _, id := range ids {
		cv, err := s.store.Conversation(id)
		if err != nil || cv.Native == nil || cv.Native.Path == "" {
			continue
		}
		if cv.Native.Path == path || filepath.Clean(cv.Native.Path) == filepath.Clean(path) {
			out = append(out, id)
			continue
		}
		if want == "" {
			want = resolved(path)
		}
		if resolved(cv.Native.Path) == want {
			out = append(out, id)
		}
	}
	return out
}

// followFork moves the link of every conversation linked to the Claude
// session that path forks (native.ClaudeForkedFrom: `claude --resume` or
// `--fork-session` going on in a new file under a new id) to path, so the
// conversation keeps growing with the terminal's turns. The mark stays: the
// fork holds the copied history with the same message ids, so only what
// follows it is imported. Each file is checked once.
func (s *Server) followFork(ctx context.Context, path string) {
	if !strings.HasSuffix(path, ".jsonl") {
		return
	}
	h := &s.native
	h.mu.Lock()
	checked := h.forkChecked[path]
	h.mu.Unlock()
	if checked {
		return
	}
	parent, decided := native.ClaudeForkedFrom(path)
	if !decided {
		return
	}
	h.mu.Lock()
	if h.forkChecked == nil {
		h.forkChecked = map[string]bool{}
	}
	h.forkChecked[path] = true
	h.mu.Unlock()
	if parent == "" {
		return
	}
	convs, err := s.store.ListConversations()
	if err != nil {
		s.log.Warn("follow a forked native session", "path", path, "err", err)
		return
	}
	newID := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	for _, cv := range convs {
		if cv.Native == nil || cv.Native.Agent != native.AgentClaude || cv.Native.SessionID != parent || cv.Native.Path == path {
			continue
		}
		done, err := s.beginSync(ctx, cv.ID)
		if err != nil {
			s.log.Info("linked native session forked; the link moves on the next change", "conversation", cv.ID, "err", err)
			h.mu.Lock()
			delete(h.forkChecked, path)
			h.mu.Unlock()
			continue
		}
		cur, err := s.store.Conversation(cv.ID)
		if err == nil && cur.Native != nil && cur.Native.SessionID == parent {
			ref := *cur.Native
			ref.SessionID, ref.Path = newID, path
			ref.Size, ref.ModTimeNs = 0, 0 // read the new file on the next sync
			if err := s.store.SetNative(cv.ID, &ref); err != nil {
				s.log.Warn("follow a forked native session", "conversation", cv.ID, "err", err)
			} else {
				s.log.Info("linked native session continues in a fork", "conversation", cv.ID, "from", parent, "to", newID, "path", path)
			}
		}
		done()
	}
}
