package testenv

import (
	"os"
	"strings"
	"testing"
)

func TestHermetic(t *testing.T) {
	t.Setenv("CLAUDE_CONFIG_DIR", "/bogus/claude")
	t.Setenv("CODEX_HOME", "/bogus/codex")
	t.Setenv("ANTHROPIC_API_KEY", "sk-bogus")
	t.Setenv("XDG_STATE_HOME", "/bogus/state")
	t.Setenv("PATH", os.Getenv("PATH"))
	t.Setenv("HOME", os.Getenv("HOME"))
	for _, k := range []string{"GOCACHE", "GOPATH", "GOENV", "npm_config_cache", "OCHAT_CACHE", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"} {
		t.Setenv(k, os.Getenv(k)) // restored after the test
	}
	os.Unsetenv("GOCACHE")
	cleanup, err := Hermetic()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	for _, k := range []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME", "ANTHROPIC_API_KEY"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s still set: %q", k, v)
		}
	}
	home := os.Getenv("HOME")
	if !strings.Contains(home, "ochat-home") || !strings.HasPrefix(os.Getenv("XDG_STATE_HOME"), home) {
		t.Errorf("HOME %q, XDG_STATE_HOME %q: not private", home, os.Getenv("XDG_STATE_HOME"))
	}
	if g := os.Getenv("GOCACHE"); g == "" || strings.HasPrefix(g, home) {
		t.Errorf("GOCACHE %q not pinned to the real cache", g)
	}
}

func TestIsCleared(t *testing.T) {
	for k, want := range map[string]bool{
		"CLAUDE_CONFIG_DIR": true, "CODEX_HOME": true, "GEMINI_API_KEY": true, "OPENCODE_CONFIG": true,
		"PI_CODING_AGENT_DIR": true, "XDG_STATE_HOME": true, "OPENAI_BASE_URL": true,
		"PATH": false, "OCHAT_E2E": false, "GOCACHE": false, "HOME": false,
	} {
		if got := IsCleared(k); got != want {
			t.Errorf("IsCleared(%s) = %v, want %v", k, got, want)
		}
	}
}
