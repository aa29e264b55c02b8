// Package testenv makes a test binary hermetic: the TestMain of every
// package whose code reads the user's environment calls Hermetic first, so
// no test sees the user's agents, their login files or native sessions
// (CLAUDE_CONFIG_DIR, CODEX_HOME, XDG_*, provider keys…), and every test
// that needs one sets its own.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Cleared are the prefixes of the variables Hermetic unsets: the agents'
// and their stores' (Claude Code, Codex, Gemini CLI, OpenCode, pi, Oh My
// Pi), the providers' keys and endpoints, and the XDG base directories.
var Cleared = []string{
	"CLAUDE_", "CLAUDECODE", "CODEX_", "GEMINI_", "GOOGLE_", "OPENCODE_", "PI_", "OMP_",
	"ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_", "OPENROUTER_", "XAI_", "MISTRAL_", "DEEPSEEK_",
	"XDG_", "IS_SANDBOX",
}

// Hermetic unsets every Cleared variable and points HOME and the XDG base
// directories at a fresh private directory, after pinning what tests need
// from the real ones: Go's build and module caches and its env file, npm's
// cache and ochat's adapter cache (OCHAT_CACHE), so builds and installs stay
// warm. It returns a cleanup that removes the private directory.
func Hermetic() (cleanup func(), err error) {
	// A test binary re-executed by a test (a child playing a CLI or an
	// agent) keeps its parent's private environment.
	if os.Getenv(markerEnv) != "" {
		return func() {}, nil
	}
	pin := map[string]string{}
	if home, err := os.UserHomeDir(); err == nil {
		pin["GOPATH"] = filepath.Join(home, "go")
		pin["npm_config_cache"] = filepath.Join(home, ".npm")
	}
	if cache, err := os.UserCacheDir(); err == nil {
		pin["GOCACHE"] = filepath.Join(cache, "go-build")
		pin["OCHAT_CACHE"] = filepath.Join(cache, "ochat", "npm")
	}
	if cfg, err := os.UserConfigDir(); err == nil {
		pin["GOENV"] = filepath.Join(cfg, "go", "env")
	}
	for k, v := range pin {
		if _, ok := os.LookupEnv(k); !ok {
			if err := os.Setenv(k, v); err != nil {
				return nil, fmt.Errorf("testenv: %w", err)
			}
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if IsCleared(k) {
			os.Unsetenv(k)
		}
	}
	dir, err := os.MkdirTemp("", "ochat-home")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	set := map[string]string{
		"HOME":            dir,
		"XDG_CONFIG_HOME": filepath.Join(dir, ".config"),
		"XDG_STATE_HOME":  filepath.Join(dir, ".local", "state"),
		"XDG_DATA_HOME":   filepath.Join(dir, ".local", "share"),
		"XDG_CACHE_HOME":  filepath.Join(dir, ".cache"),
		"XDG_RUNTIME_DIR": filepath.Join(dir, "run"),
	}
	for k, v := range set {
		if k != "HOME" {
			if err := os.MkdirAll(v, 0o700); err != nil {
				os.RemoveAll(dir)
				return nil, fmt.Errorf("testenv: %w", err)
			}
		}
		os.Setenv(k, v)
	}
	os.Setenv(markerEnv, dir)
	return func() { os.RemoveAll(dir) }, nil
}

// markerEnv names the private HOME Hermetic made, for re-executed children.
const markerEnv = "OCHAT_TESTENV_HOME"

// IsCleared reports whether Hermetic unsets the variable k.
func IsCleared(k string) bool {
	for _, p := range Cleared {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// Main is the TestMain body for a package with nothing else to do in it:
// Hermetic, run the tests, clean up.
func Main(run func() int) int {
	cleanup, err := Hermetic()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := run()
	cleanup()
	return code
}
