package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Conversation is one agent-neutral conversation of a workspace, as stored
// in the conversations bucket (JSON, camelCase).
type Conversation struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	Agents    []string   `json:"agents"`           // agents that answered, first-use order
	CreatedAt int64      `json:"createdAt"`        // Unix ms
	UpdatedAt int64      `json:"updatedAt"`        // Unix ms; newest PutMessage time
	Native    *NativeRef `json:"native,omitempty"` // set when opened from a terminal-started session
}

// NativeRef names the native CLI session a conversation was opened from,
// and the mark: how much of that session the conversation already holds
// (its snapshot, the terminal turns imported since, and the turns ochat
// itself continued in the same native session). Turns the native session
// gains after the mark are imported by the daemon (docs/protocol.md
// "Linked conversations"). A conversation opened before marks existed has
// MarkedAt 0.
type NativeRef struct {
	Agent     string `json:"agent"`          // agent name, e.g. "claude"
	SessionID string `json:"sessionId"`      // the CLI's own session id
	Path      string `json:"path,omitempty"` // session file, if the store has one file per session
	// LastNativeID is the native message id (transcript.Message.ID as the
	// history/native reader of the store gives it: Claude line uuid or API
	// message id, Codex "L<line>", Gemini/OpenCode message id, pi entry id)
	// of the last native message the conversation holds; "" when the
	// native session had no message then.
	LastNativeID string `json:"lastNativeId,omitempty"`
	// LastMessageID is the conversation message LastNativeID was imported
	// as, so that a native message that kept growing after it was imported
	// (a terminal turn still being written) is replaced in place; "" when
	// the mark was moved past a turn ochat ran itself.
	LastMessageID string `json:"lastMessageId,omitempty"`
	// Count is the number of native messages (hidden ones included) up to
	// and including LastNativeID when the mark was set.
	Count int `json:"count,omitempty"`
	// Size (bytes) and ModTimeNs (Unix ns) are the session file's as stat
	// saw it just before the read that set the mark; unchanged, the
	// session has nothing new. 0 for OpenCode's database rows.
	Size      int64 `json:"size,omitempty"`
	ModTimeNs int64 `json:"modTimeNs,omitempty"`
	// MarkedAt is when the mark was last set (Unix ms); 0 = no mark.
	MarkedAt int64 `json:"markedAt,omitempty"`
	// AwaitPrompt is the prompt text of a turn ochat ran in the native
	// session whose records the agent had not yet written to the native
	// file when the turn ended (an agent that writes its log
	// asynchronously). The next sync that finds messages after the mark
	// skips that turn — the first user message holding this text and the
	// answer after it — instead of importing it, and clears the field.
	AwaitPrompt string `json:"awaitPrompt,omitempty"`
	// Links pairs the newest native messages the conversation holds with
	// the conversation messages they are, oldest first, at most the daemon's
	// bound (64): every native message imported (open's snapshot, a sync),
	// and the native session's last message when a turn ochat ran there
	// ended (paired with the conversation's last message then). When the
	// native session no longer holds LastNativeID (a rewind or rollback in
	// the terminal), the newest link it still holds is where the sync goes
	// on from.
	Links []NativeLink `json:"links,omitempty"`
	// Rewinds records, oldest first (at most 16), each time a sync found
	// the native session rewound or rolled back past messages the
	// conversation holds: those messages stay in the conversation, and
	// the terminal's new turns are imported after them.
	Rewinds []NativeRewind `json:"rewinds,omitempty"`
}

// NativeLink says that native message NativeID (NativeRef.LastNativeID's
// kind of id) is held by the conversation as message MessageID, and so is
// everything before it.
type NativeLink struct {
	NativeID  string `json:"nativeId"`
	MessageID string `json:"messageId"`
}

// NativeRewind is one rewind or rollback of the native session seen by a
// sync: the conversation's messages First through Last (Count of them,
// ids sorting after Kept) are no longer in the native session; Kept is the
// last conversation message it still holds. At is when the sync saw it
// (Unix ms).
type NativeRewind struct {
	At    int64  `json:"at"`
	Kept  string `json:"kept"`
	First string `json:"first"`
	Last  string `json:"last"`
	Count int    `json:"count"`
}

// CreateConversation stores a new conversation. c.ID must be non-empty and
// not yet stored (else an error wrapping ErrExists); a nil Agents is stored
// as empty.
func (s *Store) CreateConversation(c Conversation) error {
	return s.Update(func(w *Writer) error { return w.CreateConversation(c) })
}

// createConversation is CreateConversation inside tx.
func createConversation(tx *bolt.Tx, c Conversation) error {
	if err := validID("conversation", c.ID); err != nil {
		return fmt.Errorf("create conversation: %w", err)
	}
	if c.Agents == nil {
		c.Agents = []string{}
	}
	b := tx.Bucket(bucketConversations)
	err := ErrExists
	if b.Get([]byte(c.ID)) == nil {
		err = putJSON(b, c.ID, c)
	}
	if err != nil {
		return fmt.Errorf("create conversation %s: %w", c.ID, err)
	}
	return nil
}

// Conversation returns the stored conversation id, or an error wrapping
// ErrNotFound.
func (s *Store) Conversation(id string) (Conversation, error) {
	var c Conversation
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		c, err = getConversation(tx, id)
		return err
	})
	if err != nil {
		return Conversation{}, fmt.Errorf("get conversation %s: %w", id, err)
	}
	return c, nil
}

// ListConversations returns every conversation, newest UpdatedAt first (ties:
// greater id first, so later-created ULIDs lead).
func (s *Store) ListConversations() ([]Conversation, error) {
	var out []Conversation
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketConversations)
		out = make([]Conversation, 0, b.Stats().KeyN)
		return b.ForEach(func(k, v []byte) error {
			var c Conversation
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("decode conversation %s: %w", k, err)
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	slices.SortFunc(out, func(a, b Conversation) int {
		if a.UpdatedAt != b.UpdatedAt {
			if a.UpdatedAt > b.UpdatedAt {
				return -1
			}
			return 1
		}
		return -strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// RenameConversation sets the title of conversation id; UpdatedAt is
// unchanged. Unknown id: an error wrapping ErrNotFound.
func (s *Store) RenameConversation(id, title string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		c, err := getConversation(tx, id)
		if err != nil {
			return err
		}
		c.Title = title
		return putJSON(tx.Bucket(bucketConversations), id, c)
	})
	if err != nil {
		return fmt.Errorf("rename conversation %s: %w", id, err)
	}
	return nil
}

// SetNative sets (or, with nil, clears) the native session a conversation
// was opened from. Unknown id: an error wrapping ErrNotFound.
func (s *Store) SetNative(id string, ref *NativeRef) error {
	return s.Update(func(w *Writer) error { return w.SetNative(id, ref) })
}

// Conversation is Store.Conversation inside the transaction.
func (w *Writer) Conversation(id string) (Conversation, error) {
	if w.tx == nil {
		return Conversation{}, errWriterDone
	}
	c, err := getConversation(w.tx, id)
	if err != nil {
		return Conversation{}, fmt.Errorf("get conversation %s: %w", id, err)
	}
	return c, nil
}

// SetNative is Store.SetNative inside the transaction (e.g. to move a
// linked conversation's mark together with the messages it imported).
func (w *Writer) SetNative(id string, ref *NativeRef) error {
	if w.tx == nil {
		return errWriterDone
	}
	c, err := getConversation(w.tx, id)
	if err == nil {
		c.Native = ref
		err = putJSON(w.tx.Bucket(bucketConversations), id, c)
	}
	if err != nil {
		return fmt.Errorf("set native session of conversation %s: %w", id, err)
	}
	return nil
}

// DeleteConversation removes conversation id with its messages, agent
// sessions, queued messages and streaming index entries, and every attachment blob no other
// message references. Unknown id: an error wrapping ErrNotFound.
func (s *Store) DeleteConversation(id string) error {
	return s.Update(func(w *Writer) error { return w.DeleteConversation(id) })
}

// deleteConversation is DeleteConversation inside w's transaction.
func deleteConversation(w *Writer, id string) error {
	tx := w.tx
	err := func() error {
		convs := tx.Bucket(bucketConversations)
		if convs.Get([]byte(id)) == nil {
			return ErrNotFound
		}
		if err := convs.Delete([]byte(id)); err != nil {
			return err
		}
		if b := tx.Bucket(bucketMessages).Bucket([]byte(id)); b != nil {
			err := b.ForEach(func(k, v []byte) error {
				return w.setBlobRefs(id, string(k), attachmentHashes(v), nil)
			})
			if err != nil {
				return err
			}
		}
		if err := deleteQueue(w, id); err != nil {
			return err
		}
		for _, parent := range [][]byte{bucketMessages, bucketAgentSessions} {
			p := tx.Bucket(parent)
			if p.Bucket([]byte(id)) != nil {
				if err := p.DeleteBucket([]byte(id)); err != nil {
					return fmt.Errorf("delete %s: %w", parent, err)
				}
			}
		}
		return deleteStreamingFrom(tx, id, "")
	}()
	if err != nil {
		return fmt.Errorf("delete conversation %s: %w", id, err)
	}
	return nil
}

// getConversation reads conversation id inside tx.
func getConversation(tx *bolt.Tx, id string) (Conversation, error) {
	v := tx.Bucket(bucketConversations).Get([]byte(id))
	if v == nil {
		return Conversation{}, ErrNotFound
	}
	var c Conversation
	if err := json.Unmarshal(v, &c); err != nil {
		return Conversation{}, fmt.Errorf("decode conversation: %w", err)
	}
	return c, nil
}

// putJSON stores v as JSON under key in b.
func putJSON(b *bolt.Bucket, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return b.Put([]byte(key), data)
}

// deleteStreamingFrom removes the streaming index entries of convID whose
// message id is >= fromID ("" = all of them).
func deleteStreamingFrom(tx *bolt.Tx, convID, fromID string) error {
	b := tx.Bucket(bucketStreaming)
	prefix := streamingKey(convID, "")
	c := b.Cursor()
	var doomed [][]byte
	for k, _ := c.Seek(streamingKey(convID, fromID)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		doomed = append(doomed, bytes.Clone(k))
	}
	for _, k := range doomed {
		if err := b.Delete(k); err != nil {
			return fmt.Errorf("delete streaming index entry: %w", err)
		}
	}
	return nil
}
