package daemon

import (
	"context"
	"time"
)

// Defaults of the agent process limits in Options.
const (
	DefaultAgentIdleTimeout = 10 * time.Minute
	DefaultMaxAgents        = 8
)

// busyLocked reports whether the agent process of key serves a running
// turn. s.mu is held.
func (s *Server) busyLocked(key slotKey) bool {
	t := s.topics[key.conv]
	return t != nil && t.run != nil && t.run.agent == key.agent && !t.run.finished
}

// liveAgents is the number of agent processes the daemon keeps (one per
// conversation and agent).
func (s *Server) liveAgents() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.slots)
}

// makeRoomForAgent stops the least recently used idle agent process when
// MaxAgents are live and another (for key) is about to start. When every
// live process serves a running turn, none is stopped and the new one
// starts over the cap.
func (s *Server) makeRoomForAgent(key slotKey) {
	if s.opts.MaxAgents < 0 {
		return
	}
	s.mu.Lock()
	if len(s.slots) < s.opts.MaxAgents {
		s.mu.Unlock()
		return
	}
	var (
		lru    slotKey
		oldest *agentSlot
	)
	for k, sl := range s.slots {
		if k == key || s.busyLocked(k) {
			continue
		}
		if oldest == nil || sl.lastUsed.Before(oldest.lastUsed) {
			lru, oldest = k, sl
		}
	}
	if oldest != nil {
		delete(s.slots, lru)
	}
	n := len(s.slots)
	s.mu.Unlock()
	if oldest == nil {
		s.log.Warn("agent process cap reached and every process serves a turn; starting one more", "live", n, "max", s.opts.MaxAgents)
		return
	}
	s.log.Info("agent process cap reached; stopping the least recently used idle one", "conversation", lru.conv, "agent", lru.agent, "max", s.opts.MaxAgents)
	s.stopAgent(oldest)
}

// stopAgent closes an idle agent process that is no longer in s.slots:
// session/close of its session (when the agent supports it), then the
// process group. It does not wait.
func (s *Server) stopAgent(sl *agentSlot) {
	go func() {
		if cl, ok := sl.conn.(sessionCloser); ok && sl.sessionID != "" {
			ctx, cancel := context.WithTimeout(s.baseCtx, closeTimeout)
			_ = cl.CloseSession(ctx, sl.sessionID)
			cancel()
		}
		sl.conn.Close()
	}()
}

// reapAgents stops agent processes that have served no turn for
// AgentIdleTimeout, until the daemon closes.
func (s *Server) reapAgents() {
	idle := s.opts.AgentIdleTimeout
	tick := time.NewTicker(min(max(idle/4, 10*time.Millisecond), 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-s.baseCtx.Done():
			return
		case <-tick.C:
		}
		var reaped []*agentSlot
		s.mu.Lock()
		for k, sl := range s.slots {
			if !s.busyLocked(k) && time.Since(sl.lastUsed) >= idle {
				delete(s.slots, k)
				reaped = append(reaped, sl)
				s.log.Info("stopping idle agent process", "conversation", k.conv, "agent", k.agent, "idle", idle)
			}
		}
		s.mu.Unlock()
		for _, sl := range reaped {
			s.stopAgent(sl)
		}
	}
}
