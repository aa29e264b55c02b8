package agents

import (
	"os"
	"path/filepath"
	"strconv"
)

// Readiness says whether an agent can run now, and if not, which fix applies
// (protocol: ochat/agents/list "state").
type Readiness string

const (
	// StateReady: the command is installed and, for a built-in, a login
	// (or provider configuration) was found. Configured agents are ready
	// when their command exists: ochat cannot know how they log in.
	StateReady Readiness = "ready"
	// StateNotInstalled: the built-in's command is not on PATH; it can
	// still start through npx, which downloads the pinned package on first
	// start (Status.DownloadMB). Install says how to install it instead.
	StateNotInstalled Readiness = "notInstalled"
	// StateNotLoggedIn: the command is there (or npx would fetch it) but
	// neither the agent's login files nor its API-key variables were
	// found; its turns would fail until Login is done.
	StateNotLoggedIn Readiness = "notLoggedIn"
	// StateUnavailable: it cannot start (no command, no npx); Reason and
	// Install say why and what to do.
	StateUnavailable Readiness = "unavailable"
	// StateUntrusted: held back by an untrusted workspace settings file.
	StateUntrusted Readiness = "untrusted"
)

// loginCheck says how to tell that a built-in can authenticate: any of
// envs set (in the daemon's environment or the agent's configured env),
// or any of files present (relative to the directory dirEnv names, else
// to home + homeRel). login is the fix shown when none is found.
type loginCheck struct {
	envs  []string
	files []loginFile
	login string
}

type loginFile struct {
	dirEnv  string // variable naming the folder, "" for none
	homeRel string // folder under $HOME when dirEnv is unset
	name    string // file (or folder) in it
}

// loginChecks are the built-ins' known credentials (their docs and the
// files the research runs saw them write, 2026-11-30/12-01).
var loginChecks = map[string]loginCheck{
	"claude": {
		envs: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
		files: []loginFile{
			{dirEnv: "CLAUDE_CONFIG_DIR", homeRel: ".claude", name: ".credentials.json"},
		},
		login: "run `claude` once and /login, or set ANTHROPIC_API_KEY",
	},
	"codex": {
		envs: []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
		files: []loginFile{
			{dirEnv: "CODEX_HOME", homeRel: ".codex", name: "auth.json"},
		},
		login: "run `codex login`, or set OPENAI_API_KEY",
	},
	"gemini": {
		envs: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"},
		files: []loginFile{
			{homeRel: ".gemini", name: "oauth_creds.json"},
		},
		login: "run `gemini` once to log in, or set GEMINI_API_KEY",
	},
	"opencode": {
		envs: []string{"OPENCODE_CONFIG", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"},
		files: []loginFile{
			{dirEnv: "XDG_DATA_HOME", homeRel: ".local/share", name: "opencode/auth.json"},
			{dirEnv: "XDG_CONFIG_HOME", homeRel: ".config", name: "opencode/opencode.json"},
			{dirEnv: "XDG_CONFIG_HOME", homeRel: ".config", name: "opencode/opencode.jsonc"},
		},
		login: "run `opencode auth login`, or configure a provider in opencode.json",
	},
	"pi": {
		envs: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"},
		files: []loginFile{
			{dirEnv: "PI_CODING_AGENT_DIR", homeRel: ".pi/agent", name: "auth.json"},
			{dirEnv: "PI_CODING_AGENT_DIR", homeRel: ".pi/agent", name: "models.json"},
		},
		login: "run `pi` and /login, or set ANTHROPIC_API_KEY (or another provider's key)",
	},
	"omp": {
		envs: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"},
		files: []loginFile{
			{homeRel: ".omp/agent", name: "agent.db"},
			{homeRel: ".omp/agent", name: "models.yml"},
		},
		login: "run `omp` and /login, or set ANTHROPIC_API_KEY (or another provider's key)",
	},
}

// loggedIn reports whether the built-in name finds credentials, looking at
// the agent's configured env first, then getenv, then files under home.
// An agent without a check counts as logged in.
func loggedIn(name string, spec map[string]string, getenv func(string) string, home string) bool {
	c, ok := loginChecks[name]
	if !ok {
		return true
	}
	get := func(k string) string {
		if v, ok := spec[k]; ok {
			return v
		}
		return getenv(k)
	}
	for _, k := range c.envs {
		if get(k) != "" {
			return true
		}
	}
	agentHome := get("HOME")
	if agentHome == "" {
		agentHome = home
	}
	for _, f := range c.files {
		dir := ""
		if f.dirEnv != "" {
			dir = get(f.dirEnv)
		}
		if dir == "" {
			if agentHome == "" {
				continue
			}
			dir = filepath.Join(agentHome, filepath.FromSlash(f.homeRel))
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.name))); err == nil {
			return true
		}
	}
	return false
}

// loginFix is what to do for a built-in that is not logged in.
func loginFix(name string) string { return loginChecks[name].login }

// stateLine renders the state for a person: "ready", "not installed (npx
// would download about 370 MB on first start)", "not logged in".
func (s Status) stateLine() string {
	switch s.State {
	case StateNotInstalled:
		if s.DownloadMB > 0 {
			return "not installed (npx would download about " + strconv.Itoa(s.DownloadMB) + " MB on first start)"
		}
		return "not installed (npx would download it on first start)"
	case StateNotLoggedIn:
		return "not logged in"
	case "":
		if s.Available {
			return "ready"
		}
		return "unavailable"
	}
	return string(s.State)
}

// StateLine is the state said for a person (`ochatd agents`, doctor).
func (s Status) StateLine() string { return s.stateLine() }
