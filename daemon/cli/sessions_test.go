package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/history/native"
)

const (
	fixtureClaudeID = "24cb974b-077a-4ab3-bdf4-622ee8278cca"
	fixtureCwd      = "/home/dev/project"
)

// cliDaemon is a real daemon serving the workspace's socket (under a
// private XDG_RUNTIME_DIR), whose native stores are a private Claude config
// dir holding the recorded fixture.
type cliDaemon struct {
	ws, claudeFile string
	env            native.Env
}

func startDaemon(t *testing.T) *cliDaemon {
	t.Helper()
	base, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "run"))
	os.MkdirAll(filepath.Join(base, "run"), 0o700)
	d := &cliDaemon{ws: filepath.Join(base, "ws")}
	os.MkdirAll(d.ws, 0o755)
	home := filepath.Join(base, "home")
	d.env = native.Env{Home: home, ClaudeConfigDir: filepath.Join(home, "claude")}
	dir, _ := native.ClaudeProjectDirName(d.ws)
	d.claudeFile = filepath.Join(d.env.ClaudeConfigDir, "projects", dir, fixtureClaudeID+".jsonl")
	b, err := os.ReadFile("../testdata/native/claude/" + fixtureClaudeID + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(d.claudeFile), 0o755)
	if err := os.WriteFile(d.claudeFile, bytes.ReplaceAll(b, []byte(fixtureCwd), []byte(d.ws)), 0o644); err != nil {
		t.Fatal(err)
	}

	st, err := history.Open(filepath.Join(base, "state", "ochat.db"))
	if err != nil {
		t.Fatal(err)
	}
	sock, err := daemon.SocketPath(d.ws)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := daemon.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := daemon.New(daemon.Options{Workspace: d.ws, Store: st, NativeEnv: &d.env, UserConfigDir: filepath.Join(base, "cfg")})
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
	})
	return d
}

// run runs ochatd with args and returns its exit status, stdout and stderr.
func (d *cliDaemon) run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Version: "test", Getenv: func(k string) string {
		switch k {
		case "HOME":
			return d.env.Home
		case "CLAUDE_CONFIG_DIR":
			return d.env.ClaudeConfigDir
		}
		return ""
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := Main(ctx, env, append(args[:1:1], append([]string{"--workspace", d.ws}, args[1:]...)...))
	return code, out.String(), errb.String()
}

func TestCLISessionsShowExportImportValidate(t *testing.T) {
	d := startDaemon(t)

	code, out, errs := d.run(t, "", "sessions", "--json")
	if code != 0 {
		t.Fatalf("sessions: %d %s", code, errs)
	}
	var list daemon.SessionsListResult
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Sessions) != 1 || list.Sessions[0].ID != fixtureClaudeID {
		t.Fatalf("sessions --json: %v\n%s", err, out)
	}
	code, out, _ = d.run(t, "", "sessions")
	if code != 0 || !strings.Contains(out, fixtureClaudeID) || !strings.Contains(out, "claude") {
		t.Fatalf("sessions table:\n%s", out)
	}

	// show by native id, by path (JSON) and as text
	for _, ref := range []string{fixtureClaudeID, d.claudeFile} {
		code, out, errs = d.run(t, "", "show", "--json", ref)
		if code != 0 {
			t.Fatalf("show %s: %d %s", ref, code, errs)
		}
		var sj struct {
			ID          string            `json:"id"`
			Agent       string            `json:"agent"`
			Title       string            `json:"title"`
			Cwd         string            `json:"cwd"`
			Messages    []json.RawMessage `json:"messages"`
			Diagnostics *struct {
				SkippedLines *int `json:"skippedLines"`
			} `json:"diagnostics"`
		}
		if err := json.Unmarshal([]byte(out), &sj); err != nil {
			t.Fatal(err)
		}
		if sj.ID != fixtureClaudeID || sj.Agent != "claude" || sj.Title == "" || sj.Cwd != d.ws || len(sj.Messages) == 0 ||
			sj.Diagnostics == nil || sj.Diagnostics.SkippedLines == nil {
			t.Fatalf("show --json %s:\n%s", ref, out)
		}
	}
	code, out, _ = d.run(t, "", "show", fixtureClaudeID)
	if code != 0 || !strings.Contains(out, "PLAIN: say hello") || !strings.Contains(out, "PONG from fake LLM") || !strings.Contains(out, "claude --resume "+fixtureClaudeID) {
		t.Fatalf("show text:\n%s", out)
	}
	if code, _, errs = d.run(t, "", "show", "no-such-session"); code != 1 || !strings.Contains(errs, "no conversation and no native session") {
		t.Fatalf("show unknown: %d %s", code, errs)
	}

	// export the native session as an event log to a file, validate it,
	// import it, and show the imported conversation
	logFile := filepath.Join(t.TempDir(), "s.jsonl")
	if code, _, errs = d.run(t, "", "export", fixtureClaudeID, "-o", logFile); code != 0 {
		t.Fatalf("export: %d %s", code, errs)
	}
	before, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errs = d.run(t, "", "export", "--format", "markdown", fixtureClaudeID, "-o", logFile); code != 1 || !strings.Contains(errs, logFile+" exists; pass --force to overwrite it") {
		t.Fatalf("export over an existing file: %d %s", code, errs)
	}
	if after, _ := os.ReadFile(logFile); !bytes.Equal(after, before) {
		t.Fatal("a refused export changed the file")
	}
	mdFile := filepath.Join(t.TempDir(), "s.md")
	if err := os.WriteFile(mdFile, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs = d.run(t, "", "export", "--format", "markdown", "--force", fixtureClaudeID, "-o", mdFile); code != 0 {
		t.Fatalf("export --force: %d %s", code, errs)
	}
	md, _ := os.ReadFile(mdFile)
	_, shown, _ := d.run(t, "", "show", fixtureClaudeID)
	if !strings.Contains(string(md), "## User · ") || !strings.Contains(shown, "## User · ") || strings.Contains(shown, "## you") {
		t.Fatalf("the user is labelled differently:\nexport:\n%s\nshow:\n%s", md, shown)
	}
	if code, out, errs = d.run(t, "", "validate", logFile); code != 0 || out != "" {
		t.Fatalf("validate exported log: %d %q %s", code, out, errs)
	}
	code, out, errs = d.run(t, "", "import", logFile, "--title", "from the terminal")
	if code != 0 {
		t.Fatalf("import: %d %s", code, errs)
	}
	convID := strings.Fields(out)[0]
	code, out, _ = d.run(t, "", "show", convID)
	if code != 0 || !strings.Contains(out, "# from the terminal") || !strings.Contains(out, "PONG from fake LLM") {
		t.Fatalf("show imported %s:\n%s", convID, out)
	}
	for _, format := range []string{"markdown", "json"} {
		code, out, errs = d.run(t, "", "export", "--format", format, convID)
		if code != 0 || !strings.Contains(out, "PONG from fake LLM") {
			t.Fatalf("export %s: %d %s\n%s", format, code, errs, out)
		}
	}
	if code, _, errs = d.run(t, "", "export", "--format", "pdf", convID); code != 1 || !strings.Contains(errs, "--format") {
		t.Fatalf("export pdf: %d %s", code, errs)
	}

	// a broken log: one line per violation, exit 1; import keeps the rest
	broken := "{\"seq\":1,\"type\":\"turn/start\",\"turnId\":\"t\"}\nnot json\n{\"seq\":3,\"type\":\"user/message\",\"turnId\":\"t\",\"messageId\":\"u\",\"text\":\"hi\"}\n"
	code, out, _ = d.run(t, broken, "validate", "-")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) < 2 || !strings.HasPrefix(lines[0], "2: ") {
		t.Fatalf("validate broken: %d\n%s", code, out)
	}
	for _, l := range lines {
		if i := strings.Index(l, ": "); i <= 0 {
			t.Fatalf("violation line %q is not LINE: message", l)
		}
	}
	code, out, errs = d.run(t, broken, "import", "-")
	if code != 0 || !strings.Contains(errs, "-:2: skipped") || !strings.Contains(out, "1 messages") {
		t.Fatalf("import broken: %d %s %s", code, out, errs)
	}
}

func TestCLIDoctorNativeStores(t *testing.T) {
	d := startDaemon(t)
	_, out, _ := d.run(t, "", "doctor")
	for _, want := range []string{"native store claude: sessions of this workspace: 1", "native store codex: not found"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

// A conversation opened from a terminal session keeps the session's
// interrupted turn marked, and keeps following the session after the
// terminal rewinds it: `ochatd import` and `ochatd show` say what happened.
func TestCLILinkedRewind(t *testing.T) {
	d := startDaemon(t)
	code, out, errs := d.run(t, "", "import", d.claudeFile)
	if code != 0 || !strings.Contains(errs, "opened a conversation") {
		t.Fatalf("import: %d %s %s", code, out, errs)
	}
	conv := strings.Fields(out)[0]
	claudeLine := func(parent, uuid, typ string, message map[string]any) string {
		b, _ := json.Marshal(map[string]any{"parentUuid": parent, "isSidechain": false, "type": typ, "userType": "external", "message": message,
			"uuid": uuid, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "cwd": d.ws, "sessionId": fixtureClaudeID, "version": "2.1.83"})
		return string(b) + "\n"
	}
	turn := func(parent, n string) string {
		u, a := "22222222-0000-4000-8000-0000000000u"+n, "22222222-0000-4000-8000-0000000000a"+n
		return claudeLine(parent, u, "user", map[string]any{"role": "user", "content": "NEW prompt " + n}) +
			claudeLine(u, a, "assistant", map[string]any{"id": "msg_new_" + n, "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
				"content": []map[string]any{{"type": "text", "text": "NEW answer " + n}}, "stop_reason": "end_turn"})
	}
	appendText := func(s string) {
		f, err := os.OpenFile(d.claudeFile, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(d.claudeFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")

	steps := []struct {
		name      string
		change    func()
		cmd       string   // "import" or "show"
		out, errs []string // substrings of stdout and stderr, in order
	}{
		{name: "the interrupted turn is marked", cmd: "show", out: []string{"SLOW: take your time", "## claude · cancelled", "PONG from fake LLM"}},
		{name: "rewound (head -n -2), then a new turn", change: func() {
			// Drop PONG's line and the last-prompt line, as `head -n -2 F > x && cat x > F` does.
			if err := os.WriteFile(d.claudeFile, []byte(strings.Join(lines[:len(lines)-2], "")), 0o644); err != nil {
				t.Fatal(err)
			}
			appendText(turn("f52c1170-5044-4bca-90b1-b2e84dc3eba6", "1"))
		}, cmd: "import", out: []string{conv}, errs: []string{"already opened as", "2 new message(s) from the terminal imported", "rewound", "last 1 message(s)"}},
		{name: "show has the rewound answer, then the new turn", cmd: "show", out: []string{"PONG from fake LLM", "NEW prompt 1", "NEW answer 1"}, errs: []string{"1 message(s)", "were rewound in the claude terminal session"}},
		{name: "later appends keep coming", change: func() { appendText(turn("22222222-0000-4000-8000-0000000000a1", "2")) }, cmd: "show",
			out: []string{"NEW answer 1", "NEW prompt 2", "NEW answer 2"}, errs: []string{"2 new message(s) from the terminal imported", "were rewound"}},
	}
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		arg := d.claudeFile
		if st.cmd == "show" {
			arg = conv
		}
		code, out, errs := d.run(t, "", st.cmd, arg)
		if code != 0 {
			t.Fatalf("%s: %s: %d %s", st.name, st.cmd, code, errs)
		}
		for _, c := range []struct {
			name, text string
			want       []string
		}{{"stdout", out, st.out}, {"stderr", errs, st.errs}} {
			rest := c.text
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%s: %s %s lacks %q (in order):\n%s", st.name, st.cmd, c.name, w, c.text)
				}
				rest = rest[i+len(w):]
			}
		}
	}
}
