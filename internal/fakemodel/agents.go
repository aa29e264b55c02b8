package fakemodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// This file says how to point each real adapter at a Server: environment
// variables and config files, per research/real-agents/README.md (runs of
// 2026-11-30 with claude-agent-acp 0.23.1, codex-acp 0.16.0, opencode
// 1.18.33, gemini-cli 0.61.0). Every helper takes a private home directory
// so that a test never touches the user's own agent settings or sessions.

// ClaudeEnv returns the environment for claude-agent-acp (and the Claude
// Code CLI it starts) talking to s, with home as HOME. IS_SANDBOX=1 is set
// when running as root: without it Claude Code refuses to start there.
// Unless home already has one, it writes $home/.claude/settings.json with
// permissions.defaultMode "default": claude-agent-acp 0.101 starts sessions
// in "auto" mode otherwise, which writes files without asking.
func (s *Server) ClaudeEnv(home string) map[string]string {
	settings := filepath.Join(home, ".claude", "settings.json")
	if _, err := os.Stat(settings); err != nil && os.MkdirAll(filepath.Dir(settings), 0o700) == nil {
		// Best effort: without it the adapter still runs, in "auto" mode.
		_ = os.WriteFile(settings, []byte(`{"permissions":{"defaultMode":"default"}}`+"\n"), 0o600)
	}
	env := map[string]string{
		"HOME":               home,
		"ANTHROPIC_BASE_URL": s.URL(),
		"ANTHROPIC_API_KEY":  "sk-ant-fake-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"DISABLE_TELEMETRY":                        "1",
	}
	if os.Geteuid() == 0 {
		env["IS_SANDBOX"] = "1"
	}
	return env
}

// CodexModel is a slug from codex's bundled model catalog; with a known
// slug codex offers its apply_patch tool.
const CodexModel = "gpt-5.4"

// CodexConfig returns $CODEX_HOME/config.toml for codex-acp talking to s.
// approval is codex's approval_policy ("untrusted" asks before every
// patch in codex 0.137 (codex-acp 0.16) but is refused by codex 0.166
// (codex-acp 2.6), where "on-request" with the "read-only" sandbox asks;
// "never" never asks) and sandbox its sandbox_mode
// ("danger-full-access" avoids the Linux sandbox, which cannot run in
// containers).
func (s *Server) CodexConfig(approval, sandbox string) string {
	return fmt.Sprintf(`model = %q
model_provider = "fake"
approval_policy = %q
sandbox_mode = %q
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake LLM"
base_url = %q
wire_api = "responses"
env_key = "FAKE_LLM_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 120000

[analytics]
enabled = false
`, CodexModel, approval, sandbox, s.URL()+"/v1")
}

// CodexEnv writes config.toml into codexHome (creating it, 0700) and
// returns the environment for codex-acp: CODEX_HOME, HOME and the fake API
// key the provider's env_key names.
func (s *Server) CodexEnv(codexHome, home, approval, sandbox string) (map[string]string, error) {
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		return nil, fmt.Errorf("fakemodel: create CODEX_HOME: %w", err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(s.CodexConfig(approval, sandbox)), 0o600); err != nil {
		return nil, fmt.Errorf("fakemodel: write codex config: %w", err)
	}
	env := map[string]string{"CODEX_HOME": codexHome, "HOME": home, "FAKE_LLM_API_KEY": "sk-fake"}
	// codex-acp 2.x ignores approval_policy and sandbox_mode for a session
	// and starts it in its own mode ("agent": auto review, no question for
	// a workspace write) unless INITIAL_AGENT_MODE names one; 0.x ignores
	// the variable.
	switch {
	case sandbox == "read-only":
		env["INITIAL_AGENT_MODE"] = "read-only"
	case sandbox == "workspace-write" && approval == "on-request":
		env["INITIAL_AGENT_MODE"] = "workspace-write"
	case sandbox == "danger-full-access" && approval == "never":
		env["INITIAL_AGENT_MODE"] = "agent-full-access"
	}
	return env, nil
}

// OpencodeEnv writes an opencode.json (fake provider, edit and bash
// permissions "ask") under root and returns the environment for
// `opencode acp`: private HOME and XDG dirs under root, OPENCODE_CONFIG
// and the switches that keep it offline.
func (s *Server) OpencodeEnv(root string) (map[string]string, error) {
	cfg := map[string]any{
		"autoupdate": false, "share": "disabled", "model": "fake/fake-model", "small_model": "fake/fake-model",
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake LLM",
			"options": map[string]any{"baseURL": s.URL() + "/v1", "apiKey": "sk-fake"},
			"models": map[string]any{"fake-model": map[string]any{"name": "Fake Model", "tool_call": true,
				"limit": map[string]any{"context": 128000, "output": 4096}}},
		}},
		"permission": map[string]any{"edit": "ask", "bash": "ask"},
	}
	env := map[string]string{"HOME": filepath.Join(root, "home")}
	for _, d := range []string{"CONFIG", "DATA", "CACHE", "STATE"} {
		env["XDG_"+d+"_HOME"] = filepath.Join(root, "xdg-"+d)
	}
	for _, d := range env {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("fakemodel: create opencode dirs: %w", err)
		}
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(root, "opencode.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("fakemodel: write opencode config: %w", err)
	}
	env["OPENCODE_CONFIG"] = path
	for _, k := range []string{"MODELS_FETCH", "AUTOUPDATE", "LSP_DOWNLOAD", "DEFAULT_PLUGINS", "SHARE"} {
		env["OPENCODE_DISABLE_"+k] = "1"
	}
	return env, nil
}

// GeminiEnv writes $home/.gemini/settings.json (API-key auth, telemetry and
// updates off) and returns the environment for `gemini --acp`.
func (s *Server) GeminiEnv(home string) (map[string]string, error) {
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fakemodel: create gemini dir: %w", err)
	}
	settings := `{"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},` +
		`"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false},` +
		`"security":{"auth":{"selectedType":"gemini-api-key"}}}`
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(settings), 0o600); err != nil {
		return nil, fmt.Errorf("fakemodel: write gemini settings: %w", err)
	}
	return map[string]string{"HOME": home, "GEMINI_API_KEY": "fake-gemini-key",
		"GOOGLE_GEMINI_BASE_URL": s.URL(), "GEMINI_CLI_NO_RELAUNCH": "true"}, nil
}

// PiModel is the model id PiEnv configures for pi and Oh My Pi.
const PiModel = "fake-model"

// PiEnv writes a "fake" provider (OpenAI chat completions at s) and makes
// it the default model in agentDir, the agent folder of pi
// ($HOME/.pi/agent: models.json, settings.json) or Oh My Pi
// ($HOME/.omp/agent: models.yml, config.yml); which one is told by the
// folder name. It returns HOME and the agent-dir variable.
func (s *Server) PiEnv(home, agentDir string) (map[string]string, error) {
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		return nil, fmt.Errorf("fakemodel: create pi agent dir: %w", err)
	}
	base := s.URL() + "/v1"
	files := map[string]string{}
	env := map[string]string{"HOME": home, "FAKE_LLM_API_KEY": "sk-fake"}
	if filepath.Base(filepath.Dir(agentDir)) == ".omp" {
		files["models.yml"] = fmt.Sprintf("providers:\n  fake:\n    baseUrl: %q\n    api: openai-completions\n    apiKey: sk-fake\n"+
			"    compat:\n      supportsDeveloperRole: false\n      supportsReasoningEffort: false\n"+
			"    models:\n      - id: %s\n        name: Fake Model\n        contextWindow: 128000\n        maxTokens: 4096\n", base, PiModel)
		files["config.yml"] = fmt.Sprintf("modelRoles:\n  default: fake/%s\n  smol: fake/%s\n  slow: fake/%s\nquietStartup: true\n", PiModel, PiModel, PiModel)
	} else {
		models, _ := json.Marshal(map[string]any{"providers": map[string]any{"fake": map[string]any{
			"baseUrl": base, "api": "openai-completions", "apiKey": "sk-fake",
			"compat": map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
			"models": []any{map[string]any{"id": PiModel, "name": "Fake Model", "contextWindow": 128000, "maxTokens": 4096}},
		}}})
		files["models.json"] = string(models)
		files["settings.json"] = fmt.Sprintf(`{"defaultProvider":"fake","defaultModel":%q,"quietStartup":true}`, PiModel)
		env["PI_CODING_AGENT_DIR"] = agentDir
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(agentDir, name), []byte(content), 0o600); err != nil {
			return nil, fmt.Errorf("fakemodel: write %s: %w", name, err)
		}
	}
	return env, nil
}
