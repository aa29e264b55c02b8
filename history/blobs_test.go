package history

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/ochat-dev/ochat/transcript"
)

func withAttachments(m transcript.Message, hashes ...string) transcript.Message {
	for _, h := range hashes {
		m.Attachments = append(m.Attachments, transcript.Attachment{Kind: "file", Name: "f", Hash: h, Size: 1})
	}
	return m
}

func TestBlobLifecycle(t *testing.T) {
	tests := []struct {
		name       string
		do         func(s *Store, h map[string]string) error
		wantPruned int
		wantKept   []string // of shared, private, orphan
	}{
		{"nothing happens", func(*Store, map[string]string) error { return nil },
			0, []string{"shared", "private", "orphan"}},
		{"delete conversation drops its private blob", func(s *Store, _ map[string]string) error {
			return s.DeleteConversation("c")
		}, 0, []string{"shared", "orphan"}},
		{"truncate drops its blobs", func(s *Store, _ map[string]string) error {
			return s.TruncateFrom("c", "01A")
		}, 0, []string{"shared", "orphan"}},
		{"replacing the message without attachments", func(s *Store, _ map[string]string) error {
			return s.PutMessage("c", user("01A", "no files now"), 5)
		}, 0, []string{"shared", "orphan"}},
		{"replacing the message with one attachment fewer", func(s *Store, h map[string]string) error {
			return s.PutMessage("c", withAttachments(user("01A", "one file"), h["private"]), 5)
		}, 0, []string{"shared", "private", "orphan"}},
		{"edit moves the attachment to the new message", func(s *Store, h map[string]string) error {
			return s.Update(func(w *Writer) error {
				if err := w.TruncateFrom("c", "01A"); err != nil {
					return err
				}
				return w.PutMessage("c", withAttachments(user("01B", "edited"), h["private"]), 6)
			})
		}, 0, []string{"shared", "private", "orphan"}},
		{"rolled back delete keeps everything", func(s *Store, _ map[string]string) error {
			err := s.Update(func(w *Writer) error {
				if err := w.DeleteConversation("c"); err != nil {
					return err
				}
				return ErrExists
			})
			if errors.Is(err, ErrExists) {
				return nil
			}
			return err
		}, 0, []string{"shared", "private", "orphan"}},
		{"prune drops only the orphan", func(*Store, map[string]string) error { return nil },
			1, []string{"shared", "private"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTemp(t)
			h := map[string]string{}
			for _, name := range []string{"shared", "private", "orphan"} {
				hash, err := s.PutBlob([]byte(name + " content"))
				if err != nil {
					t.Fatal(err)
				}
				h[name] = hash
			}
			mustCreate(t, s, "c", "d")
			mustPut(t, s, "c", 1, withAttachments(user("01A", "see files"), h["shared"], h["private"]))
			mustPut(t, s, "d", 1, withAttachments(user("01A", "see file"), h["shared"]))
			if err := tt.do(s, h); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tt.name, "prune") {
				n, err := s.PruneBlobs()
				if err != nil || n != tt.wantPruned {
					t.Fatalf("PruneBlobs = %d, %v; want %d", n, err, tt.wantPruned)
				}
			}
			var kept []string
			for _, name := range []string{"shared", "private", "orphan"} {
				_, err := s.Blob(h[name])
				switch {
				case err == nil:
					kept = append(kept, name)
				case !errors.Is(err, ErrNotFound):
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(kept, tt.wantKept) {
				t.Fatalf("blobs kept %v, want %v", kept, tt.wantKept)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCheckFindsBlobRefDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(tx *bolt.Tx, hash string) error
		want   string
	}{
		{"attachment without reference", func(tx *bolt.Tx, hash string) error {
			return tx.Bucket(bucketBlobRefs).Delete(blobRefKey(hash, "c", "01A"))
		}, "has no blob reference"},
		{"reference without message", func(tx *bolt.Tx, hash string) error {
			return tx.Bucket(bucketBlobRefs).Put(blobRefKey(hash, "c", "01Z"), nil)
		}, "does not refer to it"},
		{"malformed reference", func(tx *bolt.Tx, hash string) error {
			return tx.Bucket(bucketBlobRefs).Put([]byte(hash), nil)
		}, "malformed key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTemp(t)
			hash, _ := s.PutBlob([]byte("x"))
			mustCreate(t, s, "c")
			mustPut(t, s, "c", 1, withAttachments(user("01A", "f"), hash))
			if err := s.Check(); err != nil {
				t.Fatalf("healthy store: %v", err)
			}
			if err := s.db.Update(func(tx *bolt.Tx) error { return tt.damage(tx, hash) }); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v, want %q", err, tt.want)
			}
		})
	}
}
