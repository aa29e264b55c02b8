package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/ochat-dev/ochat/transcript"
)

// QueuedMessage is a message sent while a turn of its conversation ran: the
// daemon sends it as a turn of its own when the turns before it end. Its
// attachments' content is already stored as blobs, referenced by the queue.
type QueuedMessage struct {
	ID          string                  `json:"id"`
	Text        string                  `json:"text"`
	Agent       string                  `json:"agent"`
	Attachments []transcript.Attachment `json:"attachments,omitempty"`
	CreatedAt   int64                   `json:"createdAt"` // Unix ms
}

// queueRefPrefix marks a blob reference held by a queued message rather than
// a stored message: its blobRefs key is hash 0x00 conversation 0x00
// queueRefPrefix+queued id.
const queueRefPrefix = "queue:"

// Queue returns the queued messages of a conversation, oldest first (nil
// when none).
func (s *Store) Queue(convID string) ([]QueuedMessage, error) {
	var q []QueuedMessage
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		q, err = getQueue(tx, convID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue of %s: %w", convID, err)
	}
	return q, nil
}

// Queues returns every conversation's non-empty queue (for a daemon that
// starts: a queued message survives a restart).
func (s *Store) Queues() (map[string][]QueuedMessage, error) {
	out := map[string][]QueuedMessage{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketQueue).ForEach(func(k, v []byte) error {
			var q []QueuedMessage
			if err := json.Unmarshal(v, &q); err != nil {
				return fmt.Errorf("decode queue of %s: %w", k, err)
			}
			if len(q) > 0 {
				out[string(k)] = q
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read queues: %w", err)
	}
	return out, nil
}

// PutQueue replaces the queue of a conversation (empty removes it) and the
// blob references of its attachments. Unknown conversation: an error
// wrapping ErrNotFound.
func (s *Store) PutQueue(convID string, q []QueuedMessage) error {
	return s.Update(func(w *Writer) error { return w.PutQueue(convID, q) })
}

// PutQueue is Store.PutQueue inside the transaction (the daemon drops the
// queued message it sends in the transaction that stores it as a user
// message, so it is neither lost nor sent twice).
func (w *Writer) PutQueue(convID string, q []QueuedMessage) error {
	if w.tx == nil {
		return errWriterDone
	}
	if err := putQueue(w, convID, q); err != nil {
		return fmt.Errorf("put queue of %s: %w", convID, err)
	}
	return nil
}

func getQueue(tx *bolt.Tx, convID string) ([]QueuedMessage, error) {
	v := tx.Bucket(bucketQueue).Get([]byte(convID))
	if v == nil {
		return nil, nil
	}
	var q []QueuedMessage
	if err := json.Unmarshal(v, &q); err != nil {
		return nil, fmt.Errorf("decode queue: %w", err)
	}
	return q, nil
}

func putQueue(w *Writer, convID string, q []QueuedMessage) error {
	if err := validID("conversation", convID); err != nil {
		return err
	}
	if tx := w.tx; tx.Bucket(bucketConversations).Get([]byte(convID)) == nil {
		return ErrNotFound
	}
	old, err := getQueue(w.tx, convID)
	if err != nil {
		return err
	}
	if err := setQueueRefs(w, convID, old, q); err != nil {
		return err
	}
	b := w.tx.Bucket(bucketQueue)
	if len(q) == 0 {
		return b.Delete([]byte(convID))
	}
	for _, m := range q {
		if err := validID("queued message", m.ID); err != nil {
			return err
		}
	}
	return putJSON(b, convID, q)
}

// setQueueRefs moves the blob references of a queue from old to new.
func setQueueRefs(w *Writer, convID string, old, new []QueuedMessage) error {
	hashes := func(q []QueuedMessage, id string) []string {
		for _, m := range q {
			if m.ID != id {
				continue
			}
			var out []string
			for _, a := range m.Attachments {
				if a.Hash != "" {
					out = append(out, a.Hash)
				}
			}
			return out
		}
		return nil
	}
	ids := map[string]bool{}
	for _, m := range old {
		ids[m.ID] = true
	}
	for _, m := range new {
		ids[m.ID] = true
	}
	for id := range ids {
		if err := w.setBlobRefs(convID, queueRefPrefix+id, hashes(old, id), hashes(new, id)); err != nil {
			return err
		}
	}
	return nil
}

// deleteQueue drops a conversation's queue and its blob references.
func deleteQueue(w *Writer, convID string) error {
	old, err := getQueue(w.tx, convID)
	if err != nil {
		return err
	}
	if err := setQueueRefs(w, convID, old, nil); err != nil {
		return err
	}
	return w.tx.Bucket(bucketQueue).Delete([]byte(convID))
}

// queueRefValid reports whether the blob reference (hash, convID, msgID)
// with msgID queueRefPrefix+id is held by that queued message (Check).
func queueRefValid(tx *bolt.Tx, hash string, convID, msgID []byte) bool {
	id, ok := bytes.CutPrefix(msgID, []byte(queueRefPrefix))
	if !ok {
		return false
	}
	q, err := getQueue(tx, string(convID))
	if err != nil {
		return false
	}
	i := slices.IndexFunc(q, func(m QueuedMessage) bool { return m.ID == string(id) })
	return i >= 0 && slices.ContainsFunc(q[i].Attachments, func(a transcript.Attachment) bool { return a.Hash == hash })
}

// checkQueues verifies that every queue decodes and belongs to a stored
// conversation, and that its attachments are referenced (Check).
func checkQueues(tx *bolt.Tx, bad func(string, ...any)) {
	convs := tx.Bucket(bucketConversations)
	refs := tx.Bucket(bucketBlobRefs)
	tx.Bucket(bucketQueue).ForEach(func(k, v []byte) error {
		var q []QueuedMessage
		if err := json.Unmarshal(v, &q); err != nil {
			bad("queue of %q: %v", k, err)
			return nil
		}
		if convs.Get(k) == nil {
			bad("queue of %q: no such conversation", k)
		}
		for _, m := range q {
			for _, a := range m.Attachments {
				if a.Hash != "" && refs.Get(blobRefKey(a.Hash, string(k), queueRefPrefix+m.ID)) == nil {
					bad("queued message %s/%s: attachment %s has no blob reference", k, m.ID, a.Hash)
				}
			}
		}
		return nil
	})
}
