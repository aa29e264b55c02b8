package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
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
	code, outs, errs := w.run(t, "chat", "--help")
	if code != 0 || !strings.Contains(outs, "130 cancelled by Ctrl-C") || !strings.Contains(outs, "-agent") || errs != "" {
		t.Errorf("chat --help (help goes to stdout, all of it): %d\nstdout: %s\nstderr: %s", code, outs, errs)
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

// chatWorld is a trustWorld (user agent "test" is the testagent) whose
// daemon runs with opts; with gated, the workspace socket is a gatedProxy in
// front of the daemon's real socket (realSock).
type chatWorld struct {
	*trustWorld
	realSock string
	proxy    *gatedProxy
	stop     func() // stops the daemon (Serve, then Close); idempotent
}

func newChatWorld(t *testing.T, gated bool, opts daemon.Options) *chatWorld {
	t.Helper()
	bin := testagentPath(t)
	base, err := os.MkdirTemp("", "occ")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	w := &trustWorld{base: base, ws: filepath.Join(base, "ws"), cfg: filepath.Join(base, "config"), logPath: filepath.Join(base, "daemon.log")}
	for _, d := range []string{"run", "state", "config/ochat", "home", "ws"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "run"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
	t.Setenv("XDG_CONFIG_HOME", w.cfg)
	t.Setenv("HOME", filepath.Join(base, "home"))
	user := `{"agent_servers": {"test": {"command": "` + bin + `"}}}`
	if err := os.WriteFile(filepath.Join(w.cfg, "ochat", "settings.json"), []byte(user), 0o600); err != nil {
		t.Fatal(err)
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
	cw := &chatWorld{trustWorld: w, realSock: sock}
	if gated {
		cw.realSock = filepath.Join(base, "real.sock")
	}
	ln, err := daemon.Listen(cw.realSock)
	if err != nil {
		t.Fatal(err)
	}
	if gated {
		pln, err := daemon.Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		cw.proxy = &gatedProxy{ln: pln, real: cw.realSock, open: make(chan struct{})}
		go cw.proxy.serve()
		t.Cleanup(func() { pln.Close(); cw.proxy.release() })
	}
	opts.Workspace, opts.Store, opts.UserConfigDir, opts.Version = w.ws, st, w.cfg, "test"
	opts.Logger = slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := daemon.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	var once sync.Once
	cw.stop = func() {
		once.Do(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ccancel()
			srv.Close(cctx)
			cancel()
			<-done
		})
	}
	t.Cleanup(func() {
		cw.stop()
		st.Close()
		logf.Close()
	})
	return cw
}

// direct is a client of the daemon's real socket (never gated).
func (cw *chatWorld) direct(t *testing.T) *daemon.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := daemon.Dial(ctx, daemon.DialOptions{Workspace: cw.ws, Socket: cw.realSock})
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

// gatedProxy forwards each connection on ln to the daemon socket real.
// Once the client of a connection has sent ochat/chat/send, nothing more
// goes from the daemon to that client until release: the client reads no
// more, as a client stuck on a slow stdout would, and the daemon's queue
// for it overflows.
type gatedProxy struct {
	ln   net.Listener
	real string
	open chan struct{}
	once sync.Once
}

func (p *gatedProxy) release() { p.once.Do(func() { close(p.open) }) }

func (p *gatedProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		d, err := net.Dial("unix", p.real)
		if err != nil {
			c.Close()
			continue
		}
		var sent atomic.Bool
		go func() { // client → daemon
			defer d.Close()
			buf := make([]byte, 64<<10)
			var tail []byte // the end of the previous read, for a name split across reads
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if bytes.Contains(append(tail, buf[:n]...), []byte(daemon.MethodChatSend)) {
						sent.Store(true)
					}
					tail = append(tail[:0], buf[max(0, n-64):n]...)
					if _, werr := d.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // daemon → client
			defer c.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := d.Read(buf)
				if n > 0 {
					if sent.Load() {
						<-p.open
					}
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type chatResult struct {
	code      int
	out, errs string
}

// startChat runs `ochatd chat --workspace WS args…` in this process with
// stdin; its stderr can be read while it runs.
func startChat(ws string, stdin io.Reader, args ...string) (<-chan chatResult, *syncBuffer) {
	done := make(chan chatResult, 1)
	errb := &syncBuffer{}
	go func() {
		var out bytes.Buffer
		env := &Env{Stdin: stdin, Stdout: &out, Stderr: errb, Version: "test", Getenv: os.Getenv}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		code := Main(ctx, env, append([]string{"chat", "--workspace", ws}, args...))
		done <- chatResult{code, out.String(), errb.String()}
	}()
	return done, errb
}

// waitFor polls cond (every 20 ms, not a timing assertion) until it holds,
// failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// floodText is FLOOD n's answer.
func floodText(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strconv.Itoa(i) + " ")
	}
	return b.String()
}

// TestChatFallsBehind: a chat client that stops reading while the agent
// floods is dropped by the daemon (ochat/resync); once it reads again it
// prints the whole answer, in order, once, and ends with the turn's end —
// the plain text exactly, and with --json events up to where it fell
// behind, one resync line with the final message, and turn.completed last.
// The daemon queues at most 64 notifications per client and the turn has
// ended before the client reads again, so the catch-up comes from the store.
func TestChatFallsBehind(t *testing.T) {
	const n = 20000
	want := floodText(n)
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			cw := newChatWorld(t, true, daemon.Options{ClientQueue: 64})
			args := []string{"--agent", "test", fmt.Sprintf("FLOOD %d", n)}
			if asJSON {
				args = append([]string{"--json"}, args...)
			}
			done, _ := startChat(cw.ws, strings.NewReader(""), args...)
			cl := cw.direct(t)
			waitFor(t, "the daemon dropping the stalled client", func() bool {
				b, _ := os.ReadFile(cw.logPath)
				return bytes.Contains(b, []byte("client fell behind"))
			})
			waitFor(t, "the turn to end", func() bool {
				var res daemon.ListConversationsResult
				if err := cl.Call(context.Background(), daemon.MethodConversationsList, nil, &res); err != nil {
					t.Fatal(err)
				}
				return len(res.Conversations) == 1 && !res.Conversations[0].Running
			})
			cw.proxy.release()
			r := <-done
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.errs)
			}
			if !asJSON {
				if r.out != want+"\n" {
					t.Errorf("stdout is %d bytes, want %d; first difference at byte %d", len(r.out), len(want)+1, firstDiff(r.out, want+"\n"))
				}
				return
			}
			lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
			var text strings.Builder
			var seq int64
			resyncs := 0
			for i, l := range lines {
				var line struct {
					TurnID string            `json:"turnId"`
					Event  *transcript.Event `json:"event"`
					Resync *ChatResync       `json:"resync"`
				}
				if err := json.Unmarshal([]byte(l), &line); err != nil || line.TurnID == "" {
					t.Fatalf("line %d: %v: %s", i+1, err, l)
				}
				switch {
				case line.Resync != nil:
					resyncs++
					if line.Resync.AfterSeq != seq || line.Resync.LastSeq != 0 || !strings.HasPrefix(line.Resync.Reason, "client fell more than 64") {
						t.Errorf("resync line after seq %d: %+v", seq, line.Resync)
					}
					if got := messageText(line.Resync.Message); got != want {
						t.Errorf("resync message text is %d bytes, want %d", len(got), len(want))
					}
					if !strings.HasPrefix(want, text.String()) {
						t.Errorf("events before the resync are not a prefix of the answer")
					}
					text.Reset()
					text.WriteString(want)
				case line.Event != nil && line.Event.Type == transcript.EvContentDelta:
					if line.Event.Seq != seq+1 {
						t.Fatalf("line %d: seq %d after %d", i+1, line.Event.Seq, seq)
					}
					seq = line.Event.Seq
					text.WriteString(line.Event.Delta)
				case line.Event != nil && line.Event.Terminal():
					if i != len(lines)-1 || line.Event.Type != transcript.EvTurnCompleted || line.Event.StopReason != "end_turn" {
						t.Errorf("line %d of %d: %+v", i+1, len(lines), line.Event)
					}
				default:
					t.Errorf("line %d: %s", i+1, l)
				}
			}
			if resyncs != 1 || text.String() != want || !strings.Contains(lines[len(lines)-1], `"turn.completed"`) {
				t.Errorf("%d resync lines, text %d bytes (want %d), last line %s", resyncs, text.Len(), len(want), lines[len(lines)-1])
			}
		})
	}
}

func messageText(m transcript.Message) string {
	var b strings.Builder
	for _, s := range m.Segments {
		if s.Type == transcript.SegContent {
			b.WriteString(s.Content)
		}
	}
	return b.String()
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// TestCatchUp: after ochat/resync, what the new snapshot holds beyond what
// was printed is printed once, from the replay events, from a truncated
// turn's partial message, or from the stored message of a turn that ended.
func TestCatchUp(t *testing.T) {
	content := func(s string) transcript.Segment { return transcript.Segment{Type: transcript.SegContent, Content: s} }
	tool := func(status string) transcript.Segment {
		return transcript.Segment{Type: transcript.SegTool, ID: "t1", Name: "Read a.txt", Status: status}
	}
	delta := func(seq int64, s string) transcript.Event {
		return transcript.Event{Type: transcript.EvContentDelta, Seq: seq, Delta: s}
	}
	tests := []struct {
		name      string
		json      bool
		sub       daemon.SubscribeResult
		out       string // stdout after "0 1 2 " and the tool line were printed live
		done      bool
		code      int
		lastSeq   int64
		errSubstr string
	}{
		{
			name: "replay events",
			sub: daemon.SubscribeResult{Running: &daemon.RunningTurn{TurnID: "T", LastSeq: 6,
				Events: []transcript.Event{delta(1, "0 "), delta(2, "1 "), delta(3, "2 "), delta(4, "3 "), delta(5, "4 "), delta(6, "5 ")}}},
			out: "3 4 5 ", lastSeq: 6,
		},
		{
			name: "replay ends the turn",
			sub: daemon.SubscribeResult{Running: &daemon.RunningTurn{TurnID: "T", LastSeq: 5,
				Events: []transcript.Event{delta(4, "3 "), {Type: transcript.EvTurnCompleted, Seq: 5, StopReason: "end_turn"}}}},
			out: "3 \n", done: true, lastSeq: 5,
		},
		{
			name: "truncated",
			sub: daemon.SubscribeResult{Running: &daemon.RunningTurn{TurnID: "T", Truncated: true, LastSeq: 90,
				Message: &transcript.Message{Segments: []transcript.Segment{content("0 1 "), tool("completed"), content("2 3 4")}}}},
			out: "\n[tool] Read a.txt (completed)\n3 4", lastSeq: 90,
		},
		{
			name: "ended while behind",
			sub: daemon.SubscribeResult{Messages: []transcript.Message{{ID: "U", Role: transcript.RoleUser, Content: "x"},
				{ID: "T", Role: transcript.RoleAssistant, Status: transcript.StatusFailed, Error: "agent exited \x1b[2J",
					Segments: []transcript.Segment{content("0 1 2 3 ")}}}},
			out: "3 \n", done: true, code: 1, lastSeq: 3, errSubstr: "turn failed: agent exited ^[[2J",
		},
		{
			name: "ended while behind, json",
			json: true,
			sub: daemon.SubscribeResult{Messages: []transcript.Message{{ID: "T", Role: transcript.RoleAssistant, Status: transcript.StatusCompleted, StopReason: "end_turn",
				Segments: []transcript.Segment{content("0 1 2 3 ")}}}},
			out: `{"conversationId":"C","turnId":"T","messageId":"T","agent":"test","resync":{"reason":"behind","afterSeq":3,"message":{"id":"T","timestamp":0,"role":"assistant","segments":[{"type":"content","content":"0 1 2 3 "}],"status":"completed","stopReason":"end_turn"}}}` + "\n" +
				`{"conversationId":"C","turnId":"T","messageId":"T","agent":"test","event":{"type":"turn.completed","stopReason":"end_turn"}}` + "\n",
			done: true, lastSeq: 3,
		},
		{
			name: "truncated, json",
			json: true,
			sub: daemon.SubscribeResult{Running: &daemon.RunningTurn{TurnID: "T", Agent: "test", Truncated: true, LastSeq: 9,
				Message: &transcript.Message{ID: "T", Segments: []transcript.Segment{content("0 1 2 3 ")}}}},
			out:     `{"conversationId":"C","turnId":"T","messageId":"T","agent":"test","resync":{"reason":"behind","afterSeq":3,"lastSeq":9,"message":{"id":"T","timestamp":0,"role":"","segments":[{"type":"content","content":"0 1 2 3 "}]}}}` + "\n",
			lastSeq: 9,
		},
		{
			name:    "another turn running",
			sub:     daemon.SubscribeResult{Running: &daemon.RunningTurn{TurnID: "T2"}, Messages: []transcript.Message{{ID: "T", Status: transcript.StatusCancelled}}},
			out:     "\n",
			done:    true,
			code:    exitCancelledElsewhere,
			lastSeq: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			ct := &chatTurn{env: &Env{Stdout: &out, Stderr: &errb}, json: tt.json, agent: "test", atLineStart: true, interrupted: make(chan struct{}),
				res:   daemon.SendResult{ConversationID: "C", TurnID: "T", AssistantMessageID: "T"},
				tools: map[string]string{}, toolNames: map[string]string{}, files: map[string]string{}, asked: map[string]bool{}}
			if !tt.json { // printed live before falling behind
				ct.show(delta(1, "0 "))
				ct.show(transcript.Event{Type: transcript.EvActivityUpsert, Segment: ptrTo(tool("running"))})
				ct.show(delta(2, "1 "))
				ct.show(delta(3, "2 "))
				out.Reset()
			}
			ct.lastSeq = 3
			code, done := ct.catchUp(context.Background(), tt.sub, "behind")
			if out.String() != tt.out || done != tt.done || code != tt.code || ct.lastSeq != tt.lastSeq {
				t.Errorf("catchUp = %d, %v, lastSeq %d; stdout:\n%q\nwant %d, %v, lastSeq %d; stdout:\n%q", code, done, ct.lastSeq, out.String(), tt.code, tt.done, tt.lastSeq, tt.out)
			}
			if !strings.Contains(errb.String(), tt.errSubstr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.errSubstr)
			}
		})
	}
}

// TestChatSignalCancels: SIGHUP (the terminal closed) and SIGTERM cancel a
// turn waiting on a permission question exactly as Ctrl-C does: the
// question is answered cancelled, the turn ends cancelled, nothing is
// written, and the exit status is 128 + the signal's number. The signal is
// sent to this test process, where chat has registered for it.
func TestChatSignalCancels(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			w := userAgentWorld(t)
			pr, pw := io.Pipe() // a terminal nobody types into
			defer pw.Close()
			done, errb := startChat(w.ws, pr, "--agent", "test", "WRITE sig.txt hi")
			waitFor(t, "the permission question", func() bool { return strings.Contains(errb.String(), "choose 1-3") })
			if err := syscall.Kill(os.Getpid(), sig); err != nil {
				t.Fatal(err)
			}
			var r chatResult
			select {
			case r = <-done:
			case <-time.After(time.Minute):
				t.Fatal("chat did not end after the signal")
			}
			if r.code != 128+int(sig) || !strings.Contains(r.errs, sig.String()+": cancelling the turn") || !strings.Contains(r.errs, "(stopped: cancelled)") {
				t.Errorf("exit %d, stderr:\n%s", r.code, r.errs)
			}
			if _, err := os.Stat(filepath.Join(w.ws, "sig.txt")); err == nil {
				t.Error("sig.txt was written")
			}
		})
	}
}

// TestChatDaemonStops: the daemon stopping mid-turn (Server.Close while
// the client is connected) ends the turn as failed ("daemon stopped") and
// sends turn.failed before closing: chat says so cleanly with exit 1, not
// as a lost connection. The conversation id is on stderr while the turn
// runs.
func TestChatDaemonStops(t *testing.T) {
	cw := newChatWorld(t, false, daemon.Options{})
	done, errb := startChat(cw.ws, strings.NewReader(""), "--agent", "test", "SLOW 400")
	waitFor(t, "the conversation id and the turn's first chunk", func() bool {
		return strings.Contains(errb.String(), "(to stop the turn from elsewhere: ochatd cancel --workspace "+cw.ws+" ")
	})
	cl := cw.direct(t)
	waitFor(t, "the turn to run", func() bool {
		var res daemon.ListConversationsResult
		return cl.Call(context.Background(), daemon.MethodConversationsList, nil, &res) == nil && len(res.Conversations) == 1 && res.Conversations[0].Running
	})
	cw.stop()
	r := <-done
	if r.code != 1 || !strings.Contains(r.errs, "ochatd: turn failed: daemon stopped\nhint: the daemon stopped") || strings.Contains(r.errs, "connection to the daemon ended") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.errs)
	}
	if !strings.HasPrefix(r.errs, "conversation: ") {
		t.Errorf("stderr does not start with the conversation id:\n%s", r.errs)
	}
}

// TestChatWriteCRLF: a CRLF split across two deltas prints as a line end;
// a lone CR is visible.
func TestChatWriteCRLF(t *testing.T) {
	tests := []struct {
		deltas []string
		want   string
	}{
		{[]string{"a\r", "\nb"}, "a\r\nb\n"},
		{[]string{"a\r\n", "b"}, "a\r\nb\n"},
		{[]string{"50%\r", "100%"}, "50%^M100%\n"},
		{[]string{"a\r"}, "a\r\n"},
		{[]string{"\x1b[2J"}, "^[[2J\n"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		ct := &chatTurn{env: &Env{Stdout: &out, Stderr: io.Discard}, atLineStart: true, interrupted: make(chan struct{})}
		for _, d := range tt.deltas {
			ct.show(transcript.Event{Type: transcript.EvContentDelta, Delta: d})
		}
		ct.end(transcript.Event{Type: transcript.EvTurnCompleted, StopReason: "end_turn"})
		if out.String() != tt.want {
			t.Errorf("%q: printed %q, want %q", tt.deltas, out.String(), tt.want)
		}
	}
}

// TestAgentsUntrustedRedefinition: `ochatd agents` with an untrusted
// workspace file that redefines the user's agent and defines a new one
// says, per agent, what trusting the file would change: the command the
// redefined agent would run instead of the user's, and that the new one
// would be added with its command.
func TestAgentsUntrustedRedefinition(t *testing.T) {
	bin := testagentPath(t)
	user := `{"agent_servers": {"ta1": {"command": "` + bin + `"}}}`
	ws := `{"agent_servers": {"ta1": {"command": "/bin/echo"}, "fresh": {"command": "fresh-acp", "args": ["--acp"]}}}`
	w := newTrustWorld(t, user, ws)
	code, out, errs := w.run(t, "agents")
	if code != 0 {
		t.Fatalf("agents: %d\n%s", code, errs)
	}
	for _, want := range []string{
		"trusting them would make ta1 run `/bin/echo` instead of `" + bin + "`",
		"only the untrusted file defines fresh: trusting it would add the agent, running `fresh-acp --acp`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("agents output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "only the untrusted file defines ta1") {
		t.Errorf("the redefined user agent is called new:\n%s", out)
	}
}

// chatChildEnv names the environment variable that makes TestChatChild run
// `ochatd chat` with the JSON-encoded arguments it holds, as a separate
// process whose stdout and stderr are the real fds 1 and 2 — where Go's
// default SIGPIPE kills the process and where a signal to the process
// cannot reach the test binary.
const chatChildEnv = "OCHAT_TEST_CHAT_CHILD"

// TestChatChild is not a test: it is the child process of startChatChild.
func TestChatChild(t *testing.T) {
	raw := os.Getenv(chatChildEnv)
	if raw == "" {
		t.Skip("only the child of startChatChild")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(99)
	}
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Version: "test", Getenv: os.Getenv}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	os.Exit(Main(ctx, env, append([]string{"chat"}, args...)))
}

// startChatChild starts `ochatd chat args…` as a child process (this test
// binary running TestChatChild) with stdout and stderr as given; the
// environment (XDG dirs of the test's world) is inherited.
func startChatChild(t *testing.T, stdout, stderr io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChatChild$")
	cmd.Env = append(os.Environ(), chatChildEnv+"="+string(raw))
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// exitStatus is cmd's exit status after Wait returned err; a process
// killed by a signal fails the test, naming it.
func exitStatus(t *testing.T, cmd *exec.Cmd, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("chat was killed by %v", ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// onlyConversation is the one conversation of cw's daemon, and its
// messages; it fails the test unless there is exactly one.
func onlyConversation(t *testing.T, cl *daemon.Client) (daemon.ConversationInfo, []transcript.Message) {
	t.Helper()
	var list daemon.ListConversationsResult
	if err := cl.Call(context.Background(), daemon.MethodConversationsList, nil, &list); err != nil || len(list.Conversations) != 1 {
		t.Fatalf("conversations: %v %+v", err, list.Conversations)
	}
	c := list.Conversations[0]
	var got daemon.GetConversationResult
	if err := cl.Call(context.Background(), daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: c.ID}, &got); err != nil {
		t.Fatal(err)
	}
	return c, got.Messages
}

// TestChatOutputGone: `ochatd chat --yes "WRITE …" | head` where head has
// exited. The reader of chat's stdout (and, with 2>&1, of its stderr) is
// gone before chat writes; the write fails with EPIPE instead of SIGPIPE
// killing chat, and chat cancels the turn as Ctrl-C does — its permission
// request is answered cancelled, not allowed, although --yes — waits for
// the turn to end, and exits 141 saying nothing. The conversation is then
// not running, its turn is stored cancelled, nothing was written, and the
// next send is accepted.
func TestChatOutputGone(t *testing.T) {
	for _, tt := range []struct {
		name         string
		stderrToPipe bool // 2>&1: the first write, the conversation line, fails
	}{
		{"stdout and stderr (2>&1)", true},
		{"stdout only: fails at the tool line, before the permission", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cw := newChatWorld(t, false, daemon.Options{})
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			pr.Close() // head has exited
			var errb syncBuffer
			var stderr io.Writer = &errb
			if tt.stderrToPipe {
				stderr = pw
			}
			cmd := startChatChild(t, pw, stderr, "--workspace", cw.ws, "--agent", "test", "--yes", "WRITE pipe.txt hi")
			pw.Close()
			if code := exitStatus(t, cmd, cmd.Wait()); code != 141 {
				t.Errorf("exit %d, want 141; stderr:\n%s", code, errb.String())
			}
			if !tt.stderrToPipe && (strings.Contains(errb.String(), "cancelling") || strings.Contains(errb.String(), "(stopped") || strings.Contains(errb.String(), "Allow")) {
				t.Errorf("stderr not quiet, or the permission was allowed:\n%s", errb.String())
			}
			cl := cw.direct(t)
			c, msgs := onlyConversation(t, cl)
			if c.Running || len(msgs) == 0 || msgs[len(msgs)-1].Status != transcript.StatusCancelled {
				t.Errorf("running %v, messages %+v; want the turn stored cancelled", c.Running, msgs)
			}
			if _, err := os.Stat(filepath.Join(cw.ws, "pipe.txt")); err == nil {
				t.Error("pipe.txt was written")
			}
			var res daemon.SendResult
			if err := cl.Call(context.Background(), daemon.MethodChatSend, daemon.SendParams{ConversationID: c.ID, Agent: "test", Text: "PLAIN again"}, &res); err != nil {
				t.Errorf("next send: %v", err)
			}
		})
	}
}

// TestChatSecondSignalGivesUp: timeout(1) sends SIGTERM to chat and again
// to its process group. With an agent that ignores the cancel (HANG), the
// first TERM cancels and the second stops waiting: chat says the cancel
// was sent and the daemon stops the agent after its grace — not that the
// turn is left running — and exits 143; the daemon then ends the turn
// cancelled after its (here short) cancel grace.
func TestChatSecondSignalGivesUp(t *testing.T) {
	cw := newChatWorld(t, false, daemon.Options{CancelGrace: 500 * time.Millisecond})
	var out, errb syncBuffer
	cmd := startChatChild(t, &out, &errb, "--workspace", cw.ws, "--agent", "test", "HANG")
	waitFor(t, "HANG's chunk", func() bool { return out.String() != "" })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cancel", func() bool { return strings.Contains(errb.String(), "terminated: cancelling the turn") })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := exitStatus(t, cmd, cmd.Wait())
	errs := errb.String()
	if code != 143 || !strings.Contains(errs, "ochatd: terminated: not waiting for the turn to end: the cancel was sent; if the agent does not end the turn, the daemon stops the agent after its cancel grace (10s by default)") ||
		strings.Contains(errs, "leaving the turn running") {
		t.Errorf("exit %d, stderr:\n%s", code, errs)
	}
	cl := cw.direct(t)
	waitFor(t, "the daemon to end the turn", func() bool { c, _ := onlyConversation(t, cl); return !c.Running })
	if _, msgs := onlyConversation(t, cl); msgs[len(msgs)-1].Status != transcript.StatusCancelled {
		t.Errorf("turn stored %q, want cancelled", msgs[len(msgs)-1].Status)
	}
}

// TestOutputWatch: the first EPIPE calls the callback once, at once if it
// is set already, else when it is set; other errors and later EPIPEs do
// not.
func TestOutputWatch(t *testing.T) {
	epipe := &os.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}
	tests := []struct {
		name      string
		errs      []error // the writes' errors, in order
		setBefore bool    // onGone before the writes
		want      int     // callback calls
	}{
		{"set, then EPIPE twice", []error{nil, epipe, epipe}, true, 1},
		{"EPIPE before set", []error{epipe}, false, 1},
		{"other error", []error{errors.New("disk full"), nil}, true, 0},
		{"no error", []error{nil}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &outputWatch{}
			calls := 0
			if tt.setBefore {
				o.onGone(func() { calls++ })
			}
			for _, e := range tt.errs {
				w := o.wrap(errWriter{e})
				if _, err := w.Write([]byte("x")); err != e {
					t.Errorf("Write error %v, want %v", err, e)
				}
			}
			if !tt.setBefore {
				o.onGone(func() { calls++ })
			}
			if calls != tt.want {
				t.Errorf("callback called %d times, want %d", calls, tt.want)
			}
		})
	}
}

// errWriter fails every write with err (nil: succeeds).
type errWriter struct{ err error }

func (w errWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}
