package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runEnv runs ochatd args against d with getenv overriding d's environment
// for the keys it answers ("" falls through).
func (d *cliDaemon) runEnv(t *testing.T, over map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Version: "test", Getenv: d.getenv(over)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := Main(ctx, env, append(args[:1:1], append([]string{"--workspace", d.ws}, args[1:]...)...))
	return code, out.String(), errb.String()
}

func (d *cliDaemon) getenv(over map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := over[k]; ok {
			return v
		}
		switch k {
		case "HOME":
			return d.env.Home
		case "CLAUDE_CONFIG_DIR":
			return d.env.ClaudeConfigDir
		}
		return ""
	}
}

// TestNativeIDWhereAConversationBelongs: a terminal session's id given as
// a conversation is explained (open it first, or the conversation it is
// open as); an id found nowhere while the shell's store environment differs
// from the daemon's says which variable differs.
func TestNativeIDWhereAConversationBelongs(t *testing.T) {
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Version: "test", Getenv: d.getenv(nil)}
	cl, err := dial(ctx, env, d.ws)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	tests := []struct {
		name, id string
		over     map[string]string
		want     string // "" means no hint
	}{
		{"native id", fixtureClaudeID, nil, "is the id of a claude terminal session, not a conversation: open it as one first with `ochatd import " + d.claudeFile + "`"},
		{"unknown id, same environment", "01NOPE", nil, ""},
		{"unknown id, other CLAUDE_CONFIG_DIR", "01NOPE", map[string]string{"CLAUDE_CONFIG_DIR": "/elsewhere"}, "this shell sets CLAUDE_CONFIG_DIR differently from the daemon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Version: "test", Getenv: d.getenv(tt.over)}
			got := unknownConversationHint(ctx, env, cl, tt.id)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("hint = %q, want %q", got, tt.want)
			}
		})
	}

	// Opened, the same id points at its conversation.
	if code, out, errs := d.run(t, "", "import", d.claudeFile); code != 0 {
		t.Fatalf("import native file: %d %s %s", code, out, errs)
	}
	if got := unknownConversationHint(ctx, env, cl, fixtureClaudeID); !strings.Contains(got, "which is open as conversation ") || !strings.Contains(got, "pass --conversation ") {
		t.Errorf("hint for an opened session = %q", got)
	}

	// show and export of an unknown id name the differing variable.
	for _, cmd := range []string{"show", "export"} {
		code, _, errs := d.runEnv(t, map[string]string{"CLAUDE_CONFIG_DIR": "/elsewhere"}, cmd, "01NOPE")
		if code != 1 || !strings.Contains(errs, "no conversation and no native session has this id") || !strings.Contains(errs, "sets CLAUDE_CONFIG_DIR differently") {
			t.Errorf("%s: exit %d\n%s", cmd, code, errs)
		}
		if _, _, errs := d.run(t, "", cmd, "01NOPE"); strings.Contains(errs, "differently") {
			t.Errorf("%s with the daemon's environment names a difference:\n%s", cmd, errs)
		}
	}
}

// TestImportJSONExport: a file `export --format json` wrote imports (its
// messages as they are, through ochat/import's messages); another whole JSON document is
// refused with the command that writes an event log.
func TestImportJSONExport(t *testing.T) {
	d := startDaemon(t)
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "a.json")
	if code, _, errs := d.run(t, "", "export", "--format", "json", fixtureClaudeID, "-o", jsonFile); code != 0 {
		t.Fatalf("export json: %d %s", code, errs)
	}
	code, out, errs := d.run(t, "", "import", jsonFile)
	if code != 0 || !strings.Contains(errs, "is an `ochatd export --format json` file") {
		t.Fatalf("import json export: %d\n%s%s", code, out, errs)
	}
	id := strings.Fields(out)[0]
	if code, shown, _ := d.run(t, "", "show", id); code != 0 || !strings.Contains(shown, "PLAIN: say hello") || !strings.Contains(shown, "PONG from fake LLM") {
		t.Fatalf("show imported %s:\n%s", id, shown)
	}

	tests := []struct{ name, body string }{
		{"array", "[\n  {\"role\": \"user\"}\n]\n"},
		{"object without messages", "{\n  \"id\": \"x\"\n}\n"},
		{"object with other messages", "{\n  \"title\": \"t\",\n  \"messages\": [\"hi\"]\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			os.WriteFile(f, []byte(tt.body), 0o644)
			code, _, errs := d.run(t, "", "import", f)
			if code != 1 || !strings.Contains(errs, "one JSON document, not a session event log") || !strings.Contains(errs, "--format events") || strings.Contains(errs, "more (ochatd validate") {
				t.Errorf("import %s: exit %d\n%s", tt.name, code, errs)
			}
		})
	}
}
