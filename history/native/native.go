// Package native reads the session stores that coding-agent CLIs keep on
// disk (Claude Code, Codex, Gemini CLI, OpenCode, pi) and maps each native
// session into ochat's canonical transcript: a Session (metadata for a
// listing) and a Transcript (the Session plus its messages).
//
// It owns: locating each store for a workspace, tolerant streaming parsers
// for every format (bad lines are skipped and counted, never fatal), the
// per-store mapping rules (turn merging, tool call ↔ result pairing, file
// changes, plans, subagents, compaction markers, titles), a listing across
// all stores with an optional cache, and an fsnotify watcher that tails
// sessions as they grow.
//
// It never writes to a native store (files and databases are opened
// read-only), never reads process environment variables (callers pass an
// Env) and never talks to agents or editors. The formats and their traps are
// described in docs/native-stores.md; each reader names the store version it
// was written against.
package native

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/ochat-dev/ochat/transcript"
)

// Agent names as used in Session.Agent (and the agents registry).
const (
	AgentClaude   = "claude"
	AgentCodex    = "codex"
	AgentGemini   = "gemini"
	AgentOpenCode = "opencode"
	AgentPi       = "pi"
	AgentOmp      = "omp" // Oh My Pi: pi's format in ~/.omp (omp.go)
)

// Env carries the environment the readers use to find stores. No reader
// calls os.Getenv: the daemon fills Env once (see EnvFromOS) and tests pass
// private directories.
type Env struct {
	Home            string // $HOME
	ClaudeConfigDir string // $CLAUDE_CONFIG_DIR; may list several dirs separated by commas
	CodexHome       string // $CODEX_HOME
	GeminiCLIHome   string // $GEMINI_CLI_HOME (the dir that holds .gemini)
	XDGDataHome     string // $XDG_DATA_HOME
	OpenCodeDataDir string // $OPENCODE_DATA_DIR
	PiSessionDir    string // $PI_CODING_AGENT_SESSION_DIR (sessions dir verbatim)
	PiAgentDir      string // $PI_CODING_AGENT_DIR (sessions are in its sessions/)
}

// EnvFromLookup builds an Env from a lookup function such as os.LookupEnv
// or a test map.
func EnvFromLookup(lookup func(string) (string, bool)) Env {
	get := func(k string) string { v, _ := lookup(k); return v }
	return Env{
		Home:            get("HOME"),
		ClaudeConfigDir: get("CLAUDE_CONFIG_DIR"),
		CodexHome:       get("CODEX_HOME"),
		GeminiCLIHome:   get("GEMINI_CLI_HOME"),
		XDGDataHome:     get("XDG_DATA_HOME"),
		OpenCodeDataDir: get("OPENCODE_DATA_DIR"),
		PiSessionDir:    get("PI_CODING_AGENT_SESSION_DIR"),
		PiAgentDir:      get("PI_CODING_AGENT_DIR"),
	}
}

// Diagnostics reports what a reader could not use in one session. Nothing in
// it is fatal: the rest of the session is still read.
type Diagnostics struct {
	SkippedLines int      `json:"skippedLines"`       // lines that were not valid records (truncated, NUL, glued, over-long, unknown shape)
	Problems     []string `json:"problems,omitempty"` // other notes, e.g. "line 12: tool result for unknown call toolu_x"
}

func (d *Diagnostics) problemf(format string, args ...any) {
	const maxProblems = 50
	msg := fmt.Sprintf(format, args...)
	for _, p := range d.Problems {
		if p == msg {
			return // a rebuild while tailing reports the same problem again
		}
	}
	if len(d.Problems) < maxProblems {
		d.Problems = append(d.Problems, msg)
	} else if len(d.Problems) == maxProblems {
		d.Problems = append(d.Problems, "… further problems omitted")
	}
}

// Session is the metadata of one native session, as shown in a listing.
type Session struct {
	ID    string `json:"id"`    // native session id (Claude/Gemini/pi uuid, Codex thread uuid, OpenCode ses_…)
	Agent string `json:"agent"` // AgentClaude, AgentCodex, …
	Title string `json:"title"` // by the store's own priority rules (see each reader)
	// ParentID is the native id of the session that spawned this one as a
	// subagent (Codex subagent threads), "" for a top-level session.
	ParentID string `json:"parentId,omitempty"`
	// ForkedFrom is the native id of the session this one continues in a
	// new file (Claude Code --fork-session, or a --resume that forked):
	// the id its copied history still carries.
	ForkedFrom   string `json:"forkedFrom,omitempty"`
	Cwd          string `json:"cwd,omitempty"` // recorded working directory
	GitBranch    string `json:"gitBranch,omitempty"`
	Model        string `json:"model,omitempty"` // last model seen
	CreatedAt    int64  `json:"createdAt"`       // Unix ms
	UpdatedAt    int64  `json:"updatedAt"`       // Unix ms
	MessageCount int    `json:"messageCount"`    // visible user messages + assistant turns
	ToolCount    int    `json:"toolCount"`       // tool calls
	Path         string `json:"path"`            // session file (OpenCode: database path + "#" + id)
	Size         int64  `json:"size"`            // bytes of the session file
	// Resume is the terminal command that continues the session, e.g.
	// ["claude","--resume","<id>"]; run it in Cwd.
	Resume      []string    `json:"resume,omitempty"`
	Diagnostics Diagnostics `json:"diagnostics"`
}

// fillTimes gives a session without timestamps the file's mtime (Unix ms)
// as UpdatedAt and UpdatedAt as CreatedAt; listing and Read both do it,
// so they agree.
func (s *Session) fillTimes(mtimeMs int64) {
	if s.UpdatedAt == 0 {
		s.UpdatedAt = mtimeMs
	}
	if s.CreatedAt == 0 {
		s.CreatedAt = s.UpdatedAt
	}
}

// Marker is something the transcript shows between messages that is neither
// a user message nor model output: a compaction boundary, an interruption,
// a CLI-generated error or notice.
type Marker struct {
	AfterID   string `json:"afterId"` // id of the message it follows ("" = before the first)
	Kind      string `json:"kind"`    // "compaction" | "interrupted" | "error" | "notice" | "rollback"
	Text      string `json:"text,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"` // Unix ms
}

// Subagent is the transcript of a subagent (Claude Task/Agent tool, OpenCode
// task, Gemini invoke_agent) attached to the tool call that started it.
type Subagent struct {
	ToolCallID  string               `json:"toolCallId"`
	AgentID     string               `json:"agentId,omitempty"`
	Description string               `json:"description,omitempty"`
	Path        string               `json:"path,omitempty"`
	Messages    []transcript.Message `json:"messages"`
}

// Transcript is one native session mapped into canonical messages.
type Transcript struct {
	Session
	Messages  []transcript.Message `json:"messages"`
	Markers   []Marker             `json:"markers,omitempty"`
	Subagents []Subagent           `json:"subagents,omitempty"`
}

// Diagnostic is a store-level problem met while listing: a missing or
// unreadable store directory, a session file that is a directory, a symlink
// loop, a database that is locked. It never stops the listing.
type Diagnostic struct {
	Level   string `json:"level"` // "info" (e.g. the store does not exist) | "warning"
	Agent   string `json:"agent,omitempty"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// String renders "agent: path: message" for logs and `ochatd doctor`.
func (d Diagnostic) String() string {
	if d.Path != "" {
		return d.Agent + ": " + d.Path + ": " + d.Message
	}
	return d.Agent + ": " + d.Message
}

// ResumeCommand returns the terminal command that continues a session of
// agent (native CLI flags as of Claude Code 2.1, Codex 0.137, Gemini CLI
// 0.61, OpenCode 1.18, pi 0.x). It is nil for an unknown agent.
func ResumeCommand(agent, id, path string) []string {
	switch agent {
	case AgentClaude:
		return []string{"claude", "--resume", id}
	case AgentCodex:
		return []string{"codex", "resume", id}
	case AgentGemini:
		return []string{"gemini", "--resume", id}
	case AgentOpenCode:
		return []string{"opencode", "--session", id}
	case AgentPi:
		return []string{"pi", "--session", path}
	case AgentOmp:
		return []string{"omp", "--session", path}
	}
	return nil
}

// Cache stores listing metadata between runs. Keys come from cacheKey (agent,
// workspace, path, size, mtime), so an unchanged file is never parsed again. The history
// store's index entries satisfy it; any map does for tests.
type Cache interface {
	Get(key string) ([]byte, bool)
	Put(key string, v []byte)
}

// MetaCache is a Cache that also holds entries decoded: a listing served
// by it decodes no JSON (a 2,000-session warm listing is then a stat per
// file). Put is still called with the encoded entry, for persistence.
type MetaCache interface {
	Cache
	// GetMeta returns the decoded entry of key: the session and whether
	// the file is listed at all (a file with no conversation is not).
	GetMeta(key string) (s Session, listed, found bool)
	PutMeta(key string, s Session, listed bool)
}

func cacheKey(agent, ws, path string, size, mtimeNs int64) string {
	return fmt.Sprintf("native/v%d/%s/%s/%s/%d/%d", cacheVersion, agent, ws, path, size, mtimeNs)
}

// cacheVersion changes whenever the meaning of cached Session JSON changes.
const cacheVersion = 4

func encodeSession(s Session) []byte {
	b, _ := json.Marshal(s) // Session has no unmarshalable fields
	return b
}

func cleanAbs(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return filepath.Clean(p)
}

// CacheFuncs adapts a pair of functions to Cache, e.g. the history store's
// index: CacheFuncs{GetFunc: st.IndexEntry, PutFunc: st.PutIndexEntry}.
// A Get error counts as a miss; a Put error is ignored (the cache is only
// an optimisation).
type CacheFuncs struct {
	GetFunc func(key string) ([]byte, error)
	PutFunc func(key string, v []byte) error
}

// Get implements Cache.
func (c CacheFuncs) Get(key string) ([]byte, bool) {
	if c.GetFunc == nil {
		return nil, false
	}
	v, err := c.GetFunc(key)
	return v, err == nil && v != nil
}

// Put implements Cache.
func (c CacheFuncs) Put(key string, v []byte) {
	if c.PutFunc != nil {
		_ = c.PutFunc(key, v)
	}
}
