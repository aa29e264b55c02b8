package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrNotFound reports a conversation, message, agent session, blob or index
// entry that does not exist. It is always wrapped: test with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrLocked reports that another process (normally another ochatd serving
// the same workspace) holds the store's file lock. It is always wrapped with
// the path and a hint: test with errors.Is.
var ErrLocked = errors.New("store is locked by another process")

// ErrExists reports a CreateConversation for an id that is already stored.
var ErrExists = errors.New("already exists")

// SchemaVersion is the version of the file format described in the package
// documentation, stored under meta/"schema".
const SchemaVersion = 1

// lockTimeout is how long Open waits for another holder of the file lock.
const lockTimeout = time.Second

// Bucket names (see the package documentation for the layout).
var (
	bucketMeta          = []byte("meta")
	bucketConversations = []byte("conversations")
	bucketMessages      = []byte("messages")
	bucketAgentSessions = []byte("agentSessions")
	bucketStreaming     = []byte("streaming")
	bucketBlobs         = []byte("blobs")
	bucketBlobRefs      = []byte("blobRefs")
	bucketNativeIndex   = []byte("nativeIndex")
	bucketQueue         = []byte("queue")

	keySchema = []byte("schema")
)

var topBuckets = [][]byte{
	bucketMeta, bucketConversations, bucketMessages, bucketAgentSessions,
	bucketStreaming, bucketBlobs, bucketBlobRefs, bucketNativeIndex, bucketQueue,
}

// Store is an open history database. Its methods are safe for concurrent use;
// writes are serialised by bbolt (one writer at a time), reads run in
// parallel with each other and with a write.
type Store struct {
	db   *bolt.DB
	path string
}

// DefaultPath returns where the store of workspace lives:
// $XDG_STATE_HOME/ochat/workspaces/<first 16 hex digits of sha256 of the
// absolute, cleaned workspace path>/ochat.db, with $HOME/.local/state used
// when XDG_STATE_HOME is unset or not absolute (XDG Base Directory spec).
// Symbolic links in workspace are not resolved. It creates nothing.
func DefaultPath(workspace string) (string, error) {
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return "", fmt.Errorf("history path for workspace %q: %w", workspace, err)
	}
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("history path: no XDG_STATE_HOME and %w", err)
		}
		state = filepath.Join(home, ".local", "state")
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(state, "ochat", "workspaces", hex.EncodeToString(sum[:])[:16], "ochat.db"), nil
}

// Open opens the store at path, creating its directory (mode 0700) and file
// (mode 0600) if needed (an existing file readable by others is restricted
// to 0600), and the buckets of the current schema. If another
// process holds the file, it waits one second and returns an error wrapping
// ErrLocked. A file written by a newer schema version, or one that is not a
// bbolt database, is an error naming the path and how to fix it; the file's
// content is left untouched.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	// The store holds the user's conversations: tighten a file that was
	// created (or copied) with wider permissions. An existing directory is
	// left alone: it may be a directory the user chose for other things.
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("open history %s: restrict permissions: %w", path, err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open history %s: %w (another ochatd is serving this workspace; "+
			"connect to it with `ochatd connect`, or stop it first)", path, ErrLocked)
	}
	if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch) {
		return nil, fmt.Errorf("open history %s: %w (the file is damaged or not an ochat store; "+
			"move it aside to start with an empty history)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range topBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keySchema); v != nil {
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return fmt.Errorf("schema version %q is not a number", v)
			}
			if n > SchemaVersion {
				return fmt.Errorf("schema version %d is newer than this ochatd understands (%d): upgrade ochatd", n, SchemaVersion)
			}
			return nil
		}
		return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Path returns the file the store was opened from.
func (s *Store) Path() string { return s.path }

// Close releases the file lock and closes the file. It waits for running
// transactions to finish.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close history %s: %w", s.path, err)
	}
	return nil
}

// Check runs bbolt's consistency check over the whole file (every page
// reachable or free, no page used twice, keys ordered) and then checks this
// package's own invariants: every stored value decodes, every message bucket
// and agent session bucket belongs to a stored conversation, and the
// streaming index agrees with the messages. It returns all problems found,
// joined, or nil.
func (s *Store) Check() error {
	var errs []error
	// bbolt's check is only safe against concurrent writers inside a
	// writable transaction; it is rolled back, so nothing is written.
	tx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("check history %s: %w", s.path, err)
	}
	defer tx.Rollback()
	for err := range tx.Check() {
		errs = append(errs, err)
	}
	if len(errs) == 0 { // else the data cannot be trusted enough to walk it
		errs = append(errs, checkSchema(tx)...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("check history %s: %w", s.path, errors.Join(errs...))
	}
	return nil
}

// checkSchema verifies this package's invariants inside tx.
func checkSchema(tx *bolt.Tx) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	convs := tx.Bucket(bucketConversations)
	convs.ForEach(func(k, v []byte) error {
		var c Conversation
		if err := json.Unmarshal(v, &c); err != nil {
			bad("conversation %q: %v", k, err)
		} else if c.ID != string(k) {
			bad("conversation %q: stored id %q", k, c.ID)
		}
		return nil
	})
	streaming := tx.Bucket(bucketStreaming)
	refs := tx.Bucket(bucketBlobRefs)
	msgs := tx.Bucket(bucketMessages)
	msgs.ForEach(func(convID, v []byte) error {
		if v != nil {
			bad("messages: %q is a value, not a bucket", convID)
			return nil
		}
		if convs.Get(convID) == nil {
			bad("messages of %q: no such conversation", convID)
		}
		msgs.Bucket(convID).ForEach(func(id, v []byte) error {
			m, err := decodeMessage(v)
			if err != nil {
				bad("message %s/%s: %v", convID, id, err)
				return nil
			}
			if m.ID != string(id) {
				bad("message %s/%s: stored id %q", convID, id, m.ID)
			}
			for _, a := range m.Attachments {
				if a.Hash != "" && refs.Get(blobRefKey(a.Hash, string(convID), string(id))) == nil {
					bad("message %s/%s: attachment %s has no blob reference", convID, id, a.Hash)
				}
			}
			indexed := streaming.Get(streamingKey(string(convID), string(id))) != nil
			if isStreaming(m) != indexed {
				bad("message %s/%s: status %q but streaming index entry present=%t", convID, id, m.Status, indexed)
			}
			return nil
		})
		return nil
	})
	streaming.ForEach(func(k, _ []byte) error {
		convID, msgID, ok := splitStreamingKey(k)
		if !ok {
			bad("streaming index: malformed key %q", k)
			return nil
		}
		if b := msgs.Bucket([]byte(convID)); b == nil || b.Get([]byte(msgID)) == nil {
			bad("streaming index: %s/%s: no such message", convID, msgID)
		}
		return nil
	})
	refs.ForEach(func(k, _ []byte) error {
		parts := bytes.SplitN(k, []byte{0}, 3)
		if len(parts) != 3 {
			bad("blob references: malformed key %q", k)
			return nil
		}
		hash, convID, msgID := string(parts[0]), parts[1], parts[2]
		var v []byte
		if b := msgs.Bucket(convID); b != nil {
			v = b.Get(msgID)
		}
		if !slices.Contains(attachmentHashes(v), hash) && !queueRefValid(tx, hash, convID, msgID) {
			bad("blob reference %s from %s/%s: the message does not refer to it", hash, convID, msgID)
		}
		return nil
	})
	sessions := tx.Bucket(bucketAgentSessions)
	sessions.ForEach(func(convID, v []byte) error {
		if v != nil {
			bad("agentSessions: %q is a value, not a bucket", convID)
			return nil
		}
		if convs.Get(convID) == nil {
			bad("agent sessions of %q: no such conversation", convID)
		}
		sessions.Bucket(convID).ForEach(func(agent, v []byte) error {
			var as AgentSession
			if err := json.Unmarshal(v, &as); err != nil {
				bad("agent session %s/%s: %v", convID, agent, err)
			}
			return nil
		})
		return nil
	})
	checkQueues(tx, bad)
	tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
		sum := sha256.Sum256(v)
		if hex.EncodeToString(sum[:]) != string(k) {
			bad("blob %s: content does not match its hash", k)
		}
		return nil
	})
	return errs
}

// validID rejects ids that cannot be keys of this layout.
func validID(kind, id string) error {
	if id == "" {
		return fmt.Errorf("empty %s id", kind)
	}
	if strings.IndexByte(id, 0) >= 0 {
		return fmt.Errorf("%s id %q contains a NUL byte", kind, id)
	}
	if len(id) > bolt.MaxKeySize/2 {
		return fmt.Errorf("%s id is %d bytes, longer than %d", kind, len(id), bolt.MaxKeySize/2)
	}
	return nil
}

// Stats is a summary of a store for `ochatd doctor` and logs.
type Stats struct {
	Path          string `json:"path"`
	FileBytes     int64  `json:"fileBytes"`     // size of the database file, bytes
	SchemaVersion int    `json:"schemaVersion"` // of the file
	Conversations int    `json:"conversations"`
	Messages      int    `json:"messages"`
	Streaming     int    `json:"streaming"` // assistant messages still streaming (in flight, or found by MarkInterrupted)
	Blobs         int    `json:"blobs"`
	BlobBytes     int64  `json:"blobBytes"`
	IndexEntries  int    `json:"indexEntries"` // native-session index cache
}

// Stats counts what the store holds. It reads every key once but decodes no
// values.
func (s *Store) Stats() (Stats, error) {
	st := Stats{Path: s.path}
	err := s.db.View(func(tx *bolt.Tx) error {
		st.FileBytes = tx.Size()
		st.SchemaVersion, _ = strconv.Atoi(string(tx.Bucket(bucketMeta).Get(keySchema)))
		st.Conversations = tx.Bucket(bucketConversations).Stats().KeyN
		msgs := tx.Bucket(bucketMessages)
		err := msgs.ForEachBucket(func(k []byte) error {
			st.Messages += msgs.Bucket(k).Stats().KeyN
			return nil
		})
		if err != nil {
			return err
		}
		st.Streaming = tx.Bucket(bucketStreaming).Stats().KeyN
		st.IndexEntries = tx.Bucket(bucketNativeIndex).Stats().KeyN
		return tx.Bucket(bucketBlobs).ForEach(func(_, v []byte) error {
			st.Blobs++
			st.BlobBytes += int64(len(v))
			return nil
		})
	})
	if err != nil {
		return Stats{}, fmt.Errorf("history stats %s: %w", s.path, err)
	}
	return st, nil
}
