// Package history owns ochat's own store of conversations: one bbolt
// database file per workspace holding conversations, their messages, the
// per-(conversation, agent) ACP session state (session id, cursor, accepted
// config option values), the queue of messages waiting for a running turn
// to end, content-addressed attachment blobs and a cache for
// the native-session index. Native CLI session stores are read by the
// sub-package history/native, never by this package.
//
// It never talks to agents or editors, never generates ids (the daemon makes
// ULIDs) and never reads a clock: times come in as Unix milliseconds. It never
// writes to a native CLI store.
//
// # Durability
//
// Every mutating method is one bbolt read-write transaction, committed with
// bbolt's default fsync (data pages, then the meta page) before the method
// returns. A message returned as stored by PutMessage survives the process
// being killed at any later moment; a kill during PutMessage leaves either
// the previous or the new version, never a mix. The daemon therefore stores
// a finished assistant message before it sends turn.completed, and
// checkpoints a streaming one a few times a second; on start-up
// MarkInterrupted turns what was still streaming into interrupted, keeping
// what had arrived.
//
// One process at a time: bbolt takes an exclusive flock on the file, and a
// second Open of the same path (from any process, or from the same process
// through another handle) fails with ErrLocked after one second.
//
// # File format (schema version 1)
//
// The file is a bbolt database (go.etcd.io/bbolt v1.4.3; file mode 0600 in a
// 0700 directory, see DefaultPath). Keys and values are bytes; "JSON" below
// means encoding/json of the named Go type, with the JSON tags that type
// declares. Top-level buckets:
//
//	meta            "schema" → ASCII decimal schema version ("1")
//	conversations   conversation id → JSON Conversation
//	messages        one nested bucket per conversation id:
//	                  message id → JSON transcript.Message
//	                ids are ULIDs, so byte order of keys is chronological
//	                order, and cursors compare as strings
//	agentSessions   one nested bucket per conversation id:
//	                  agent name → JSON AgentSession
//	streaming       conversation id + 0x00 + message id → 8-byte big-endian
//	                Unix ms of the last PutMessage of that message; present
//	                exactly while the stored message is an assistant message
//	                with status "streaming" (kept in the same transaction as
//	                the message, so start-up finds in-flight turns without
//	                scanning every message)
//	blobs           lowercase sha256 hex of the content → the content
//	blobRefs        hash + 0x00 + conversation id + 0x00 + message id → empty:
//	                one entry per message attachment referring to a blob;
//	                a blob is deleted in the transaction that removes its
//	                last reference
//	nativeIndex     caller-chosen key → caller-chosen value (the native
//	                session index cache of history/native; opaque here)
//	queue           conversation id → JSON []QueuedMessage: the messages
//	                sent while a turn ran, in the order they will be sent;
//	                absent when none. A queued message's attachment holds
//	                its blob with a blobRefs entry whose message id is
//	                "queue:" + the queued message's id
//
// A conversation with no messages may have no nested bucket in messages or
// agentSessions. Conversation and message ids must be non-empty and must not
// contain a 0x00 byte. Newer schema versions are refused by Open rather than
// misread.
package history
