package native

import (
	"errors"
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
