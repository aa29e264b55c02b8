package daemon

import (
	"context"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/transcript"
)

// closeTimeout bounds one session/close when an edit or retry drops the
// sessions that saw the dropped turns.
const closeTimeout = 10 * time.Second

// sessionCloser is implemented by agent connections that can end one
// session (ACP session/close; *agents.Conn).
type sessionCloser interface {
	CloseSession(ctx context.Context, id string) error
}

// sessionResumer is implemented by agent connections that can reopen a
// session without a history replay (ACP session/resume; *agents.Conn).
type sessionResumer interface {
	ResumeSession(ctx context.Context, id string) (agents.SessionInfo, error)
}

// reopener is one way to reopen a stored session.
type reopener struct {
	method string // ACP method name, for logs and errors
	call   func(context.Context, string) (agents.SessionInfo, error)
}

// reopenMethods lists how a stored session can be reopened on conn, in the
// order to try: session/load when the agent advertises loadSession, then
// session/resume when it advertises sessionCapabilities.resume (and conn can
// send it) — so an agent whose load fails (gemini-cli 0.61 within the
// minute of creation) still gets a resume before falling back to
// session/new.
func reopenMethods(conn AgentConn) []reopener {
	var out []reopener
	caps := conn.Capabilities()
	if caps.LoadSession {
		out = append(out, reopener{"session/load", conn.LoadSession})
	}
	if rs, ok := conn.(sessionResumer); ok && caps.SessionCapabilities.Resume != nil {
		out = append(out, reopener{"session/resume", rs.ResumeSession})
	}
	return out
}

// closeSessions ends every live agent session of a conversation (edit and
// retry: those sessions saw turns that were dropped). Each session gets
// session/close when its agent supports it; either way the slot forgets it,
// so the next turn of that agent runs session/new in the same process.
func (s *Server) closeSessions(ctx context.Context, convID string) {
	type open struct {
		agent, id string
		conn      AgentConn
	}
	var sessions []open
	s.mu.Lock()
	for k, sl := range s.slots {
		if k.conv == convID && sl.sessionID != "" {
			sessions = append(sessions, open{k.agent, sl.sessionID, sl.conn})
			sl.sessionID = ""
			sl.state = agents.State{}
		}
	}
	s.mu.Unlock()
	for _, o := range sessions {
		cl, ok := o.conn.(sessionCloser)
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, closeTimeout)
		err := cl.CloseSession(cctx, o.id)
		cancel()
		if err != nil {
			s.log.Info("session/close of a dropped session", "conversation", convID, "agent", o.agent, "session", o.id, "err", err)
		}
	}
}

// edit handles ochat/chat/edit: the user message MessageID and everything
// after it are dropped, every agent session of the conversation is reset
// (and its live session closed when the turn starts), and a turn starts with
// the new text (the message's attachments are kept).
func (s *Server) edit(c *client, p EditParams, reply jsonrpc2.Replier) (any, error) {
	msgs, err := s.store.Messages(p.ConversationID)
	if err != nil {
		return nil, storeErr("edit", p.ConversationID, err)
	}
	i := messageIndex(msgs, p.MessageID)
	if i < 0 {
		return nil, notFound("unknown message %q in conversation %s", p.MessageID, p.ConversationID)
	}
	if msgs[i].Role != transcript.RoleUser {
		return nil, fieldError("messageId", "must name a user message (use ochat/chat/retry to regenerate an answer)")
	}
	agent := p.Agent
	if agent == "" {
		agent = answeringAgent(msgs, i)
	}
	restoreTo, err := restorePoint(p.RestoreCode, msgs, i)
	if err != nil {
		return nil, err
	}
	return s.startTurn(c, turnRequest{
		restoreTo: restoreTo,
		convID:    p.ConversationID, agent: agent, text: p.Text, attachments: msgs[i].Attachments, truncateFrom: msgs[i].ID,
	}, reply)
}

// retry handles ochat/chat/retry: MessageID names an assistant message (or
// the user message it answers); that user message and everything after it
// are dropped, every agent session is reset, and the same prompt starts a
// new turn (agent: Agent, else the one that answered, else the
// conversation's last).
func (s *Server) retry(c *client, p RetryParams, reply jsonrpc2.Replier) (any, error) {
	msgs, err := s.store.Messages(p.ConversationID)
	if err != nil {
		return nil, storeErr("retry", p.ConversationID, err)
	}
	i := messageIndex(msgs, p.MessageID)
	if i < 0 {
		return nil, notFound("unknown message %q in conversation %s", p.MessageID, p.ConversationID)
	}
	agent := p.Agent
	if msgs[i].Role == transcript.RoleAssistant {
		if agent == "" {
			agent = msgs[i].Agent
		}
		for i >= 0 && msgs[i].Role != transcript.RoleUser {
			i--
		}
		if i < 0 {
			return nil, fieldError("messageId", "names an answer with no user message before it")
		}
	} else if msgs[i].Role != transcript.RoleUser {
		return nil, fieldError("messageId", "must name a user or assistant message")
	}
	if agent == "" {
		agent = answeringAgent(msgs, i)
	}
	restoreTo, err := restorePoint(p.RestoreCode, msgs, i)
	if err != nil {
		return nil, err
	}
	u := msgs[i]
	return s.startTurn(c, turnRequest{
		restoreTo: restoreTo,
		convID:    p.ConversationID, agent: agent, text: u.Content, attachments: u.Attachments, truncateFrom: u.ID,
	}, reply)
}

// messageIndex is the index of the message with id, or -1.
func messageIndex(msgs []transcript.Message, id string) int {
	for i := range msgs {
		if msgs[i].ID == id {
			return i
		}
	}
	return -1
}

// answeringAgent is the agent of the first answer after msgs[i], "" if none.
func answeringAgent(msgs []transcript.Message, i int) string {
	for _, m := range msgs[i+1:] {
		if m.Role == transcript.RoleUser {
			break
		}
		if m.Role == transcript.RoleAssistant && m.Agent != "" {
			return m.Agent
		}
	}
	return ""
}

// resyncOthersLocked tells every subscriber of t but except that the
// conversation's stored messages changed under it (an edit or retry dropped
// some): each is sent ochat/resync and dropped from t's live events, and
// re-subscribing gives it the new snapshot with the running turn's replay —
// no gap, no duplicate. s.mu is held.
func (s *Server) resyncOthersLocked(t *topic, except *client, reason string) {
	raw, err := marshalParams(ResyncParams{ConversationID: t.id, Reason: reason})
	if err != nil {
		return
	}
	frame := frameNotification(NotifyResync, raw)
	for c := range t.subs {
		if c == except {
			continue
		}
		delete(t.subs, c)
		delete(c.subs, t.id)
		c.push(outItem{frame: frame}, false)
	}
}
