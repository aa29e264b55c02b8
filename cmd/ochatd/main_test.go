package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"

	"github.com/ochat-dev/ochat/internal/testenv"
)

var ochatdBin, testagentBin string

func TestMain(m *testing.M) {
	cleanup, err := testenv.Hermetic()
	if err != nil {
		panic(err)
	}
	defer cleanup()
	dir, err := os.MkdirTemp("", "ochatd-bin")
	if err != nil {
		panic(err)
	}
	ochatdBin = filepath.Join(dir, "ochatd")
	testagentBin = filepath.Join(dir, "testagent")
	for _, b := range [][2]string{{ochatdBin, "github.com/ochat-dev/ochat/cmd/ochatd"}, {testagentBin, "github.com/ochat-dev/ochat/internal/testagent/cmd/testagent"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			os.Stderr.Write(out)
			panic(err)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cliEnv is a private user environment: config (the testagent as agent
// "test"), state, runtime dir and a workspace.
type cliEnv struct {
	t    testing.TB
	root string
	ws   string
	env  []string
}

func newCLIEnv(t testing.TB) *cliEnv {
	root, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	e := &cliEnv{t: t, root: root, ws: filepath.Join(root, "ws")}
	for _, d := range []string{e.ws, filepath.Join(root, "config", "ochat"), filepath.Join(root, "state"), filepath.Join(root, "run"), filepath.Join(root, "agent")} {
		os.MkdirAll(d, 0o700)
	}
	settings, _ := json.Marshal(map[string]any{"agent_servers": map[string]any{
		"test": map[string]any{"command": testagentBin, "env": map[string]string{"TESTAGENT_STATE": filepath.Join(root, "agent")}},
	}})
	os.WriteFile(filepath.Join(root, "config", "ochat", "settings.json"), settings, 0o600)
	e.env = append(os.Environ(),
		"XDG_CONFIG_HOME="+filepath.Join(root, "config"),
		"XDG_STATE_HOME="+filepath.Join(root, "state"),
		"XDG_RUNTIME_DIR="+filepath.Join(root, "run"),
		"OCHATD_IDLE=2s",
	)
	t.Cleanup(func() {
		// Auto-started daemons exit after OCHATD_IDLE; wait for their sockets.
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			// (Not dialling: a connection would reset the idle timer.)
			socks, _ := filepath.Glob(filepath.Join(root, "run", "ochat", "*.sock"))
			if len(socks) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		os.RemoveAll(root)
	})
	return e
}

// run runs ochatd with args and returns stdout, stderr and the exit status.
func (e *cliEnv) run(stdin string, args ...string) (string, string, int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ochatdBin, args...)
	cmd.Env = e.env
	cmd.Dir = e.ws
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("ochatd %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func conversationID(t *testing.T, stderr string) string {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		// "conversation: ID (to stop the turn from elsewhere: …)"
		if rest, ok := strings.CutPrefix(l, "conversation: "); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	t.Fatalf("no conversation id in stderr:\n%s", stderr)
	return ""
}

func TestCLI(t *testing.T) {
	e := newCLIEnv(t)
	ws := []string{"--workspace", e.ws}

	out, errs, code := e.run("", append([]string{"chat", "--agent", "test", "--json"}, append(ws, "PLAIN hello from the cli")...)...)
	if code != 0 {
		t.Fatalf("chat: exit %d\n%s", code, errs)
	}
	id := conversationID(t, errs)
	var seq int64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var p daemon.EventParams
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("chat --json line %q: %v", l, err)
		}
		seq++
		if p.Event.Seq != seq || p.ConversationID != id {
			t.Fatalf("event %+v, want seq %d in %s", p, seq, id)
		}
	}
	if seq < 2 {
		t.Fatalf("chat --json printed %d events", seq)
	}

	out, errs, code = e.run("", append([]string{"chat", "--conversation", id, "--yes"}, append(ws, `WRITE a.txt hi\n`)...)...)
	if code != 0 || !strings.Contains(out, "[file] ") || !strings.Contains(errs, "asks permission") {
		t.Fatalf("chat --yes: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "a.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("a.txt %q %v", b, err)
	}
	_, errs, code = e.run("", append([]string{"chat", "--conversation", id, "--no"}, append(ws, `WRITE b.txt no`)...)...)
	if _, err := os.Stat(filepath.Join(e.ws, "b.txt")); code != 0 || err == nil {
		t.Fatalf("chat --no: exit %d, b.txt exists: %v\n%s", code, err == nil, errs)
	}
	// Permission answered on the terminal: option 1 (allow).
	_, errs, code = e.run("1\n", append([]string{"chat", "--conversation", id}, append(ws, `WRITE c.txt yes`)...)...)
	if _, err := os.Stat(filepath.Join(e.ws, "c.txt")); code != 0 || err != nil {
		t.Fatalf("chat with terminal answer: exit %d, %v\n%s", code, err, errs)
	}
	_, errs, code = e.run("", append([]string{"chat", "--conversation", id}, append(ws, "CRASH")...)...)
	if code == 0 || !strings.Contains(errs, "turn failed") {
		t.Fatalf("chat CRASH: exit %d\n%s", code, errs)
	}
	_, errs, code = e.run("", append([]string{"chat", "--agent", "nope"}, append(ws, "hi")...)...)
	if code == 0 || !strings.Contains(errs, "nope") {
		t.Fatalf("unknown agent: exit %d\n%s", code, errs)
	}

	out, errs, code = e.run("", append([]string{"conversations", "--json"}, ws...)...)
	var convs []daemon.ConversationInfo
	if code != 0 || json.Unmarshal([]byte(out), &convs) != nil || len(convs) != 1 || convs[0].ID != id || convs[0].Title != "PLAIN hello from the cli" {
		t.Fatalf("conversations --json: exit %d\n%s\n%s", code, out, errs)
	}
	out, _, code = e.run("", append([]string{"conversations"}, ws...)...)
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("conversations: %s", out)
	}

	out, errs, code = e.run("", append([]string{"show", id, "--json"}, ws...)...)
	var shown struct {
		ID       string               `json:"id"`
		Title    string               `json:"title"`
		Messages []transcript.Message `json:"messages"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil {
		t.Fatalf("show --json: exit %d\n%s\n%s", code, out, errs)
	}
	if shown.ID != id || len(shown.Messages) != 10 {
		t.Fatalf("show: id %s, %d messages", shown.ID, len(shown.Messages))
	}
	for i, m := range shown.Messages {
		if (i%2 == 1) != (m.Role == transcript.RoleAssistant) || (m.Role == transcript.RoleAssistant && m.Agent != "test") {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	if shown.Messages[9].Status != transcript.StatusFailed {
		t.Fatalf("last status %q", shown.Messages[9].Status)
	}
	out, _, code = e.run("", append([]string{"show", id}, ws...)...)
	if code != 0 || !strings.Contains(out, "[file] ") || !strings.Contains(out, "hello from the cli") {
		t.Fatalf("show:\n%s", out)
	}
	_, errs, code = e.run("", append([]string{"show", "01NOPE"}, ws...)...)
	if code == 0 || !strings.Contains(errs, "01NOPE") {
		t.Fatalf("show unknown: exit %d %s", code, errs)
	}

	out, _, code = e.run("", append([]string{"agents", "--json"}, ws...)...)
	if code != 0 || !strings.Contains(out, `"name": "test"`) {
		t.Fatalf("agents --json:\n%s", out)
	}
	out, _, code = e.run("", append([]string{"doctor"}, ws...)...)
	if code != 0 || !strings.Contains(out, "ok    daemon answers") || !strings.Contains(out, "ok    agent test") {
		t.Fatalf("doctor: exit %d\n%s", code, out)
	}
	if out, _, code := e.run("", "--version"); code != 0 || !strings.HasPrefix(out, "ochatd ") {
		t.Fatalf("--version: %s", out)
	}
}

// TestKilledDaemon: a turn streaming when its daemon is SIGKILLed is found
// interrupted by the next daemon, with what had arrived kept; a second
// daemon for the same workspace refuses to start.
func TestKilledDaemon(t *testing.T) {
	e := newCLIEnv(t)
	serve := exec.Command(ochatdBin, "serve", "--workspace", e.ws, "--idle", "0")
	serve.Env = e.env
	serveLog, err := os.Create(filepath.Join(e.root, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer serveLog.Close()
	serve.Stderr = serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Process.Kill()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sock := filepath.Join(e.root, "run", "ochat", daemon.WorkspaceHash(e.ws)+".sock")
	nc, err := daemon.Dial(ctx, daemon.DialOptions{Workspace: e.ws, Socket: sock})
	for i := 0; err != nil && i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		nc, err = daemon.Dial(ctx, daemon.DialOptions{Workspace: e.ws, Socket: sock})
	}
	if err != nil {
		b, _ := os.ReadFile(serveLog.Name())
		t.Fatalf("dial: %v\n%s", err, b)
	}
	// A second daemon for the workspace fails with a clear message.
	second := exec.Command(ochatdBin, "serve", "--workspace", e.ws)
	second.Env = e.env
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "already") {
		t.Fatalf("second daemon: %v\n%s", err, out)
	}
	cl, err := daemon.NewClient(ctx, nc, "test", "0")
	if err != nil {
		t.Fatal(err)
	}
	var res daemon.SendResult
	if err := cl.Call(ctx, daemon.MethodChatSend, daemon.SendParams{Agent: "test", Text: "SLOW 400"}, &res); err != nil {
		t.Fatal(err)
	}
	// Wait for enough events that a checkpoint (every 250 ms) has happened.
	for {
		n, err := cl.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var p daemon.EventParams
		json.Unmarshal(n.Params, &p)
		if p.Event.Seq >= 12 {
			break
		}
	}
	serve.Process.Signal(syscall.SIGKILL)
	serve.Wait()
	nc.Close()
	out, errs, code := e.run("", "show", res.ConversationID, "--json", "--workspace", e.ws)
	var shown struct {
		Messages []transcript.Message `json:"messages"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Messages) != 2 {
		t.Fatalf("show after kill: exit %d\n%s\n%s", code, out, errs)
	}
	m := shown.Messages[1]
	if m.Status != transcript.StatusInterrupted || len(m.Segments) == 0 || !strings.HasPrefix(m.Segments[0].Content, "c0 c1 ") {
		t.Fatalf("after kill: %+v", m)
	}
}

// TestConnectAutoStart: `ochatd connect` with no daemon running starts one
// (detached, logging beside the store), forwards initialize to it, and exits
// when its stdin closes; the daemon then exits when idle.
func TestConnectAutoStart(t *testing.T) {
	e := newCLIEnv(t)
	connectInitialize(t, e)
	logs, _ := filepath.Glob(filepath.Join(e.root, "state", "ochat", "workspaces", "*", "daemon.log"))
	if len(logs) != 1 {
		t.Fatalf("daemon logs %v", logs)
	}
	b, _ := os.ReadFile(logs[0])
	if !strings.Contains(string(b), "msg=serving") {
		t.Fatalf("daemon log:\n%s", b)
	}
	// A second connect reuses the running daemon.
	connectInitialize(t, e)
	socks, _ := filepath.Glob(filepath.Join(e.root, "run", "ochat", "*.sock"))
	if len(socks) != 1 {
		t.Fatalf("sockets %v", socks)
	}
	fi, err := os.Stat(filepath.Dir(socks[0]))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v %v", fi.Mode().Perm(), err)
	}
}
