package daemon

import "time"

// DefaultPermissionTimeout is Options.PermissionTimeout's default.
const DefaultPermissionTimeout = 10 * time.Minute

// armPermTimeoutLocked starts the permission timer when a permission
// request is pending and no client is connected, and stops it when a client
// connects. A client that goes away does not cancel anything at once: the
// turn waits PermissionTimeout for one to come back. s.mu is held.
func (s *Server) armPermTimeoutLocked() {
	want := s.opts.PermissionTimeout > 0 && len(s.clients) == 0 && len(s.perms) > 0
	if !want {
		if s.permIdle != nil {
			s.permIdle.Stop()
			s.permIdle = nil
		}
		return
	}
	if s.permIdle != nil {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(s.opts.PermissionTimeout, func() {
		s.mu.Lock()
		if s.permIdle != t {
			s.mu.Unlock()
			return
		}
		s.permIdle = nil
		if len(s.clients) > 0 {
			s.mu.Unlock()
			return
		}
		var runs []*run
		seen := map[*run]bool{}
		for _, p := range s.perms {
			if !seen[p.run] {
				seen[p.run] = true
				runs = append(runs, p.run)
			}
		}
		s.mu.Unlock()
		for _, r := range runs {
			s.log.Warn("permission unanswered with no client connected; cancelling the turn", "conversation", r.convID, "turn", r.turnID, "timeout", s.opts.PermissionTimeout)
			r.requestCancel()
		}
	})
	s.permIdle = t
}
