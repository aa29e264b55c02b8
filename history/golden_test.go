package history

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

var update = flag.Bool("ochat.update", false, "rewrite history/testdata/schema1.db (only when the schema version changes: add a new file then)")

// goldenContent is what testdata/schema1.db holds: a store written by
// schema version 1, kept so later versions of this package prove they still
// read it.
func goldenContent() (Conversation, []transcript.Message, AgentSession, []byte) {
	two := 2
	c := Conversation{ID: "01JDX0000000000000000000C1", Title: "Golden", Agents: []string{"claude"},
		CreatedAt: 1732960000000, UpdatedAt: 1732960005000,
		Native: &NativeRef{Agent: "claude", SessionID: "sess-1", Path: "/home/u/.claude/projects/x/sess-1.jsonl"}}
	blob := []byte("attachment bytes")
	sum := sha256.Sum256(blob)
	ms := []transcript.Message{
		{ID: "01JDX0000000000000000000M1", Timestamp: 1732960000000, Role: transcript.RoleUser, Content: "fix it",
			Attachments: []transcript.Attachment{{Kind: "file", Name: "a.txt", Hash: hex.EncodeToString(sum[:]), Size: 16}}},
		{ID: "01JDX0000000000000000000M2", Timestamp: 1732960001000, Role: transcript.RoleAssistant, Agent: "claude",
			Status: transcript.StatusStreaming, Segments: []transcript.Segment{
				{Type: transcript.SegContent, Content: "working"},
				{Type: transcript.SegFileChange, Path: "a.txt", Additions: &two, Status: "applied"},
			}},
	}
	as := AgentSession{SessionID: "acp-1", Cursor: "01JDX0000000000000000000M2", Config: map[string]string{"mode": "plan"}}
	return c, ms, as, blob
}

func TestGoldenSchema1(t *testing.T) {
	golden := filepath.Join("testdata", "schema1.db")
	c, ms, as, blob := goldenContent()
	if *update {
		os.Remove(golden)
		s, err := Open(golden)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutBlob(blob); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateConversation(c); err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if err := s.PutMessage(c.ID, m, c.UpdatedAt); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutAgentSession(c.ID, "claude", as); err != nil {
			t.Fatal(err)
		}
		if err := s.PutIndexEntry("claude\x00/p\x00123\x00456", []byte(`{"title":"x"}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ochat.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	gotC, err := s.Conversation(c.ID)
	if err != nil || !reflect.DeepEqual(gotC, c) {
		t.Fatalf("conversation = %+v, %v; want %+v", gotC, err, c)
	}
	if got, err := s.Blob(ms[0].Attachments[0].Hash); err != nil || string(got) != string(blob) {
		t.Fatalf("blob = %q, %v", got, err)
	}
	gotMs, err := s.Messages(c.ID)
	if err != nil || !reflect.DeepEqual(gotMs, ms) {
		t.Fatalf("messages = %+v, %v; want %+v", gotMs, err, ms)
	}
	if got, err := s.AgentSession(c.ID, "claude"); err != nil || !reflect.DeepEqual(got, as) {
		t.Fatalf("agent session = %+v, %v", got, err)
	}
	if v, err := s.IndexEntry("claude\x00/p\x00123\x00456"); err != nil || string(v) != `{"title":"x"}` {
		t.Fatalf("index entry = %q, %v", v, err)
	}
	if n, err := s.MarkInterrupted(1732960009000); err != nil || n != 1 {
		t.Fatalf("MarkInterrupted = %d, %v", n, err)
	}
}
