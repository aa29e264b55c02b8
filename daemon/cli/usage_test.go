package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
)

// runMain runs ochatd args in this process with the process environment.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Version: "test", Getenv: os.Getenv}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Main(ctx, env, args)
	return code, out.String(), errb.String()
}

// TestHelpAndUsage: help that is asked for goes to stdout with exit 0, a
// usage error to stderr with exit 2; a command's --help names its
// positional arguments and prints once.
func TestHelpAndUsage(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		stdout  string // must contain; "" means stdout must be empty
		stderr  string // must contain; "" means stderr must be empty
		onlyOne string // must appear exactly once in stdout
	}{
		{[]string{"--help"}, 0, "usage: ochatd <command> [flags]", "", "usage: ochatd <command>"},
		{[]string{"-h"}, 0, "commands:", "", ""},
		{[]string{"help"}, 0, "  doctor", "", ""},
		{[]string{}, 2, "", "usage: ochatd <command> [flags]", ""},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`, ""},
		{[]string{"help", "show"}, 0, "usage: ochatd show [flags] REF\n", "", ""},
		{[]string{"help", "frobnicate"}, 2, "", `unknown command "frobnicate"`, ""},
		{[]string{"show", "--help"}, 0, "usage: ochatd show [flags] REF\n", "", "-workspace"},
		{[]string{"export", "-h"}, 0, "usage: ochatd export [flags] REF\n", "", ""},
		{[]string{"import", "--help"}, 0, "usage: ochatd import [flags] FILE\n", "", ""},
		{[]string{"rename", "--help"}, 0, "usage: ochatd rename [flags] CONVERSATION_ID TITLE\n", "", ""},
		{[]string{"delete", "--help"}, 0, "usage: ochatd delete [flags] CONVERSATION_ID\n", "", ""},
		{[]string{"cancel", "--help"}, 0, "usage: ochatd cancel [flags] CONVERSATION_ID\n", "", ""},
		{[]string{"revert", "--help"}, 0, "usage: ochatd revert [flags] CONVERSATION_ID [MESSAGE_ID [PATH...]]\n", "", ""},
		{[]string{"validate", "--help"}, 0, "usage: ochatd validate [flags] FILE\n", "", ""},
		{[]string{"doctor", "--help"}, 0, "1 when any check prints FAIL", "", "usage: ochatd doctor"},
		{[]string{"stop", "--help"}, 0, "usage: ochatd stop [flags]\n", "", ""},
		{[]string{"show", "--bogus"}, 2, "", "flag provided but not defined: -bogus", ""},
		{[]string{"doctor", "--bogus"}, 2, "", "usage: ochatd doctor [flags]", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			code, out, errs := runMain(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errs)
			}
			check := func(stream, got, want string) {
				if want == "" && got != "" {
					t.Errorf("%s is not empty:\n%s", stream, got)
				}
				if !strings.Contains(got, want) {
					t.Errorf("%s lacks %q:\n%s", stream, want, got)
				}
			}
			check("stdout", out, tt.stdout)
			check("stderr", errs, tt.stderr)
			if tt.onlyOne != "" && strings.Count(out, tt.onlyOne) != 1 {
				t.Errorf("stdout has %q %d times, want once:\n%s", tt.onlyOne, strings.Count(out, tt.onlyOne), out)
			}
		})
	}
}

// TestRefusedBeforeTheDaemon: arguments the CLI can judge alone are refused
// before it connects (so these need no daemon).
func TestRefusedBeforeTheDaemon(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rename", "01ABC", ""}, 2, "the title is blank"},
		{[]string{"rename", "01ABC", "  ", " "}, 2, "the title is blank"},
		{[]string{"export", "01ABC", "-o", dir}, 1, dir + " is a directory: -o takes a file name"},
		{[]string{"export", "01ABC", "-o", dir, "--force"}, 1, dir + " is a directory"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			code, _, errs := runMain(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant %q", code, tt.code, errs, tt.want)
			}
			if strings.Contains(errs, "exists; pass --force") {
				t.Errorf("a directory got the --force advice:\n%s", errs)
			}
		})
	}
}

// TestCLIMessage: the daemon's "cancel it (ochat/chat/cancel)" becomes the
// command a CLI user runs; other messages pass unchanged.
func TestCLIMessage(t *testing.T) {
	tests := []struct {
		code      jsonrpc2.Code
		msg, want string
	}{
		{daemon.CodeConflict, "a turn is running in conversation 01JD: cancel it (ochat/chat/cancel) before deleting", "a turn is running in conversation 01JD: cancel it (ochatd cancel 01JD) before deleting"},
		{daemon.CodeConflict, "a turn is already running", "a turn is already running"},
		{daemon.CodeNotFound, "a turn is running in conversation 01JD: cancel it (ochat/chat/cancel)", "a turn is running in conversation 01JD: cancel it (ochat/chat/cancel)"},
	}
	for _, tt := range tests {
		if got := cliMessage(&jsonrpc2.Error{Code: tt.code, Message: tt.msg}); got != tt.want {
			t.Errorf("cliMessage(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

// TestDeleteRunningSaysCancel: deleting a conversation whose turn runs is
// refused with the CLI command that cancels it.
func TestDeleteRunningSaysCancel(t *testing.T) {
	bin := testagentPath(t)
	w := newTrustWorld(t, `{"agent_servers": {"test": {"command": "`+bin+`"}}}`, "")
	done := make(chan int, 1)
	go func() {
		code, _, _ := w.run(t, "chat", "--agent", "test", "HANG")
		done <- code
	}()
	id := runningConversation(t, w)
	code, _, errs := w.run(t, "delete", id)
	if code != 1 || !strings.Contains(errs, "ochatd cancel "+id) || strings.Contains(errs, "ochat/chat/cancel") {
		t.Errorf("delete running: exit %d\n%s", code, errs)
	}
	if code, out, errs := w.run(t, "cancel", id); code != 0 {
		t.Errorf("cancel: exit %d\n%s%s", code, out, errs)
	}
	<-done
}

// TestDoctorExitStatus: doctor exits 1 when a check fails (damaged settings,
// damaged store), 0 when every check passes.
func TestDoctorExitStatus(t *testing.T) {
	bin := testagentPath(t)
	good := `{"agent_servers": {"test": {"command": "` + bin + `"}}}`
	tests := []struct {
		name, settings, store string
		code                  int
		want                  string
	}{
		{"healthy", good, "", 0, "ok    agent test"},
		{"damaged settings", good[:20], "", 1, "FAIL  settings"},
		{"damaged store", good, "not a bbolt file", 1, "FAIL  store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			for _, d := range []string{"run", "state", "config/ochat", "home", "ws"} {
				os.MkdirAll(filepath.Join(base, d), 0o700)
			}
			t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "run"))
			t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(base, "config"))
			t.Setenv("HOME", filepath.Join(base, "home"))
			os.WriteFile(filepath.Join(base, "config", "ochat", "settings.json"), []byte(tt.settings), 0o600)
			if tt.store != "" {
				db := storePath(t, ws)
				os.MkdirAll(filepath.Dir(db), 0o700)
				os.WriteFile(db, []byte(tt.store), 0o600)
			}
			code, out, errs := runMain(t, "doctor", "--workspace", ws)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Fatalf("doctor: exit %d (want %d), want %q\n%s%s", code, tt.code, tt.want, out, errs)
			}
			if fails := strings.Contains(out, "FAIL "); fails != (code == 1) {
				t.Errorf("exit %d but FAIL printed = %v:\n%s", code, fails, out)
			}
		})
	}
}

// storePath is the store of workspace ws under the current XDG_STATE_HOME.
func storePath(t *testing.T, ws string) string {
	t.Helper()
	abs, err := daemon.AbsWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	db, err := history.DefaultPath(abs)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestDoctorAgentStates: a built-in on PATH without a login is "not logged
// in" with its fix, never "ok … (not logged in?)"; one with an API key is ok.
func TestDoctorAgentStates(t *testing.T) {
	bin := testagentPath(t)
	for _, tt := range []struct {
		name, key string
		want      string
		notWant   string
	}{
		{"no login", "", "agent claude not logged in", "ok    agent claude"},
		{"api key", "sk-test", "ok    agent claude", "not logged in"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			pathDir := filepath.Join(base, "bin")
			for _, d := range []string{"run", "state", "config/ochat", "home", "ws", "bin"} {
				os.MkdirAll(filepath.Join(base, d), 0o700)
			}
			// A stand-in claude-agent-acp on PATH: doctor only looks it up.
			if err := os.Symlink(bin, filepath.Join(pathDir, "claude-agent-acp")); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", pathDir)
			t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "run"))
			t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(base, "config"))
			t.Setenv("HOME", filepath.Join(base, "home"))
			for _, k := range []string{"CLAUDE_CONFIG_DIR", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"} {
				t.Setenv(k, "")
			}
			t.Setenv("ANTHROPIC_API_KEY", tt.key)
			_, out, errs := runMain(t, "doctor", "--workspace", ws)
			if !strings.Contains(out, tt.want) || strings.Contains(out, tt.notWant) || strings.Contains(out, "not logged in?") {
				t.Fatalf("doctor: want %q, not %q:\n%s%s", tt.want, tt.notWant, out, errs)
			}
		})
	}
}
