package native

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReadFileNoSessionID: a file shaped like a store's session but naming
// no session id is refused with ErrNoSessionID; the same records with an id
// (in a session_meta or the rollout file name) read as a session.
func TestReadFileNoSessionID(t *testing.T) {
	const turnContext = `{"timestamp":"2026-01-01T00:00:00Z","type":"turn_context","payload":{"model":"x"}}` + "\n"
	const meta = `{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"0199aaaa-0000-7000-8000-00000000000f","cwd":"/w"}}` + "\n"
	tests := []struct {
		name, file, data string
		wantID           string // "" means ErrNoSessionID
	}{
		{"codex turn_context only", "a.jsonl", turnContext, ""},
		{"codex session_meta without id", "b.jsonl", `{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"cwd":"/w"}}` + "\n", ""},
		{"codex session_meta with id", "c.jsonl", meta + turnContext, "0199aaaa-0000-7000-8000-00000000000f"},
		{"codex id from rollout name", "rollout-2026-01-01T00-00-00-0199aaaa-0000-7000-8000-00000000000e.jsonl", turnContext, "0199aaaa-0000-7000-8000-00000000000e"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.file)
			if err := os.WriteFile(p, []byte(tt.data), 0o644); err != nil {
				t.Fatal(err)
			}
			tr, err := ReadFile(context.Background(), p)
			if tt.wantID == "" {
				if !errors.Is(err, ErrNoSessionID) {
					t.Fatalf("ReadFile = %v, %v; want ErrNoSessionID", tr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			if tr.ID != tt.wantID || tr.Agent != AgentCodex {
				t.Errorf("ReadFile: id %q agent %q, want %q codex", tr.ID, tr.Agent, tt.wantID)
			}
		})
	}
}
