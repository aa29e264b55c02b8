package history

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

func queued(id, text string, hashes ...string) QueuedMessage {
	m := QueuedMessage{ID: id, Text: text, Agent: "a", CreatedAt: 1}
	for _, h := range hashes {
		m.Attachments = append(m.Attachments, transcript.Attachment{Kind: "file", Name: "f", Hash: h, Size: 1})
	}
	return m
}

func TestQueue(t *testing.T) {
	tests := []struct {
		name      string
		do        func(s *Store, h string) error
		wantQueue []string // ids left in c's queue
		wantBlob  bool     // the attachment's blob survives
	}{
		{"queued attachment keeps its blob", func(*Store, string) error { return nil }, []string{"q1", "q2"}, true},
		{"removing the item drops its blob", func(s *Store, _ string) error {
			return s.PutQueue("c", []QueuedMessage{queued("q2", "two")})
		}, []string{"q2"}, false},
		{"sent as a message in one transaction keeps the blob", func(s *Store, h string) error {
			return s.Update(func(w *Writer) error {
				if err := w.PutMessage("c", withAttachments(user("01A", "one"), h), 2); err != nil {
					return err
				}
				return w.PutQueue("c", []QueuedMessage{queued("q2", "two")})
			})
		}, []string{"q2"}, true},
		{"empty queue removes it", func(s *Store, _ string) error { return s.PutQueue("c", nil) }, nil, false},
		{"delete conversation drops the queue", func(s *Store, _ string) error { return s.DeleteConversation("c") }, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, "c")
			h, err := s.PutBlob([]byte("attached"))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.PutQueue("c", []QueuedMessage{queued("q1", "one", h), queued("q2", "two")}); err != nil {
				t.Fatal(err)
			}
			if err := tt.do(s, h); err != nil {
				t.Fatal(err)
			}
			q, err := s.Queue("c")
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range q {
				ids = append(ids, m.ID)
			}
			if !reflect.DeepEqual(ids, tt.wantQueue) {
				t.Fatalf("queue = %v, want %v", ids, tt.wantQueue)
			}
			all, err := s.Queues()
			if err != nil {
				t.Fatal(err)
			}
			if got := len(all["c"]); got != len(tt.wantQueue) {
				t.Fatalf("Queues()[c] has %d items, want %d", got, len(tt.wantQueue))
			}
			if _, err := s.Blob(h); (err == nil) != tt.wantBlob {
				t.Fatalf("blob present = %v, want %v", err == nil, tt.wantBlob)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPutQueueUnknownConversation(t *testing.T) {
	s := openTemp(t)
	if err := s.PutQueue("nope", []QueuedMessage{queued("q1", "x")}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}
