package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// PutBlob stores data content-addressed and returns its lowercase sha256 hex
// digest (what transcript.Attachment.Hash holds). Storing the same content
// again is a cheap no-op. A blob lives as long as a stored message's
// attachment refers to it: when the last such message is replaced, truncated
// or deleted, the blob goes too (see also PruneBlobs). bbolt caps one value at about 2 GB; callers should
// cap attachments well below that.
func (s *Store) PutBlob(data []byte) (hash string, err error) {
	sum := sha256.Sum256(data)
	hash = hex.EncodeToString(sum[:])
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlobs)
		if b.Get([]byte(hash)) != nil {
			return nil
		}
		return b.Put([]byte(hash), data)
	})
	if err != nil {
		return "", fmt.Errorf("put blob %s (%d bytes): %w", hash, len(data), err)
	}
	return hash, nil
}

// Blob returns a copy of the blob with the given sha256 hex digest, or an
// error wrapping ErrNotFound.
func (s *Store) Blob(hash string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketBlobs).Get([]byte(hash))
		if v == nil {
			return ErrNotFound
		}
		out = append(make([]byte, 0, len(v)), v...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", hash, err)
	}
	return out, nil
}

// PruneBlobs deletes every blob that no stored message references (left
// behind when a process died between PutBlob and the PutMessage that refers
// to it) and returns how many it deleted. A blob stored for a message not
// yet put looks unreferenced too: call PruneBlobs only when no prompt is
// being assembled, e.g. at start-up before serving.
func (s *Store) PruneBlobs() (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		var doomed [][]byte
		err := tx.Bucket(bucketBlobs).ForEach(func(k, _ []byte) error {
			if !blobReferenced(tx, string(k)) {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := tx.Bucket(bucketBlobs).Delete(k); err != nil {
				return err
			}
		}
		n = len(doomed)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune blobs: %w", err)
	}
	return n, nil
}

// attachmentHashes returns the blob hashes a stored message value refers to
// (nil for nil). Most messages have no attachments: a byte search spares
// decoding them.
func attachmentHashes(v []byte) []string {
	if !bytes.Contains(v, []byte(`"attachments"`)) {
		return nil
	}
	var m struct {
		Attachments []struct {
			Hash string `json:"hash"`
		} `json:"attachments"`
	}
	if json.Unmarshal(v, &m) != nil {
		return nil // Check reports undecodable messages
	}
	var out []string
	for _, a := range m.Attachments {
		if a.Hash != "" {
			out = append(out, a.Hash)
		}
	}
	return out
}

// blobRefKey is the blobRefs key recording that message convID/msgID refers
// to blob hash.
func blobRefKey(hash, convID, msgID string) []byte {
	return []byte(hash + "\x00" + convID + "\x00" + msgID)
}

// blobReferenced reports whether any message refers to hash.
func blobReferenced(tx *bolt.Tx, hash string) bool {
	prefix := []byte(hash + "\x00")
	k, _ := tx.Bucket(bucketBlobRefs).Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}

// setBlobRefs replaces the blob references of message convID/msgID: old are
// the hashes its previous version referred to, new those of the version
// being stored (nil when it is deleted). Blobs that lose a reference are
// remembered and deleted at commit if nothing refers to them any more.
func (w *Writer) setBlobRefs(convID, msgID string, old, new []string) error {
	if len(old) == 0 && len(new) == 0 {
		return nil
	}
	refs := w.tx.Bucket(bucketBlobRefs)
	for _, h := range old {
		if slices.Contains(new, h) {
			continue
		}
		if err := refs.Delete(blobRefKey(h, convID, msgID)); err != nil {
			return fmt.Errorf("blob reference: %w", err)
		}
		if w.released == nil {
			w.released = map[string]bool{}
		}
		w.released[h] = true
	}
	for _, h := range new {
		if err := refs.Put(blobRefKey(h, convID, msgID), nil); err != nil {
			return fmt.Errorf("blob reference: %w", err)
		}
	}
	return nil
}

// dropUnreferencedBlobs deletes the blobs this transaction released that
// nothing refers to any more.
func (w *Writer) dropUnreferencedBlobs() error {
	for h := range w.released {
		if blobReferenced(w.tx, h) {
			continue
		}
		if err := w.tx.Bucket(bucketBlobs).Delete([]byte(h)); err != nil {
			return fmt.Errorf("delete blob %s: %w", h, err)
		}
	}
	return nil
}
