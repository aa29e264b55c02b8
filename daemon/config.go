package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/history"
)

// configSetter is implemented by agent connections that can change a
// session config option (ACP session/set_config_option with the
// session/set_mode and session/set_model fallbacks, 30 s; *agents.Conn).
type configSetter interface {
	SetConfigOption(ctx context.Context, sessionID, configID, value string) (agents.State, error)
}

// setConfig handles ochat/agent/setConfig. With a live session of (conv,
// agent) the value is sent to the agent at once; once the agent accepts it
// (or when no session is live) it is remembered in the conversation's
// AgentSession.Config and replayed into every later session of that agent.
// The answer is queued from a goroutine, so a slow agent (up to 30 s) does
// not hold up the client's other requests.
func (s *Server) setConfig(c *client, p SetConfigParams, reply jsonrpc2.Replier) (any, error) {
	if _, err := s.store.Conversation(p.ConversationID); err != nil {
		return nil, storeErr("setConfig", p.ConversationID, err)
	}
	reg, err := s.registry()
	if err != nil {
		return nil, jsonrpc2.Errorf(CodeAgentUnavailable, "%v", err)
	}
	if _, err := reg.Lookup(p.Agent); err != nil {
		return nil, jsonrpc2.Errorf(CodeAgentUnavailable, "%v", err)
	}
	value := p.value
	s.mu.Lock()
	var conn AgentConn
	sid := ""
	if sl := s.slots[slotKey{p.ConversationID, p.Agent}]; sl != nil && sl.sessionID != "" {
		conn, sid = sl.conn, sl.sessionID
	}
	s.mu.Unlock()
	go func() {
		res, err := s.applyConfig(p, conn, sid, value)
		c.queueReply(reply, res, err)
	}()
	return nil, errReplied
}

// applyConfig sends one config value to a live session (if any), stores it
// and tells the subscribers the agent's changed state.
func (s *Server) applyConfig(p SetConfigParams, conn AgentConn, sid, value string) (SetConfigResult, error) {
	res := SetConfigResult{}
	if conn != nil {
		cs, ok := conn.(configSetter)
		if !ok {
			return res, jsonrpc2.Errorf(CodeAgentUnavailable, "agent %s: this connection cannot change config options", p.Agent)
		}
		st, err := cs.SetConfigOption(s.baseCtx, sid, p.ConfigID, value)
		if err != nil {
			var re *agents.RequestError
			if errors.As(err, &re) {
				return res, jsonrpc2.Errorf(jsonrpc2.InvalidParams, "agent %s refused %s = %q: %v", p.Agent, p.ConfigID, value, err)
			}
			return res, jsonrpc2.Errorf(CodeAgentUnavailable, "set %s on agent %s: %v", p.ConfigID, p.Agent, err)
		}
		res.Applied = true
		s.mu.Lock()
		if sl := s.slots[slotKey{p.ConversationID, p.Agent}]; sl != nil && sl.sessionID == sid {
			sl.state.Merge(st)
			res.State = sl.state
		} else {
			res.State = st
		}
		if t := s.topics[p.ConversationID]; t != nil {
			s.broadcastLocked(t, NotifyAgentState, AgentStateParams{ConversationID: p.ConversationID, Agent: p.Agent, State: st})
		}
		s.mu.Unlock()
	}
	err := s.store.Update(func(w *history.Writer) error {
		as, err := w.AgentSession(p.ConversationID, p.Agent)
		if err != nil && !errors.Is(err, history.ErrNotFound) {
			return err
		}
		if as.Config == nil {
			as.Config = map[string]string{}
		}
		as.Config[p.ConfigID] = value
		res.Config = as.Config
		return w.PutAgentSession(p.ConversationID, p.Agent, as)
	})
	if err != nil {
		if errors.Is(err, history.ErrNotFound) {
			return SetConfigResult{}, notFound("unknown conversation %q", p.ConversationID)
		}
		return SetConfigResult{}, fmt.Errorf("store config of agent %s: %w", p.Agent, err)
	}
	return res, nil
}

// replayConfig applies remembered config values to a session just created
// or reopened, skipping those the session already has; it returns the state
// the agent reported changed. A value the agent refuses is logged and kept
// (the agent may accept it again later).
func (s *Server) replayConfig(ctx context.Context, conn AgentConn, agent string, info agents.SessionInfo, cfg map[string]string) agents.State {
	var changed agents.State
	cs, ok := conn.(configSetter)
	if !ok {
		return changed
	}
	cur := info.State
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if v, ok := configValue(cur, k); ok && v == cfg[k] {
			continue
		}
		st, err := cs.SetConfigOption(ctx, info.ID, k, cfg[k])
		if err != nil {
			s.log.Warn("replaying a config value into a new session", "agent", agent, "session", info.ID, "config", k, "value", cfg[k], "err", err)
			continue
		}
		cur.Merge(st)
		changed.Merge(st)
	}
	return changed
}

// configValue is the current value of config option id in st: a
// configOptions entry (select value, or "true"/"false"), else for "mode" the
// legacy current mode and for "model" the legacy current model.
func configValue(st agents.State, id string) (string, bool) {
	for _, o := range st.ConfigOptions {
		switch {
		case o.Select != nil && string(o.Select.Id) == id:
			return string(o.Select.CurrentValue), true
		case o.Boolean != nil && string(o.Boolean.Id) == id:
			return strconv.FormatBool(o.Boolean.CurrentValue), true
		}
	}
	switch {
	case id == "mode" && st.Modes != nil:
		return string(st.Modes.CurrentModeId), true
	case id == "model" && st.Models != nil:
		var m struct {
			CurrentModelID string `json:"currentModelId"`
		}
		if json.Unmarshal(st.Models, &m) == nil && m.CurrentModelID != "" {
			return m.CurrentModelID, true
		}
	}
	return "", false
}

// agentsList handles ochat/agents/list; with a conversation id it adds, per
// agent that has a session or remembered config in that conversation, its
// live state and remembered config.
func (s *Server) agentsList(p AgentsListParams) (any, error) {
	reg, err := s.registry()
	if err != nil {
		return nil, jsonrpc2.Errorf(CodeAgentUnavailable, "%v", err)
	}
	res := AgentsListResult{Agents: reg.List()}
	if pr, ok := reg.(interface{ Problems() []agents.Problem }); ok {
		res.Problems = pr.Problems()
	}
	if p.ConversationID == "" {
		return res, nil
	}
	stored, err := s.store.AgentSessions(p.ConversationID)
	if err != nil {
		return nil, storeErr("agents/list", p.ConversationID, err)
	}
	byAgent := map[string]*ConversationAgentState{}
	for name, as := range stored {
		byAgent[name] = &ConversationAgentState{Agent: name, Config: as.Config}
	}
	s.mu.Lock()
	for k, sl := range s.slots {
		if k.conv != p.ConversationID || sl.sessionID == "" {
			continue
		}
		st := byAgent[k.agent]
		if st == nil {
			st = &ConversationAgentState{Agent: k.agent}
			byAgent[k.agent] = st
		}
		st.Live = true
		st.State = sl.state
	}
	s.mu.Unlock()
	res.States = []ConversationAgentState{}
	for _, st := range byAgent {
		res.States = append(res.States, *st)
	}
	slices.SortFunc(res.States, func(a, b ConversationAgentState) int { return strings.Compare(a.Agent, b.Agent) })
	return res, nil
}
