package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"

	"github.com/ochat-dev/ochat/internal/testenv"
)

// fakeAgentEnv, when set, makes this test binary play a misbehaving ACP
// agent (fakeagent_test.go) instead of running tests.
const fakeAgentEnv = "OCHAT_FAULT_AGENT"

// fakeStateEnv names a file the fake agent may create to remember, across
// its processes, that it already misbehaved once.
const fakeStateEnv = "OCHAT_FAULT_STATE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeAgentEnv); mode != "" {
		os.Exit(runFakeAgent(mode, os.Stdin, os.Stdout, os.Stderr))
	}
	cleanup, err := testenv.Hermetic()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if fuzzSrv != nil {
		os.RemoveAll(fuzzSrv.dir)
	}
	os.Exit(code)
}

// long reports whether the long loops run (OCHAT_LONG=1).
func long() bool { return os.Getenv("OCHAT_LONG") == "1" }

// pick returns short, or long with OCHAT_LONG=1.
func pick(short, long_ int) int {
	if long() {
		return long_
	}
	return short
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds ./cmd/ochatd and ./internal/testagent/cmd/testagent once
// per test binary and returns their paths.
func binaries(t testing.TB) (ochatd, testagent string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "ochat-faults-bin-")
		if buildErr != nil {
			return
		}
		for _, p := range []string{"cmd/ochatd", "internal/testagent/cmd/testagent"} {
			out := filepath.Join(binDir, filepath.Base(p))
			cmd := exec.Command("go", "build", "-o", out, "github.com/ochat-dev/ochat/"+p)
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build ./%s: %v\n%s", p, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "ochatd"), filepath.Join(binDir, "testagent")
}

// agentEntry is one agent_servers entry of the world's settings.json.
type agentEntry struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// world is a private machine for one daemon: workspace, XDG config (with
// agent_servers), state and runtime folders. Every agent in it is a user
// agent named in settings.json.
type world struct {
	t      testing.TB
	root   string
	ws     string
	env    []string
	sock   string
	dbPath string
	agents map[string]agentEntry
}

// newWorld makes the folders and settings.json. "test" is always the
// scripted testagent (state in root/tastate, so a new process can
// session/load); fakes maps more agent names to fake-agent modes.
func newWorld(t testing.TB, fakes map[string]string) *world {
	t.Helper()
	_, ta := binaries(t)
	root, err := os.MkdirTemp("", "of")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if root, err = filepath.EvalSymlinks(root); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, root: root, ws: filepath.Join(root, "ws"), agents: map[string]agentEntry{}}
	for _, d := range []string{filepath.Join(w.ws, ".git"), filepath.Join(root, "config", "ochat"), filepath.Join(root, "state"), filepath.Join(root, "run"), filepath.Join(root, "home"), filepath.Join(root, "tastate")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	w.agents["test"] = agentEntry{Command: ta, Env: map[string]string{"TESTAGENT_STATE": filepath.Join(root, "tastate")}}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, mode := range fakes {
		w.agents[name] = agentEntry{Command: self, Args: []string{"-test.run=^$"}, Env: map[string]string{fakeAgentEnv: mode, fakeStateEnv: filepath.Join(root, "fake-"+name)}}
	}
	b, _ := json.MarshalIndent(map[string]any{"agent_servers": w.agents}, "", "  ")
	if err := os.WriteFile(filepath.Join(root, "config", "ochat", "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = append(cleanEnv(),
		"HOME="+filepath.Join(root, "home"),
		"XDG_CONFIG_HOME="+filepath.Join(root, "config"),
		"XDG_STATE_HOME="+filepath.Join(root, "state"),
		"XDG_CACHE_HOME="+filepath.Join(root, "cache"),
		"XDG_RUNTIME_DIR="+filepath.Join(root, "run"),
	)
	w.sock = filepath.Join(root, "run", "ochat", daemon.WorkspaceHash(w.ws)+".sock")
	t.Setenv("XDG_STATE_HOME", filepath.Join(root, "state"))
	if w.dbPath, err = history.DefaultPath(w.ws); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.checkStrays)
	return w
}

// cleanEnv is the test's environment without the XDG and HOME variables
// the world sets.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || strings.HasPrefix(k, "XDG_") || k == fakeAgentEnv || k == fakeStateEnv {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// checkStrays fails the test if a process still runs with its cwd in the
// world (an agent the daemon left behind), and kills it by pid. It polls
// for 100 rounds of 50 ms, counted rather than timed (the sandbox clock
// jumps), while killed processes finish exiting.
func (w *world) checkStrays() {
	for round := 0; ; round++ {
		pids := w.strays()
		if len(pids) == 0 {
			return
		}
		if round == 100 {
			for pid, cmdline := range pids {
				w.t.Errorf("process %d (%s) still runs in the test's workspace after the daemon stopped; killing it", pid, cmdline)
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// strays lists processes (other than this one) whose cwd is in the world.
func (w *world) strays() map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || (cwd != w.ws && !strings.HasPrefix(cwd, w.root+"/")) {
			continue
		}
		if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); bytes.Contains(st, []byte(") Z ")) || bytes.Contains(st, []byte(") X ")) {
			continue // a zombie waiting for its (dead) parent's reaper
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // released its memory: inside exit
		}
		out[pid] = string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
	return out
}

// lockedBuffer is a goroutine-safe log sink.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// daemonProc is one `ochatd serve` child process.
type daemonProc struct {
	w    *world
	cmd  *exec.Cmd
	done chan struct{}
	logs *lockedBuffer
}

// start runs `ochatd serve --workspace WS --idle 0 [flags]` in its own
// process group and waits until its socket answers.
func (w *world) start(flags ...string) *daemonProc {
	t := w.t
	t.Helper()
	bin, _ := binaries(t)
	cmd := exec.Command(bin, append([]string{"serve", "--workspace", w.ws, "--idle", "0"}, flags...)...)
	cmd.Env = w.env
	cmd.Dir = w.ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d := &daemonProc{w: w, cmd: cmd, done: make(chan struct{}), logs: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		if t.Failed() && d.alive() && os.Getenv("OCHAT_FAULTS_DUMP") == "1" {
			d.cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump into the log
			<-d.done
			t.Logf("daemon goroutines:\n%s", d.logs.tail(60000))
		}
		d.stop()
		if t.Failed() {
			t.Logf("daemon %d log (tail):\n%s", cmd.Process.Pid, d.logs.tail(4000))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", w.sock); err == nil {
			c.Close()
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("ochatd serve exited: %v\n%s", cmd.ProcessState, d.logs.tail(4000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ochatd serve did not answer on %s\n%s", w.sock, d.logs.tail(4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemonProc) pid() int { return d.cmd.Process.Pid }

// alive reports whether the process has not exited.
func (d *daemonProc) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the daemon alone (not its agents, which run in
// their own process groups) and waits until it is reaped.
func (d *daemonProc) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// stop sends SIGTERM and waits (SIGKILL after 15 s).
func (d *daemonProc) stop() {
	if !d.alive() {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		d.w.t.Errorf("ochatd did not stop within 15 s of SIGTERM; killing it")
		d.kill()
	}
}

// dial connects a client of the daemon.
func (w *world) dial(name string) *daemon.Client {
	w.t.Helper()
	nc, err := net.Dial("unix", w.sock)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := daemon.NewClient(ctx, nc, name, "test")
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { nc.Close() })
	return c
}

// procStats is what /proc says of one process.
type procStats struct {
	RSSKB, HWMKB int64 // VmRSS, VmHWM
	FDs          int
	Threads      int
}

func (s procStats) String() string {
	return fmt.Sprintf("rss=%.1fMB peak=%.1fMB fds=%d threads=%d", float64(s.RSSKB)/1024, float64(s.HWMKB)/1024, s.FDs, s.Threads)
}

// stats reads /proc/<pid>/status and /proc/<pid>/fd.
func stats(t testing.TB, pid int) procStats {
	t.Helper()
	var s procStats
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			s.RSSKB = n
		case "VmHWM":
			s.HWMKB = n
		case "Threads":
			s.Threads = int(n)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	s.FDs = len(fds)
	return s
}

// figure logs one measured figure in a greppable form (docs/reliability.md
// quotes these lines).
func figure(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Logf("figure: "+format, args...)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// call makes one request and decodes the result.
func call[R any](t testing.TB, c *daemon.Client, method string, params any) R {
	t.Helper()
	var r R
	if err := c.Call(ctxFor(t, 60*time.Second), method, params, &r); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

// turnView is what one client saw of one prompt turn.
type turnView struct {
	events   []transcript.Event
	terminal transcript.Event
	resync   bool
}

// await reads notifications until turnID's terminal event, the connection
// ending (err) or ctx ending (err).
func await(ctx context.Context, c *daemon.Client, turnID string) (turnView, error) {
	var v turnView
	for {
		n, err := c.Next(ctx)
		if err != nil {
			return v, fmt.Errorf("turn %s after %d events: %w", turnID, len(v.events), err)
		}
		switch n.Method {
		case daemon.NotifyResync:
			v.resync = true
		case daemon.NotifyEvent:
			var p daemon.EventParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				return v, err
			}
			if p.TurnID != turnID {
				continue
			}
			v.events = append(v.events, p.Event)
			if p.Event.Terminal() {
				v.terminal = p.Event
				return v, nil
			}
		}
	}
}

// runTurn sends one prompt and waits for its end.
func runTurn(t testing.TB, c *daemon.Client, convID, agent, text string) (daemon.SendResult, turnView) {
	t.Helper()
	res := call[daemon.SendResult](t, c, daemon.MethodChatSend, daemon.SendParams{ConversationID: convID, Agent: agent, Text: text})
	v, err := await(ctxFor(t, 120*time.Second), c, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	return res, v
}

// reduce applies events to an assistant message.
func reduce(id string, evs []transcript.Event) transcript.Message {
	m := transcript.Message{ID: id, Role: transcript.RoleAssistant}
	for _, ev := range evs {
		transcript.Apply(&m, ev)
	}
	return m
}

// text is the concatenated content segments of a message.
func text(m transcript.Message) string {
	var b strings.Builder
	for _, s := range m.Segments {
		if s.Type == transcript.SegContent {
			b.WriteString(s.Content)
		}
	}
	return b.String()
}

// getMessage returns one stored message through ochat/conversations/get.
func getMessage(t testing.TB, c *daemon.Client, convID, msgID string) transcript.Message {
	t.Helper()
	got := call[daemon.GetConversationResult](t, c, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: convID})
	for _, m := range got.Messages {
		if m.ID == msgID {
			return m
		}
	}
	t.Fatalf("message %s not in conversation %s (%d messages)", msgID, convID, len(got.Messages))
	return transcript.Message{}
}

// follower is a client's view of one turn that survives falling behind: on
// ochat/resync it subscribes again and continues from the snapshot, as an
// editor must. Events are applied strictly in seq order.
type follower struct {
	c       *daemon.Client
	conv    string
	turn    string
	m       transcript.Message
	last    int64 // seq of the last applied event
	done    bool
	final   transcript.Event // terminal event, if seen live (m.Status tells the end either way)
	resyncs int
	events  int // live events applied
}

// newFollower follows a turn this client is already subscribed to from its
// first event (the sender of ochat/chat/send is).
func newFollower(c *daemon.Client, conv, turn string) *follower {
	return &follower{c: c, conv: conv, turn: turn, m: transcript.Message{ID: turn, Role: transcript.RoleAssistant}}
}

// subscribe (re)subscribes and takes the snapshot.
func (f *follower) subscribe(ctx context.Context) error {
	var sub daemon.SubscribeResult
	if err := f.c.Call(ctx, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: f.conv}, &sub); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	f.snapshot(sub)
	return nil
}

func (f *follower) snapshot(sub daemon.SubscribeResult) {
	var stored *transcript.Message
	for i := range sub.Messages {
		if sub.Messages[i].ID == f.turn {
			stored = &sub.Messages[i]
		}
	}
	if r := sub.Running; r != nil && r.TurnID == f.turn {
		if r.Truncated {
			f.m = *r.Message
		} else {
			f.m = transcript.Message{ID: f.turn, Role: transcript.RoleAssistant}
			if stored != nil {
				f.m = *stored
				f.m.Segments = nil
			}
			for _, ev := range r.Events {
				transcript.Apply(&f.m, ev)
			}
		}
		f.last = r.LastSeq
		return
	}
	if stored != nil && stored.Status != transcript.StatusStreaming {
		f.m = *stored
		f.done = true
	}
}

// run reads notifications until the turn ends, ctx ends, or stop (if not
// nil) returns true after an event.
func (f *follower) run(ctx context.Context, stop func(*follower) bool) error {
	for !f.done {
		n, err := f.c.Next(ctx)
		if err != nil {
			return fmt.Errorf("turn %s at seq %d: %w", f.turn, f.last, err)
		}
		switch n.Method {
		case daemon.NotifyResync:
			var p daemon.ResyncParams
			json.Unmarshal(n.Params, &p)
			if p.ConversationID != f.conv {
				continue
			}
			f.resyncs++
			if err := f.subscribe(ctx); err != nil {
				return err
			}
			if stop != nil && stop(f) {
				return nil
			}
		case daemon.NotifyEvent:
			var p daemon.EventParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				return err
			}
			if p.TurnID != f.turn || p.Event.Seq <= f.last {
				continue
			}
			if p.Event.Seq != f.last+1 {
				return fmt.Errorf("turn %s: event seq %d after %d (gap)", f.turn, p.Event.Seq, f.last)
			}
			transcript.Apply(&f.m, p.Event)
			f.last = p.Event.Seq
			f.events++
			if p.Event.Terminal() {
				f.final = p.Event
				f.done = true
			}
			if stop != nil && stop(f) {
				return nil
			}
		}
	}
	return nil
}
