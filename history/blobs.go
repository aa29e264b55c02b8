package history

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// PutBlob stores data content-addressed and returns its lowercase sha256 hex
// digest (what transcript.Attachment.Hash holds). Storing the same content
// again is a cheap no-op. bbolt caps one value at about 2 GB; callers should
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
