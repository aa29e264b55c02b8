package history

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/ochat-dev/ochat/transcript"
)

// errWriterDone reports use of a Writer after its Update returned.
var errWriterDone = errors.New("history: Writer used after its Update returned")

// Writer makes several changes to the store in one transaction; see
// Store.Update. It is valid only inside the function given to Update and
// must not be used from other goroutines.
type Writer struct {
	tx *bolt.Tx
	// released holds blob hashes whose last reference this transaction may
	// have dropped; they are deleted at commit if still unreferenced, so a
	// blob moved from a dropped message to its replacement survives.
	released map[string]bool
}

// Update runs f in one read-write transaction and commits it durably when f
// returns nil; if f returns an error (or panics) nothing f did is kept, and
// the error is returned. Use it for changes that must not be torn apart by a
// crash, e.g. storing the finished answer together with the agent's moved
// cursor, or an edit's TruncateFrom together with the replacement message
// and ResetAgentSessions. f must not call other Store methods (they would
// wait for this transaction forever).
func (s *Store) Update(f func(w *Writer) error) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		w := &Writer{tx: tx}
		defer func() { w.tx = nil }()
		if err := f(w); err != nil {
			return err
		}
		return w.dropUnreferencedBlobs()
	})
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("history %s: %w", s.path, err)
	}
	return err
}

// CreateConversation is Store.CreateConversation inside the transaction
// (e.g. to import a native session's messages all or nothing).
func (w *Writer) CreateConversation(c Conversation) error {
	if w.tx == nil {
		return errWriterDone
	}
	return createConversation(w.tx, c)
}

// PutMessage is Store.PutMessage inside the transaction.
func (w *Writer) PutMessage(convID string, m transcript.Message, now int64) error {
	if w.tx == nil {
		return errWriterDone
	}
	return putMessage(w, convID, m, now)
}

// TruncateFrom is Store.TruncateFrom inside the transaction.
func (w *Writer) TruncateFrom(convID, messageID string) error {
	if w.tx == nil {
		return errWriterDone
	}
	return truncateFrom(w, convID, messageID)
}

// PutAgentSession is Store.PutAgentSession inside the transaction.
func (w *Writer) PutAgentSession(convID, agent string, as AgentSession) error {
	if w.tx == nil {
		return errWriterDone
	}
	return putAgentSession(w.tx, convID, agent, as)
}

// AgentSession is Store.AgentSession inside the transaction (it sees the
// transaction's own changes).
func (w *Writer) AgentSession(convID, agent string) (AgentSession, error) {
	if w.tx == nil {
		return AgentSession{}, errWriterDone
	}
	return getAgentSession(w.tx, convID, agent)
}

// DeleteConversation is Store.DeleteConversation inside the transaction.
func (w *Writer) DeleteConversation(id string) error {
	if w.tx == nil {
		return errWriterDone
	}
	return deleteConversation(w, id)
}

// ResetAgentSessions is Store.ResetAgentSessions inside the transaction.
func (w *Writer) ResetAgentSessions(convID string) error {
	if w.tx == nil {
		return errWriterDone
	}
	return resetAgentSessions(w.tx, convID)
}
