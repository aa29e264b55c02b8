package history

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The native-session index cache: history/native keeps parsed metadata of
// native CLI session files here, keyed by whatever identifies a file version
// (for example path, size and modification time), so listing does not parse
// unchanged files again. Keys and values are opaque to this package.

// PutIndexEntry stores value under key in the native index cache, replacing
// any previous value. key must be non-empty and at most 32 KB.
func (s *Store) PutIndexEntry(key string, value []byte) error {
	if key == "" || len(key) > bolt.MaxKeySize {
		return fmt.Errorf("put index entry: key must be 1..%d bytes, got %d", bolt.MaxKeySize, len(key))
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketNativeIndex).Put([]byte(key), value)
	})
	if err != nil {
		return fmt.Errorf("put index entry %q: %w", key, err)
	}
	return nil
}

// IndexEntry returns a copy of the value stored under key in the native
// index cache, or an error wrapping ErrNotFound.
func (s *Store) IndexEntry(key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketNativeIndex).Get([]byte(key))
		if v == nil {
			return ErrNotFound
		}
		out = append(make([]byte, 0, len(v)), v...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index entry %q: %w", key, err)
	}
	return out, nil
}

// DeleteIndexEntry removes key from the native index cache. Deleting a key
// that is not there is not an error.
func (s *Store) DeleteIndexEntry(key string) error {
	if key == "" {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketNativeIndex).Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("delete index entry %q: %w", key, err)
	}
	return nil
}

// ForEachIndexEntry calls f for every entry of the native index cache in key
// byte order, inside one read transaction. value is only valid during the
// call (copy it to keep it); f must not call other Store methods that write,
// or it deadlocks. An error from f stops the walk and is returned wrapped.
func (s *Store) ForEachIndexEntry(f func(key string, value []byte) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketNativeIndex).ForEach(func(k, v []byte) error {
			return f(string(k), v)
		})
	})
	if err != nil {
		return fmt.Errorf("walk index entries: %w", err)
	}
	return nil
}
