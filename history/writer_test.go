package history

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

func TestUpdate(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		f           func(w *Writer) error
		wantErr     error
		wantIDs     []string
		wantSession string // claude's session id afterwards
	}{
		{"finish a turn and move the cursor together", func(w *Writer) error {
			if err := w.PutMessage("c", assistant("01D", "claude", transcript.StatusCompleted, "done"), 50); err != nil {
				return err
			}
			as, err := w.AgentSession("c", "claude")
			if err != nil {
				return err
			}
			as.Cursor = "01D"
			return w.PutAgentSession("c", "claude", as)
		}, nil, []string{"01A", "01B", "01C", "01D"}, "s1"},
		{"edit: truncate, replace, reset", func(w *Writer) error {
			if err := w.TruncateFrom("c", "01C"); err != nil {
				return err
			}
			if err := w.PutMessage("c", user("01E", "edited"), 60); err != nil {
				return err
			}
			return w.ResetAgentSessions("c")
		}, nil, []string{"01A", "01B", "01E"}, ""},
		{"error rolls everything back", func(w *Writer) error {
			if err := w.TruncateFrom("c", "01A"); err != nil {
				return err
			}
			if err := w.ResetAgentSessions("c"); err != nil {
				return err
			}
			return boom
		}, boom, []string{"01A", "01B", "01C"}, "s1"},
		{"a failing step inside rolls back", func(w *Writer) error {
			if err := w.PutMessage("c", user("01Z", "x"), 70); err != nil {
				return err
			}
			return w.PutMessage("nope", user("01Y", "x"), 70)
		}, ErrNotFound, []string{"01A", "01B", "01C"}, "s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, "c")
			mustPut(t, s, "c", 10, user("01A", "q"), assistant("01B", "claude", transcript.StatusCompleted, "a"), user("01C", "q2"))
			if err := s.PutAgentSession("c", "claude", AgentSession{SessionID: "s1", Cursor: "01B"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Update(tt.f); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Update = %v, want %v", err, tt.wantErr)
			}
			ms, err := s.Messages("c")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids(ms), tt.wantIDs) {
				t.Fatalf("ids = %v, want %v", ids(ms), tt.wantIDs)
			}
			as, err := s.AgentSession("c", "claude")
			if err != nil {
				t.Fatal(err)
			}
			if as.SessionID != tt.wantSession {
				t.Fatalf("claude session = %+v, want id %q", as, tt.wantSession)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestUpdateImportAllOrNothing(t *testing.T) {
	s := openTemp(t)
	imp := func(fail bool) error {
		return s.Update(func(w *Writer) error {
			if err := w.CreateConversation(Conversation{ID: "imp", Native: &NativeRef{Agent: "claude", SessionID: "x"}}); err != nil {
				return err
			}
			for _, m := range []transcript.Message{user("01A", "q"), assistant("01B", "claude", transcript.StatusCompleted, "a")} {
				if err := w.PutMessage("imp", m, 9); err != nil {
					return err
				}
			}
			if fail {
				return errors.New("bad line")
			}
			return nil
		})
	}
	if err := imp(true); err == nil {
		t.Fatal("failed import reported success")
	}
	if _, err := s.Conversation("imp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed import left a conversation: %v", err)
	}
	if err := imp(false); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Messages("imp")
	if err != nil || len(ms) != 2 {
		t.Fatalf("import: %d messages, %v", len(ms), err)
	}
	if err := imp(false); !errors.Is(err, ErrExists) {
		t.Fatalf("second import: %v, want ErrExists", err)
	}
}

func TestWriterAfterUpdate(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c")
	var kept *Writer
	if err := s.Update(func(w *Writer) error { kept = w; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := kept.PutMessage("c", user("01A", "x"), 1); !errors.Is(err, errWriterDone) {
		t.Fatalf("PutMessage after Update = %v", err)
	}
	if _, err := kept.AgentSession("c", "claude"); !errors.Is(err, errWriterDone) {
		t.Fatalf("AgentSession after Update = %v", err)
	}
}

func TestMessagesAfter(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c", "empty")
	mustPut(t, s, "c", 10, user("01A", "1"), assistant("01B", "claude", transcript.StatusCompleted, "2"),
		user("01D", "3"), assistant("01E", "codex", transcript.StatusCompleted, "4"))
	tests := []struct {
		name, conv, after string
		want              []string
		wantErr           error
	}{
		{"no cursor: everything", "c", "", []string{"01A", "01B", "01D", "01E"}, nil},
		{"after an existing message", "c", "01B", []string{"01D", "01E"}, nil},
		{"after a dropped message", "c", "01C", []string{"01D", "01E"}, nil},
		{"after the last", "c", "01E", []string{}, nil},
		{"past the end", "c", "09", []string{}, nil},
		{"empty conversation", "empty", "", []string{}, nil},
		{"unknown conversation", "zz", "", nil, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.MessagesAfter(tt.conv, tt.after)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(ids(got), tt.want) {
				t.Fatalf("ids = %v, want %v", ids(got), tt.want)
			}
		})
	}
}

func TestCheckWritesNothing(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c")
	mustPut(t, s, "c", 1, user("01A", "x"))
	before, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(s.Path())
	if string(before) != string(after) {
		t.Fatal("Check changed the file")
	}
}

func TestMessageRoundTrip(t *testing.T) {
	two, five := 2, 5
	oldText, newText := "a\nb\n", "a\nc\nd\n"
	full := transcript.Message{
		ID: "01J", Timestamp: 1732960000123, Role: transcript.RoleAssistant, Agent: "codex",
		Status: transcript.StatusCompleted, DurationMs: 4321, StopReason: "end_turn",
		Segments: []transcript.Segment{
			{Type: transcript.SegReasoning, Content: "thinking… ünïcödé \u2028 \"quoted\" <html>&"},
			{Type: transcript.SegTool, ID: "call_1", Name: "shell", Status: "completed", ProviderKind: "execute",
				Input: []byte(`{"command":["ls","-la"],"nested":{"n":1.5e3,"null":null}}`), Output: "total 0\n", DurationMs: 12},
			{Type: transcript.SegTool, ID: "call_2", Name: "edit", Status: "error", Error: "denied"},
			{Type: transcript.SegPlan, Entries: []transcript.PlanEntry{{Content: "step", Status: "in_progress", Priority: "high"}}},
			{Type: transcript.SegFileChange, Path: "src/a.go", Additions: &two, Deletions: &five, Status: "applied",
				Diff: "--- a\n+++ b\n", OldText: &oldText, NewText: &newText, ToolCallID: "call_2"},
			{Type: transcript.SegWorkspace, Files: []string{"a", "b"}, Errors: []string{"e"}},
			{Type: transcript.SegContent, Content: "done 🎉"},
		},
	}
	userMsg := transcript.Message{ID: "01I", Timestamp: 1, Role: transcript.RoleUser, Content: "hi", Hidden: true,
		Attachments: []transcript.Attachment{{Kind: "image", Name: "x.png", MimeType: "image/png", Size: 3}}}
	s := openTemp(t)
	mustCreate(t, s, "c")
	mustPut(t, s, "c", 1, userMsg, full)
	got, err := s.Messages("c")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []transcript.Message{userMsg, full}) {
		t.Fatalf("round trip changed the messages:\n got %+v\nwant %+v", got, []transcript.Message{userMsg, full})
	}
}

func TestConcurrentUse(t *testing.T) {
	s := openTemp(t)
	const writers, perWriter = 4, 25
	for w := range writers {
		mustCreate(t, s, fmt.Sprintf("c%d", w))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conv := fmt.Sprintf("c%d", w)
			for i := range perWriter {
				m := assistant(fmt.Sprintf("m%03d", i), "claude", transcript.StatusStreaming, "x")
				if i%5 == 4 {
					m.Status = transcript.StatusCompleted
				}
				if err := s.PutMessage(conv, m, int64(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.ListConversations(); err != nil {
					errs <- err
					return
				}
				if _, err := s.Messages("c0"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		ms, err := s.Messages(fmt.Sprintf("c%d", w))
		if err != nil || len(ms) != perWriter {
			t.Fatalf("c%d: %d messages, %v", w, len(ms), err)
		}
	}
	// Every fifth message completed; the rest are still streaming.
	if n, err := s.MarkInterrupted(1); err != nil || n != writers*perWriter*4/5 {
		t.Fatalf("MarkInterrupted = %d, %v", n, err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}
