package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// run is one prompt turn in flight. Its fields below mu-comment are guarded
// by Server.mu.
type run struct {
	s       *Server
	turnID  string // = assistant message id
	convID  string
	agent   string
	userMsg transcript.Message
	started time.Time
	fresh   bool // edit/retry: close the conversation's agent sessions first
	// startErr fails the turn at once: a queued message whose agent can no
	// longer be found (queue.go) is stored with the reason, not lost.
	startErr string

	ctx    context.Context
	cancel context.CancelFunc

	// guarded by Server.mu
	red       *transcript.Reducer // assistant message, reduced live
	events    []transcript.Event  // replay buffer (nil once truncated)
	truncated bool
	seq       int64
	finished  bool
	cancelled bool
	abortMsg  string
	sessionID string
	conn      AgentConn
	permOrder []string
	// permRejected maps a tool call id to whether the last answer to a
	// permission request for it was a reject or a cancel.
	permRejected map[string]bool
	lastCkpt     int64 // seq of the last checkpoint
	lastEvent    time.Time
	cancelSent   bool
	abandoned    bool            // the agent ignored a cancel for CancelGrace and is being stopped
	ckBefore     string          // code checkpoint before the turn (checkpoints.go)
	ckNote       string          // why there is none
	agentWrote   map[string]bool // paths the agent wrote through fs/write_text_file

	kick     chan struct{} // checkpoint wanted
	urgent   chan struct{} // checkpoint wanted now (tool / fileChange)
	ckptStop chan struct{}
	ckptDone chan struct{}
}

// slotKey names one agent process: one per (conversation, agent).
type slotKey struct{ conv, agent string }

// agentSlot is a live agent process and its session for one conversation.
type agentSlot struct {
	conn      AgentConn
	sessionID string
	state     agents.State
	lastUsed  time.Time // last turn start or end, for idle reaping and the cap
}

// pendingPerm is a permission request waiting for its first answer.
type pendingPerm struct {
	params  PermissionParams
	run     *run
	options map[string]bool
	answer  chan agents.PermissionOutcome // cap 1
}

// messageCopyLocked returns the live assistant message; later events do not
// change it. s.mu is held.
func (r *run) messageCopyLocked() transcript.Message { return r.red.Message() }

// turnRequest says how to start a turn: ochat/chat/send, edit and retry.
type turnRequest struct {
	restoreTo   string // edit/retry restoreCode: the code checkpoint to restore first (rewind.go)
	convID      string // "" creates a conversation
	agent       string // "" = the conversation's last agent, else the default
	text        string
	attachments []transcript.Attachment
	// blobs (sha256 hex → content) are put in the store before the user
	// message that refers to them (ochat/chat/send's attachments as read by
	// ingestAttachments); edit and retry reuse stored blobs and have none.
	blobs ingested
	// truncateFrom (edit, retry) is a message id: it and every later message
	// are dropped, and every agent session of the conversation is reset, in
	// the transaction that stores the new user message.
	truncateFrom string
	// queueable (ochat/chat/send) queues the message when a turn runs
	// instead of refusing it (queue.go); queued is the queued message being
	// sent, which leaves the queue (queueRest remains) with its user message.
	queueable bool
	queued    *history.QueuedMessage
	queueRest []history.QueuedMessage
}

// send handles ochat/chat/send: it reads the attachments (refusing any
// outside the workspace, missing, over their cap or not the kind they claim
// before anything is stored), stores their content as blobs, the user
// message and a streaming assistant placeholder, subscribes the sender,
// queues the ids answer and starts the turn.
func (s *Server) send(c *client, p SendParams, reply jsonrpc2.Replier) (any, error) {
	if err := checkPromptSize(p.Text); err != nil {
		return nil, err
	}
	in, err := s.ingestAttachments(p.Attachments)
	if err != nil {
		return nil, err
	}
	return s.startTurn(c, turnRequest{convID: p.ConversationID, agent: p.Agent, text: p.Text, attachments: in.attachments, blobs: in, queueable: true}, reply)
}

// startTurn reserves the conversation's run slot, stores (in one
// transaction) the dropped tail for edit/retry, the user message and a
// streaming assistant placeholder, subscribes c, queues the SendResult
// answer and starts the turn.
func (s *Server) startTurn(c *client, req turnRequest, reply jsonrpc2.Replier) (any, error) {
	if err := checkPromptSize(req.text); err != nil {
		return nil, err
	}
	reg, err := s.registry()
	if err != nil {
		if req.queued == nil {
			return nil, jsonrpc2.Errorf(CodeAgentUnavailable, "%v", err)
		}
		reg = failedRegistry{err}
	}
	var conv history.Conversation
	if req.convID != "" {
		s.syncLinked(s.baseCtx, req.convID, nil) // the terminal's turns go into the prompt and the handoff
		conv, err = s.store.Conversation(req.convID)
		if err != nil {
			return nil, storeErr("send", req.convID, err)
		}
	}
	agentName := req.agent
	if agentName == "" && conv.ID != "" {
		agentName = s.lastAgent(conv.ID)
	}
	if agentName == "" {
		agentName = reg.Default()
	}
	if agentName == "" {
		return nil, jsonrpc2.Errorf(CodeAgentUnavailable, "no agent is available: install one (see `ochatd agents`) or configure agent_servers in settings.json")
	}
	spec, err := reg.Lookup(agentName)
	startErr := ""
	if err != nil {
		if req.queued == nil {
			return nil, jsonrpc2.Errorf(CodeAgentUnavailable, "%v", err)
		}
		spec, startErr = agents.Spec{Name: agentName}, err.Error()
	}
	now := nowMs()
	if conv.ID == "" {
		conv = history.Conversation{ID: s.newID(), Title: titleFrom(req.text), Agents: []string{}, CreatedAt: now, UpdatedAt: now}
		if err := s.store.CreateConversation(conv); err != nil {
			return nil, fmt.Errorf("create conversation: %w", err)
		}
	}
	userID := s.newID()
	turnID := s.newID()
	r := &run{
		s: s, turnID: turnID, convID: conv.ID, agent: spec.Name, started: time.Now(),
		userMsg:  transcript.Message{ID: userID, Timestamp: now, Role: transcript.RoleUser, Content: req.text, Attachments: req.attachments},
		fresh:    req.truncateFrom != "",
		startErr: startErr,
		events:   make([]transcript.Event, 0, 64),
		kick:     make(chan struct{}, 1),
		urgent:   make(chan struct{}, 1),
		ckptStop: make(chan struct{}),
		ckptDone: make(chan struct{}),
	}
	if r.agent == "" {
		r.agent = agentName
	}
	r.red = transcript.NewReducer(transcript.Message{ID: turnID, Timestamp: now, Role: transcript.RoleAssistant, Agent: r.agent, Status: transcript.StatusStreaming})
	r.ctx, r.cancel = context.WithCancel(s.baseCtx)

	// Reserve the conversation's run slot before writing, so two sends race
	// to one winner.
	s.mu.Lock()
	if err := s.waitSyncLocked(conv.ID); err != nil { // a linked conversation's sync holds it
		s.mu.Unlock()
		r.cancel()
		return nil, jsonrpc2.Errorf(CodeConflict, "%v", err)
	}
	if s.closed {
		s.mu.Unlock()
		r.cancel()
		return nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "daemon is stopping")
	}
	t := s.topicLocked(conv.ID)
	if t.run != nil || (req.queueable && len(s.queues[conv.ID]) > 0) {
		s.mu.Unlock()
		r.cancel()
		switch {
		case req.queueable: // behind the running turn, or older queued messages
			return s.enqueue(c, conv.ID, r.agent, req, reply)
		case req.queued != nil:
			return nil, errQueueBusy
		}
		return nil, jsonrpc2.Errorf(CodeConflict, "a turn is already running in conversation %s: wait for it or cancel it (run `ochatd cancel %s`)", conv.ID, conv.ID)
	}
	t.run = r
	s.running++
	s.armIdleLocked()
	s.mu.Unlock()

	release := func() {
		s.mu.Lock()
		t.run = nil
		s.running--
		s.dropTopicLocked(t)
		s.armIdleLocked()
		s.mu.Unlock()
		r.cancel()
	}
	if err := s.putBlobs(req.blobs); err != nil {
		release()
		return nil, err
	}
	if err := s.restoreCodeFor(conv.ID, req.restoreTo); err != nil {
		release()
		return nil, err
	}
	err = s.store.Update(func(w *history.Writer) error {
		if req.truncateFrom != "" {
			if err := w.TruncateFrom(conv.ID, req.truncateFrom); err != nil {
				return err
			}
			if err := w.ResetAgentSessions(conv.ID); err != nil {
				return err
			}
		}
		if err := w.PutMessage(conv.ID, r.userMsg, now); err != nil {
			return fmt.Errorf("store user message: %w", err)
		}
		if err := w.PutMessage(conv.ID, r.red.Message(), now); err != nil {
			return fmt.Errorf("store assistant placeholder: %w", err)
		}
		if req.queued != nil {
			return w.PutQueue(conv.ID, req.queueRest)
		}
		return nil
	})
	if err != nil {
		release()
		if errors.Is(err, history.ErrNotFound) {
			return nil, notFound("%v", err)
		}
		return nil, fmt.Errorf("start turn: %w", err)
	}
	s.reputMissingBlobs(req.blobs)

	s.mu.Lock()
	if req.truncateFrom != "" {
		s.resyncOthersLocked(t, c, fmt.Sprintf("conversation edited: message %s and every later one were replaced", req.truncateFrom))
	}
	res := SendResult{ConversationID: conv.ID, UserMessageID: userID, AssistantMessageID: turnID, TurnID: turnID}
	if c != nil {
		t.subs[c] = struct{}{}
		c.subs[conv.ID] = struct{}{}
		c.queueReply(reply, res, nil)
	}
	if req.queued != nil {
		s.queueSentLocked(t, req.queued, req.queueRest, res)
	}
	s.turns.Add(1)
	s.mu.Unlock()

	go s.runTurn(r, spec)
	return nil, errReplied
}

// MaxPromptBytes is the largest prompt text (bytes of UTF-8) that chat/send,
// edit and retry accept: an agent reads its stdin one line at a time and
// agents cap a line near 10 MB, so a longer prompt would only kill the agent.
const MaxPromptBytes = 8 << 20

// checkPromptSize refuses a prompt over MaxPromptBytes with -32602 before
// anything is stored.
func checkPromptSize(text string) error {
	if len(text) <= MaxPromptBytes {
		return nil
	}
	return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "prompt is %.1f MiB; the limit is %d MiB", float64(len(text))/(1<<20), MaxPromptBytes>>20)
}

// lastAgent is the agent of the conversation's last assistant message.
func (s *Server) lastAgent(convID string) string {
	msgs, err := s.store.Messages(convID)
	if err != nil {
		return ""
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == transcript.RoleAssistant && msgs[i].Agent != "" {
			return msgs[i].Agent
		}
	}
	return ""
}

// runTurn drives one prompt turn to its end.
func (s *Server) runTurn(r *run, spec agents.Spec) {
	defer s.turns.Done()
	defer r.cancel()
	go s.checkpointLoop(r)
	if s.opts.TurnIdleTimeout > 0 {
		go s.watchIdle(r)
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in turn", "conversation", r.convID, "turn", r.turnID, "panic", p)
			s.finish(r, "", fmt.Sprintf("internal error: %v", p))
		}
	}()

	if r.startErr != "" {
		s.finish(r, "", r.startErr)
		return
	}
	s.turnStartCheckpoint(r)
	if r.fresh {
		s.closeSessions(r.ctx, r.convID)
	}
	conn, sessionID, fresh, cursor, err := s.ensureSession(r.ctx, r.convID, r.agent, spec)
	if err != nil {
		s.mu.Lock()
		cancelled, abort := r.cancelled, r.abortMsg
		s.mu.Unlock()
		switch {
		case abort != "":
			s.finish(r, "", abort)
		case cancelled:
			s.finish(r, "cancelled", "")
		default:
			s.finish(r, "", err.Error())
		}
		return
	}
	s.mu.Lock()
	r.conn, r.sessionID = conn, sessionID
	cancelled := r.cancelled
	s.mu.Unlock()
	if cancelled {
		s.finish(r, "cancelled", "")
		return
	}
	prompt, err := s.assemblePrompt(r, fresh, cursor)
	if err != nil {
		s.finish(r, "", err.Error())
		return
	}
	s.moveCursor(r, sessionID, r.userMsg.ID)
	stop, err := conn.Prompt(r.ctx, sessionID, prompt)
	if err != nil {
		s.mu.Lock()
		cancelled, abort, abandoned := r.cancelled, r.abortMsg, r.abandoned
		s.mu.Unlock()
		switch {
		case abort != "":
			s.finish(r, "", abort)
		case cancelled && (abandoned || errors.Is(err, context.Canceled)):
			s.finish(r, "cancelled", "")
		default:
			select {
			case <-conn.Done():
				s.dropSlot(r.convID, r.agent, conn)
			default:
			}
			s.finish(r, "", err.Error())
		}
		return
	}
	s.mu.Lock()
	abort := r.abortMsg
	s.mu.Unlock()
	if abort != "" {
		s.finish(r, "", abort)
		return
	}
	s.finish(r, stop, "")
}

// watchIdle cancels r when its agent has been silent for TurnIdleTimeout
// while no permission question was pending.
func (s *Server) watchIdle(r *run) {
	tick := time.NewTicker(min(s.opts.TurnIdleTimeout/4, time.Second))
	defer tick.Stop()
	s.mu.Lock()
	r.lastEvent = time.Now()
	s.mu.Unlock()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		if len(r.permOrder) > 0 {
			r.lastEvent = time.Now() // waiting for the user, not the agent
		}
		silent := time.Since(r.lastEvent)
		done := r.finished || r.cancelled
		s.mu.Unlock()
		if done {
			return
		}
		if silent >= s.opts.TurnIdleTimeout {
			s.log.Warn("agent silent; cancelling the turn", "conversation", r.convID, "agent", r.agent, "silent", silent.Round(time.Second))
			// The turn fails with the reason, so the stored turn says why it
			// ended rather than looking like a user's cancel.
			s.mu.Lock()
			r.abortMsg = fmt.Sprintf("agent %s sent nothing for %s (turn idle timeout); the turn was cancelled", r.agent, s.opts.TurnIdleTimeout)
			s.mu.Unlock()
			r.requestCancel()
			return
		}
	}
}

// ensureSession returns a live agent connection and session for (convID,
// agent): the live one, else (a new process if need be and) session/load of
// the stored session id when the agent advertises loadSession, then (no
// load, or it failed) session/resume when it advertises
// sessionCapabilities.resume (reopenMethods), else session/new with the
// cursor reset. The config values accepted earlier for
// (convID, agent) are replayed into a session that was created or reopened.
// fresh reports a session that has seen nothing of the conversation; cursor
// is the id of the last message the session has seen.
func (s *Server) ensureSession(ctx context.Context, convID, agent string, spec agents.Spec) (conn AgentConn, sessionID string, fresh bool, cursor string, err error) {
	key := slotKey{convID, agent}
	stored, serr := s.store.AgentSession(convID, agent)
	if serr != nil && !errors.Is(serr, history.ErrNotFound) {
		return nil, "", false, "", fmt.Errorf("read agent session: %w", serr)
	}
	s.mu.Lock()
	sl := s.slots[key]
	s.mu.Unlock()
	if sl != nil {
		select {
		case <-sl.conn.Done():
			s.dropSlot(convID, agent, sl.conn)
			sl = nil
		default:
		}
	}
	if sl != nil && sl.sessionID != "" && sl.sessionID == stored.SessionID {
		return sl.conn, sl.sessionID, false, stored.Cursor, nil
	}
	if sl == nil {
		s.progress(convID, agent, ProgressStarting, startingMessage(agent, spec))
		s.makeRoomForAgent(key)
		// ctx (the turn's) bounds spawn and initialize only: a cancel aborts
		// the start at once and the starting process group is killed.
		c, err := s.opts.StartAgent(ctx, spec, agents.Options{
			Workspace:   s.opts.Workspace,
			Handler:     &agentHandler{s: s, conv: convID, agent: agent},
			Logger:      s.log.With("agent", agent, "conversation", convID),
			InitTimeout: s.opts.AgentInitTimeout,
			WriteFile:   s.editorWriteFile(convID),
			Shim:        s.opts.AgentShim,
			Ledger:      s.opts.ProcLedger,
		})
		if err != nil {
			s.progress(convID, agent, ProgressFailed, err.Error())
			return nil, "", false, "", err // agents names the agent and what failed
		}
		if ctx.Err() != nil { // cancelled as initialize answered
			c.Close()
			return nil, "", false, "", fmt.Errorf("start agent %s: %w", agent, ctx.Err())
		}
		sl = &agentSlot{conn: c}
		s.mu.Lock()
		s.slots[key] = sl
		s.mu.Unlock()
	}
	s.mu.Lock()
	sl.lastUsed = time.Now()
	s.mu.Unlock()
	// A process that could not give this turn a session serves nothing (one
	// process per conversation and agent): stop it rather than leave it
	// running for the daemon's lifetime.
	defer func() {
		if err != nil {
			s.dropSlot(convID, agent, sl.conn)
		}
	}()
	var info agents.SessionInfo
	reopened := false
	// timed runs one session call with SessionTimeout; an agent that does not
	// answer in time is stopped (its process may be wedged).
	timed := func(call string, f func(context.Context) (agents.SessionInfo, error)) (agents.SessionInfo, error) {
		cctx, cancel := context.WithTimeout(ctx, s.opts.SessionTimeout)
		defer cancel()
		info, err := f(cctx)
		if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			s.dropSlot(convID, agent, sl.conn)
			return info, fmt.Errorf("agent %s did not answer %s within %v; its process was stopped", agent, call, s.opts.SessionTimeout)
		}
		return info, err
	}
	if stored.SessionID != "" {
		s.progress(convID, agent, ProgressSession, fmt.Sprintf("%s: reopening its session (the agent may replay its history)…", agent))
		for _, ro := range reopenMethods(sl.conn) {
			info, err = timed(ro.method, func(c context.Context) (agents.SessionInfo, error) { return ro.call(c, stored.SessionID) })
			if err == nil {
				reopened = true
				break
			}
			if ctx.Err() != nil {
				return nil, "", false, "", err
			}
			s.log.Info(ro.method+" failed", "agent", agent, "session", stored.SessionID, "err", err)
			select {
			case <-sl.conn.Done():
				return nil, "", false, "", err
			default:
			}
		}
	}
	if !reopened {
		s.progress(convID, agent, ProgressSession, fmt.Sprintf("%s: opening a session…", agent))
		info, err = timed("session/new", sl.conn.NewSession)
		if err != nil {
			select {
			case <-sl.conn.Done():
				s.dropSlot(convID, agent, sl.conn)
			default:
			}
			return nil, "", false, "", err // agents names the agent and the call
		}
	}
	if len(stored.Config) > 0 {
		info.State.Merge(s.replayConfig(ctx, sl.conn, agent, info, stored.Config))
	}
	err = s.store.Update(func(w *history.Writer) error {
		as, err := w.AgentSession(convID, agent)
		if err != nil && !errors.Is(err, history.ErrNotFound) {
			return err
		}
		as.SessionID = info.ID
		if !reopened {
			as.Cursor = ""
		}
		stored = as
		return w.PutAgentSession(convID, agent, as)
	})
	if err != nil {
		return nil, "", false, "", fmt.Errorf("store agent session: %w", err)
	}
	s.mu.Lock()
	sl.sessionID = info.ID
	sl.state = info.State
	if t := s.topics[convID]; t != nil {
		s.broadcastLocked(t, NotifyAgentState, AgentStateParams{ConversationID: convID, Agent: agent, State: info.State})
	}
	s.mu.Unlock()
	s.progress(convID, agent, ProgressReady, fmt.Sprintf("%s: ready", agent))
	return sl.conn, info.ID, !reopened, stored.Cursor, nil
}

// progress tells the conversation's subscribers what the daemon is doing to
// get agent ready (ochat/agentProgress), so a slow start is never silent.
func (s *Server) progress(convID, agent, stage, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.topics[convID]; t != nil {
		s.broadcastLocked(t, NotifyAgentProgress, AgentProgressParams{ConversationID: convID, Agent: agent, Stage: stage, Message: msg})
	}
}

// startingMessage is the ochat/agentProgress line for spawning agent: npx
// may first download the adapter, which takes long the first time.
func startingMessage(agent string, spec agents.Spec) string {
	if filepath.Base(spec.Command) == "npx" {
		return fmt.Sprintf("starting %s: npx is fetching the adapter (the first time this downloads it) and starting it…", agent)
	}
	return fmt.Sprintf("starting %s: launching %s…", agent, filepath.Base(spec.Command))
}

// moveCursor records that the session of r's agent has seen everything up
// to msgID (the turn's user message, once its prompt is assembled): if the
// daemon dies mid-turn, the next prompt to that session hands off the cut
// answer (marked interrupted) but not the user's text again. Nothing moves
// if the stored session is no longer sessionID.
func (s *Server) moveCursor(r *run, sessionID, msgID string) {
	err := s.store.Update(func(w *history.Writer) error {
		as, err := w.AgentSession(r.convID, r.agent)
		if err != nil || as.SessionID != sessionID {
			return nil
		}
		as.Cursor = msgID
		return w.PutAgentSession(r.convID, r.agent, as)
	})
	if err != nil {
		s.log.Warn("store agent cursor", "conversation", r.convID, "agent", r.agent, "err", err)
	}
}

// dropSlot forgets a dead agent process (if it is still the slot's).
func (s *Server) dropSlot(conv, agent string, conn AgentConn) {
	s.mu.Lock()
	key := slotKey{conv, agent}
	if sl := s.slots[key]; sl != nil && sl.conn == conn {
		delete(s.slots, key)
	}
	s.mu.Unlock()
	conn.Close()
}

// assemblePrompt builds the prompt content blocks of a turn: the turns the
// agent's session has not seen (all earlier turns for a fresh session, else
// those after its cursor) rendered as a handoff block, then the user's text,
// then one block per attachment (attachmentBlock: image, embedded resource
// or resource link, as the agent's promptCapabilities allow).
//
// Budgets and summaries belong to transcript.RenderHandoff (renderHandoff);
// this function only chooses which messages go in.
func (s *Server) assemblePrompt(r *run, fresh bool, cursor string) ([]acp.ContentBlock, error) {
	if fresh {
		cursor = ""
	}
	// Only the messages after the cursor are read (and decoded): a live
	// session of a long conversation costs what it has not seen.
	msgs, err := s.store.MessagesAfter(r.convID, cursor)
	if err != nil {
		return nil, fmt.Errorf("read conversation for prompt: %w", err)
	}
	// Earlier messages, oldest first, up to this turn's user message.
	end := len(msgs)
	for i, m := range msgs {
		if m.ID == r.userMsg.ID || m.ID == r.turnID {
			end = i
			break
		}
	}
	unseen := unseenMessages(msgs[:end], fresh, cursor)
	var blocks []acp.ContentBlock
	if h := renderHandoff(unseen); h != "" {
		blocks = append(blocks, acp.TextBlock(h))
	}
	blocks = append(blocks, acp.TextBlock(r.userMsg.Content))
	if len(r.userMsg.Attachments) == 0 {
		return blocks, nil
	}
	var caps acp.PromptCapabilities
	s.mu.Lock()
	if r.conn != nil {
		caps = r.conn.Capabilities().PromptCapabilities
	}
	s.mu.Unlock()
	budget := promptBudget(blocks)
	for _, a := range r.userMsg.Attachments {
		blocks = append(blocks, s.attachmentBlock(a, caps, &budget))
	}
	return blocks, nil
}

// checkpointLoop writes the streaming assistant message to the store at most
// every CheckpointInterval, and at once after a tool or fileChange event.
func (s *Server) checkpointLoop(r *run) {
	defer close(r.ckptDone)
	var last time.Time
	for {
		now := false
		select {
		case <-r.ckptStop:
			return
		case <-r.kick:
		case <-r.urgent:
			now = true
		}
		if !now {
			if wait := s.opts.CheckpointInterval - time.Since(last); wait > 0 {
				tm := time.NewTimer(wait)
				select {
				case <-r.ckptStop:
					tm.Stop()
					return
				case <-r.urgent:
					tm.Stop()
				case <-tm.C:
				}
			}
		}
		s.mu.Lock()
		if r.finished || r.seq == r.lastCkpt {
			s.mu.Unlock()
			continue
		}
		m := r.messageCopyLocked()
		r.lastCkpt = r.seq
		s.mu.Unlock()
		if err := s.store.PutMessage(r.convID, m, nowMs()); err != nil {
			s.log.Warn("checkpoint streaming message", "conversation", r.convID, "turn", r.turnID, "err", err)
		}
		last = time.Now()
	}
}

// emitLocked numbers, timestamps, reduces, buffers and fans out one event of
// r. s.mu is held.
func (s *Server) emitLocked(r *run, ev transcript.Event) {
	r.lastEvent = time.Now()
	r.seq++
	ev.Seq = r.seq
	ev.Timestamp = nowMs()
	if ev.Segment != nil {
		seg := *ev.Segment
		ev.Segment = &seg
	}
	if !ev.Terminal() {
		r.red.Apply(ev)
	}
	if !r.truncated {
		if len(r.events) >= s.opts.BufferCap {
			r.truncated = true
			r.events = nil
		} else {
			r.events = append(r.events, ev)
		}
	}
	if t := s.topics[r.convID]; t != nil {
		s.broadcastLocked(t, NotifyEvent, EventParams{ConversationID: r.convID, TurnID: r.turnID, MessageID: r.turnID, Agent: r.agent, Event: ev})
	}
	if ev.Type == transcript.EvActivityUpsert {
		select {
		case r.urgent <- struct{}{}:
		default:
		}
	} else {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// finish ends a turn: the final message is written to the store first, then
// turn.completed (stopReason) or turn.failed (errMsg) is sent.
func (s *Server) finish(r *run, stopReason, errMsg string) {
	close(r.ckptStop)
	<-r.ckptDone

	s.mu.Lock()
	if r.finished {
		s.mu.Unlock()
		return
	}
	r.finished = true
	final := r.messageCopyLocked()
	var perms []*pendingPerm
	for _, id := range r.permOrder {
		if p := s.perms[id]; p != nil {
			perms = append(perms, p)
		}
	}
	sessionID := r.sessionID
	s.mu.Unlock()
	for _, p := range perms {
		s.resolvePermission(p, agents.PermissionOutcome{Cancelled: true})
	}
	s.mu.Lock()
	rejected := r.permRejected
	s.mu.Unlock()

	final.DurationMs = time.Since(r.started).Milliseconds()
	term := transcript.Event{Type: transcript.EvTurnCompleted, StopReason: stopReason}
	if errMsg != "" {
		errMsg = withHint(r.agent, errMsg)
		term = transcript.Event{Type: transcript.EvTurnFailed, Message: errMsg}
	}
	transcript.Apply(&final, term) // status, stopReason/error, canonical segments
	rejectedSegs := markRejected(&final, rejected)
	rejectedSegs = append(rejectedSegs, s.turnEndCheckpoint(r, &final)...) // what the disk says wins
	// The answer and the agent's cursor move together: a crash cannot leave
	// a stored answer that the agent would be handed again, or a cursor past
	// an answer that was not stored.
	err := s.store.Update(func(w *history.Writer) error {
		if err := w.PutMessage(r.convID, final, nowMs()); err != nil {
			return err
		}
		if sessionID == "" {
			return nil
		}
		as, err := w.AgentSession(r.convID, r.agent)
		if err != nil || as.SessionID != sessionID {
			return nil // reset (edit) or replaced meanwhile: nothing to move
		}
		as.Cursor = r.turnID
		return w.PutAgentSession(r.convID, r.agent, as)
	})
	if err != nil {
		s.log.Error("store final message", "conversation", r.convID, "turn", r.turnID, "err", err)
		if errMsg == "" {
			errMsg = fmt.Sprintf("the answer could not be stored: %v", err)
			term = transcript.Event{Type: transcript.EvTurnFailed, Message: errMsg}
		}
	}
	// The agent wrote this turn to a linked native session; a stop reason
	// says it took the prompt (it may log the turn after the end).
	s.nativeTurnEnded(r.convID, r.agent, sessionID, r.userMsg.Content, stopReason != "")

	s.mu.Lock()
	r.red = transcript.NewReducer(final)
	for _, sg := range rejectedSegs { // live clients learn the change did not happen
		s.emitLocked(r, transcript.Event{Type: transcript.EvActivityUpsert, Segment: &sg})
	}
	s.emitLocked(r, term)
	t := s.topics[r.convID]
	if t != nil && t.run == r {
		t.run = nil
		s.dropTopicLocked(t)
	}
	s.running--
	if sl := s.slots[slotKey{r.convID, r.agent}]; sl != nil {
		sl.lastUsed = time.Now()
	}
	s.armIdleLocked()
	s.mu.Unlock()
	if errMsg != "" {
		s.log.Info("turn failed", "conversation", r.convID, "turn", r.turnID, "agent", r.agent, "err", errMsg)
	}
	s.turnEnded(r.convID) // the next queued message (queue.go)
}

// FileRejected is the status of a fileChange segment whose write did not
// happen (its tool failed, or its permission was rejected or cancelled);
// transcript.Summarize leaves such changes out of the file counts.
const FileRejected = "rejected"

// optionKind is the kind of the option optionID of a permission request.
func optionKind(opts []agents.PermissionOption, optionID string) string {
	for _, o := range opts {
		if o.OptionID == optionID {
			return o.Kind
		}
	}
	return ""
}

// markRejected gives status "rejected" to the file changes of m that did not
// happen: their tool call (ToolCallID) ended in error, or its permission
// request was rejected or cancelled (rejected[id]) and the tool did not
// complete. A change the daemon applied or reverted keeps its status. It
// returns the segments it changed.
func markRejected(m *transcript.Message, rejected map[string]bool) []transcript.Segment {
	var changed []transcript.Segment
	tools := map[string]string{}
	for _, sg := range m.Segments {
		if sg.Type == transcript.SegTool && sg.ID != "" {
			tools[sg.ID] = sg.Status
		}
	}
	for i, sg := range m.Segments {
		if sg.Type != transcript.SegFileChange || sg.ToolCallID == "" || (sg.Status != "" && sg.Status != "proposed") {
			continue
		}
		st, known := tools[sg.ToolCallID]
		if st == string(transcript.ToolError) || st == "cancelled" || (rejected[sg.ToolCallID] && (!known || st != string(transcript.ToolCompleted))) {
			m.Segments[i].Status = FileRejected
			changed = append(changed, m.Segments[i])
		}
	}
	return changed
}

// cancel handles ochat/chat/cancel.
func (s *Server) cancel(convID string) (any, error) {
	s.mu.Lock()
	t := s.topics[convID]
	if t == nil || t.run == nil {
		s.mu.Unlock()
		if _, err := s.store.Conversation(convID); err != nil {
			return nil, storeErr("cancel", convID, err)
		}
		return CancelResult{Cancelled: false}, nil
	}
	r := t.run
	s.mu.Unlock()
	r.requestCancel()
	return CancelResult{Cancelled: true}, nil
}

// cancelRepeat and cancelRepeats space and bound the session/cancel
// notifications of one cancelled turn (see requestCancel).
const (
	cancelRepeat  = 500 * time.Millisecond
	cancelRepeats = 4
)

// requestCancel sends session/cancel (repeated up to cancelRepeats times
// while the turn runs), answers pending permissions
// cancelled, and abandons the prompt if the agent has not answered within
// CancelGrace.
func (r *run) requestCancel() {
	s := r.s
	s.mu.Lock()
	r.cancelled = true
	conn, sid, sent := r.conn, r.sessionID, r.cancelSent
	r.cancelSent = true
	var perms []*pendingPerm
	for _, id := range r.permOrder {
		if p := s.perms[id]; p != nil {
			perms = append(perms, p)
		}
	}
	s.mu.Unlock()
	for _, p := range perms {
		s.resolvePermission(p, agents.PermissionOutcome{Cancelled: true})
	}
	if sent {
		return
	}
	if conn == nil {
		r.cancel() // still starting: abandon the start
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(r.ctx, s.opts.CancelGrace)
		defer cancel()
		// A cancel can overtake the prompt it cancels (sent before
		// session/prompt is on the wire, or before the connection has
		// registered the turn), and the agent then ignores it: repeat it a
		// few times while the turn runs. session/cancel is a notification,
		// and a repeat for a turn already being cancelled is harmless.
		tick := time.NewTicker(cancelRepeat)
		defer tick.Stop()
		for n := 0; ctx.Err() == nil; n++ {
			if n < cancelRepeats {
				if err := conn.Cancel(ctx, sid); err != nil && ctx.Err() == nil {
					s.log.Warn("session/cancel", "conversation", r.convID, "err", err)
				}
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.log.Warn("agent did not end a cancelled turn in time; abandoning the prompt and stopping the agent", "conversation", r.convID, "agent", r.agent, "grace", s.opts.CancelGrace)
			s.mu.Lock()
			r.abandoned = true
			s.mu.Unlock()
			r.cancel()
			s.dropSlot(r.convID, r.agent, conn)
		}
	}()
}

// abort ends a turn because the daemon is stopping.
func (r *run) abort(msg string) {
	r.s.mu.Lock()
	r.abortMsg = msg
	r.s.mu.Unlock()
	r.cancel()
}

// respondPermission handles ochat/permission/respond: first answer wins.
func (s *Server) respondPermission(p RespondParams) (any, error) {
	s.mu.Lock()
	pp := s.perms[p.PermissionID]
	s.mu.Unlock()
	if pp == nil {
		return nil, notFound("unknown or already resolved permission %q", p.PermissionID)
	}
	if !p.Cancelled && !pp.options[p.OptionID] {
		return nil, fieldError("optionId", fmt.Sprintf("%q is not one of the request's options", p.OptionID))
	}
	if !s.resolvePermission(pp, agents.PermissionOutcome{OptionID: p.OptionID, Cancelled: p.Cancelled}) {
		return nil, notFound("permission %q was already resolved", p.PermissionID)
	}
	return struct{}{}, nil
}

// resolvePermission answers a pending permission once and tells every
// subscriber; false if it was already resolved.
func (s *Server) resolvePermission(p *pendingPerm, out agents.PermissionOutcome) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := p.params.PermissionID
	if s.perms[id] != p {
		return false
	}
	delete(s.perms, id)
	r := p.run
	r.permOrder = slices.DeleteFunc(r.permOrder, func(x string) bool { return x == id })
	if tc := p.params.ToolCall.ID; tc != "" {
		if r.permRejected == nil {
			r.permRejected = map[string]bool{}
		}
		r.permRejected[tc] = out.Cancelled || strings.HasPrefix(optionKind(p.params.Options, out.OptionID), "reject")
	}
	p.answer <- out
	res := PermissionResolvedParams{PermissionID: id, ConversationID: r.convID, OptionID: out.OptionID, Outcome: "selected"}
	if out.Cancelled {
		res.Outcome, res.OptionID = "cancelled", ""
	}
	if t := s.topics[r.convID]; t != nil {
		s.broadcastLocked(t, NotifyPermissionResolved, res)
	}
	return true
}

// agentHandler routes one agent process's callbacks to its conversation.
type agentHandler struct {
	s     *Server
	conv  string
	agent string
}

// currentLocked is the running turn this agent serves, if any.
func (h *agentHandler) currentLocked() *run {
	t := h.s.topics[h.conv]
	if t == nil || t.run == nil || t.run.agent != h.agent || t.run.finished {
		return nil
	}
	return t.run
}

// Event implements agents.Handler.
func (h *agentHandler) Event(sessionID string, ev transcript.Event) {
	if ev.Terminal() {
		return
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	r := h.currentLocked()
	if r == nil || (r.sessionID != "" && r.sessionID != sessionID) {
		h.s.log.Debug("dropping event outside a turn", "conversation", h.conv, "agent", h.agent, "type", ev.Type)
		return
	}
	h.s.emitLocked(r, ev)
}

// State implements agents.Handler.
func (h *agentHandler) State(sessionID string, st agents.State) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl := s.slots[slotKey{h.conv, h.agent}]; sl != nil {
		sl.state.Merge(st)
	}
	if t := s.topics[h.conv]; t != nil {
		s.broadcastLocked(t, NotifyAgentState, AgentStateParams{ConversationID: h.conv, Agent: h.agent, State: st})
	}
}

// RequestPermission implements agents.Handler: the request goes to every
// subscriber as ochat/permission and waits for the first answer.
func (h *agentHandler) RequestPermission(ctx context.Context, sessionID string, req agents.PermissionRequest) (agents.PermissionOutcome, error) {
	s := h.s
	s.mu.Lock()
	r := h.currentLocked()
	if r == nil {
		s.mu.Unlock()
		return agents.PermissionOutcome{Cancelled: true}, nil
	}
	p := &pendingPerm{
		run:     r,
		options: make(map[string]bool, len(req.Options)),
		answer:  make(chan agents.PermissionOutcome, 1),
		params: PermissionParams{
			PermissionID: s.newID(), ConversationID: h.conv, TurnID: r.turnID, Agent: h.agent,
			ToolCall: req.ToolCall, FileChanges: req.FileChanges, Options: req.Options,
		},
	}
	if p.params.FileChanges == nil {
		p.params.FileChanges = []transcript.Segment{}
	}
	if p.params.Options == nil {
		p.params.Options = []agents.PermissionOption{}
	}
	for _, o := range req.Options {
		p.options[o.OptionID] = true
	}
	s.perms[p.params.PermissionID] = p
	r.permOrder = append(r.permOrder, p.params.PermissionID)
	s.armPermTimeoutLocked()
	cancelled := r.cancelled
	if t := s.topics[h.conv]; t != nil {
		s.broadcastLocked(t, NotifyPermission, p.params)
	}
	s.mu.Unlock()
	if cancelled {
		s.resolvePermission(p, agents.PermissionOutcome{Cancelled: true})
	}
	select {
	case out := <-p.answer:
		return out, nil
	case <-ctx.Done():
		s.resolvePermission(p, agents.PermissionOutcome{Cancelled: true})
		select {
		case out := <-p.answer:
			return out, nil
		default:
		}
		return agents.PermissionOutcome{Cancelled: true}, nil
	case <-r.ctx.Done():
		s.resolvePermission(p, agents.PermissionOutcome{Cancelled: true})
		return agents.PermissionOutcome{Cancelled: true}, nil
	}
}

// withHint appends what the user can do about a known failure of a built-in
// agent (agents.Hint: a missing login, say), so every editor shows the fix
// with the turn.failed message, not only the CLI.
func withHint(agent, msg string) string {
	if h := agents.Hint(agent, msg); h != "" {
		return msg + "; " + h
	}
	return msg
}
