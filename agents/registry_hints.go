package agents

import "strings"

// hint maps one known failure text of a built-in agent to what the user
// should do about it.
type hint struct {
	agent string // built-in name
	match string // case-insensitive substring of the error text
	text  string
}

// hints are the failures seen from the pinned built-ins (research/real-agents,
// 2026-11-30): claude-agent-acp 0.23.1 ends the prompt with "Query closed
// before response received" when Claude Code cannot start or is not logged
// in; codex-acp 0.16.0 answers "Authentication required"; gemini-cli 0.61.0
// the same for a missing login.
var hints = []hint{
	{"claude", "query closed before response received", "claude-agent-acp could not start Claude Code: run `claude` once to log in, or set ANTHROPIC_API_KEY; see `ochatd doctor`"},
	{"claude", "authentication", "run `claude` once to log in, or set ANTHROPIC_API_KEY; see `ochatd doctor`"},
	{"claude", "invalid api key", "run `claude` once to log in, or set ANTHROPIC_API_KEY; see `ochatd doctor`"},
	{"codex", "authentication required", "run `codex login` or set OPENAI_API_KEY; see `ochatd doctor`"},
	{"codex", "401 unauthorized", "run `codex login` or set OPENAI_API_KEY; see `ochatd doctor`"},
	{"gemini", "authentication required", "run `gemini` once to log in, or set GEMINI_API_KEY; see `ochatd doctor`"},
	{"gemini", "api key not valid", "set a valid GEMINI_API_KEY, or run `gemini` once to log in; see `ochatd doctor`"},
}

// Hint returns what the user should do about errText, an error a built-in
// agent (by name: "claude", "codex", "gemini") reported for a prompt turn or
// session start; "" when the text is not a known failure or errText already
// carries the hint. Matching is a case-insensitive substring test.
func Hint(agentName, errText string) string {
	low := strings.ToLower(errText)
	for _, h := range hints {
		if h.agent == agentName && strings.Contains(low, h.match) {
			if strings.Contains(errText, h.text) {
				return ""
			}
			return h.text
		}
	}
	return ""
}
