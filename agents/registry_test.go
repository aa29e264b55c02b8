package agents

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
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
		{"npx fallback", []string{"npx"}, "codex", true, "npx", "-y @zed-industries/codex-acp@0.16.0", true, "<nil>", "claude"},
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
			if strings.Join(names, ",") != "claude,codex,gemini,opencode" {
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
	if got := strings.Join(names, ","); got != "claude,codex,gemini,opencode,mine,pi" {
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
		body string
		want string
	}{
		{`{"agent_servers": {`, "unexpected end of JSON"},
		{`{"agent_servers": {"x": {"args": []}}}`, `agent_servers.x needs a "command"`},
		{`{"agent_servers": {"x": {"command": ""}}}`, `needs a "command"`},
		{`{"agent_servers": {"claude": {"command": ""}}}`, `empty "command"`},
		{`{"agent_servers": []}`, "cannot unmarshal"},
	}
	for _, tt := range tests {
		ws := t.TempDir()
		p := filepath.Join(ws, ".ochat", "settings.json")
		writeSettings(t, p, tt.body)
		_, err := loadRegistry("", ws, fakePath())
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want the file name and %q", tt.body, err, tt.want)
		}
	}
	// A missing file is fine; an unreadable one is an error.
	if _, err := loadRegistry(t.TempDir(), t.TempDir(), fakePath()); err != nil {
		t.Errorf("missing files: %v", err)
	}
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".ochat", "settings.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := loadRegistry("", ws, fakePath()); err == nil {
		t.Error("a directory as settings file was accepted")
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
