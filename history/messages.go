package history

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	sjson "github.com/segmentio/encoding/json"
	bolt "go.etcd.io/bbolt"

	"github.com/ochat-dev/ochat/transcript"
)

// Messages returns every message of conversation convID in order of id
// (ULIDs sort by time, so this is chronological). A conversation with no
// messages gives an empty, non-nil slice; an unknown one an error wrapping
// ErrNotFound.
func (s *Store) Messages(convID string) ([]transcript.Message, error) {
	var out []transcript.Message
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketConversations).Get([]byte(convID)) == nil {
			return ErrNotFound
		}
		out = []transcript.Message{}
		b := tx.Bucket(bucketMessages).Bucket([]byte(convID))
		if b == nil {
			return nil
		}
		out = make([]transcript.Message, 0, b.Stats().KeyN)
		return b.ForEach(func(k, v []byte) error {
			m, err := decodeMessage(v)
			if err != nil {
				return fmt.Errorf("message %s: %w", k, err)
			}
			out = append(out, m)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("messages of %s: %w", convID, err)
	}
	return out, nil
}

// MessagesAfter returns the messages of conversation convID whose id sorts
// after afterID ("" = all), in order of id: what an agent whose cursor is
// afterID has not seen. afterID need not exist (a cursor may point at a
// message dropped by TruncateFrom). Unknown conversation: an error wrapping
// ErrNotFound.
func (s *Store) MessagesAfter(convID, afterID string) ([]transcript.Message, error) {
	out := []transcript.Message{}
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketConversations).Get([]byte(convID)) == nil {
			return ErrNotFound
		}
		b := tx.Bucket(bucketMessages).Bucket([]byte(convID))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := c.Seek([]byte(afterID))
		if k != nil && string(k) == afterID {
			k, v = c.Next()
		}
		for ; k != nil; k, v = c.Next() {
			m, err := decodeMessage(v)
			if err != nil {
				return fmt.Errorf("message %s: %w", k, err)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("messages of %s after %q: %w", convID, afterID, err)
	}
	return out, nil
}

// Message returns one message of conversation convID, or an error wrapping
// ErrNotFound if the conversation or the message does not exist.
func (s *Store) Message(convID, msgID string) (transcript.Message, error) {
	var m transcript.Message
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMessages).Bucket([]byte(convID))
		if b == nil {
			return ErrNotFound
		}
		v := b.Get([]byte(msgID))
		if v == nil {
			return ErrNotFound
		}
		var err error
		m, err = decodeMessage(v)
		return err
	})
	if err != nil {
		return transcript.Message{}, fmt.Errorf("message %s/%s: %w", convID, msgID, err)
	}
	return m, nil
}

// PutMessage inserts m into conversation convID, or replaces the stored
// message with the same m.ID, in one durable transaction. It sets the
// conversation's UpdatedAt to now (Unix ms) unless that is older than the
// stored value, and, for an assistant message, appends m.Agent to its Agents if new. An assistant
// message with status streaming is recorded in the streaming index (with
// now as its last checkpoint time) so MarkInterrupted finds it; any other
// status removes it from the index.
//
// Errors: unknown conversation wraps ErrNotFound; an empty m.ID or one with a
// NUL byte is refused.
func (s *Store) PutMessage(convID string, m transcript.Message, now int64) error {
	return s.Update(func(w *Writer) error { return w.PutMessage(convID, m, now) })
}

// putMessage is PutMessage inside w's transaction.
func putMessage(w *Writer, convID string, m transcript.Message, now int64) error {
	tx := w.tx
	if err := validID("message", m.ID); err != nil {
		return fmt.Errorf("put message in %s: %w", convID, err)
	}
	err := func() error {
		data, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		c, err := getConversation(tx, convID)
		if err != nil {
			return err
		}
		b, err := tx.Bucket(bucketMessages).CreateBucketIfNotExists([]byte(convID))
		if err != nil {
			return err
		}
		oldRefs := attachmentHashes(b.Get([]byte(m.ID)))
		if err := b.Put([]byte(m.ID), data); err != nil {
			return err
		}
		var newRefs []string
		for _, a := range m.Attachments {
			if a.Hash != "" {
				newRefs = append(newRefs, a.Hash)
			}
		}
		if err := w.setBlobRefs(convID, m.ID, oldRefs, newRefs); err != nil {
			return err
		}
		idx := tx.Bucket(bucketStreaming)
		key := streamingKey(convID, m.ID)
		if isStreaming(m) {
			var t [8]byte
			binary.BigEndian.PutUint64(t[:], uint64(now))
			err = idx.Put(key, t[:])
		} else {
			err = idx.Delete(key)
		}
		if err != nil {
			return fmt.Errorf("streaming index: %w", err)
		}
		changed := false
		if now > c.UpdatedAt {
			c.UpdatedAt, changed = now, true
		}
		if m.Role == transcript.RoleAssistant && m.Agent != "" && !slices.Contains(c.Agents, m.Agent) {
			c.Agents, changed = append(c.Agents, m.Agent), true
		}
		if !changed {
			return nil
		}
		return putJSON(tx.Bucket(bucketConversations), convID, c)
	}()
	if err != nil {
		return fmt.Errorf("put message %s/%s: %w", convID, m.ID, err)
	}
	return nil
}

// TruncateFrom deletes message messageID of conversation convID and every
// message after it (every id >= messageID), in one transaction; this is the
// storage half of edit and retry. In the same transaction it recomputes the
// conversation's Agents from the messages kept, and drops the session id and
// cursor of every agent whose cursor is at or past messageID (that agent's
// session has seen the dropped turns, so it must not be resumed; config
// values are kept). Agents whose cursor is before messageID keep their
// session. Callers that want every agent to start afresh also call
// ResetAgentSessions.
//
// Unknown conversation or message: an error wrapping ErrNotFound, and nothing
// is deleted.
func (s *Store) TruncateFrom(convID, messageID string) error {
	return s.Update(func(w *Writer) error { return w.TruncateFrom(convID, messageID) })
}

// truncateFrom is TruncateFrom inside w's transaction.
func truncateFrom(w *Writer, convID, messageID string) error {
	tx := w.tx
	err := func() error {
		c, err := getConversation(tx, convID)
		if err != nil {
			return err
		}
		b := tx.Bucket(bucketMessages).Bucket([]byte(convID))
		if b == nil || b.Get([]byte(messageID)) == nil {
			return fmt.Errorf("message %s: %w", messageID, ErrNotFound)
		}
		var doomed [][]byte
		cur := b.Cursor()
		for k, v := cur.Seek([]byte(messageID)); k != nil; k, v = cur.Next() {
			doomed = append(doomed, bytes.Clone(k))
			if err := w.setBlobRefs(convID, string(k), attachmentHashes(v), nil); err != nil {
				return err
			}
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if err := deleteStreamingFrom(tx, convID, messageID); err != nil {
			return err
		}
		// Agents that still answer in what is kept, in first-use order.
		agents := []string{}
		err = b.ForEach(func(k, v []byte) error {
			var who struct {
				Role  transcript.Role `json:"role"`
				Agent string          `json:"agent"`
			}
			if err := sjson.Unmarshal(v, &who); err != nil {
				return fmt.Errorf("message %s: %w", k, err)
			}
			if who.Role == transcript.RoleAssistant && who.Agent != "" && !slices.Contains(agents, who.Agent) {
				agents = append(agents, who.Agent)
			}
			return nil
		})
		if err != nil {
			return err
		}
		c.Agents = agents
		if err := putJSON(tx.Bucket(bucketConversations), convID, c); err != nil {
			return err
		}
		return updateAgentSessions(tx, convID, func(as *AgentSession) bool {
			if as.Cursor == "" || as.Cursor < messageID {
				return false
			}
			as.SessionID, as.Cursor = "", ""
			return true
		})
	}()
	if err != nil {
		return fmt.Errorf("truncate %s from %s: %w", convID, messageID, err)
	}
	return nil
}

// MarkInterrupted finds every assistant message still in status streaming
// (through the streaming index, without scanning all messages) and stores it
// with status interrupted, keeping its segments. A message with no
// DurationMs gets the time from its Timestamp to its last checkpoint (the
// now of its last PutMessage), or to now (Unix ms) if that is unknown. It
// returns how many messages it marked. The daemon calls it once at start-up,
// before serving.
func (s *Store) MarkInterrupted(now int64) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		idx := tx.Bucket(bucketStreaming)
		type entry struct {
			key  []byte
			last int64
		}
		var entries []entry
		err := idx.ForEach(func(k, v []byte) error {
			last := now
			if len(v) == 8 {
				last = int64(binary.BigEndian.Uint64(v))
			}
			entries = append(entries, entry{bytes.Clone(k), last})
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := idx.Delete(e.key); err != nil {
				return err
			}
			convID, msgID, ok := splitStreamingKey(e.key)
			if !ok {
				continue
			}
			b := tx.Bucket(bucketMessages).Bucket([]byte(convID))
			if b == nil {
				continue
			}
			v := b.Get([]byte(msgID))
			if v == nil {
				continue
			}
			m, err := decodeMessage(v)
			if err != nil {
				return fmt.Errorf("message %s/%s: %w", convID, msgID, err)
			}
			if !isStreaming(m) {
				continue
			}
			m.Status = transcript.StatusInterrupted
			if m.DurationMs == 0 && e.last > m.Timestamp {
				m.DurationMs = e.last - m.Timestamp
			}
			data, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("encode message %s/%s: %w", convID, msgID, err)
			}
			if err := b.Put([]byte(msgID), data); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("mark interrupted turns: %w", err)
	}
	return n, nil
}

// isStreaming reports whether m belongs in the streaming index.
func isStreaming(m transcript.Message) bool {
	return m.Role == transcript.RoleAssistant && m.Status == transcript.StatusStreaming
}

// decodeMessage decodes a stored message value. It uses segmentio's
// drop-in encoding/json (already linked through go.lsp.dev/jsonrpc2):
// loading a conversation is dominated by decoding, and it halves that
// (docs/perf-history.md). Values are always written by encoding/json.
func decodeMessage(v []byte) (transcript.Message, error) {
	var m transcript.Message
	if err := sjson.Unmarshal(v, &m); err != nil {
		return transcript.Message{}, fmt.Errorf("decode message: %w", err)
	}
	return m, nil
}

// streamingKey is the streaming index key of a message: convID, NUL, msgID.
func streamingKey(convID, msgID string) []byte {
	k := make([]byte, 0, len(convID)+1+len(msgID))
	k = append(k, convID...)
	k = append(k, 0)
	return append(k, msgID...)
}

// splitStreamingKey undoes streamingKey.
func splitStreamingKey(k []byte) (convID, msgID string, ok bool) {
	c, m, ok := bytes.Cut(k, []byte{0})
	return string(c), string(m), ok
}
