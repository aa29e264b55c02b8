package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/internal/fakemodel"
	"github.com/ochat-dev/ochat/transcript"

	"github.com/ochat-dev/ochat/internal/testenv"
)

var (
	buildOnce sync.Once
	ochatdBin string
	buildErr  error
	buildDir  string
)

// ochatd builds ./cmd/ochatd once per test binary and returns its path;
// $OCHAT_E2E_OCHATD names a prebuilt binary to use instead.
func ochatd(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("OCHAT_E2E_OCHATD"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "ochat-e2e-bin-")
		if buildErr != nil {
			return
		}
		ochatdBin = filepath.Join(buildDir, "ochatd")
		cmd := exec.Command("go", "build", "-o", ochatdBin, "github.com/ochat-dev/ochat/cmd/ochatd")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/ochatd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return ochatdBin
}

func TestMain(m *testing.M) {
	cleanup, err := testenv.Hermetic()
	if err != nil {
		panic(err)
	}
	code := m.Run()
	cleanup()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// daemonEnv is a private world for one daemon: workspace, config (with the
// agent configured as a user agent), state and runtime dirs.
type daemonEnv struct {
	t         *testing.T
	bin       string
	ws        string
	root      string
	env       []string
	socket    string
	serve     *proc
	serveLogs *lockedBuffer
}

// newDaemonEnv writes $XDG_CONFIG_HOME/ochat/settings.json with the agent
// as a user agent ({"agent_servers":{NAME:{command,args,env}}}).
func newDaemonEnv(t *testing.T, agents []agentSetup, root, ws string) *daemonEnv {
	t.Helper()
	d := &daemonEnv{t: t, bin: ochatd(t), ws: ws, root: root}
	cfg := filepath.Join(root, "config")
	run := filepath.Join(root, "run")
	for _, dir := range []string{filepath.Join(cfg, "ochat"), run, filepath.Join(root, "state"), filepath.Join(root, "dhome")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	servers := map[string]any{}
	for _, a := range agents {
		servers[a.name] = map[string]any{"command": a.command, "args": a.args, "env": a.env}
	}
	settings := map[string]any{"agent_servers": servers}
	b, _ := json.MarshalIndent(settings, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg, "ochat", "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	d.env = append(baseEnv(),
		"HOME="+filepath.Join(root, "dhome"),
		"XDG_CONFIG_HOME="+cfg,
		"XDG_STATE_HOME="+filepath.Join(root, "state"),
		"XDG_CACHE_HOME="+filepath.Join(root, "cache"),
		"XDG_RUNTIME_DIR="+run,
	)
	d.socket = filepath.Join(run, "ochat", daemon.WorkspaceHash(ws)+".sock")
	t.Cleanup(d.killStrays)
	return d
}

// start runs `ochatd serve --workspace WS` in its own process group and
// waits until its socket answers.
func (d *daemonEnv) start() {
	t := d.t
	t.Helper()
	cmd := exec.Command(d.bin, "serve", "--workspace", d.ws)
	cmd.Env = d.env
	cmd.Dir = d.ws
	d.serveLogs = &lockedBuffer{}
	cmd.Stdout = d.serveLogs
	cmd.Stderr = d.serveLogs
	d.serve = startProc(t, cmd)
	waitFor(t, 20*time.Second, "the daemon socket "+d.socket, func() bool {
		c, err := net.Dial("unix", d.socket)
		if err == nil {
			c.Close()
			return true
		}
		select {
		case <-d.serve.done:
			t.Fatalf("ochatd serve exited: %v\n%s", d.serve.cmd.ProcessState, d.serveLogs.tail(4000))
		default:
		}
		return false
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log (tail):\n%s", d.serveLogs.tail(6000))
		}
	})
}

// stop ends the daemon (SIGTERM, then SIGKILL after 5 s).
func (d *daemonEnv) stop() { d.serve.stop(5 * time.Second) }

// client dials the socket and runs the LSP handshake.
func (d *daemonEnv) client(ctx context.Context) *daemon.Client {
	t := d.t
	t.Helper()
	conn, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	c, err := daemon.NewClient(ctx, conn, "ochat-e2e", "0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cli runs an ochatd subcommand against this workspace and returns stdout.
func (d *daemonEnv) cli(args ...string) []byte {
	t := d.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Env = d.env
	cmd.Dir = d.ws
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ochatd %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// killStrays kills, by pid, any process still running in the test's
// workspace (an agent the daemon failed to stop) and reports it. Processes
// killed with their group take a moment to finish exiting, so it polls for
// up to 100 rounds of 50 ms (counted, not timed: the sandbox clock jumps)
// before calling one a stray.
func (d *daemonEnv) killStrays() {
	var strays map[int]string
	for range 100 {
		strays = d.strays()
		if len(strays) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for pid, cmdline := range strays {
		d.t.Errorf("process %d (%s) still running in the test's folders after the daemon stopped; killing it", pid, cmdline)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// strays returns pid → command line of the live processes whose working
// directory is in the test's folders. A zombie (exited, not yet reaped) and
// a process that has released its memory (empty cmdline: inside exit) have
// stopped already.
func (d *daemonEnv) strays() map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || (cwd != d.ws && !strings.HasPrefix(cwd, d.root+"/")) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
				continue
			}
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		out[pid] = string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
	return out
}

// turn is what a client saw of one prompt turn.
type turn struct {
	send   daemon.SendResult
	events []transcript.Event
	perms  []daemon.PermissionParams
	text   string
}

// final is the terminal event of the turn.
func (tr *turn) final() transcript.Event { return tr.events[len(tr.events)-1] }

// tools returns the last upsert of each tool segment and of each
// fileChange, in first-seen order.
func (tr *turn) activities() (tools, files []transcript.Segment) {
	idx := map[string]int{}
	var all []transcript.Segment
	for _, ev := range tr.events {
		if ev.Type != transcript.EvActivityUpsert || ev.Segment == nil {
			continue
		}
		key := string(ev.Segment.Type) + ":" + ev.Segment.ID + ev.Segment.Path
		if i, ok := idx[key]; ok {
			all[i] = *ev.Segment
			continue
		}
		idx[key] = len(all)
		all = append(all, *ev.Segment)
	}
	for _, s := range all {
		switch s.Type {
		case transcript.SegTool:
			tools = append(tools, s)
		case transcript.SegFileChange:
			files = append(files, s)
		}
	}
	return tools, files
}

// runTurn sends text and collects the turn's events until its terminal
// event, answering permission requests with the first option of kind
// allowKind. during, if set, runs on every event (for the cancel).
func runTurn(ctx context.Context, t *testing.T, c *daemon.Client, convID, agent, text, allowKind string,
	during func(tr *turn, ev transcript.Event)) *turn {
	t.Helper()
	tr := &turn{}
	if err := c.Call(ctx, daemon.MethodChatSend, daemon.SendParams{ConversationID: convID, Agent: agent, Text: text}, &tr.send); err != nil {
		t.Fatalf("chat/send %q: %v", text, err)
	}
	for {
		n, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("turn %q: waiting for events: %v (got %d events)", text, err, len(tr.events))
		}
		switch n.Method {
		case daemon.NotifyPermission:
			var p daemon.PermissionParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				t.Fatal(err)
			}
			if p.TurnID != tr.send.TurnID {
				t.Errorf("permission for turn %s during turn %s", p.TurnID, tr.send.TurnID)
			}
			tr.perms = append(tr.perms, p)
			opt := ""
			for _, o := range p.Options {
				if o.Kind == allowKind {
					opt = o.OptionID
					break
				}
			}
			if opt == "" {
				t.Fatalf("permission options %+v have no %s", p.Options, allowKind)
			}
			if err := c.Call(ctx, daemon.MethodPermissionRespond, daemon.RespondParams{PermissionID: p.PermissionID, OptionID: opt}, nil); err != nil {
				t.Fatalf("permission/respond: %v", err)
			}
		case daemon.NotifyEvent:
			var p daemon.EventParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				t.Fatal(err)
			}
			if p.TurnID != tr.send.TurnID {
				t.Errorf("event %+v of turn %s arrived during turn %s", p.Event, p.TurnID, tr.send.TurnID)
				continue
			}
			tr.events = append(tr.events, p.Event)
			if p.Event.Type == transcript.EvContentDelta {
				tr.text += p.Event.Delta
			}
			if during != nil {
				during(tr, p.Event)
			}
			if p.Event.Terminal() {
				checkSeq(t, text, tr.events)
				return tr
			}
		}
	}
}

// checkSeq asserts events are numbered 1, 2, 3… with exactly one terminal
// event, last.
func checkSeq(t *testing.T, what string, evs []transcript.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Errorf("turn %q: event %d has seq %d (events out of order or lost)", what, i+1, ev.Seq)
		}
		if ev.Terminal() != (i == len(evs)-1) {
			t.Errorf("turn %q: terminal event at %d of %d", what, i+1, len(evs))
		}
	}
}

// showJSON is `ochatd show --json`'s output.
type showJSON struct {
	ID       string               `json:"id"`
	Title    string               `json:"title"`
	Messages []transcript.Message `json:"messages"`
}

// TestDaemon drives a conversation with each older adapter release users
// still run (@zed-industries/claude-agent-acp 0.23.1, codex-acp 0.16.0,
// npm-legacy/; TestSeedAgents runs the current ones) through a real ochatd
// daemon over its socket: a plain answer; a file write with its
// permission answered allow; a slow answer cancelled; a further turn. Then
// it checks the stored conversation through `ochatd show --json`, also
// after a daemon restart, and the model's request log.
func TestDaemon(t *testing.T) {
	need(t)
	in := legacyAdapters(t)
	ochatd(t)
	for _, name := range []string{"codex", "claude"} {
		t.Run(name, func(t *testing.T) {
			root := realpath(t, t.TempDir())
			ws := filepath.Join(root, "work")
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			s := fakeModel(t)
			a := setupAgent(t, name, s, in, root)
			d := newDaemonEnv(t, []agentSetup{a}, root, ws)
			d.start()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			c := d.client(ctx)

			// 1. Plain answer (includes spawning the agent and session/new).
			start := time.Now()
			t1 := runTurn(ctx, t, c, "", name, "PLAIN: say hello", a.allowKind, nil)
			metric(t, name+" daemon first turn (spawn+session/new+prompt)", time.Since(start))
			conv := t1.send.ConversationID
			if f := t1.final(); f.Type != transcript.EvTurnCompleted || f.StopReason != "end_turn" {
				t.Fatalf("plain turn ended with %+v", f)
			}
			if !strings.Contains(t1.text, fakemodel.PlainPrefix+": PLAIN: say hello") {
				t.Errorf("plain turn text %q", t1.text)
			}

			// 2. A file write after a permission request answered allow.
			target := filepath.Join(ws, "hello.txt")
			start = time.Now()
			t2 := runTurn(ctx, t, c, conv, name, "WRITE_FILE "+target, a.allowKind, nil)
			metric(t, name+" daemon write turn (with permission)", time.Since(start))
			if f := t2.final(); f.Type != transcript.EvTurnCompleted || f.StopReason != "end_turn" {
				t.Fatalf("write turn ended with %+v", f)
			}
			if len(t2.perms) != 1 {
				t.Errorf("permission requests: %d, want 1", len(t2.perms))
			} else if p := t2.perms[0]; len(p.FileChanges) != 1 || p.FileChanges[0].Path != target {
				t.Errorf("permission fileChanges %+v, want one for %s", p.FileChanges, target)
			}
			tools, files := t2.activities()
			if len(tools) != 1 || tools[0].Status != string(transcript.ToolCompleted) {
				t.Errorf("tool segments %+v, want one completed", tools)
			}
			if len(files) != 1 || files[0].Path != target || files[0].Additions == nil || *files[0].Additions != 1 {
				t.Errorf("fileChange segments %+v, want one for %s with 1 addition", files, target)
			}
			if !strings.Contains(t2.text, "Done: created "+target) {
				t.Errorf("write turn text %q", t2.text)
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != fakemodel.FileContent {
				t.Errorf("file on disk: %q, %v", b, err)
			}

			// 3. A slow answer, cancelled once its first chunk arrived.
			cancelled := false
			t3 := runTurn(ctx, t, c, conv, name, "SLOW: take your time", a.allowKind, func(tr *turn, ev transcript.Event) {
				if !cancelled && strings.Contains(tr.text, "Thinking") {
					cancelled = true
					var r daemon.CancelResult
					if err := c.Call(ctx, daemon.MethodChatCancel, daemon.ConversationParams{ConversationID: conv}, &r); err != nil || !r.Cancelled {
						t.Errorf("chat/cancel: %+v, %v", r, err)
					}
				}
			})
			if f := t3.final(); !cancelled || f.Type != transcript.EvTurnCompleted || f.StopReason != "cancelled" {
				t.Fatalf("slow turn: cancelled=%v, ended with %+v", cancelled, f)
			}

			// 4. A further turn. claude-agent-acp 0.23.1 answers the first
			// prompt after a cancel at once with no text (research/real-agents
			// README, "Quirk"); the model is still called with it.
			start = time.Now()
			t4 := runTurn(ctx, t, c, conv, name, "PLAIN: after cancel", a.allowKind, nil)
			metric(t, name+" daemon turn after cancel", time.Since(start))
			if f := t4.final(); f.Type != transcript.EvTurnCompleted || f.StopReason != "end_turn" {
				t.Fatalf("turn after cancel ended with %+v", f)
			}
			if name != "claude" && !strings.Contains(t4.text, fakemodel.PlainPrefix+": PLAIN: after cancel") {
				t.Errorf("turn after cancel: text %q", t4.text)
			}
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			defer wcancel()
			if _, err := s.WaitFor(wctx, func(r fakemodel.Request) bool { return r.LastUserText() == "PLAIN: after cancel" }); err != nil {
				t.Errorf("the model never saw the turn after cancel: %v", err)
			}

			// What is stored: one assistant message per turn, in order.
			var got daemon.GetConversationResult
			if err := c.Call(ctx, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv}, &got); err != nil {
				t.Fatalf("conversations/get: %v", err)
			}
			checkStored(t, name, got.Messages, target, []*turn{t1, t2, t3, t4})

			var shown showJSON
			if err := json.Unmarshal(d.cli("show", "--workspace", ws, "--json", conv), &shown); err != nil {
				t.Fatalf("show --json: %v", err)
			}
			if shown.ID != conv || !reflect.DeepEqual(normalize(shown.Messages), normalize(got.Messages)) {
				t.Errorf("show --json differs from conversations/get:\nshow: %+v\nget:  %+v", shown, got.Messages)
			}

			// After a daemon restart the same conversation is shown.
			c.Close()
			d.stop()
			d.start()
			var again showJSON
			if err := json.Unmarshal(d.cli("show", "--workspace", ws, "--json", conv), &again); err != nil {
				t.Fatalf("show --json after restart: %v", err)
			}
			if !reflect.DeepEqual(normalize(again.Messages), normalize(shown.Messages)) {
				t.Errorf("after restart show --json differs:\nbefore: %+v\nafter:  %+v", shown.Messages, again.Messages)
			}
			d.stop()
		})
	}
}

// normalize re-encodes messages so that equal JSON compares equal.
func normalize(ms []transcript.Message) []any {
	b, _ := json.Marshal(ms)
	var v []any
	json.Unmarshal(b, &v)
	return v
}

// checkStored asserts the stored messages: user/assistant pairs, one
// assistant message per turn with its agent, status and stop reason, the
// write turn's completed tool and fileChange.
func checkStored(t *testing.T, agent string, msgs []transcript.Message, target string, turns []*turn) {
	t.Helper()
	if len(msgs) != 2*len(turns) {
		t.Fatalf("stored %d messages, want %d: %+v", len(msgs), 2*len(turns), msgs)
	}
	wantStatus := []transcript.MessageStatus{transcript.StatusCompleted, transcript.StatusCompleted, transcript.StatusCancelled, transcript.StatusCompleted}
	for i, tr := range turns {
		u, m := msgs[2*i], msgs[2*i+1]
		if u.Role != transcript.RoleUser || u.ID != tr.send.UserMessageID {
			t.Errorf("message %d: %+v, want user message %s", 2*i, u, tr.send.UserMessageID)
		}
		if m.Role != transcript.RoleAssistant || m.ID != tr.send.AssistantMessageID || m.Agent != agent {
			t.Errorf("message %d: role %s id %s agent %s, want assistant %s by %s", 2*i+1, m.Role, m.ID, m.Agent, tr.send.AssistantMessageID, agent)
		}
		if m.Status != wantStatus[i] {
			t.Errorf("turn %d stored with status %q, want %q", i+1, m.Status, wantStatus[i])
		}
	}
	w := msgs[3]
	var tool, fc *transcript.Segment
	for i := range w.Segments {
		switch s := &w.Segments[i]; s.Type {
		case transcript.SegTool:
			tool = s
		case transcript.SegFileChange:
			fc = s
		}
	}
	if tool == nil || tool.Status != string(transcript.ToolCompleted) {
		t.Errorf("stored write turn: tool segment %+v, want completed", tool)
	}
	if fc == nil || fc.Path != target || fc.Additions == nil || *fc.Additions != 1 {
		t.Errorf("stored write turn: fileChange %+v, want %s with 1 addition", fc, target)
	}
}

// TestDaemonHandoff passes one conversation between codex and claude and
// uses the model's request log to prove that each agent was shown the
// turns it had not seen (the daemon's handoff) and answered the new text.
// handoff_test.go counts every turn in the requests (no duplicate, no gap).
func TestDaemonHandoff(t *testing.T) {
	need(t)
	in := adapters(t)
	root := realpath(t, t.TempDir())
	ws := filepath.Join(root, "work")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	s := fakeModel(t)
	codex, claude := setupAgent(t, "codex", s, in, root), setupAgent(t, "claude", s, in, root)
	d := newDaemonEnv(t, []agentSetup{codex, claude}, root, ws)
	d.start()
	defer d.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := d.client(ctx)

	steps := []struct {
		agent, text string
		seen        []string // earlier user texts the agent's model request must carry
	}{
		{"codex", "PLAIN: first, to codex", nil},
		{"claude", "PLAIN: second, to claude", []string{"PLAIN: first, to codex"}},
		{"codex", "PLAIN: third, back to codex", []string{"PLAIN: second, to claude"}},
	}
	conv := ""
	for _, st := range steps {
		tr := runTurn(ctx, t, c, conv, st.agent, st.text, "allow_once", nil)
		conv = tr.send.ConversationID
		if f := tr.final(); f.Type != transcript.EvTurnCompleted || f.StopReason != "end_turn" {
			t.Fatalf("%s turn %q ended with %+v", st.agent, st.text, f)
		}
		if !strings.Contains(tr.text, fakemodel.PlainPrefix+": "+st.text) {
			t.Errorf("%s answered %q, want the echo of %q", st.agent, tr.text, st.text)
		}
		api := map[string]fakemodel.API{"codex": fakemodel.APIResponses, "claude": fakemodel.APIAnthropic}[st.agent]
		var req fakemodel.Request
		for _, r := range s.ModelRequests() {
			if r.API == api && r.SawText(st.text) {
				req = r
			}
		}
		if req.Seq == 0 {
			t.Fatalf("no %s model request carried %q", st.agent, st.text)
		}
		for _, want := range st.seen {
			if !req.SawText(want) {
				t.Errorf("%s's model request for %q does not carry the earlier turn %q; user texts: %q", st.agent, st.text, want, req.UserTexts)
			}
		}
	}
	var got daemon.GetConversationResult
	if err := c.Call(ctx, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: conv}, &got); err != nil {
		t.Fatal(err)
	}
	var agents []string
	for _, m := range got.Messages {
		if m.Role == transcript.RoleAssistant {
			agents = append(agents, m.Agent)
		}
	}
	if strings.Join(agents, ",") != "codex,claude,codex" {
		t.Errorf("assistant messages by %v, want codex, claude, codex", agents)
	}
}
