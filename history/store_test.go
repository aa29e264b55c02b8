package history

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/ochat-dev/ochat/transcript"
)

// openTemp opens a fresh store in a test directory and closes it at cleanup.
func openTemp(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "ws", "ochat.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mustCreate stores conversations or fails the test.
func mustCreate(t testing.TB, s *Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.CreateConversation(Conversation{ID: id, Title: "t " + id, CreatedAt: 1, UpdatedAt: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// mustPut stores messages or fails the test.
func mustPut(t testing.TB, s *Store, convID string, now int64, ms ...transcript.Message) {
	t.Helper()
	for _, m := range ms {
		if err := s.PutMessage(convID, m, now); err != nil {
			t.Fatal(err)
		}
	}
}

func user(id, text string) transcript.Message {
	return transcript.Message{ID: id, Timestamp: 100, Role: transcript.RoleUser, Content: text}
}

func assistant(id, agent string, status transcript.MessageStatus, text string) transcript.Message {
	return transcript.Message{
		ID: id, Timestamp: 100, Role: transcript.RoleAssistant, Agent: agent, Status: status,
		Segments: []transcript.Segment{{Type: transcript.SegContent, Content: text}},
	}
}

func ids(ms []transcript.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestDefaultPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ws := t.TempDir()
	tests := []struct {
		name       string
		xdg        string
		workspace  string
		wantPrefix string
	}{
		{"xdg set", "/state", ws, "/state/ochat/workspaces/"},
		{"xdg unset", "", ws, filepath.Join(home, ".local/state/ochat/workspaces") + "/"},
		{"xdg relative is ignored", "rel/state", ws, filepath.Join(home, ".local/state/ochat/workspaces") + "/"},
		{"unclean path", "/state", ws + "/sub/..", "/state/ochat/workspaces/"},
	}
	var first string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_STATE_HOME", tt.xdg)
			got, err := DefaultPath(tt.workspace)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got, tt.wantPrefix) || filepath.Base(got) != "ochat.db" {
				t.Fatalf("DefaultPath = %q, want under %q", got, tt.wantPrefix)
			}
			hash := filepath.Base(filepath.Dir(got))
			if len(hash) != 16 {
				t.Fatalf("workspace dir %q is not 16 hex digits", hash)
			}
			if first == "" {
				first = hash
			} else if hash != first {
				t.Fatalf("same workspace hashed to %s and %s", first, hash)
			}
		})
	}
	t.Setenv("XDG_STATE_HOME", "/state")
	other, _ := DefaultPath(t.TempDir())
	if filepath.Base(filepath.Dir(other)) == first {
		t.Fatal("two workspaces share a store")
	}
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "ochat.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s mode = %v, want %v", p, fi.Mode(), want)
		}
	}
	if s.Path() != path {
		t.Errorf("Path() = %q", s.Path())
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRestrictsWideFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	path := filepath.Join(dir, "ochat.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for p, want := range map[string]os.FileMode{dir: 0o755, path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ochat.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt's flock is per open file description, so a second handle in the
	// same process conflicts just as another process would.
	s2, err := Open(path)
	if err == nil {
		s2.Close()
		t.Fatal("second Open succeeded")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another ochatd") {
		t.Fatalf("second Open: %v, want ErrLocked naming the path and the hint", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s3.Close()
}

func TestOpenRefuses(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		want    string
	}{
		{"not a bbolt file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "move it aside"},
		{"newer schema", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.Update(func(tx *bolt.Tx) error {
				b, _ := tx.CreateBucket(bucketMeta)
				return b.Put(keySchema, []byte("2"))
			})
			if err != nil {
				t.Fatal(err)
			}
		}, "upgrade ochatd"},
		{"garbage schema", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.Update(func(tx *bolt.Tx) error {
				b, _ := tx.CreateBucket(bucketMeta)
				return b.Put(keySchema, []byte("x"))
			})
		}, "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ochat.db")
			tt.prepare(t, path)
			before, _ := os.ReadFile(path)
			s, err := Open(path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open: %v, want it to mention %q and the path", err, tt.want)
			}
			after, _ := os.ReadFile(path)
			if string(before) != string(after) {
				t.Fatal("refused file was modified")
			}
		})
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ochat.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "c1")
	mustPut(t, s, "c1", 5, user("m1", "hello"), assistant("m2", "claude", transcript.StatusCompleted, "hi"))
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Messages("c1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids(got), []string{"m1", "m2"}) || got[1].Segments[0].Content != "hi" {
		t.Fatalf("after reopen: %+v", got)
	}
}

func TestCreateConversation(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "dup")
	tests := []struct {
		name    string
		c       Conversation
		wantErr error
		errText string
	}{
		{"ok", Conversation{ID: "c1", Title: "first", CreatedAt: 10, UpdatedAt: 10}, nil, ""},
		{"with native ref", Conversation{ID: "c2", Native: &NativeRef{Agent: "codex", SessionID: "s", Path: "/x.jsonl"}}, nil, ""},
		{"duplicate", Conversation{ID: "dup"}, ErrExists, ""},
		{"empty id", Conversation{}, nil, "empty conversation id"},
		{"nul in id", Conversation{ID: "a\x00b"}, nil, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.CreateConversation(tt.c)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			case tt.errText != "":
				if err == nil || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want %q", err, tt.errText)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			got, err := s.Conversation(tt.c.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.c
			want.Agents = []string{}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
	if _, err := s.Conversation("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown conversation: %v", err)
	}
}

func TestListConversations(t *testing.T) {
	s := openTemp(t)
	if got, err := s.ListConversations(); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	for _, c := range []Conversation{
		{ID: "a", UpdatedAt: 10}, {ID: "b", UpdatedAt: 30}, {ID: "c", UpdatedAt: 20}, {ID: "d", UpdatedAt: 20},
	} {
		if err := s.CreateConversation(c); err != nil {
			t.Fatal(err)
		}
	}
	// A message makes "a" the newest.
	mustPut(t, s, "a", 40, user("m1", "x"))
	got, err := s.ListConversations()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, c := range got {
		order = append(order, c.ID)
	}
	if want := []string{"a", "b", "d", "c"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
}

func TestRenameAndSetNative(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c1")
	tests := []struct {
		name    string
		do      func() error
		wantErr error
		check   func(c Conversation) bool
	}{
		{"rename", func() error { return s.RenameConversation("c1", "New title") }, nil,
			func(c Conversation) bool { return c.Title == "New title" && c.UpdatedAt == 1 }},
		{"rename unknown", func() error { return s.RenameConversation("zz", "x") }, ErrNotFound, nil},
		{"set native", func() error { return s.SetNative("c1", &NativeRef{Agent: "claude", SessionID: "abc"}) }, nil,
			func(c Conversation) bool {
				return c.Native != nil && c.Native.SessionID == "abc" && c.Title == "New title"
			}},
		{"clear native", func() error { return s.SetNative("c1", nil) }, nil,
			func(c Conversation) bool { return c.Native == nil }},
		{"set native unknown", func() error { return s.SetNative("zz", nil) }, ErrNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.Conversation("c1")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Fatalf("unexpected conversation %+v", c)
			}
		})
	}
}

func TestDeleteConversation(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c1", "c2", "c1x")
	for _, c := range []string{"c1", "c2", "c1x"} {
		mustPut(t, s, c, 5, user("m1", "hi"), assistant("m2", "claude", transcript.StatusStreaming, "par"))
		if err := s.PutAgentSession(c, "claude", AgentSession{SessionID: "s-" + c}); err != nil {
			t.Fatal(err)
		}
	}
	hash, _ := s.PutBlob([]byte("shared attachment"))
	if err := s.DeleteConversation("c1"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		do      func() error
		wantErr error
	}{
		{"conversation gone", func() error { _, err := s.Conversation("c1"); return err }, ErrNotFound},
		{"messages gone", func() error { _, err := s.Messages("c1"); return err }, ErrNotFound},
		{"sessions gone", func() error { _, err := s.AgentSession("c1", "claude"); return err }, ErrNotFound},
		{"delete again", func() error { return s.DeleteConversation("c1") }, ErrNotFound},
		{"neighbour with common prefix kept", func() error { _, err := s.Message("c1x", "m2"); return err }, nil},
		{"other kept", func() error { _, err := s.AgentSession("c2", "claude"); return err }, nil},
		{"blob kept", func() error { _, err := s.Blob(hash); return err }, nil},
		{"check", s.Check, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	// The streaming entries of c1 went with it; those of the others remain.
	n, err := s.MarkInterrupted(9)
	if err != nil || n != 2 {
		t.Fatalf("MarkInterrupted = %d, %v; want 2", n, err)
	}
}

func TestPutMessage(t *testing.T) {
	type step struct {
		m   transcript.Message
		now int64
	}
	tests := []struct {
		name       string
		steps      []step
		wantIDs    []string
		wantAgents []string
		wantUpd    int64
		wantStream int // streaming index entries afterwards
	}{
		{"user then assistant", []step{
			{user("01A", "hi"), 10}, {assistant("01B", "claude", transcript.StatusCompleted, "yo"), 20},
		}, []string{"01A", "01B"}, []string{"claude"}, 20, 0},
		{"streaming checkpoints then completed", []step{
			{user("01A", "hi"), 10},
			{assistant("01B", "codex", transcript.StatusStreaming, "a"), 11},
			{assistant("01B", "codex", transcript.StatusStreaming, "ab"), 12},
			{assistant("01B", "codex", transcript.StatusCompleted, "abc"), 13},
		}, []string{"01A", "01B"}, []string{"codex"}, 13, 0},
		{"still streaming", []step{
			{assistant("01B", "codex", transcript.StatusStreaming, "a"), 11},
		}, []string{"01B"}, []string{"codex"}, 11, 1},
		{"agents in first-use order", []step{
			{assistant("01B", "codex", transcript.StatusCompleted, "a"), 11},
			{assistant("01D", "claude", transcript.StatusCompleted, "a"), 12},
			{assistant("01F", "codex", transcript.StatusCompleted, "a"), 13},
		}, []string{"01B", "01D", "01F"}, []string{"codex", "claude"}, 13, 0},
		{"out of order ids are returned sorted", []step{
			{user("01C", "c"), 10}, {user("01A", "a"), 11}, {user("01B", "b"), 12},
		}, []string{"01A", "01B", "01C"}, []string{}, 12, 0},
		{"older now does not move UpdatedAt back", []step{
			{user("01A", "a"), 50}, {user("01B", "b"), 40},
		}, []string{"01A", "01B"}, []string{}, 50, 0},
		{"a user message naming an agent does not add it", []step{
			{transcript.Message{ID: "01A", Role: transcript.RoleUser, Agent: "gemini"}, 5},
		}, []string{"01A"}, []string{}, 5, 0},
		{"a user message with status streaming is not indexed", []step{
			{transcript.Message{ID: "01A", Role: transcript.RoleUser, Status: transcript.StatusStreaming}, 5},
		}, []string{"01A"}, []string{}, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, "c")
			var last = map[string]transcript.Message{}
			for _, st := range tt.steps {
				mustPut(t, s, "c", st.now, st.m)
				last[st.m.ID] = st.m
			}
			got, err := s.Messages("c")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids(got), tt.wantIDs) {
				t.Fatalf("ids = %v, want %v", ids(got), tt.wantIDs)
			}
			for _, m := range got {
				if !reflect.DeepEqual(m, last[m.ID]) {
					t.Errorf("stored %+v, want %+v", m, last[m.ID])
				}
				one, err := s.Message("c", m.ID)
				if err != nil || !reflect.DeepEqual(one, m) {
					t.Errorf("Message(%s) = %+v, %v", m.ID, one, err)
				}
			}
			c, _ := s.Conversation("c")
			if !reflect.DeepEqual(c.Agents, tt.wantAgents) || c.UpdatedAt != tt.wantUpd {
				t.Errorf("conversation agents %v updated %d, want %v %d", c.Agents, c.UpdatedAt, tt.wantAgents, tt.wantUpd)
			}
			if n := countBucket(t, s, bucketStreaming); n != tt.wantStream {
				t.Errorf("streaming index has %d entries, want %d", n, tt.wantStream)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMessageErrors(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c", "empty")
	mustPut(t, s, "c", 1, user("m1", "x"))
	tests := []struct {
		name    string
		do      func() error
		wantErr error
		errText string
	}{
		{"put unknown conversation", func() error { return s.PutMessage("zz", user("m1", "x"), 1) }, ErrNotFound, ""},
		{"put empty id", func() error { return s.PutMessage("c", user("", "x"), 1) }, nil, "empty message id"},
		{"put nul id", func() error { return s.PutMessage("c", user("a\x00", "x"), 1) }, nil, "NUL"},
		{"messages unknown conversation", func() error { _, err := s.Messages("zz"); return err }, ErrNotFound, ""},
		{"message unknown conversation", func() error { _, err := s.Message("zz", "m1"); return err }, ErrNotFound, ""},
		{"message unknown id", func() error { _, err := s.Message("c", "m9"); return err }, ErrNotFound, ""},
		{"messages of empty conversation", func() error {
			ms, err := s.Messages("empty")
			if err == nil && (ms == nil || len(ms) != 0) {
				return errors.New("want empty non-nil slice")
			}
			return err
		}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case tt.errText != "":
				if err == nil || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want %q", err, tt.errText)
				}
			case err != nil:
				t.Fatal(err)
			}
		})
	}
}

func TestTruncateFrom(t *testing.T) {
	// 01A user, 01B claude, 01C user, 01D codex (streaming), 01E user, 01F codex
	setup := func(t *testing.T) *Store {
		s := openTemp(t)
		mustCreate(t, s, "c")
		mustPut(t, s, "c", 10,
			user("01A", "one"), assistant("01B", "claude", transcript.StatusCompleted, "1"),
			user("01C", "two"), assistant("01D", "codex", transcript.StatusStreaming, "2"),
			user("01E", "three"), assistant("01F", "codex", transcript.StatusCompleted, "3"))
		for agent, cur := range map[string]string{"claude": "01B", "codex": "01F", "gemini": ""} {
			err := s.PutAgentSession("c", agent, AgentSession{SessionID: "s-" + agent, Cursor: cur, Config: map[string]string{"mode": "x"}})
			if err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	tests := []struct {
		name        string
		conv, from  string
		wantErr     error
		wantIDs     []string
		wantAgents  []string
		wantSession map[string]string // agent → session id afterwards
		wantStream  int
	}{
		{"retry last answer", "c", "01F", nil,
			[]string{"01A", "01B", "01C", "01D", "01E"}, []string{"claude", "codex"},
			map[string]string{"claude": "s-claude", "codex": "", "gemini": "s-gemini"}, 1},
		{"edit second prompt", "c", "01C", nil,
			[]string{"01A", "01B"}, []string{"claude"},
			map[string]string{"claude": "s-claude", "codex": "", "gemini": "s-gemini"}, 0},
		{"edit first prompt", "c", "01A", nil,
			[]string{}, []string{},
			map[string]string{"claude": "", "codex": "", "gemini": "s-gemini"}, 0},
		{"unknown message", "c", "01Z", ErrNotFound,
			[]string{"01A", "01B", "01C", "01D", "01E", "01F"}, []string{"claude", "codex"},
			map[string]string{"claude": "s-claude", "codex": "s-codex", "gemini": "s-gemini"}, 1},
		{"unknown conversation", "zz", "01A", ErrNotFound,
			[]string{"01A", "01B", "01C", "01D", "01E", "01F"}, []string{"claude", "codex"},
			map[string]string{"claude": "s-claude", "codex": "s-codex", "gemini": "s-gemini"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			if err := s.TruncateFrom(tt.conv, tt.from); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			got, err := s.Messages("c")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids(got), tt.wantIDs) {
				t.Fatalf("ids = %v, want %v", ids(got), tt.wantIDs)
			}
			c, _ := s.Conversation("c")
			if !reflect.DeepEqual(c.Agents, tt.wantAgents) {
				t.Errorf("agents = %v, want %v", c.Agents, tt.wantAgents)
			}
			for agent, want := range tt.wantSession {
				as, err := s.AgentSession("c", agent)
				if err != nil {
					t.Fatal(err)
				}
				if as.SessionID != want || (want == "" && as.Cursor != "") || as.Config["mode"] != "x" {
					t.Errorf("%s session = %+v, want id %q (cursor cleared with it, config kept)", agent, as, want)
				}
			}
			if n := countBucket(t, s, bucketStreaming); n != tt.wantStream {
				t.Errorf("streaming index has %d entries, want %d", n, tt.wantStream)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMarkInterrupted(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c1", "c2")
	streaming := assistant("01B", "claude", transcript.StatusStreaming, "partial answer")
	streaming.Segments = append(streaming.Segments, transcript.Segment{Type: transcript.SegTool, ID: "t1", Name: "Edit", Status: "running"})
	mustPut(t, s, "c1", 150, user("01A", "q"), streaming) // last checkpoint at 150, started at 100
	timed := assistant("01D", "codex", transcript.StatusStreaming, "x")
	timed.DurationMs = 7
	mustPut(t, s, "c2", 120, timed)
	mustPut(t, s, "c2", 130, assistant("01E", "codex", transcript.StatusCompleted, "done"))

	n, err := s.MarkInterrupted(999)
	if err != nil || n != 2 {
		t.Fatalf("MarkInterrupted = %d, %v; want 2", n, err)
	}
	tests := []struct {
		conv, id     string
		wantStatus   transcript.MessageStatus
		wantDuration int64
		wantSegments int
	}{
		{"c1", "01B", transcript.StatusInterrupted, 50, 2},
		{"c2", "01D", transcript.StatusInterrupted, 7, 1},
		{"c2", "01E", transcript.StatusCompleted, 0, 1},
		{"c1", "01A", "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.conv+"/"+tt.id, func(t *testing.T) {
			m, err := s.Message(tt.conv, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != tt.wantStatus || m.DurationMs != tt.wantDuration || len(m.Segments) != tt.wantSegments {
				t.Fatalf("got status %q duration %d segments %d, want %q %d %d",
					m.Status, m.DurationMs, len(m.Segments), tt.wantStatus, tt.wantDuration, tt.wantSegments)
			}
		})
	}
	if n, err := s.MarkInterrupted(1000); err != nil || n != 0 {
		t.Fatalf("second MarkInterrupted = %d, %v; want 0", n, err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestAgentSessions(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c", "bare")
	full := AgentSession{SessionID: "sess-1", Cursor: "01B", Config: map[string]string{"mode": "plan", "model": "o3"}}
	tests := []struct {
		name    string
		do      func() (AgentSession, error)
		want    AgentSession
		wantErr error
	}{
		{"none yet", func() (AgentSession, error) { return s.AgentSession("c", "claude") }, AgentSession{}, ErrNotFound},
		{"none in bare conversation", func() (AgentSession, error) { return s.AgentSession("bare", "claude") }, AgentSession{}, ErrNotFound},
		{"unknown conversation", func() (AgentSession, error) { return s.AgentSession("zz", "claude") }, AgentSession{}, ErrNotFound},
		{"put unknown conversation", func() (AgentSession, error) { return AgentSession{}, s.PutAgentSession("zz", "claude", full) }, AgentSession{}, ErrNotFound},
		{"put then get", func() (AgentSession, error) {
			if err := s.PutAgentSession("c", "claude", full); err != nil {
				return AgentSession{}, err
			}
			return s.AgentSession("c", "claude")
		}, full, nil},
		{"replace", func() (AgentSession, error) {
			if err := s.PutAgentSession("c", "claude", AgentSession{SessionID: "sess-2", Cursor: "01D"}); err != nil {
				return AgentSession{}, err
			}
			return s.AgentSession("c", "claude")
		}, AgentSession{SessionID: "sess-2", Cursor: "01D"}, nil},
		{"other agent independent", func() (AgentSession, error) {
			if err := s.PutAgentSession("c", "codex", full); err != nil {
				return AgentSession{}, err
			}
			return s.AgentSession("c", "codex")
		}, full, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.do()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if err := s.PutAgentSession("c", "", full); err == nil {
		t.Fatal("empty agent name accepted")
	}
	all, err := s.AgentSessions("c")
	if err != nil || len(all) != 2 || all["codex"].SessionID != "sess-1" {
		t.Fatalf("AgentSessions = %+v, %v", all, err)
	}
	if all, err := s.AgentSessions("bare"); err != nil || all == nil || len(all) != 0 {
		t.Fatalf("AgentSessions(bare) = %+v, %v", all, err)
	}
	if _, err := s.AgentSessions("zz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("AgentSessions(zz): %v", err)
	}
}

func TestResetAgentSessions(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, "c", "other", "bare")
	for _, conv := range []string{"c", "other"} {
		for _, agent := range []string{"claude", "codex"} {
			as := AgentSession{SessionID: "s-" + agent, Cursor: "01B", Config: map[string]string{"model": agent + "-m"}}
			if err := s.PutAgentSession(conv, agent, as); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name    string
		conv    string
		wantErr error
	}{
		{"reset", "c", nil},
		{"reset twice", "c", nil},
		{"no sessions", "bare", nil},
		{"unknown", "zz", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.ResetAgentSessions(tt.conv); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	for _, agent := range []string{"claude", "codex"} {
		got, _ := s.AgentSession("c", agent)
		if want := (AgentSession{Config: map[string]string{"model": agent + "-m"}}); !reflect.DeepEqual(got, want) {
			t.Errorf("c/%s = %+v, want %+v", agent, got, want)
		}
		kept, _ := s.AgentSession("other", agent)
		if kept.SessionID != "s-"+agent || kept.Cursor != "01B" {
			t.Errorf("other/%s changed: %+v", agent, kept)
		}
	}
}

func TestBlobs(t *testing.T) {
	s := openTemp(t)
	big := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", []byte{}, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", []byte("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abc again", []byte("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"1 MiB", big, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hash, err := s.PutBlob(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && hash != tt.want {
				t.Fatalf("hash = %s, want %s", hash, tt.want)
			}
			got, err := s.Blob(hash)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(tt.data) {
				t.Fatalf("blob content differs (%d vs %d bytes)", len(got), len(tt.data))
			}
		})
	}
	if _, err := s.Blob("0000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown blob: %v", err)
	}
	if n := countBucket(t, s, bucketBlobs); n != 3 {
		t.Fatalf("%d blobs stored, want 3 (content-addressed)", n)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestIndexEntries(t *testing.T) {
	s := openTemp(t)
	tests := []struct {
		name    string
		do      func() error
		wantErr error
	}{
		{"get missing", func() error { _, err := s.IndexEntry("k1"); return err }, ErrNotFound},
		{"put", func() error { return s.PutIndexEntry("k1", []byte("v1")) }, nil},
		{"put second", func() error { return s.PutIndexEntry("k0", []byte("v0")) }, nil},
		{"put empty value", func() error { return s.PutIndexEntry("k2", nil) }, nil},
		{"replace", func() error { return s.PutIndexEntry("k1", []byte("v1b")) }, nil},
		{"get", func() error {
			v, err := s.IndexEntry("k1")
			if err == nil && string(v) != "v1b" {
				return errors.New("got " + string(v))
			}
			return err
		}, nil},
		{"delete", func() error { return s.DeleteIndexEntry("k2") }, nil},
		{"delete missing is fine", func() error { return s.DeleteIndexEntry("nope") }, nil},
		{"gone", func() error { _, err := s.IndexEntry("k2"); return err }, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if err := s.PutIndexEntry("", []byte("x")); err == nil {
		t.Fatal("empty key accepted")
	}
	var seen []string
	err := s.ForEachIndexEntry(func(k string, v []byte) error {
		seen = append(seen, k+"="+string(v))
		return nil
	})
	if err != nil || !reflect.DeepEqual(seen, []string{"k0=v0", "k1=v1b"}) {
		t.Fatalf("ForEachIndexEntry saw %v, %v", seen, err)
	}
	stop := errors.New("stop")
	err = s.ForEachIndexEntry(func(string, []byte) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("ForEachIndexEntry error = %v, want wrapped stop", err)
	}
}

func TestCheckFindsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(tx *bolt.Tx) error
		want   string
	}{
		{"orphan messages", func(tx *bolt.Tx) error {
			b, err := tx.Bucket(bucketMessages).CreateBucket([]byte("ghost"))
			if err != nil {
				return err
			}
			return b.Put([]byte("m"), []byte(`{"id":"m","role":"user"}`))
		}, "no such conversation"},
		{"undecodable message", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMessages).Bucket([]byte("c")).Put([]byte("01A"), []byte("{"))
		}, "decode message"},
		{"streaming message not indexed", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketStreaming).Delete(streamingKey("c", "01B"))
		}, "streaming index entry present=false"},
		{"dangling index entry", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketStreaming).Put(streamingKey("c", "01Z"), make([]byte, 8))
		}, "no such message"},
		{"blob hash mismatch", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketBlobs).Put([]byte("00ff"), []byte("x"))
		}, "does not match"},
		{"bad conversation", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketConversations).Put([]byte("c"), []byte(`{"id":"d"}`))
		}, "stored id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, "c")
			mustPut(t, s, "c", 1, user("01A", "x"), assistant("01B", "claude", transcript.StatusStreaming, "y"))
			if err := s.Check(); err != nil {
				t.Fatalf("healthy store: %v", err)
			}
			if err := s.db.Update(tt.damage); err != nil {
				t.Fatal(err)
			}
			err := s.Check()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v, want %q", err, tt.want)
			}
		})
	}
}

// countBucket returns how many keys a top-level bucket holds.
func countBucket(t testing.TB, s *Store, name []byte) int {
	t.Helper()
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(name).ForEach(func(_, _ []byte) error { n++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStats(t *testing.T) {
	s := openTemp(t)
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stats{Path: s.Path(), FileBytes: st.FileBytes, SchemaVersion: SchemaVersion}); st != want || st.FileBytes <= 0 {
		t.Fatalf("empty store stats %+v, want %+v", st, want)
	}
	mustCreate(t, s, "c1", "c2", "c3")
	mustPut(t, s, "c1", 1, user("01A", "x"), assistant("01B", "claude", transcript.StatusStreaming, "y"))
	mustPut(t, s, "c2", 1, user("01A", "x"))
	if _, err := s.PutBlob([]byte("12345")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIndexEntry("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	st, err = s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Path: s.Path(), FileBytes: st.FileBytes, SchemaVersion: 1, Conversations: 3, Messages: 3,
		Streaming: 1, Blobs: 1, BlobBytes: 5, IndexEntries: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
}
