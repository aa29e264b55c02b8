package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/tailscale/hujson"
)

// Spec says how to start one agent (Zed agent_servers shape + our
// bookkeeping). Env values are redacted when a Spec is marshalled or logged.
type Spec struct {
	Name    string            `json:"name"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Source  string            `json:"source"` // "builtin" | "user" | "workspace"
	// FSCapabilities, when false, makes Start advertise no client fs
	// methods (settings key "fsCapabilities"). nil: advertised, except for
	// the built-in gemini, whose new-file writes break when fs is advertised
	// (gemini-cli 0.61.0).
	FSCapabilities *bool `json:"fsCapabilities,omitempty"`
}

func (s Spec) fsEnabled() bool {
	if s.FSCapabilities != nil {
		return *s.FSCapabilities
	}
	return true
}

// redactedEnv returns env with every value replaced.
func redactedEnv(env map[string]string) map[string]string {
	if env == nil {
		return nil
	}
	out := make(map[string]string, len(env))
	for k := range env {
		out[k] = "<redacted>"
	}
	return out
}

type specJSON Spec

// MarshalJSON encodes the spec with env values redacted.
func (s Spec) MarshalJSON() ([]byte, error) {
	r := specJSON(s)
	r.Env = redactedEnv(s.Env)
	return json.Marshal(r)
}

// String renders the command line, env values redacted.
func (s Spec) String() string {
	var b strings.Builder
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "=<redacted> ")
	}
	b.WriteString(s.Command)
	for _, a := range s.Args {
		b.WriteString(" " + a)
	}
	return fmt.Sprintf("%s: %s (%s)", s.Name, b.String(), s.Source)
}

// LogValue makes slog print the redacted form.
func (s Spec) LogValue() slog.Value { return slog.StringValue(s.String()) }

// GoString makes %#v print the redacted form too.
func (s Spec) GoString() string { return "agents.Spec{" + s.String() + "}" }

// minRedactLen is the shortest env value Redact replaces in free text:
// shorter values ("1", "true") are not secrets and would mangle the text.
const minRedactLen = 6

// Redact returns text with every env value of the spec at least 6 bytes
// long replaced by "<redacted>" — for text the agent produced (its stderr
// tail, log lines), which may echo a credential it was given ("invalid API
// key sk-…"). Longer values are replaced first, so a value containing
// another is fully hidden.
func (s Spec) Redact(text string) string {
	if len(s.Env) == 0 {
		return text
	}
	vals := make([]string, 0, len(s.Env))
	for _, v := range s.Env {
		if len(v) >= minRedactLen {
			vals = append(vals, v)
		}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	for _, v := range vals {
		text = strings.ReplaceAll(text, v, "<redacted>")
	}
	return text
}

// Status is a Spec plus whether it can start (protocol: ochat/agents/list
// entries). Env values are redacted in JSON.
type Status struct {
	Spec
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`  // why not available
	Install   string `json:"install,omitempty"` // what to run to fix it
	// Note says how an available agent will be started when that is not
	// obvious (through npx, downloading a pinned version on first use).
	Note string `json:"note,omitempty"`
	// Untrusted marks an agent held back because the workspace settings
	// file that defines or overrides it is not trusted (or changed since);
	// Reason says so and Install says how to trust it.
	Untrusted bool `json:"untrusted,omitempty"`
	// State is ready, notInstalled, notLoggedIn, unavailable or untrusted
	// (see State); only "ready" means it can start and run a turn now.
	State Readiness `json:"state"`
	// DownloadMB is about how much npx downloads on first start
	// (notInstalled).
	DownloadMB int `json:"downloadMB,omitempty"`
	// Login is what to do to log in (notLoggedIn).
	Login string `json:"login,omitempty"`
}

// MarshalJSON encodes the status flat, env values redacted.
func (s Status) MarshalJSON() ([]byte, error) {
	type flat struct {
		specJSON
		Available  bool      `json:"available"`
		Reason     string    `json:"reason,omitempty"`
		Install    string    `json:"install,omitempty"`
		Note       string    `json:"note,omitempty"`
		Untrusted  bool      `json:"untrusted,omitempty"`
		State      Readiness `json:"state"`
		DownloadMB int       `json:"downloadMB,omitempty"`
		Login      string    `json:"login,omitempty"`
	}
	f := flat{specJSON: specJSON(s.Spec), Available: s.Available, Reason: s.Reason, Install: s.Install, Note: s.Note, Untrusted: s.Untrusted,
		State: s.State, DownloadMB: s.DownloadMB, Login: s.Login}
	f.Env = redactedEnv(s.Env)
	return json.Marshal(f)
}

// String renders the status on one line, env values redacted.
func (s Status) String() string {
	out := s.Spec.String()
	if s.Available {
		out += " available"
		if s.State != "" && s.State != StateReady {
			out += ", " + s.stateLine()
		}
	} else {
		out += " unavailable: " + s.Reason
		if s.Install != "" {
			out += "; install: " + s.Install
		}
	}
	if s.Note != "" {
		out += " (" + s.Note + ")"
	}
	return out
}

// builtin describes one built-in agent.
type builtin struct {
	name    string
	command string
	args    []string
	npmPkg  string   // pinned package for the npx fallback
	npxPkgs []string // more packages npx must fetch beside it (pi-acp runs pi)
	npxArgs []string
	needs   string // a program the npx fallback needs on PATH ("bun"), "" for none
	install string
	fs      *bool
	login   string // what the agent needs besides the command ("a Claude login")
	// downloadMB is about what the npx fallback downloads (installed
	// size of the pinned package, measured 2026-12-01).
	downloadMB int
}

var falseVal = false

// builtins are the agents known without settings, in List order. Versions are
// the ones tested offline (internal/e2e TestSeedAgents, docs/real-agents.md).
var builtins = []builtin{
	{name: "claude", command: "claude-agent-acp", npmPkg: "@agentclientprotocol/claude-agent-acp@0.101.0",
		install: "npm i -g @agentclientprotocol/claude-agent-acp", login: "a Claude login", downloadMB: 370},
	{name: "codex", command: "codex-acp", npmPkg: "@agentclientprotocol/codex-acp@2.6.0",
		install: "npm i -g @agentclientprotocol/codex-acp", login: "a Codex login", downloadMB: 450},
	{name: "gemini", command: "gemini", args: []string{"--acp"}, npmPkg: "@google/gemini-cli@0.61.0", npxArgs: []string{"--acp"},
		install: "npm i -g @google/gemini-cli", fs: &falseVal, login: "a Gemini login", downloadMB: 100},
	{name: "opencode", command: "opencode", args: []string{"acp"}, npmPkg: "opencode-ai@1.18.33", npxArgs: []string{"acp"},
		install: "npm i -g opencode-ai", login: "a provider configured in opencode", downloadMB: 350},
	{name: "pi", command: "pi-acp", npmPkg: "pi-acp@0.0.34", npxPkgs: []string{"@earendil-works/pi-coding-agent@1.6.0"},
		install: "npm i -g pi-acp @earendil-works/pi-coding-agent", login: "a provider login in pi", downloadMB: 120},
	{name: "omp", command: "omp", args: []string{"acp"}, npmPkg: "@oh-my-pi/pi-coding-agent@18.2.3", npxArgs: []string{"acp"}, needs: "bun",
		install: "bun install -g @oh-my-pi/pi-coding-agent (needs Bun 1.3.14 or later: npm i -g bun)", login: "a provider login in omp", downloadMB: 250},
}

// Registry is the merged set of agents a workspace can use.
type Registry struct {
	statuses []Status // List order
	files    []string // settings files applied
	lookPath func(string) (string, error)
	getenv   func(string) string
	home     string

	wsSettings string     // the workspace settings file, "" if none
	wsState    TrustState // its trust
	wsErr      error      // why its trust could not be decided

	problems []Problem // settings files or entries left out
}

// Problem is a settings file, or one entry of it, that could not be used:
// its agents are left out and everything else (built-ins, the other file)
// keeps working. Protocol: ochat/agents/list "problems".
type Problem struct {
	Source string `json:"source"` // "user" | "workspace"
	Path   string `json:"path"`   // the settings file
	// Agent names the agent_servers entry at fault; "" when the whole file
	// is unusable (unreadable, or not JSON with comments).
	Agent string `json:"agent,omitempty"`
	// Message says what is wrong, with "line L, column C" for malformed
	// JSON.
	Message string `json:"message"`
	// Untrusted marks a problem in a workspace file that is not trusted
	// either; it never ran.
	Untrusted bool `json:"untrusted,omitempty"`
}

// String renders the problem on one line: "PATH: [agent_servers.NAME: ]MESSAGE".
func (p Problem) String() string {
	if p.Agent != "" {
		return fmt.Sprintf("%s: agent_servers.%s: %s", p.Path, p.Agent, p.Message)
	}
	return p.Path + ": " + p.Message
}

// RegistryOptions configure NewRegistry.
type RegistryOptions struct {
	// UserConfigDir holds ochat/settings.json (normally os.UserConfigDir(),
	// $XDG_CONFIG_HOME); "" skips the user layer. User settings need no
	// trust.
	UserConfigDir string
	// Workspace holds .ochat/settings.json; "" skips the workspace layer.
	Workspace string
	// Trust decides whether the workspace layer applies. nil trusts no
	// workspace: its entries are listed unavailable.
	Trust *TrustStore
	// LookPath finds commands; nil means exec.LookPath.
	LookPath func(string) (string, error)
	// Getenv and Home are where built-ins' logins are looked for (API-key
	// variables, login files under HOME); nil and "" mean os.Getenv and
	// os.UserHomeDir().
	Getenv func(string) string
	Home   string
}

// settingsEntry is one agent_servers entry of a settings.json (Zed's
// shape, plus fsCapabilities).
type settingsEntry struct {
	Command        *string           `json:"command"`
	Args           []string          `json:"args"`
	Env            map[string]string `json:"env"`
	FSCapabilities *bool             `json:"fsCapabilities"`
}

// LoadRegistry is NewRegistry for tools that have already decided to trust
// the workspace: its settings apply without consulting a TrustStore. The
// daemon and the CLI use NewRegistry.
//
// It merges built-ins (claude, codex, gemini, opencode, pi, omp),
// $userConfigDir/ochat/settings.json and <workspace>/.ochat/settings.json
// ({"agent_servers":{"NAME":{"command","args","env"}}}), workspace winning.
// userConfigDir is normally os.UserConfigDir() ($XDG_CONFIG_HOME). Settings
// files are JSON with comments and trailing commas, as Zed writes them. A
// broken settings file (or entry) never fails the registry: it is left out
// and listed by Problems, with line and column. A missing file is fine;
// either argument may be "" to skip that layer. The error is always nil
// today; it stays for callers.
//
// An entry for a built-in name without "command" keeps the built-in command
// and adds its env (and fsCapabilities); with "command" it replaces it.
// Whether each agent can start is decided now, from $PATH.
func LoadRegistry(userConfigDir, workspace string) (*Registry, error) {
	return buildRegistry(RegistryOptions{UserConfigDir: userConfigDir, Workspace: workspace}, true)
}

// NewRegistry merges the built-ins, the user settings and — only when
// o.Trust records the workspace settings file with its current sha256 — the
// workspace settings, as LoadRegistry describes. Until then every entry of
// the workspace file is listed with Available false, Untrusted true and a
// Reason naming the file and `ochatd trust`; an entry overriding a built-in
// or user agent holds that agent back too (its command and env are left as
// the lower layers say, and it cannot start). Entries of an untrusted file
// contribute no env. A broken settings file, trusted or not, is a Problem,
// never an error.
func NewRegistry(o RegistryOptions) (*Registry, error) {
	return buildRegistry(o, false)
}

// loadRegistry is LoadRegistry with a PATH lookup of the caller's choosing.
func loadRegistry(userConfigDir, workspace string, lookPath func(string) (string, error)) (*Registry, error) {
	// Hermetic: no login is found from the test's own environment.
	return buildRegistry(RegistryOptions{UserConfigDir: userConfigDir, Workspace: workspace, LookPath: lookPath,
		Getenv: func(string) string { return "" }}, true)
}

func buildRegistry(o RegistryOptions, trustAll bool) (*Registry, error) {
	userConfigDir, workspace := o.UserConfigDir, o.Workspace
	lookPath := o.LookPath
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	r := &Registry{lookPath: lookPath, getenv: o.Getenv, home: o.Home}
	if r.getenv == nil {
		r.getenv = os.Getenv
	}
	if r.home == "" && o.Getenv == nil {
		r.home, _ = os.UserHomeDir()
	} else if r.home == "" {
		r.home = r.getenv("HOME")
	}
	held := map[string]string{} // names held back by an untrusted workspace file → what trusting it would change ("" for a new agent)
	specs := map[string]*Spec{}
	var order []string
	for _, b := range builtins {
		s := &Spec{Name: b.name, Command: b.command, Args: slices.Clone(b.args), Source: "builtin", FSCapabilities: b.fs}
		specs[b.name] = s
		order = append(order, b.name)
	}
	var layers []struct{ path, source string }
	if userConfigDir != "" {
		layers = append(layers, struct{ path, source string }{filepath.Join(userConfigDir, "ochat", "settings.json"), "user"})
	}
	if workspace != "" {
		layers = append(layers, struct{ path, source string }{WorkspaceSettingsPath(workspace), "workspace"})
	}
	for _, l := range layers {
		raw, err := readSettingsFile(l.path)
		if err != nil {
			r.problems = append(r.problems, Problem{Source: l.source, Path: l.path, Message: err.Error()})
			continue
		}
		if raw == nil {
			continue
		}
		trusted := true
		if l.source == "workspace" {
			r.wsSettings, r.wsState = l.path, TrustOK
			if !trustAll {
				// Trust needs only the raw bytes' hash: the file is not
				// parsed for use before it is trusted.
				if o.Trust == nil {
					r.wsState = TrustNone
				} else {
					r.wsState, r.wsErr = o.Trust.Check(workspace, raw)
				}
				trusted = r.wsState == TrustOK
			}
		}
		entries, bad, err := parseSettings(raw)
		if err != nil {
			r.problems = append(r.problems, Problem{Source: l.source, Path: l.path, Message: err.Error(), Untrusted: !trusted})
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(bad)) {
			r.problems = append(r.problems, Problem{Source: l.source, Path: l.path, Agent: name, Message: bad[name].Error(), Untrusted: !trusted})
		}
		if trusted {
			r.files = append(r.files, l.path)
		}
		names := make([]string, 0, len(entries))
		for n := range entries {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			e := entries[name]
			s, ok := specs[name]
			if msg := entryProblem(name, e, ok); msg != "" {
				r.problems = append(r.problems, Problem{Source: l.source, Path: l.path, Agent: name, Message: msg, Untrusted: !trusted})
				continue
			}
			if !trusted {
				// Listed so the user sees it, never started, no env.
				held[name] = ""
				if ok {
					held[name] = redefinition(*s, e)
				} else {
					specs[name] = &Spec{Name: name, Command: *e.Command, Args: slices.Clone(e.Args), Source: l.source}
					order = append(order, name)
				}
				continue
			}
			if !ok {
				s = &Spec{Name: name}
				specs[name] = s
				order = append(order, name)
			}
			if e.Command != nil {
				s.Command = *e.Command
				s.Args = slices.Clone(e.Args)
			} else if e.Args != nil {
				s.Args = slices.Clone(e.Args)
			}
			if len(e.Env) > 0 {
				if s.Env == nil {
					s.Env = map[string]string{}
				}
				for k, v := range e.Env {
					s.Env[k] = v
				}
			}
			if e.FSCapabilities != nil {
				v := *e.FSCapabilities
				s.FSCapabilities = &v
			}
			s.Source = l.source
		}
	}
	for _, name := range order {
		if change, ok := held[name]; ok {
			reason := untrustedReason(r.wsSettings, r.wsState, r.wsErr)
			if change != "" {
				reason += "; trusting them would " + change
			}
			r.statuses = append(r.statuses, Status{
				Spec:      *specs[name],
				Reason:    reason,
				Install:   trustInstall(workspace),
				Untrusted: true,
				State:     StateUntrusted,
			})
			continue
		}
		r.statuses = append(r.statuses, r.status(*specs[name]))
	}
	return r, nil
}

// Problems lists the settings files and entries that were left out, in
// the order read (user, then workspace); nil when there are none.
func (r *Registry) Problems() []Problem { return slices.Clone(r.problems) }

// WorkspaceTrust reports the workspace settings file ("" when the workspace
// has none) and whether it is trusted; err says why trust could not be
// decided (an unreadable or unsafe trust file).
func (r *Registry) WorkspaceTrust() (settings string, state TrustState, err error) {
	return r.wsSettings, r.wsState, r.wsErr
}

// readSettingsFile reads one settings file's raw content (what trust
// hashes); nil, nil when the file does not exist.
func readSettingsFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return b, nil
}

// settingsShape is appended to parse errors.
const settingsShape = ` (expected {"agent_servers": {"NAME": {"command": "...", "args": [], "env": {}}}})`

// parseSettings decodes a settings file as Zed writes it: JSON with // and
// /* */ comments and trailing commas (HuJSON). Errors say "line L, column
// C". err is for a file that is unusable as a whole (not JSON with comments,
// agent_servers not an object); an entry that does not decode (say "args":
// "x") is left out of entries and reported in bad under its name, so one
// typo does not take the file's other agents down. b is not modified (the
// caller hashes it for trust).
func parseSettings(b []byte) (entries map[string]settingsEntry, bad map[string]error, err error) {
	std, err := hujson.Standardize(slices.Clone(b)) // comments and trailing commas become spaces: offsets kept
	if err != nil && !bytes.HasSuffix(b, []byte("\n")) {
		// hujson wants a newline after a final line comment.
		if s, err2 := hujson.Standardize(append(slices.Clone(b), '\n')); err2 == nil {
			std, err = s, nil
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s%s", strings.TrimPrefix(err.Error(), "hujson: "), settingsShape)
	}
	var f struct {
		AgentServers map[string]json.RawMessage `json:"agent_servers"`
	}
	if err := json.Unmarshal(std, &f); err != nil {
		return nil, nil, positioned(std, 0, jsonPathError("", err))
	}
	entries = make(map[string]settingsEntry, len(f.AgentServers))
	for name, raw := range f.AgentServers {
		var e settingsEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			if bad == nil {
				bad = make(map[string]error)
			}
			bad[name] = positioned(std, max(0, bytes.Index(std, raw)), jsonPathError("agent_servers."+name, err))
			continue
		}
		entries[name] = e
	}
	return entries, bad, nil
}

// jsonPathError rewrites a decoding error that names Go types ("Go struct
// field settingsEntry.command of type string") with the JSON path under
// prefix ("agent_servers.NAME.command: a number where a string belongs").
func jsonPathError(prefix string, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	path := te.Field
	if prefix != "" && path != "" {
		path = prefix + "." + path
	} else if path == "" {
		path = prefix
	}
	want := "a " + te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.Map, reflect.Struct:
		want = "an object"
	case reflect.Bool:
		want = "true or false"
	case reflect.Pointer:
		want = "a " + te.Type.Elem().Kind().String()
	}
	msg := fmt.Sprintf("%s where %s belongs", jsonValue(te.Value), want)
	if path != "" {
		msg = path + ": " + msg
	}
	return &pathError{msg: msg, err: err}
}

// pathError is a decoding error said with its JSON path; it wraps the
// original (whose offset positioned reads).
type pathError struct {
	msg string
	err error
}

func (e *pathError) Error() string { return e.msg }
func (e *pathError) Unwrap() error { return e.err }

// jsonValue names the kind of JSON value UnmarshalTypeError.Value holds.
func jsonValue(v string) string {
	switch {
	case v == "array" || v == "object":
		return "an " + v
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number"):
		return "a number"
	}
	return v
}

// positioned adds "line L, column C" of std to a decoding error whose offset
// is relative to base.
func positioned(std []byte, base int, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if n := base + int(off); off >= 0 && n <= len(std) {
		line, col := lineColumn(std, n)
		return fmt.Errorf("line %d, column %d: %w%s", line, col, err, settingsShape)
	}
	return fmt.Errorf("%w%s", err, settingsShape)
}

// lineColumn converts byte offset n of b to a 1-based line and column
// (column in bytes).
func lineColumn(b []byte, n int) (line, col int) {
	line = 1 + bytes.Count(b[:n], []byte("\n"))
	col = 1 + n - (bytes.LastIndexByte(b[:n], '\n') + 1)
	return line, col
}

// entryProblem says what is wrong with one agent_servers entry, "" if
// nothing; known says whether name is already defined by a lower layer.
func entryProblem(name string, e settingsEntry, known bool) string {
	switch {
	case name == "":
		return "an entry has an empty name"
	case e.Command != nil && *e.Command == "" && known:
		return `empty "command" (leave "command" out to keep the built-in one)`
	case !known && (e.Command == nil || *e.Command == ""):
		return `needs a "command"`
	}
	return ""
}

// SettingsAgents lists the agent_servers entries of one settings file's
// content, in name order, for review before trusting it (`ochatd trust`).
// Command is "" for an entry that keeps a built-in's command; Source is
// "workspace". Print them with String, which redacts env values. Malformed
// content, or an entry the registry would leave out (no "command" for a new
// name, an empty one), is an error naming the entry.
func SettingsAgents(content []byte) ([]Spec, error) {
	entries, bad, err := parseSettings(content)
	if err != nil {
		return nil, err
	}
	for _, n := range slices.Sorted(maps.Keys(bad)) {
		return nil, fmt.Errorf("agent_servers.%s: %w", n, bad[n])
	}
	for n, e := range entries {
		known := slices.ContainsFunc(builtins, func(b builtin) bool { return b.name == n })
		if msg := entryProblem(n, e, known); msg != "" {
			return nil, fmt.Errorf("agent_servers.%s: %s", n, msg)
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Spec, 0, len(names))
	for _, n := range names {
		e := entries[n]
		s := Spec{Name: n, Args: slices.Clone(e.Args), Env: maps.Clone(e.Env), Source: "workspace", FSCapabilities: e.FSCapabilities}
		if e.Command != nil {
			s.Command = *e.Command
		}
		out = append(out, s)
	}
	return out, nil
}

// status decides whether spec can start, and its State.
func (r *Registry) status(spec Spec) Status {
	st := r.startable(spec)
	switch {
	case !st.Available:
		st.State = StateUnavailable
	case st.Source == "builtin" || builtinNamed(spec.Name, spec.Command) != nil:
		st.State = StateReady
		if st.Command == "npx" {
			st.State = StateNotInstalled
		}
		if !loggedIn(spec.Name, spec.Env, r.getenv, r.home) {
			// Not logged in outranks not installed: installing alone
			// would not make it work.
			st.State, st.Login = StateNotLoggedIn, loginFix(spec.Name)
		}
	default:
		st.State = StateReady
	}
	return st
}

// builtinNamed is the built-in with this name still running its own
// command, nil if none.
func builtinNamed(name, command string) *builtin {
	for i := range builtins {
		if builtins[i].name == name && builtins[i].command == command {
			return &builtins[i]
		}
	}
	return nil
}

// startable decides whether spec can start: on PATH, or a built-in through
// npx.
func (r *Registry) startable(spec Spec) Status {
	st := Status{Spec: spec}
	b := builtinNamed(spec.Name, spec.Command)
	if _, err := r.lookPath(spec.Command); err == nil {
		st.Available = true
		return st
	}
	if b != nil {
		st.Install = b.install
		_, errNpx := r.lookPath("npx")
		_, errNeeds := r.lookPath(b.needs)
		switch {
		case errNpx != nil:
			st.Reason = fmt.Sprintf("%s is not on PATH and npx (Node.js) is not installed", b.command)
		case b.needs != "" && errNeeds != nil:
			st.Reason = fmt.Sprintf("%s is not on PATH, and its npx fallback needs %s, which is not installed either", b.command, b.needs)
		default:
			st.Command = "npx"
			st.Args = []string{"-y"}
			if len(b.npxPkgs) > 0 {
				st.Args = append(st.Args, "-p", b.npmPkg)
				for _, p := range b.npxPkgs {
					st.Args = append(st.Args, "-p", p)
				}
				st.Args = append(st.Args, b.command)
			} else {
				st.Args = append(st.Args, b.npmPkg)
			}
			st.Args = append(st.Args, b.npxArgs...)
			st.Available = true
			st.DownloadMB = b.downloadMB
			st.Note = fmt.Sprintf("via npx: first start downloads %s", b.npmPkg)
			if b.login != "" {
				st.Note += "; needs " + b.login
			}
		}
		return st
	}
	field := "agent_servers." + spec.Name
	// "command": "/path/agent --acp": the program exists, the arguments
	// belong in "args".
	if prog, rest, ok := strings.Cut(strings.TrimSpace(spec.Command), " "); ok && prog != "" {
		if _, err := r.lookPath(prog); err == nil {
			args, _ := json.Marshal(append(strings.Fields(rest), spec.Args...))
			st.Reason = fmt.Sprintf("command %q is not a program: %s.command names the program only", spec.Command, field)
			st.Install = fmt.Sprintf(`put arguments in "args": set %s.command to %q and %s.args to %s in %s`, field, prog, field, args, sourceFile(spec.Source))
			return st
		}
	}
	if strings.ContainsRune(spec.Command, filepath.Separator) {
		st.Reason = fmt.Sprintf("command %s does not exist or is not executable", spec.Command)
		st.Install = "fix " + field + ".command in " + sourceFile(spec.Source) + " (no executable at that path)"
	} else {
		st.Reason = fmt.Sprintf("command %s is not on PATH", spec.Command)
		st.Install = "install " + spec.Command + " or fix " + field + ".command in " + sourceFile(spec.Source)
	}
	return st
}

func sourceFile(source string) string {
	switch source {
	case "workspace":
		return ".ochat/settings.json"
	case "user":
		return "$XDG_CONFIG_HOME/ochat/settings.json"
	}
	return "your settings"
}

// List returns every agent: the built-ins in a fixed order (claude, codex,
// gemini, opencode, pi, omp), then configured ones in name order.
func (r *Registry) List() []Status {
	return slices.Clone(r.statuses)
}

// Lookup returns the spec to start the named agent (with the npx fallback
// applied). Unknown or unavailable agents are an error saying how to fix it.
func (r *Registry) Lookup(name string) (Spec, error) {
	var names []string
	for _, st := range r.statuses {
		if st.Name == name {
			if !st.Available {
				msg := fmt.Sprintf("agent %s cannot start: %s", name, st.Reason)
				if st.Install != "" {
					msg += "; to fix: " + st.Install
				}
				return Spec{}, errors.New(msg)
			}
			return st.Spec, nil
		}
		names = append(names, st.Name)
	}
	msg := fmt.Sprintf("unknown agent %q (known: %s); add it under \"agent_servers\" in .ochat/settings.json or $XDG_CONFIG_HOME/ochat/settings.json",
		name, strings.Join(names, ", "))
	for _, p := range r.problems {
		if p.Agent == "" || p.Agent == name {
			msg += "; settings problem: " + p.String()
		}
	}
	return Spec{}, errors.New(msg)
}

// Default returns the first agent in List order that can run a turn now
// (ready); failing that the first that npx would fetch, then the first
// that starts at all; "" if none can start.
func (r *Registry) Default() string {
	for _, want := range []Readiness{StateReady, StateNotInstalled, ""} {
		for _, st := range r.statuses {
			if st.Available && (want == "" || st.State == want) {
				return st.Name
			}
		}
	}
	return ""
}

// Files returns the settings files that were read (existing ones only).
func (r *Registry) Files() []string { return slices.Clone(r.files) }

// LogValue makes slog print the redacted form.
func (s Status) LogValue() slog.Value { return slog.StringValue(s.String()) }

// GoString makes %#v print the redacted form too.
func (s Status) GoString() string { return "agents.Status{" + s.String() + "}" }
