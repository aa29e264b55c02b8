package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// runIn runs ochatd args (with --workspace) in this process with stdin.
func (w *trustWorld) runIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Version: "test", Getenv: os.Getenv}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Main(ctx, env, append(args[:1:1], append([]string{"--workspace", w.ws}, args[1:]...)...))
	return code, out.String(), errb.String()
}

// userAgentWorld is a daemon whose user settings define the testagent as
// "test" (with a comment and a trailing comma, as Zed writes settings) and
// whose untrusted workspace settings file is not JSON at all.
func userAgentWorld(t *testing.T) *trustWorld {
	bin := testagentPath(t)
	user := "// my agents\n{\"agent_servers\": {\"test\": {\"command\": \"" + bin + "\",},},}\n"
	return newTrustWorld(t, user, "{bad json")
}

// TestBrokenWorkspaceSettings: a broken untrusted workspace file is a
// problem listed by agents and doctor; the user's agent still answers.
func TestBrokenWorkspaceSettings(t *testing.T) {
	w := userAgentWorld(t)
	code, out, errs := w.run(t, "agents", "--json")
	if code != 0 {
		t.Fatalf("agents --json: %d %s", code, errs)
	}
	var res daemon.AgentsListResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	settings := agents.WorkspaceSettingsPath(w.ws)
	if len(res.Problems) != 1 || res.Problems[0].Path != settings || !strings.Contains(res.Problems[0].Message, "line 1, column 2") || !res.Problems[0].Untrusted {
		t.Errorf("problems = %+v", res.Problems)
	}
	code, out, _ = w.run(t, "agents")
	if code != 0 || !strings.Contains(out, "settings problem (workspace, left out): "+settings+": line 1, column 2") {
		t.Errorf("agents text (%d):\n%s", code, out)
	}
	code, out, errs = w.run(t, "chat", "--agent", "test", "PLAIN hello")
	if code != 0 || !strings.Contains(out, "hello") {
		t.Errorf("chat with the user's agent: %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = w.run(t, "doctor")
	if code != 1 || !strings.Contains(out, "FAIL  settings "+settings+": line 1, column 2") || !strings.Contains(out, "ok    agent test") {
		t.Errorf("doctor (%d):\n%s", code, out)
	}
}

func TestChatPermissionAnswers(t *testing.T) {
	w := userAgentWorld(t)
	tests := []struct {
		name, stdin, prompt string
		written             bool
		wantErr             string
	}{
		{"y", "y\n", "WRITE a.txt x", true, ""},
		{"option name", "always allow\n", "WRITE b.txt x", true, ""},
		{"option id", "reject\n", "WRITE c.txt x", false, ""},
		{"number", "1\n", "WRITE d.txt x", true, ""},
		{"unclear thrice", "maybe\nsure\nok\n", "WRITE e.txt x", false, "no clear answer: answering Reject"},
		{"unclear then yes", "maybe\nyes\n", "WRITE f.txt x", true, `"maybe" is not one of the options`},
		{"eof", "", "WRITE g.txt x", false, "stdin closed (use --yes / --no in scripts): answering Reject"},
		{"prompt on stdin", "WRITE h.txt x", "-", false, "stdin is the prompt; use --yes or --no: answering Reject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := w.runIn(t, tt.stdin, "chat", "--agent", "test", tt.prompt)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errs)
			}
			_, err := os.Stat(filepath.Join(w.ws, strings.Fields(tt.prompt + " " + tt.stdin)[1]))
			if tt.prompt == "-" {
				_, err = os.Stat(filepath.Join(w.ws, "h.txt"))
			}
			if (err == nil) != tt.written {
				t.Errorf("written = %v, want %v\n%s\n%s", err == nil, tt.written, out, errs)
			}
			if !strings.Contains(errs, tt.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, errs)
			}
		})
	}
}

func TestChatReasoningAndFlags(t *testing.T) {
	w := userAgentWorld(t)
	code, out, errs := w.run(t, "chat", "--agent", "test", "THINK done")
	if code != 0 || !strings.Contains(out, "thinking: Thinking about it.\ndone") {
		t.Errorf("reasoning (%d):\n%q\n%s", code, out, errs)
	}
	code, out, _ = w.run(t, "chat", "--agent", "test", "--quiet", "THINK done")
	if code != 0 || strings.Contains(out, "Thinking") || !strings.Contains(out, "done") {
		t.Errorf("--quiet (%d):\n%q", code, out)
	}
	code, out, errs = w.run(t, "chat", "--agent", "test", "FAIL")
	if code != 1 || !strings.Contains(errs, "turn failed") {
		t.Errorf("FAIL: %d\n%s\n%s", code, out, errs)
	}
	var errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &errb, Getenv: os.Getenv}
	if code := Main(context.Background(), env, []string{"chat", "--workspace", "", "PLAIN x"}); code != 2 || !strings.Contains(errb.String(), "name a directory") {
		t.Errorf(`--workspace "": %d %s`, code, errb.String())
	}
	code, _, errs = w.run(t, "conversations", "extra")
	if code != 2 || !strings.Contains(errs, "takes no arguments") {
		t.Errorf("conversations extra: %d %s", code, errs)
	}
	code, _, errs = w.run(t, "chat", "--help")
	if code != 0 || !strings.Contains(errs, "130 cancelled by Ctrl-C") {
		t.Errorf("chat --help: %d %s", code, errs)
	}
}

func TestConversationsEmpty(t *testing.T) {
	w := newTrustWorld(t, "", "")
	code, out, _ := w.run(t, "conversations")
	if code != 0 || !strings.Contains(out, "no conversations yet (start one with: ochatd chat") {
		t.Errorf("%d %q", code, out)
	}
	code, out, _ = w.run(t, "sessions")
	if code != 0 || !strings.Contains(out, "no sessions yet") {
		t.Errorf("sessions: %d %q", code, out)
	}
	code, _, errs := w.run(t, "sessions", "extra")
	if code != 2 || !strings.Contains(errs, "takes no arguments") {
		t.Errorf("sessions extra: %d %q", code, errs)
	}
}

func TestMatchOption(t *testing.T) {
	opts := []agents.PermissionOption{
		{OptionID: "allow", Name: "Allow", Kind: "allow_once"},
		{OptionID: "always", Name: "Always allow", Kind: "allow_always"},
		{OptionID: "reject", Name: "Reject", Kind: "reject_once"},
	}
	tests := []struct{ in, want string }{
		{"1", "allow"}, {" 3\n", "reject"}, {"4", ""}, {"0", ""},
		{"always", "always"}, {"ALWAYS ALLOW", "always"},
		{"y", "allow"}, {"Yes", "allow"}, {"n", "reject"}, {"no", "reject"},
		{"", ""}, {"maybe", ""},
	}
	for _, tt := range tests {
		if got := matchOption(opts, tt.in); got != tt.want {
			t.Errorf("matchOption(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := matchOption(opts[:2], "n"); got != "" {
		t.Errorf("n without a reject option = %q", got)
	}
}

func TestToolLine(t *testing.T) {
	ct := &chatTurn{toolNames: map[string]string{}}
	seg := func(id, name, status string) transcript.Segment {
		return transcript.Segment{Type: transcript.SegTool, ID: id, Name: name, Status: status}
	}
	if got := ct.toolLine(seg("t1", "", "running")); got != "[tool] t1 (running)" {
		t.Errorf("unnamed = %q", got)
	}
	ct.toolLine(seg("t2", "Read x", "pending"))
	if got := ct.toolLine(seg("t2", "", "completed")); got != "[tool] Read x (completed)" {
		t.Errorf("named earlier = %q", got)
	}
}

// TestChatCancelledElsewhere: a turn cancelled by another client exits 2
// and says so; show prints the status once.
func TestChatCancelledElsewhere(t *testing.T) {
	w := userAgentWorld(t)
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errs := w.run(t, "chat", "--agent", "test", "SLOW 400")
		done <- result{code, out, errs}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := daemon.Dial(ctx, daemon.DialOptions{Workspace: w.ws})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := daemon.NewClient(ctx, nc, "canceller", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var id string
	for id == "" {
		var res daemon.ListConversationsResult
		if err := cl.Call(ctx, daemon.MethodConversationsList, nil, &res); err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Conversations {
			if c.Running {
				id = c.ID
			}
		}
		if ctx.Err() != nil {
			t.Fatal("the chat turn never ran")
		}
		time.Sleep(20 * time.Millisecond) // poll, not an assertion
	}
	var cr daemon.CancelResult
	if err := cl.Call(ctx, daemon.MethodChatCancel, daemon.ConversationParams{ConversationID: id}, &cr); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != exitCancelledElsewhere || !strings.Contains(r.errs, "cancelled by another client or the daemon") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.errs)
	}
	code, out, _ := w.run(t, "show", id)
	if code != 0 || !strings.Contains(out, "· cancelled") || strings.Contains(out, "cancelled (cancelled)") {
		t.Errorf("show:\n%s", out)
	}
}

// TestAskInterrupted: Ctrl-C while the permission question waits on a
// terminal that never answers returns at once, answering cancelled.
func TestAskInterrupted(t *testing.T) {
	pr, pw := io.Pipe() // a terminal nobody types into
	defer pw.Close()
	ct := &chatTurn{env: &Env{Stderr: io.Discard}, stdin: pr, interrupted: make(chan struct{})}
	got := make(chan daemon.RespondParams, 1)
	go func() {
		r, how := ct.ask(daemon.PermissionParams{PermissionID: "p1", Options: []agents.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: "allow_once"}}})
		if how != askInterrupted {
			r = daemon.RespondParams{}
		}
		got <- r
	}()
	close(ct.interrupted)
	select {
	case r := <-got:
		if !r.Cancelled || r.PermissionID != "p1" {
			t.Errorf("answer = %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ask still blocked on stdin after Ctrl-C")
	}
}

func TestFailureHint(t *testing.T) {
	var errb bytes.Buffer
	ct := &chatTurn{env: &Env{Stdout: io.Discard, Stderr: &errb}, agent: "codex", atLineStart: true, interrupted: make(chan struct{})}
	code := ct.end(transcript.Event{Type: transcript.EvTurnFailed, Message: "agent error: Authentication required"})
	if code != 1 || !strings.Contains(errb.String(), "hint: run `codex login` or set OPENAI_API_KEY") {
		t.Errorf("exit %d stderr %q", code, errb.String())
	}
}

// TestEndRejected: a turn the agent cancelled after the user rejected its
// permission request says so and exits ExitRejected, not "cancelled by
// another client".
func TestEndRejected(t *testing.T) {
	tests := []struct {
		rejected bool
		code     int
		want     string
	}{
		{true, ExitRejected, "(stopped: you rejected the permission request)"},
		{false, exitCancelledElsewhere, "(stopped: cancelled by another client or the daemon)"},
	}
	for _, tt := range tests {
		var errb bytes.Buffer
		ct := &chatTurn{env: &Env{Stdout: io.Discard, Stderr: &errb}, rejected: tt.rejected, atLineStart: true, interrupted: make(chan struct{})}
		code := ct.end(transcript.Event{Type: transcript.EvTurnCompleted, StopReason: "cancelled"})
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("rejected=%v: exit %d stderr %q", tt.rejected, code, errb.String())
		}
	}
}

// TestChatPermissionAnsweredElsewhere: a second client answers the CLI's
// permission question; the CLI drops the question at once (stdin never
// answers), names the option chosen and streams the turn to its end.
func TestChatPermissionAnsweredElsewhere(t *testing.T) {
	w := userAgentWorld(t)
	pr, pw := io.Pipe() // a terminal nobody types into
	defer pw.Close()
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		env := &Env{Stdin: pr, Stdout: &out, Stderr: &errb, Version: "test", Getenv: os.Getenv}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		code := Main(ctx, env, []string{"chat", "--workspace", w.ws, "--agent", "test", "WRITE pty.txt hi"})
		done <- result{code, out.String(), errb.String()}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := daemon.Dial(ctx, daemon.DialOptions{Workspace: w.ws})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := daemon.NewClient(ctx, nc, "other-editor", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var perm string
	for perm == "" {
		var res daemon.ListConversationsResult
		if err := cl.Call(ctx, daemon.MethodConversationsList, nil, &res); err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Conversations {
			if !c.Running {
				continue
			}
			var sub daemon.SubscribeResult
			if err := cl.Call(ctx, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: c.ID}, &sub); err != nil {
				t.Fatal(err)
			}
			if len(sub.Permissions) > 0 {
				perm = sub.Permissions[0].PermissionID
			}
		}
		if ctx.Err() != nil {
			t.Fatal("no permission question came")
		}
		time.Sleep(20 * time.Millisecond) // poll, not an assertion
	}
	if err := cl.Call(ctx, daemon.MethodPermissionRespond, daemon.RespondParams{PermissionID: perm, OptionID: "allow"}, nil); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the CLI still waits on its question after another client answered")
	}
	if r.code != 0 || !strings.Contains(r.errs, "(answered in another editor: Allow)") || strings.Contains(r.errs, "already answered elsewhere") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errs)
	}
	if b, err := os.ReadFile(filepath.Join(w.ws, "pty.txt")); err != nil || string(b) != "hi" {
		t.Errorf("pty.txt = %q, %v", b, err)
	}
}

// TestChatEmptyPrompt: an empty prompt (argument or stdin) says so before
// the usage text and exits 2 without dialling the daemon.
func TestChatEmptyPrompt(t *testing.T) {
	for _, tt := range []struct{ stdin, arg string }{{"", ""}, {"  \n", "-"}, {"", "   "}} {
		var out, errb bytes.Buffer
		env := &Env{Stdin: strings.NewReader(tt.stdin), Stdout: &out, Stderr: &errb, Version: "test", Getenv: func(string) string { return "" }}
		args := []string{"chat", "--workspace", t.TempDir()}
		if tt.arg != "" {
			args = append(args, tt.arg)
		}
		code := Main(context.Background(), env, args)
		if code != 2 || !strings.HasPrefix(errb.String(), "ochatd chat: empty prompt\nusage: ochatd chat") {
			t.Errorf("%q/%q: exit %d stderr:\n%s", tt.stdin, tt.arg, code, errb.String())
		}
	}
}

// TestTerminalEscapesFiltered: escape sequences in an agent's answer and in
// a conversation title reach chat, show, conversations and sessions output
// as visible text, never raw; --json keeps the text (JSON-escaped).
func TestTerminalEscapesFiltered(t *testing.T) {
	w := userAgentWorld(t)
	const evil = "\x1b]0;pwned\x07\x1b[2Jhi\u202e"
	const shown = `^[]0;pwned^G^[[2Jhi\u202e`
	code, out, errs := w.run(t, "chat", "--agent", "test", "PLAIN "+evil)
	if code != 0 || !strings.Contains(out, shown) || strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Fatalf("chat (%d): %q\n%s", code, out, errs)
	}
	code, out, _ = w.run(t, "conversations", "--json")
	var convs []struct{ ID, Title string }
	if err := json.Unmarshal([]byte(out), &convs); code != 0 || err != nil || len(convs) != 1 {
		t.Fatalf("conversations --json (%d, %v): %s", code, err, out)
	}
	id := convs[0].ID
	if err := w.cl(t).Call(context.Background(), daemon.MethodConversationsRename, daemon.RenameParams{ConversationID: id, Title: ptrTo("t\x1b[31m\ttab\nline")}, nil); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"show", id}, {"conversations"}, {"sessions"}} {
		code, out, errs := w.run(t, args...)
		if code != 0 || strings.ContainsAny(out, "\x1b\x07\u202e") || !strings.Contains(out, "t^[[31m") {
			t.Errorf("%v (%d): %q\n%s", args, code, out, errs)
		}
		if args[0] == "show" && !strings.Contains(out, shown) {
			t.Errorf("show lacks the escaped answer: %q", out)
		}
	}
	code, out, _ = w.run(t, "chat", "--json", "--agent", "test", "--conversation", id, "PLAIN "+evil)
	if code != 0 || !strings.Contains(out, `"delta":"\u001b]0;pw`) || strings.Contains(out, "\x1b") {
		t.Errorf("chat --json (%d): %q", code, out)
	}
}

func ptrTo[T any](v T) *T { return &v }

// cl is a client of w's daemon, closed when the test ends.
func (w *trustWorld) cl(t *testing.T) *daemon.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := daemon.Dial(ctx, daemon.DialOptions{Workspace: w.ws})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := daemon.NewClient(ctx, nc, "test-client", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
