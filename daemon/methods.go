package daemon

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

func nowMs() int64 { return time.Now().UnixMilli() }

func (s *Server) initializeResult() InitializeResult {
	var r InitializeResult
	r.ServerInfo = &protocol.ServerInfo{Name: "ochatd", Version: s.opts.Version}
	r.Workspace = s.opts.Workspace
	r.ProtocolVersion = ProtocolVersion
	env := s.nativeEnv()
	r.Daemon = DaemonInfo{PID: os.Getpid(), StartedAt: s.startedAt.UnixMilli(), StoreEnv: map[string]string{}}
	for k, v := range map[string]string{
		"HOME": env.Home, "CLAUDE_CONFIG_DIR": env.ClaudeConfigDir, "CODEX_HOME": env.CodexHome,
		"GEMINI_CLI_HOME": env.GeminiCLIHome, "XDG_DATA_HOME": env.XDGDataHome, "OPENCODE_DATA_DIR": env.OpenCodeDataDir,
		"PI_CODING_AGENT_SESSION_DIR": env.PiSessionDir, "PI_CODING_AGENT_DIR": env.PiAgentDir,
	} {
		if v != "" {
			r.Daemon.StoreEnv[k] = v
		}
	}
	return r
}

// Shutdown stops the daemon gracefully, as ochat/daemon/stop does: no new
// client or turn is taken, running turns are cancelled and given
// CancelGrace to end (the rest end failed: "daemon stopped"), every client
// is sent what is queued for it, then Serve returns. It returns at once;
// call Close after Serve returns. ochatd serve calls it on SIGTERM/SIGINT.
func (s *Server) Shutdown() { s.stopDaemon() }

// stopDaemon handles ochat/daemon/stop (see Shutdown).
func (s *Server) stopDaemon() {
	s.mu.Lock()
	var runs []*run
	for _, t := range s.topics {
		if t.run != nil {
			runs = append(runs, t.run)
		}
	}
	stop := s.idleStop
	s.closed = true // no new turn or client
	s.mu.Unlock()
	s.log.Info("stop requested", "runningTurns", len(runs))
	go func() {
		for _, r := range runs {
			r.requestCancel()
		}
		done := make(chan struct{})
		go func() { s.turns.Wait(); close(done) }()
		t := time.NewTimer(s.opts.CancelGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			// Turns that did not end in time end now, failed, while the
			// connections are still up to carry their turn.failed.
			for _, r := range runs {
				r.abort("daemon stopped")
			}
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		}
		// The turns' last events (turn.completed …) are queued: let every
		// client's writer put them on the wire before the connections close.
		s.drainClients(2 * time.Second)
		if stop != nil {
			stop()
		}
	}()
}

// drainClients waits, at most d, until every client has written what is
// queued for it.
func (s *Server) drainClients(d time.Duration) {
	s.mu.Lock()
	clients := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	deadline := time.Now().Add(d)
	for _, c := range clients {
		for !c.drained() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// registry loads the agent registry afresh (settings or trust may have
// changed).
func (s *Server) registry() (AgentRegistry, error) {
	if s.opts.LoadRegistry != nil {
		return s.opts.LoadRegistry()
	}
	dir := s.opts.UserConfigDir
	if dir == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return nil, fmt.Errorf("load agent registry: %w", err)
		}
		dir = d
	}
	// Workspace settings apply only once the user trusts them (`ochatd
	// trust`); the trust file is found like the store, from XDG_STATE_HOME.
	trustPath, err := agents.DefaultTrustPath(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("load agent registry: %w", err)
	}
	reg, err := agents.NewRegistry(agents.RegistryOptions{UserConfigDir: dir, Workspace: s.opts.Workspace, Trust: agents.NewTrustStore(trustPath)})
	if err != nil {
		return nil, fmt.Errorf("load agent registry: %w", err)
	}
	return reg, nil
}

// storeErr maps a store error to a protocol error.
func storeErr(op, id string, err error) error {
	if errors.Is(err, history.ErrNotFound) {
		return notFound("unknown conversation %q", id)
	}
	return fmt.Errorf("%s %s: %w", op, id, err)
}

func (s *Server) listConversations() (any, error) {
	convs, err := s.store.ListConversations()
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	out := ListConversationsResult{Conversations: make([]ConversationInfo, 0, len(convs))}
	s.mu.Lock()
	for _, c := range convs {
		t := s.topics[c.ID]
		out.Conversations = append(out.Conversations, ConversationInfo{Conversation: normConv(c), Running: t != nil && t.run != nil})
	}
	s.mu.Unlock()
	return out, nil
}

func normConv(c history.Conversation) history.Conversation {
	if c.Agents == nil {
		c.Agents = []string{}
	}
	return c
}

func (s *Server) createConversation(p CreateConversationParams) (any, error) {
	now := nowMs()
	c := history.Conversation{ID: s.newID(), Title: p.Title, Agents: []string{}, CreatedAt: now, UpdatedAt: now}
	if err := s.store.CreateConversation(c); err != nil {
		return nil, fmt.Errorf("create conversation: %w", err)
	}
	return ConversationResult{Conversation: c}, nil
}

// snapshot returns a conversation and its messages, with the running turn's
// assistant message taken live rather than from the last checkpoint.
func (s *Server) snapshot(id string) (history.Conversation, []transcript.Message, error) {
	conv, err := s.store.Conversation(id)
	if err != nil {
		return conv, nil, storeErr("get conversation", id, err)
	}
	msgs, err := s.store.Messages(id)
	if err != nil {
		return conv, nil, storeErr("get messages", id, err)
	}
	if msgs == nil {
		msgs = []transcript.Message{}
	}
	return normConv(conv), msgs, nil
}

func (s *Server) getConversation(id string) (any, error) {
	sync := s.syncLinked(s.baseCtx, id, nil) // a linked conversation first imports its native session's new turns
	conv, msgs, err := s.snapshot(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if t := s.topics[id]; t != nil && t.run != nil {
		live := t.run.messageCopyLocked()
		msgs = replaceMessage(msgs, live)
	}
	queue := s.queueLocked(id)
	s.mu.Unlock()
	res := GetConversationResult{Conversation: conv, Messages: msgs, Queue: queue}
	if sync != (NativeSync{}) {
		res.Sync = &sync
	}
	return res, nil
}

// replaceMessage replaces (or appends) the message with m's id.
func replaceMessage(msgs []transcript.Message, m transcript.Message) []transcript.Message {
	for i := range msgs {
		if msgs[i].ID == m.ID {
			msgs[i] = m
			return msgs
		}
	}
	return append(msgs, m)
}

func (s *Server) renameConversation(p RenameParams) (any, error) {
	if err := s.store.RenameConversation(p.ConversationID, *p.Title); err != nil {
		return nil, storeErr("rename conversation", p.ConversationID, err)
	}
	return struct{}{}, nil
}

func (s *Server) deleteConversation(id string) (any, error) {
	s.qmu.Lock() // a queued message must not start as the conversation goes
	defer s.qmu.Unlock()
	s.mu.Lock()
	if t := s.topics[id]; t != nil && t.run != nil {
		s.mu.Unlock()
		return nil, jsonrpc2.Errorf(CodeConflict, "a turn is running in conversation %s: cancel it (ochat/chat/cancel) before deleting", id)
	}
	var conns []AgentConn
	for k, sl := range s.slots {
		if k.conv == id {
			conns = append(conns, sl.conn)
			delete(s.slots, k)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	if err := s.store.DeleteConversation(id); err != nil {
		return nil, storeErr("delete conversation", id, err)
	}
	s.mu.Lock()
	s.forgetQueueLocked(id) // stored with the conversation, dropped with it
	s.mu.Unlock()
	return struct{}{}, nil
}

func (s *Server) historyRecords(id string) (any, error) {
	res, err := s.getConversation(id)
	if err != nil {
		return nil, err
	}
	recs := transcript.Flatten(res.(GetConversationResult).Messages)
	if recs == nil {
		recs = []transcript.Record{}
	}
	return HistoryResult{Records: recs}, nil
}

// subscribe adds c to the conversation's subscribers and queues the answer —
// snapshot, running turn's buffered events, pending permissions — under s.mu,
// so every later event is queued after it: no gap, no duplicate.
func (s *Server) subscribe(c *client, id string, reply jsonrpc2.Replier) (any, error) {
	s.syncLinked(s.baseCtx, id, c) // a linked conversation first imports its native session's new turns
	conv, msgs, err := s.snapshot(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topicLocked(id)
	res := SubscribeResult{Conversation: conv, Messages: msgs, Permissions: []PermissionParams{}}
	if r := t.run; r != nil {
		rt := &RunningTurn{TurnID: r.turnID, AssistantMessageID: r.turnID, Agent: r.agent, LastSeq: r.seq}
		live := r.messageCopyLocked()
		if r.truncated {
			rt.Truncated = true
			rt.Events = []transcript.Event{}
			rt.Message = &live
			res.Messages = replaceMessage(res.Messages, live)
		} else {
			rt.Events = append([]transcript.Event(nil), r.events...)
			if rt.Events == nil {
				rt.Events = []transcript.Event{}
			}
			live.Segments = nil
			res.Messages = replaceMessage(res.Messages, live)
		}
		res.Running = rt
		for _, p := range r.permOrder {
			if pp := s.perms[p]; pp != nil {
				res.Permissions = append(res.Permissions, pp.params)
			}
		}
	}
	res.AgentStates = []AgentStateParams{}
	for k, sl := range s.slots {
		if k.conv == id && sl.sessionID != "" {
			res.AgentStates = append(res.AgentStates, AgentStateParams{ConversationID: id, Agent: k.agent, State: sl.state})
		}
	}
	slices.SortFunc(res.AgentStates, func(a, b AgentStateParams) int { return strings.Compare(a.Agent, b.Agent) })
	res.Queue = s.queueLocked(id)
	t.subs[c] = struct{}{}
	c.subs[id] = struct{}{}
	c.queueReply(reply, res, nil)
	return nil, errReplied
}

func (s *Server) unsubscribe(c *client, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.topics[id]; t != nil {
		delete(t.subs, c)
		s.dropTopicLocked(t)
	}
	delete(c.subs, id)
}

// titleFrom makes a conversation title from the start of a prompt: its first
// non-blank line, at most 60 characters.
func titleFrom(text string) string {
	line := ""
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	line = strings.Join(strings.Fields(line), " ")
	const max = 60
	if utf8.RuneCountInString(line) <= max {
		return line
	}
	r := []rune(line)[:max]
	cut := string(r)
	if i := strings.LastIndexByte(cut, ' '); i > max/2 {
		cut = cut[:i]
	}
	return cut + "…"
}
