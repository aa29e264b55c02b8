package history

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// AgentSession is what the store keeps per (conversation, agent) so a later
// prompt can reuse the agent's ACP session (session/load or session/resume)
// and hand off only the turns that agent has not seen.
type AgentSession struct {
	SessionID string            `json:"sessionId"`        // ACP session id; "" forces session/new
	Cursor    string            `json:"cursor"`           // id of the last message this agent has seen ("" = none)
	Config    map[string]string `json:"config,omitempty"` // accepted config option values, configId → value
}

// AgentSession returns the session state of agent in conversation convID.
// Errors wrap ErrNotFound when the conversation or the agent's entry does
// not exist.
func (s *Store) AgentSession(convID, agent string) (AgentSession, error) {
	var as AgentSession
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		as, err = getAgentSession(tx, convID, agent)
		return err
	})
	return as, err
}

// getAgentSession is AgentSession inside tx.
func getAgentSession(tx *bolt.Tx, convID, agent string) (AgentSession, error) {
	var as AgentSession
	err := func() error {
		if tx.Bucket(bucketConversations).Get([]byte(convID)) == nil {
			return ErrNotFound
		}
		b := tx.Bucket(bucketAgentSessions).Bucket([]byte(convID))
		if b == nil {
			return ErrNotFound
		}
		v := b.Get([]byte(agent))
		if v == nil {
			return ErrNotFound
		}
		if err := json.Unmarshal(v, &as); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		return nil
	}()
	if err != nil {
		return AgentSession{}, fmt.Errorf("agent session %s/%s: %w", convID, agent, err)
	}
	return as, nil
}

// AgentSessions returns the session state of every agent of conversation
// convID, keyed by agent name (empty, non-nil if none). Unknown conversation:
// an error wrapping ErrNotFound.
func (s *Store) AgentSessions(convID string) (map[string]AgentSession, error) {
	out := map[string]AgentSession{}
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketConversations).Get([]byte(convID)) == nil {
			return ErrNotFound
		}
		b := tx.Bucket(bucketAgentSessions).Bucket([]byte(convID))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var as AgentSession
			if err := json.Unmarshal(v, &as); err != nil {
				return fmt.Errorf("decode %s: %w", k, err)
			}
			out[string(k)] = as
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("agent sessions of %s: %w", convID, err)
	}
	return out, nil
}

// PutAgentSession stores (replacing) the session state of agent in
// conversation convID. Unknown conversation: an error wrapping ErrNotFound;
// an empty agent name is refused.
func (s *Store) PutAgentSession(convID, agent string, as AgentSession) error {
	return s.Update(func(w *Writer) error { return w.PutAgentSession(convID, agent, as) })
}

// putAgentSession is PutAgentSession inside tx.
func putAgentSession(tx *bolt.Tx, convID, agent string, as AgentSession) error {
	if err := validID("agent", agent); err != nil {
		return fmt.Errorf("put agent session in %s: %w", convID, err)
	}
	err := func() error {
		if tx.Bucket(bucketConversations).Get([]byte(convID)) == nil {
			return ErrNotFound
		}
		b, err := tx.Bucket(bucketAgentSessions).CreateBucketIfNotExists([]byte(convID))
		if err != nil {
			return err
		}
		return putJSON(b, agent, as)
	}()
	if err != nil {
		return fmt.Errorf("put agent session %s/%s: %w", convID, agent, err)
	}
	return nil
}

// ResetAgentSessions drops the session id and the cursor of every agent of
// conversation convID, keeping accepted config values: the next prompt to
// any agent starts a session/new that receives the whole conversation, and
// the config is replayed into it. Unknown conversation: an error wrapping
// ErrNotFound.
func (s *Store) ResetAgentSessions(convID string) error {
	return s.Update(func(w *Writer) error { return w.ResetAgentSessions(convID) })
}

// resetAgentSessions is ResetAgentSessions inside tx.
func resetAgentSessions(tx *bolt.Tx, convID string) error {
	err := func() error {
		if tx.Bucket(bucketConversations).Get([]byte(convID)) == nil {
			return ErrNotFound
		}
		return updateAgentSessions(tx, convID, func(as *AgentSession) bool {
			changed := as.SessionID != "" || as.Cursor != ""
			as.SessionID, as.Cursor = "", ""
			return changed
		})
	}()
	if err != nil {
		return fmt.Errorf("reset agent sessions of %s: %w", convID, err)
	}
	return nil
}

// updateAgentSessions applies f to every agent session of convID inside tx,
// storing those for which f reports a change.
func updateAgentSessions(tx *bolt.Tx, convID string, f func(*AgentSession) bool) error {
	b := tx.Bucket(bucketAgentSessions).Bucket([]byte(convID))
	if b == nil {
		return nil
	}
	changed := map[string]AgentSession{}
	err := b.ForEach(func(k, v []byte) error {
		var as AgentSession
		if err := json.Unmarshal(v, &as); err != nil {
			return fmt.Errorf("decode agent session %s: %w", k, err)
		}
		if f(&as) {
			changed[string(k)] = as
		}
		return nil
	})
	if err != nil {
		return err
	}
	for agent, as := range changed {
		if err := putJSON(b, agent, as); err != nil {
			return err
		}
	}
	return nil
}
