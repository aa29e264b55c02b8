package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
)

var (
	testagentOnce sync.Once
	testagentBin  string
	testagentErr  error
)

// testagentPath builds the scripted ACP agent once per test binary.
func testagentPath(t *testing.T) string {
	t.Helper()
	testagentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ochat-cli-testagent")
		if err != nil {
			testagentErr = err
			return
		}
		testagentBin = filepath.Join(dir, "testagent")
		out, err := exec.Command("go", "build", "-o", testagentBin, "github.com/ochat-dev/ochat/internal/testagent/cmd/testagent").CombinedOutput()
		if err != nil {
			testagentErr = err
			testagentBin = string(out)
		}
	})
	if testagentErr != nil {
		t.Fatalf("build testagent: %v\n%s", testagentErr, testagentBin)
	}
	return testagentBin
}

// trustWorld is a real daemon for a private workspace, with private
// XDG_RUNTIME_DIR, XDG_STATE_HOME (the trust file) and XDG_CONFIG_HOME (user
// settings), logging at debug level to logPath.
type trustWorld struct {
	base, ws, cfg, logPath string
}

func newTrustWorld(t *testing.T, userSettings, wsSettings string) *trustWorld {
	t.Helper()
	base, err := os.MkdirTemp("", "oct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	w := &trustWorld{base: base, ws: filepath.Join(base, "ws"), cfg: filepath.Join(base, "config"), logPath: filepath.Join(base, "daemon.log")}
	for _, d := range []string{"run", "state", "config/ochat", "home", "ws/.ochat"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "run"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
	t.Setenv("XDG_CONFIG_HOME", w.cfg)
	t.Setenv("HOME", filepath.Join(base, "home"))
	if userSettings != "" {
		if err := os.WriteFile(filepath.Join(w.cfg, "ochat", "settings.json"), []byte(userSettings), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if wsSettings != "" {
		w.writeWS(t, wsSettings)
	}
	logf, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	st, err := history.Open(filepath.Join(base, "state", "ochat.db"))
	if err != nil {
		t.Fatal(err)
	}
	sock, err := daemon.SocketPath(w.ws)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := daemon.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := daemon.New(daemon.Options{Workspace: w.ws, Store: st, UserConfigDir: w.cfg, Logger: log, Version: "test"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		srv.Close(cctx)
		st.Close()
		logf.Close()
	})
	return w
}

func (w *trustWorld) writeWS(t *testing.T, body string) {
	t.Helper()
	if err := os.WriteFile(agents.WorkspaceSettingsPath(w.ws), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs ochatd args (with --workspace) in this process.
func (w *trustWorld) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Version: "test", Getenv: os.Getenv}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Main(ctx, env, append(args[:1:1], append([]string{"--workspace", w.ws}, args[1:]...)...))
	return code, out.String(), errb.String()
}

func (w *trustWorld) agent(t *testing.T, name string) agents.Status {
	t.Helper()
	code, out, errs := w.run(t, "agents", "--json")
	if code != 0 {
		t.Fatalf("agents --json: %d %s", code, errs)
	}
	var res daemon.AgentsListResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("agents --json: %v\n%s", err, out)
	}
	for _, a := range res.Agents {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("agents --json has no %s:\n%s", name, out)
	return agents.Status{}
}

// TestCLIWorkspaceTrust walks the direnv cycle through the real daemon: a
// workspace agent is inactive (agents/list and chat/send say why), `ochatd
// trust` activates it, a changed file asks again, --revoke undoes it.
func TestCLIWorkspaceTrust(t *testing.T) {
	bin := testagentPath(t)
	wsBody := `{"agent_servers": {"repo": {"command": "` + bin + `", "env": {"REPO_TOKEN": "tok-1234-very-secret"}}}}`
	w := newTrustWorld(t, "", wsBody)
	settings := agents.WorkspaceSettingsPath(w.ws)
	notTrusted := "workspace settings " + settings + " are not trusted: run `ochatd trust` (or review the file first)"

	steps := []struct {
		name      string
		args      []string
		code      int
		stdout    []string // substrings
		stderr    []string
		available bool   // of "repo" afterwards
		reason    string // of "repo" afterwards
	}{
		{"fresh clone: listed, inactive", []string{"agents"}, 0, []string{"repo", "unavailable", notTrusted, "to fix: review " + settings}, nil, false, notTrusted},
		{"chat/send refuses with the reason", []string{"chat", "--agent", "repo", "PLAIN hi"}, 1, nil, []string{notTrusted}, false, notTrusted},
		{"doctor says so", []string{"doctor"}, -1, []string{"note  workspace settings " + settings + " are not trusted: agents repo stay inactive"}, nil, false, notTrusted},
		{"trust", []string{"trust"}, 0, []string{settings, "repo", bin, "env: REPO_TOKEN", "Trusted"}, nil, true, ""},
		{"trust again", []string{"trust"}, 0, []string{"already trusted"}, nil, true, ""},
		{"chat now works", []string{"chat", "--agent", "repo", "PLAIN hello-from-repo"}, 0, []string{"hello-from-repo"}, nil, true, ""},
		{"list", []string{"trust", "--list"}, 0, []string{w.ws, "trusted"}, nil, true, ""},
	}
	for _, s := range steps {
		code, out, errs := w.run(t, s.args...)
		if s.code >= 0 && code != s.code { // doctor's status depends on the built-ins on PATH
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", s.name, code, s.code, out, errs)
		}
		for _, want := range s.stdout {
			if !strings.Contains(out, want) {
				t.Errorf("%s: stdout lacks %q:\n%s", s.name, want, out)
			}
		}
		for _, want := range s.stderr {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", s.name, want, errs)
			}
		}
		a := w.agent(t, "repo")
		if a.Available != s.available || a.Reason != s.reason || a.Untrusted == s.available {
			t.Errorf("%s: repo = available %v untrusted %v reason %q; want %v %q", s.name, a.Available, a.Untrusted, a.Reason, s.available, s.reason)
		}
	}

	// A changed file asks again.
	w.writeWS(t, strings.Replace(wsBody, `"env"`, `"args": ["--new"], "env"`, 1))
	if a := w.agent(t, "repo"); a.Available || !strings.Contains(a.Reason, "changed since you trusted them: run `ochatd trust`") {
		t.Errorf("changed file: repo = %+v", a)
	}
	code, out, _ := w.run(t, "trust", "--list", "--json")
	var list []TrustListEntry
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 1 || list[0].State != "changed" || list[0].Workspace != w.ws {
		t.Errorf("trust --list --json after a change: %d %v\n%s", code, err, out)
	}
	if code, out, _ := w.run(t, "trust"); code != 0 || !strings.Contains(out, "--new") {
		t.Errorf("re-trust: %d\n%s", code, out)
	}
	if a := w.agent(t, "repo"); !a.Available {
		t.Errorf("re-trusted: repo = %+v", a)
	}
	// Revoke.
	if code, out, _ := w.run(t, "trust", "--revoke"); code != 0 || !strings.Contains(out, "Revoked") {
		t.Errorf("revoke: %d\n%s", code, out)
	}
	if a := w.agent(t, "repo"); a.Available || a.Reason != notTrusted {
		t.Errorf("revoked: repo = %+v", a)
	}
	if code, out, _ := w.run(t, "trust", "--revoke"); code != 0 || !strings.Contains(out, "was not trusted") {
		t.Errorf("second revoke: %d\n%s", code, out)
	}
	// The trust file is private.
	tp, _ := agents.DefaultTrustPath(os.Getenv)
	if fi, err := os.Stat(tp); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("trust file %s: %v %v", tp, fi, err)
	}
}

func TestCLITrustRefusals(t *testing.T) {
	tests := []struct {
		name   string
		ws     string // workspace settings; "" none
		args   []string
		code   int
		stderr string
	}{
		{"no settings file", "", []string{"trust"}, 1, "nothing to trust"},
		{"broken settings", `{"agent_servers": {"x": {}}}`, []string{"trust"}, 1, "nothing was trusted"},
		{"revoke and list", `{}`, []string{"trust", "--revoke", "--list"}, 2, "usage"},
		{"extra argument", `{}`, []string{"trust", "somewhere"}, 2, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTrustWorld(t, "", tt.ws)
			if tt.ws == "" {
				os.Remove(agents.WorkspaceSettingsPath(w.ws))
			}
			code, _, errs := w.run(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.stderr) {
				t.Errorf("exit %d stderr %q; want %d and %q", code, errs, tt.code, tt.stderr)
			}
			tp, _ := agents.DefaultTrustPath(os.Getenv)
			if entries, _ := agents.NewTrustStore(tp).Entries(); len(entries) != 0 {
				t.Errorf("trusted anyway: %v", entries)
			}
		})
	}
}

// TestSecretsNeverShown: env values of agent settings never reach stdout,
// stderr or the daemon's debug log, through agents, doctor, trust, and
// agents that cannot start, fail to initialize or crash mid-turn.
func TestSecretsNeverShown(t *testing.T) {
	bin := testagentPath(t)
	const userSecret, wsSecret = "sk-user-0123456789-SECRET", "sk-workspace-9876543210-SECRET"
	failing := filepath.Join(t.TempDir(), "failing-agent")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho \"not json: key=$API_KEY\"\necho \"cannot log in with $API_KEY\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := func(secret string) string {
		return `{"API_KEY": "` + secret + `", "TESTAGENT_STATE": "` + t.TempDir() + `"}`
	}
	user := `{"agent_servers": {
		"crashy":  {"command": "` + bin + `", "env": ` + env(userSecret) + `},
		"failing": {"command": "` + failing + `", "env": ` + env(userSecret) + `},
		"missing": {"command": "/nonexistent/agent-acp", "env": ` + env(userSecret) + `},
		"claude":  {"env": ` + env(userSecret) + `}
	}}`
	ws := `{"agent_servers": {"repo": {"command": "` + bin + `", "args": ["--x"], "env": ` + env(wsSecret) + `}}}`
	w := newTrustWorld(t, user, ws)

	runs := [][]string{
		{"agents"}, {"agents", "--json"}, {"doctor"},
		{"chat", "--agent", "repo", "PLAIN hi"}, // untrusted
		{"trust"}, {"trust", "--list"}, {"trust", "--list", "--json"},
		{"agents"}, {"agents", "--json"}, {"doctor"},
		{"chat", "--agent", "missing", "PLAIN hi"},
		{"chat", "--agent", "failing", "PLAIN hi"},
		{"chat", "--agent", "crashy", "CRASH"},
		{"chat", "--agent", "repo", "PLAIN hi"},
		{"chat", "--agent", "nobody", "PLAIN hi"},
	}
	var all strings.Builder
	for _, args := range runs {
		code, out, errs := w.run(t, args...)
		all.WriteString(out + errs)
		for _, secret := range []string{userSecret, wsSecret} {
			if strings.Contains(out, secret) || strings.Contains(errs, secret) {
				t.Errorf("ochatd %s shows a secret (exit %d):\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
			}
		}
		// The failures happened (and said so) rather than passing silently.
		if args[0] == "chat" && args[2] != "repo" && code == 0 {
			t.Errorf("ochatd %s succeeded", strings.Join(args, " "))
		}
	}
	for _, want := range []string{"API_KEY", "cannot log in", "exit status 3", "/nonexistent/agent-acp"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("output lacks %q (the failure paths were not exercised)", want)
		}
	}
	log, err := os.ReadFile(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) == 0 {
		t.Fatal("daemon log is empty")
	}
	for _, secret := range []string{userSecret, wsSecret} {
		if i := bytes.Index(log, []byte(secret)); i >= 0 {
			lo := max(0, bytes.LastIndexByte(log[:i], '\n'))
			t.Errorf("daemon log shows a secret: %s", log[lo:min(len(log), i+200)])
		}
	}
}
