package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakePath resolves only the names given.
func fakePath(names ...string) func(string) (string, error) {
	return func(n string) (string, error) {
		for _, x := range names {
			if x == n {
				return "/usr/bin/" + n, nil
			}
		}
		return "", exec.ErrNotFound
	}
}

func writeSettings(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func statusOf(t *testing.T, r *Registry, name string) Status {
	t.Helper()
	for _, s := range r.List() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no agent %s", name)
	return Status{}
}

func TestRegistryBuiltins(t *testing.T) {
	tests := []struct {
		name     string
		path     []string
		agent    string
		avail    bool
		command  string
		args     string
		note     bool
		fsCaps   string
		defaultA string
	}{
		{"on PATH", []string{"claude-agent-acp"}, "claude", true, "claude-agent-acp", "", false, "<nil>", "claude"},
		{"npx fallback", []string{"npx"}, "codex", true, "npx", "-y @agentclientprotocol/codex-acp@2.6.0", true, "<nil>", "claude"},
		{"gemini flags", []string{"gemini"}, "gemini", true, "gemini", "--acp", false, "false", "gemini"},
		{"gemini npx", []string{"npx"}, "gemini", true, "npx", "-y @google/gemini-cli@0.61.0 --acp", true, "false", "claude"},
		{"opencode", []string{"opencode"}, "opencode", true, "opencode", "acp", false, "<nil>", "opencode"},
		{"nothing", nil, "claude", false, "claude-agent-acp", "", false, "<nil>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := loadRegistry("", "", fakePath(tt.path...))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range r.List() {
				names = append(names, s.Name)
			}
			if strings.Join(names, ",") != "claude,codex,gemini,opencode,pi,omp" {
				t.Errorf("order = %v", names)
			}
			s := statusOf(t, r, tt.agent)
			if s.Available != tt.avail || s.Command != tt.command || strings.Join(s.Args, " ") != tt.args || (s.Note != "") != tt.note {
				t.Errorf("status = %+v", s)
			}
			fs := "<nil>"
			if s.FSCapabilities != nil {
				fs = fmt.Sprint(*s.FSCapabilities)
			}
			if fs != tt.fsCaps {
				t.Errorf("fsCapabilities = %s, want %s", fs, tt.fsCaps)
			}
			if !s.Available && (s.Reason == "" || !strings.Contains(s.Install, "npm i -g")) {
				t.Errorf("unavailable without reason/install: %+v", s)
			}
			if r.Default() != tt.defaultA {
				t.Errorf("Default = %q, want %q", r.Default(), tt.defaultA)
			}
			spec, err := r.Lookup(tt.agent)
			if tt.avail != (err == nil) {
				t.Errorf("Lookup err = %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "to fix: npm i -g") {
				t.Errorf("Lookup error does not say how to fix: %v", err)
			}
			if err == nil && spec.Command != tt.command {
				t.Errorf("Lookup command = %q", spec.Command)
			}
		})
	}
}

func TestRegistryMerge(t *testing.T) {
	user := t.TempDir()
	ws := t.TempDir()
	writeSettings(t, filepath.Join(user, "ochat", "settings.json"), `{
		"theme": "ignored",
		"agent_servers": {
			"pi": {"command": "pi-acp", "args": ["--x"], "env": {"PI_KEY": "user-secret"}},
			"claude": {"env": {"ANTHROPIC_API_KEY": "sk-user"}},
			"mine": {"command": "mine-user"}
		}}`)
	writeSettings(t, filepath.Join(ws, ".ochat", "settings.json"), `{"agent_servers": {
			"mine": {"command": "/opt/mine/bin/agent", "args": ["acp"]},
			"claude": {"env": {"EXTRA": "1"}},
			"gemini": {"fsCapabilities": true}
		}}`)
	r, err := loadRegistry(user, ws, fakePath("claude-agent-acp", "pi-acp"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.List() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "claude,codex,gemini,opencode,pi,omp,mine" {
		t.Errorf("order = %s", got)
	}
	claude := statusOf(t, r, "claude")
	if claude.Command != "claude-agent-acp" || claude.Env["ANTHROPIC_API_KEY"] != "sk-user" || claude.Env["EXTRA"] != "1" || claude.Source != "workspace" {
		t.Errorf("claude = %+v", claude)
	}
	mine := statusOf(t, r, "mine")
	if mine.Command != "/opt/mine/bin/agent" || strings.Join(mine.Args, " ") != "acp" || mine.Source != "workspace" || mine.Available {
		t.Errorf("mine = %+v", mine)
	}
	if !strings.Contains(mine.Reason, "/opt/mine/bin/agent") || !strings.Contains(mine.Install, ".ochat/settings.json") {
		t.Errorf("mine reason/install = %q / %q", mine.Reason, mine.Install)
	}
	pi := statusOf(t, r, "pi")
	if !pi.Available || pi.Source != "user" || pi.Env["PI_KEY"] != "user-secret" {
		t.Errorf("pi = %+v", pi)
	}
	if g := statusOf(t, r, "gemini"); g.FSCapabilities == nil || !*g.FSCapabilities {
		t.Errorf("gemini fsCapabilities override lost: %+v", g)
	}
	if len(r.Files()) != 2 {
		t.Errorf("files = %v", r.Files())
	}
	_, err = r.Lookup("nobody")
	if err == nil || !strings.Contains(err.Error(), "agent_servers") || !strings.Contains(err.Error(), "claude, codex") {
		t.Errorf("unknown agent error = %v", err)
	}
}

func TestRegistryBrokenSettings(t *testing.T) {
	tests := []struct {
		body  string
		agent string // the entry at fault, "" for the whole file
		want  string
	}{
		{`{"agent_servers": {`, "", "line 1, column 20"},
		{"{\n  bad json", "", "line 2, column 3"},
		{`{"agent_servers": {"x": {"args": []}}}`, "x", `needs a "command"`},
		{`{"agent_servers": {"x": {"command": ""}}}`, "x", `needs a "command"`},
		{`{"agent_servers": {"claude": {"command": ""}}}`, "claude", `empty "command"`},
		{"{\n\"agent_servers\": []}", "", "line 2, column"},
	}
	for _, tt := range tests {
		user := t.TempDir()
		writeSettings(t, filepath.Join(user, "ochat", "settings.json"), `{"agent_servers": {"mine": {"command": "mine-acp"}}}`)
		ws := t.TempDir()
		p := filepath.Join(ws, ".ochat", "settings.json")
		writeSettings(t, p, tt.body)
		r, err := loadRegistry(user, ws, fakePath("claude-agent-acp", "mine-acp"))
		if err != nil {
			t.Fatalf("%s: registry failed as a whole: %v", tt.body, err)
		}
		probs := r.Problems()
		if len(probs) != 1 || probs[0].Path != p || probs[0].Source != "workspace" || probs[0].Agent != tt.agent || !strings.Contains(probs[0].Message, tt.want) {
			t.Errorf("%s: problems = %+v, want one for %s entry %q with %q", tt.body, probs, p, tt.agent, tt.want)
		}
		// Built-ins and the user's own agents keep working.
		if _, err := r.Lookup("claude"); err != nil {
			t.Errorf("%s: claude: %v", tt.body, err)
		}
		if _, err := r.Lookup("mine"); err != nil {
			t.Errorf("%s: user agent: %v", tt.body, err)
		}
	}
	// A typo in the user file leaves the built-ins and the workspace's agents.
	user, ws := t.TempDir(), t.TempDir()
	writeSettings(t, filepath.Join(user, "ochat", "settings.json"), `{"agent_servers": {"mypi": {"command": "pi-acp"`)
	writeSettings(t, filepath.Join(ws, ".ochat", "settings.json"), `{"agent_servers": {"mine": {"command": "mine-acp"}}}`)
	r, err := loadRegistry(user, ws, fakePath("claude-agent-acp", "mine-acp", "pi-acp"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup("mine"); err != nil {
		t.Errorf("workspace agent after a broken user file: %v", err)
	}
	if _, err := r.Lookup("mypi"); err == nil || !strings.Contains(err.Error(), "settings problem") {
		t.Errorf("agent of the broken file: err = %v, want one naming the settings problem", err)
	}
	// A missing file is fine; an unreadable one is a problem.
	if r, _ := loadRegistry(t.TempDir(), t.TempDir(), fakePath()); len(r.Problems()) != 0 {
		t.Errorf("missing files: %v", r.Problems())
	}
	ws = t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".ochat", "settings.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r, err := loadRegistry("", ws, fakePath()); err != nil || len(r.Problems()) != 1 {
		t.Errorf("a directory as settings file: err %v, problems %v", err, r.Problems())
	}
}

func TestRegistryUntrustedBrokenSettings(t *testing.T) {
	ws := t.TempDir()
	writeSettings(t, filepath.Join(ws, ".ochat", "settings.json"), `{bad json`)
	r, err := NewRegistry(RegistryOptions{Workspace: ws, Trust: NewTrustStore(filepath.Join(t.TempDir(), "trust.json")), LookPath: fakePath("claude-agent-acp")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup("claude"); err != nil {
		t.Errorf("built-in held back by a broken untrusted file: %v", err)
	}
	p := r.Problems()
	if len(p) != 1 || !p[0].Untrusted || !strings.Contains(p[0].Message, "line 1, column 2") {
		t.Errorf("problems = %+v", p)
	}
	if _, st, _ := r.WorkspaceTrust(); st == TrustOK {
		t.Error("broken untrusted file reported trusted")
	}
}

func TestSettingsJSONC(t *testing.T) {
	ws := t.TempDir()
	writeSettings(t, filepath.Join(ws, ".ochat", "settings.json"), `// Zed-style settings
{
  /* agents */
  "agent_servers": {
    "mine": {
      "command": "mine-acp", // trailing comma next
      "args": ["acp",],
    },
  },
}
`)
	r, err := loadRegistry("", ws, fakePath("mine-acp"))
	if err != nil || len(r.Problems()) != 0 {
		t.Fatalf("err %v problems %v", err, r.Problems())
	}
	s, err := r.Lookup("mine")
	if err != nil || strings.Join(s.Args, " ") != "acp" {
		t.Errorf("mine = %+v, %v", s, err)
	}
	specs, err := SettingsAgents([]byte("{\"agent_servers\":{\"a\":{\"command\":\"x\",},},} // c"))
	if err != nil || len(specs) != 1 || specs[0].Command != "x" {
		t.Errorf("SettingsAgents = %+v, %v", specs, err)
	}
	// Type errors after a comment still point at the right line, and only
	// take their own entry down.
	entries, bad, err := parseSettings([]byte("/* one\ntwo */\n{\"agent_servers\": {\"a\": {\"command\": 3},\n \"b\": {\"command\": \"ok\"}}}"))
	if err != nil || bad["a"] == nil || !strings.Contains(bad["a"].Error(), "line 3, column") || len(entries) != 1 || entries["b"].Command == nil {
		t.Errorf("type error: entries %v bad %v err %v", entries, bad, err)
	}
	// Parsing never changes the bytes the trust hash is taken over.
	content := []byte("{ // repo agent\n \"agent_servers\": {\"repo\": {\"command\": \"x\"},} /* c */ }")
	orig := slices.Clone(content)
	if _, err := SettingsAgents(content); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(content, orig) {
		t.Errorf("SettingsAgents changed its input:\n%s\nwas\n%s", content, orig)
	}
}

// One entry of the wrong shape is a problem of that entry: the file's other
// agents, and the built-ins, still load.
func TestRegistryBadEntryKeepsOthers(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "ochat", "settings.json")
	if err := os.MkdirAll(filepath.Dir(user), 0o700); err != nil {
		t.Fatal(err)
	}
	body := `{"agent_servers": {"good": {"command": "sh"}, "badargs": {"command": "sh", "args": "notalist"}, "badcmd": {"command": 42}}}`
	if err := os.WriteFile(user, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := NewRegistry(RegistryOptions{UserConfigDir: dir, Workspace: t.TempDir(), LookPath: func(s string) (string, error) { return "/bin/" + s, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup("good"); err != nil {
		t.Errorf("good: %v", err)
	}
	if _, err := r.Lookup("claude"); err != nil {
		t.Errorf("built-in claude: %v", err)
	}
	got := map[string]string{}
	for _, p := range r.Problems() {
		got[p.Agent] = p.Message
	}
	for _, name := range []string{"badargs", "badcmd"} {
		if !strings.Contains(got[name], "line 1, column") {
			t.Errorf("problem for %s = %q, want one with its position", name, got[name])
		}
	}
	if _, err := r.Lookup("badargs"); err == nil {
		t.Errorf("badargs looked up though its entry is broken")
	}
}

func TestNpxNote(t *testing.T) {
	r, err := loadRegistry("", "", fakePath("npx"))
	if err != nil {
		t.Fatal(err)
	}
	c := statusOf(t, r, "claude")
	want := "via npx: first start downloads @agentclientprotocol/claude-agent-acp@0.101.0; needs a Claude login"
	if c.Note != want {
		t.Errorf("note = %q, want %q", c.Note, want)
	}
}

func TestHint(t *testing.T) {
	tests := []struct{ agent, err, want string }{
		{"claude", "agent error: Query closed before response received", "run `claude` once to log in"},
		{"codex", `Internal error: {"code":-32000,"message":"Authentication required"}`, "run `codex login`"},
		{"codex", "Query closed before response received", ""},
		{"mine", "Authentication required", ""},
		{"claude", "rate limited", ""},
	}
	for _, tt := range tests {
		got := Hint(tt.agent, tt.err)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("Hint(%q, %q) = %q, want %q", tt.agent, tt.err, got, tt.want)
		}
		if got != "" && Hint(tt.agent, tt.err+"; "+got) != "" {
			t.Errorf("Hint repeats itself for %q", tt.err)
		}
	}
}

func TestRedaction(t *testing.T) {
	s := Status{Spec: Spec{Name: "x", Command: "x-acp", Env: map[string]string{"API_KEY": "sk-very-secret"}, Source: "user"}, Available: true}
	for name, out := range map[string]string{
		"Status JSON": mustJSON(t, s),
		"Spec JSON":   mustJSON(t, s.Spec),
		"Status":      s.String(),
		"Spec":        s.Spec.String(),
		"LogValue":    s.LogValue().String(),
		"Sprintf":     fmt.Sprintf("%v %+v %s %q", s, s.Spec, s, s.Spec),
		"GoSyntax":    fmt.Sprintf("%#v %#v", s, s.Spec),
		"slog JSON":   slogJSON(s),
		"slice":       fmt.Sprintf("%v %+v %#v", []Status{s}, []Spec{s.Spec}, []Status{s}),
	} {
		if strings.Contains(out, "sk-very-secret") {
			t.Errorf("%s leaks the env value: %s", name, out)
		}
		if !strings.Contains(out, "API_KEY") {
			t.Errorf("%s lost the env key: %s", name, out)
		}
	}
	var flat map[string]any
	if err := json.Unmarshal([]byte(mustJSON(t, s)), &flat); err != nil {
		t.Fatal(err)
	}
	if flat["name"] != "x" || flat["available"] != true || flat["command"] != "x-acp" {
		t.Errorf("Status JSON shape = %v", flat)
	}
	// The spec itself keeps the value for Start.
	if s.Env["API_KEY"] != "sk-very-secret" {
		t.Error("redaction changed the spec")
	}
}

// slogJSON logs s as an attribute through slog's JSON handler.
func slogJSON(v any) string {
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("agent", "spec", v, "err", fmt.Errorf("wrapped: %v", v))
	return b.String()
}

func TestSpecRedact(t *testing.T) {
	s := Spec{Env: map[string]string{"API_KEY": "sk-abc123", "LONG": "xx-sk-abc123-yy", "FLAG": "1", "EMPTY": ""}}
	tests := []struct{ in, want string }{
		{"invalid API key sk-abc123\n", "invalid API key <redacted>\n"},
		{"token xx-sk-abc123-yy rejected", "token <redacted> rejected"},
		{"sk-abc123sk-abc123", "<redacted><redacted>"},
		{"level 1 of 1", "level 1 of 1"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := s.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := (Spec{}).Redact("sk-abc123"); got != "sk-abc123" {
		t.Errorf("no env: %q", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoadRegistryRealPath(t *testing.T) {
	// The exported constructor uses $PATH: a settings agent pointing at a
	// real binary is available.
	ws := t.TempDir()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	writeSettings(t, filepath.Join(ws, ".ochat", "settings.json"), fmt.Sprintf(`{"agent_servers":{"shell":{"command":%q}}}`, sh))
	r, err := LoadRegistry("", ws)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup("shell"); err != nil {
		t.Errorf("Lookup: %v", err)
	}
}

// TestUnavailableCommandAdvice: the fix offered for a command that cannot
// start fits the mistake: arguments written into "command" are to go in
// "args"; a missing path is to be fixed, not "installed"; a name not on
// PATH is to be installed.
func TestUnavailableCommandAdvice(t *testing.T) {
	tests := []struct {
		name, entry          string
		reason, install, not string
	}{
		{"args in command", `{"command": "/opt/bin/testagent --acp --verbose", "args": ["x"]}`,
			`"/opt/bin/testagent --acp --verbose" is not a program`,
			`put arguments in "args": set agent_servers.mine.command to "/opt/bin/testagent" and agent_servers.mine.args to ["--acp","--verbose","x"]`,
			"install /opt"},
		{"args in command, name on PATH", `{"command": "mine-acp serve"}`,
			`"mine-acp serve" is not a program`, `put arguments in "args"`, "install mine-acp"},
		{"missing path", `{"command": "/opt/bin/missing"}`,
			"/opt/bin/missing does not exist or is not executable", "fix agent_servers.mine.command in", "install /opt"},
		{"missing path with args", `{"command": "/opt/bin/missing --acp"}`,
			"does not exist or is not executable", "fix agent_servers.mine.command", `put arguments in "args"`},
		{"not on PATH", `{"command": "nosuch-acp"}`,
			"nosuch-acp is not on PATH", "install nosuch-acp or fix agent_servers.mine.command", `"args"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := t.TempDir()
			writeSettings(t, filepath.Join(cfg, "ochat", "settings.json"), `{"agent_servers": {"mine": `+tt.entry+`}}`)
			lookPath := func(n string) (string, error) {
				if n == "/opt/bin/testagent" || n == "mine-acp" {
					return n, nil
				}
				return "", exec.ErrNotFound
			}
			r, err := loadRegistry(cfg, t.TempDir(), lookPath)
			if err != nil {
				t.Fatal(err)
			}
			st := statusOf(t, r, "mine")
			if st.Available || !strings.Contains(st.Reason, tt.reason) || !strings.Contains(st.Install, tt.install) ||
				strings.Contains(st.Install, tt.not) {
				t.Errorf("reason %q\ninstall %q\nwant reason ∋ %q, install ∋ %q, install ∌ %q", st.Reason, st.Install, tt.reason, tt.install, tt.not)
			}
		})
	}
}

// TestSettingsErrorsSayTheJSONPath: a value of the wrong type is reported
// with its JSON path, not the Go struct that decodes it.
func TestSettingsErrorsSayTheJSONPath(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{`{"agent_servers": {"mine": {"command": 5}}}`, "agent_servers.mine.command: a number where a string belongs"},
		{`{"agent_servers": {"mine": {"command": "x", "args": "--acp"}}}`, "agent_servers.mine.args: a string where an array belongs"},
		{`{"agent_servers": {"mine": {"command": "x", "env": ["A=1"]}}}`, "agent_servers.mine.env: an array where an object belongs"},
		{`{"agent_servers": ["mine"]}`, "agent_servers: an array where an object belongs"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			cfg := t.TempDir()
			writeSettings(t, filepath.Join(cfg, "ochat", "settings.json"), tt.body)
			r, err := loadRegistry(cfg, t.TempDir(), fakePath())
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, p := range r.Problems() {
				msgs = append(msgs, p.String())
			}
			all := strings.Join(msgs, "\n")
			if !strings.Contains(all, tt.want) || strings.Contains(all, "settingsEntry") || strings.Contains(all, "Go struct") || strings.Contains(all, "Go value") {
				t.Errorf("problems:\n%s\nwant %q", all, tt.want)
			}
		})
	}
}

// TestRegistryStates: an agent is "ready" only when it can start and a
// login was found; not installed (npx) and not logged in are their own
// states with their fix, and the default is the first ready agent.
func TestRegistryStates(t *testing.T) {
	tests := []struct {
		name     string
		path     []string
		env      map[string]string
		files    []string // under HOME
		agent    string
		want     Readiness
		download bool
		login    string
		def      string
	}{
		{"installed and api key", []string{"claude-agent-acp"}, map[string]string{"ANTHROPIC_API_KEY": "k"}, nil, "claude", StateReady, false, "", "claude"},
		{"installed, no login", []string{"claude-agent-acp", "codex-acp"}, nil, []string{".codex/auth.json"}, "claude", StateNotLoggedIn, false, "`claude`", "codex"},
		{"claude credentials file", []string{"claude-agent-acp"}, nil, []string{".claude/.credentials.json"}, "claude", StateReady, false, "", "claude"},
		{"a .claude folder alone is no login", []string{"claude-agent-acp"}, nil, []string{".claude/settings.json"}, "claude", StateNotLoggedIn, false, "`claude`", "claude"},
		{"npx with login", []string{"npx"}, map[string]string{"OPENAI_API_KEY": "k"}, nil, "codex", StateNotInstalled, true, "", "codex"},
		{"npx without login", []string{"npx"}, nil, nil, "gemini", StateNotLoggedIn, true, "GEMINI_API_KEY", "claude"},
		{"nothing", nil, nil, nil, "codex", StateUnavailable, false, "", ""},
		{"omp via npx needs bun", []string{"npx"}, map[string]string{"ANTHROPIC_API_KEY": "k"}, nil, "omp", StateUnavailable, false, "", "claude"},
		{"omp via npx with bun", []string{"npx", "bun"}, map[string]string{"ANTHROPIC_API_KEY": "k"}, nil, "omp", StateNotInstalled, true, "", "claude"},
		{"pi via npx fetches pi too", []string{"npx"}, nil, []string{".pi/agent/auth.json"}, "pi", StateNotInstalled, true, "", "pi"},
		{"codex login under CODEX_HOME", []string{"codex-acp"}, map[string]string{"CODEX_HOME": "CH"}, []string{"CH/auth.json"}, "codex", StateReady, false, "", "codex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			for _, f := range tt.files {
				writeSettings(t, filepath.Join(home, f), "{}")
			}
			getenv := func(k string) string {
				v := tt.env[k]
				if k == "CODEX_HOME" && v != "" {
					return filepath.Join(home, v)
				}
				return v
			}
			r, err := NewRegistry(RegistryOptions{LookPath: fakePath(tt.path...), Getenv: getenv, Home: home})
			if err != nil {
				t.Fatal(err)
			}
			s := statusOf(t, r, tt.agent)
			if s.State != tt.want {
				t.Errorf("state = %q, want %q (%+v)", s.State, tt.want, s)
			}
			if (s.DownloadMB > 0) != tt.download {
				t.Errorf("downloadMB = %d, want some: %v", s.DownloadMB, tt.download)
			}
			if tt.login != "" && !strings.Contains(s.Login, tt.login) {
				t.Errorf("login fix %q, want one naming %s", s.Login, tt.login)
			}
			if tt.want == StateUnavailable && (s.Available || s.Reason == "") {
				t.Errorf("unavailable agent %+v has no reason", s)
			}
			if tt.want == StateNotInstalled && !strings.Contains(s.StateLine(), "MB") {
				t.Errorf("state line %q does not say how much npx downloads", s.StateLine())
			}
			if r.Default() != tt.def {
				t.Errorf("Default = %q, want %q", r.Default(), tt.def)
			}
			b, _ := json.Marshal(s)
			if !strings.Contains(string(b), `"state":"`+string(tt.want)+`"`) {
				t.Errorf("JSON %s lacks the state", b)
			}
		})
	}
}
