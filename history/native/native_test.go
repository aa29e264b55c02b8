package native

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResumeCommand(t *testing.T) {
	tests := []struct{ agent, want string }{
		{AgentClaude, "claude --resume ID"},
		{AgentCodex, "codex resume ID"},
		{AgentGemini, "gemini --resume ID"},
		{AgentOpenCode, "opencode --session ID"},
		{AgentPi, "pi --session /p/s.jsonl"},
		{"other", ""},
	}
	for _, tc := range tests {
		if got := strings.Join(ResumeCommand(tc.agent, "ID", "/p/s.jsonl"), " "); got != tc.want {
			t.Errorf("ResumeCommand(%s) = %q, want %q", tc.agent, got, tc.want)
		}
	}
}

func TestEnvFromLookup(t *testing.T) {
	m := map[string]string{"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c1,/c2", "CODEX_HOME": "/x", "XDG_DATA_HOME": "/d", "PI_CODING_AGENT_DIR": "/pi"}
	env := EnvFromLookup(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	if env.Home != "/h" || env.CodexHome != "/x" || env.XDGDataHome != "/d" || env.PiAgentDir != "/pi" {
		t.Errorf("env = %+v", env)
	}
	if got := strings.Join(claudeProjectsDirs(env), ","); got != "/c1/projects,/c2/projects" {
		t.Errorf("claude dirs = %s", got)
	}
	if openCodeDir(env) != "/d/opencode" || piSessionsDir(env) != "/pi/sessions" || codexHome(env) != "/x" {
		t.Errorf("store dirs: %s %s %s", openCodeDir(env), piSessionsDir(env), codexHome(env))
	}
}

func TestCacheFuncs(t *testing.T) {
	store := map[string][]byte{}
	c := CacheFuncs{
		GetFunc: func(k string) ([]byte, error) {
			if v, ok := store[k]; ok {
				return v, nil
			}
			return nil, errors.New("not found")
		},
		PutFunc: func(k string, v []byte) error { store[k] = v; return nil },
	}
	if _, ok := c.Get("k"); ok {
		t.Error("hit on empty cache")
	}
	c.Put("k", []byte("v"))
	if v, ok := c.Get("k"); !ok || string(v) != "v" {
		t.Errorf("get = %q %v", v, ok)
	}
	var none CacheFuncs
	none.Put("k", nil)
	if _, ok := none.Get("k"); ok {
		t.Error("zero CacheFuncs hit")
	}
}

// TestCopiedSessionFile reads session files copied or renamed out of their
// store (what `ochatd show <file>` gets): the store is told from the
// records and the id is the one the records carry (Claude sessionId, Codex
// session_meta id, Gemini sessionId, pi header id), for Read, the listing
// and the resume command. A Claude file whose name is one of its
// sessionIds (a fork: copied lines keep the old id) keeps its name.
func TestCopiedSessionFile(t *testing.T) {
	dir := t.TempDir()
	forkLines := func() []byte {
		b, err := os.ReadFile("testdata/claude/recorded/24cb974b-077a-4ab3-bdf4-622ee8278cca.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(b, []byte("\n"))
		for i := len(lines) - 4; i < len(lines); i++ {
			lines[i] = bytes.ReplaceAll(lines[i], []byte("24cb974b-077a-4ab3-bdf4-622ee8278cca"), []byte("99999999-9999-4999-8999-999999999999"))
		}
		return bytes.Join(lines, nil)
	}
	for _, tc := range []struct {
		name, src, copyName string
		data                func() []byte
		agent, id, resume   string
		forkedFrom          string // the session a fork continues (listed with it)
	}{
		{"claude trap", "testdata/claude/traps/22222222-2222-4222-8222-222222222222.jsonl", "fu-copy.jsonl", nil,
			AgentClaude, "11111111-1111-4111-8111-111111111111", "claude --resume 11111111-1111-4111-8111-111111111111", ""},
		{"claude recorded", "testdata/claude/recorded/24cb974b-077a-4ab3-bdf4-622ee8278cca.jsonl", "session.jsonl", nil,
			AgentClaude, "24cb974b-077a-4ab3-bdf4-622ee8278cca", "claude --resume 24cb974b-077a-4ab3-bdf4-622ee8278cca", ""},
		{"claude fork keeps its name", "", "99999999-9999-4999-8999-999999999999.jsonl", forkLines,
			AgentClaude, "99999999-9999-4999-8999-999999999999", "claude --resume 99999999-9999-4999-8999-999999999999",
			"24cb974b-077a-4ab3-bdf4-622ee8278cca"},
		{"codex", "testdata/codex/recorded/rollout-2026-11-30T09-21-42-01a22bc2-94f0-7343-bc9a-974a49e6be4e.jsonl", "copy.jsonl", nil,
			AgentCodex, "01a22bc2-94f0-7343-bc9a-974a49e6be4e", "codex resume 01a22bc2-94f0-7343-bc9a-974a49e6be4e", ""},
		{"codex legacy bare", "testdata/codex/public/claude-code-log__legacy-flat__rollout-44444444-4444-4444-8444-444444444444.jsonl", "old.jsonl", nil,
			AgentCodex, "44444444-4444-4444-8444-444444444444", "codex resume 44444444-4444-4444-8444-444444444444", ""},
		{"gemini", "testdata/gemini/recorded/session-2026-11-30T09-28-71f227ce.jsonl", "copy.jsonl", nil,
			AgentGemini, "71f227ce-0a5f-43b0-b7c4-a6393048de49", "gemini --resume 71f227ce-0a5f-43b0-b7c4-a6393048de49", ""},
		{"pi", "testdata/pi/traps/2026-04-01T00-00-00-000Z_7a000000-0000-4000-8000-000000000001.jsonl", "copy.jsonl", nil,
			AgentPi, "7a000000-0000-4000-8000-000000000001", "pi --session " + filepath.Join(dir, "pi", "copy.jsonl"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var data []byte
			if tc.data != nil {
				data = tc.data()
			} else {
				var err error
				if data, err = os.ReadFile(tc.src); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, tc.agent, tc.copyName)
			writeFile(t, path, data)
			tr, err := Read(context.Background(), Env{}, path)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Agent != tc.agent || tr.ID != tc.id || strings.Join(tr.Resume, " ") != tc.resume {
				t.Errorf("read: agent %s id %s resume %q; want %s %s %q", tr.Agent, tr.ID, strings.Join(tr.Resume, " "), tc.agent, tc.id, tc.resume)
			}
			s, _ := listingMeta(t, tc.agent, path)
			if s.ID != tc.id || strings.Join(s.Resume, " ") != tc.resume {
				t.Errorf("listing: id %s resume %q; want %s %q", s.ID, strings.Join(s.Resume, " "), tc.id, tc.resume)
			}
			if tr.ForkedFrom != tc.forkedFrom || s.ForkedFrom != tc.forkedFrom {
				t.Errorf("forkedFrom: read %q listing %q, want %q", tr.ForkedFrom, s.ForkedFrom, tc.forkedFrom)
			}
		})
	}
}

// TestReadByIDFindsRenamedClaudeFile: a Claude session file renamed inside
// the store is listed under the sessionId of its lines, and Read by that
// id finds it.
func TestReadByIDFindsRenamedClaudeFile(t *testing.T) {
	home := t.TempDir()
	data, err := os.ReadFile("testdata/claude/traps/22222222-2222-4222-8222-222222222222.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := ClaudeProjectDirName("/w/app")
	writeFile(t, filepath.Join(home, ".claude", "projects", enc, "fu-copy.jsonl"), data)
	env := Env{Home: home}
	ss, _ := List(context.Background(), env, "/w/app")
	if len(ss) != 1 || ss[0].ID != "11111111-1111-4111-8111-111111111111" {
		t.Fatalf("listing = %+v", ss)
	}
	tr, err := Read(context.Background(), env, ss[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Path != ss[0].Path || tr.MessageCount != ss[0].MessageCount {
		t.Errorf("read by id: %s %d msgs; listed %s %d msgs", tr.Path, tr.MessageCount, ss[0].Path, ss[0].MessageCount)
	}
	if _, err := Read(context.Background(), env, "33333333-3333-4333-8333-333333333333"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}

// TestDetectAgentFromHead tells each store from the first records alone,
// compact or with spaces, whatever the file is called.
func TestDetectAgentFromHead(t *testing.T) {
	for _, tc := range []struct{ name, head, want string }{
		{"claude line", `{"parentUuid":null,"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"hi"}}` + "\n", AgentClaude},
		{"claude spaced", `{"type": "user", "uuid": "u1", "message": {"content": "hi"}}` + "\n", AgentClaude},
		{"claude minimal", `{"type":"user","message":{}}` + "\n" + `{"type":"assistant","message":{}}` + "\n", AgentClaude},
		{"claude snapshot only", `{"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}` + "\n", AgentClaude},
		{"codex", `{"timestamp":"t","type":"session_meta","payload":{"id":"x","cwd":"/w"}}` + "\n", AgentCodex},
		{"codex bare", `{"id":"44444444-4444-4444-8444-444444444444","timestamp":"2026-01-04T05:06:07.000Z"}` + "\n" + `{"type":"message","role":"user","content":[]}` + "\n", AgentCodex},
		{"pi spaced", `{"type": "session", "version": 3, "id": "7a", "cwd": "/w"}` + "\n", AgentPi},
		{"pi v1", `{"type":"session","id":"x","timestamp":"t","cwd":"/w","provider":"anthropic"}` + "\n", AgentPi},
		{"gemini jsonl", `{"sessionId":"s","projectHash":"h","startTime":"t"}` + "\n", AgentGemini},
		{"gemini legacy json", "{\n  \"sessionId\": \"s\",\n  \"messages\": [\n    {\"id\": \"m1\", \"type\": \"user\", \"content\": \"hel", AgentGemini},
		{"opencode session json", `{"id":"ses_1","projectID":"p","directory":"/w","title":"t","time":{"created":1}}`, AgentOpenCode},
		{"not a session", "hello\nworld\n", ""},
	} {
		if got := detectAgentFromHead(tc.head); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
