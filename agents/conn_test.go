package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/ochat-dev/ochat/transcript"

	"github.com/ochat-dev/ochat/internal/testenv"
)

// testagentBin is the scripted agent (internal/testagent), built once.
var testagentBin string

func TestMain(m *testing.M) {
	cleanup, err := testenv.Hermetic()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer cleanup()
	dir, err := os.MkdirTemp("", "agents-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testagentBin = filepath.Join(dir, "testagent")
	out, err := exec.Command("go", "build", "-o", testagentBin, "github.com/ochat-dev/ochat/internal/testagent/cmd/testagent").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build testagent: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// recorder is a Handler that records everything and answers permission
// requests with answer (default: the first allow_once option).
type recorder struct {
	mu     sync.Mutex
	events map[string][]transcript.Event
	states map[string][]State
	perms  []PermissionRequest
	answer func(ctx context.Context, req PermissionRequest) (PermissionOutcome, error)
	notify chan struct{}
}

func newRecorder() *recorder {
	return &recorder{events: map[string][]transcript.Event{}, states: map[string][]State{}, notify: make(chan struct{}, 1)}
}

func (r *recorder) poke() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) Event(sid string, ev transcript.Event) {
	r.mu.Lock()
	r.events[sid] = append(r.events[sid], ev)
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) State(sid string, st State) {
	r.mu.Lock()
	r.states[sid] = append(r.states[sid], st)
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) RequestPermission(ctx context.Context, sid string, req PermissionRequest) (PermissionOutcome, error) {
	r.mu.Lock()
	r.perms = append(r.perms, req)
	answer := r.answer
	r.mu.Unlock()
	r.poke()
	if answer != nil {
		return answer(ctx, req)
	}
	for _, o := range req.Options {
		if o.Kind == "allow_once" {
			return PermissionOutcome{OptionID: o.OptionID}, nil
		}
	}
	return PermissionOutcome{Cancelled: true}, nil
}

func (r *recorder) eventsOf(sid string) []transcript.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]transcript.Event(nil), r.events[sid]...)
}

func (r *recorder) statesOf(sid string) []State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]State(nil), r.states[sid]...)
}

// waitFor polls cond after every handler call until it holds or 10 s pass.
func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-r.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// text joins the deltas of one type.
func text(evs []transcript.Event, typ transcript.EventType) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == typ {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

// lastTool returns the last activity.upsert of the tool id.
func lastTool(evs []transcript.Event, id string) (transcript.Segment, bool) {
	var seg transcript.Segment
	found := false
	for _, e := range evs {
		if e.Type == transcript.EvActivityUpsert && e.Segment.Type == transcript.SegTool && e.Segment.ID == id {
			seg, found = *e.Segment, true
		}
	}
	return seg, found
}

func toolIDs(evs []transcript.Event) []string {
	seen := map[string]bool{}
	var ids []string
	for _, e := range evs {
		if e.Type == transcript.EvActivityUpsert && e.Segment.Type == transcript.SegTool && !seen[e.Segment.ID] {
			seen[e.Segment.ID] = true
			ids = append(ids, e.Segment.ID)
		}
	}
	return ids
}

func fileChanges(evs []transcript.Event) []transcript.Segment {
	var out []transcript.Segment
	for _, e := range evs {
		if e.Type == transcript.EvActivityUpsert && e.Segment.Type == transcript.SegFileChange {
			out = append(out, *e.Segment)
		}
	}
	return out
}

type fixture struct {
	conn *Conn
	rec  *recorder
	ws   string
}

func testSpec(env map[string]string) Spec {
	return Spec{Name: "testagent", Command: testagentBin, Env: env, Source: "user"}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start starts the scripted agent in a fresh workspace.
func start(t *testing.T, env map[string]string, mod func(*Options)) *fixture {
	t.Helper()
	ws := t.TempDir()
	rec := newRecorder()
	opts := Options{Workspace: ws, Handler: rec, Logger: quietLogger(), InitTimeout: 20 * time.Second, KillGrace: time.Second}
	if mod != nil {
		mod(&opts)
	}
	c, err := Start(context.Background(), testSpec(env), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &fixture{conn: c, rec: rec, ws: ws}
}

func prompt(s string) []acp.ContentBlock { return []acp.ContentBlock{acp.TextBlock(s)} }

func (f *fixture) session(t *testing.T) SessionInfo {
	t.Helper()
	info, err := f.conn.NewSession(context.Background())
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return info
}

func (f *fixture) prompt(t *testing.T, sid, p string) string {
	t.Helper()
	stop, err := f.conn.Prompt(context.Background(), sid, prompt(p))
	if err != nil {
		t.Fatalf("Prompt(%q): %v", p, err)
	}
	return stop
}

func TestStartAndNewSession(t *testing.T) {
	f := start(t, nil, nil)
	if !f.conn.Capabilities().LoadSession {
		t.Error("LoadSession capability not read")
	}
	if info := f.conn.AgentInfo(); info == nil || info.Name != "testagent" {
		t.Errorf("AgentInfo = %+v", info)
	}
	info := f.session(t)
	if !strings.HasPrefix(info.ID, "ts-") {
		t.Errorf("session id %q", info.ID)
	}
	// available_commands_update arrives before the session/new answer.
	if len(info.State.Commands) != 2 || info.State.Commands[0].Name != "plan" {
		t.Errorf("commands = %+v", info.State.Commands)
	}
	if info.State.Modes == nil || info.State.Modes.CurrentModeId != "default" || len(info.State.Modes.AvailableModes) != 2 {
		t.Errorf("modes = %+v", info.State.Modes)
	}
	if len(info.State.ConfigOptions) != 2 || info.State.ConfigOptions[1].Select == nil || info.State.ConfigOptions[1].Select.Id != "model" {
		t.Errorf("config options = %+v", info.State.ConfigOptions)
	}
	if f.conn.Name() != "testagent" {
		t.Errorf("Name = %q", f.conn.Name())
	}
}

func TestScenarios(t *testing.T) {
	f := start(t, nil, nil)
	tests := []struct {
		prompt string
		check  func(t *testing.T, evs []transcript.Event)
	}{
		{"PLAIN hello there world", func(t *testing.T, evs []transcript.Event) {
			if got := text(evs, transcript.EvContentDelta); got != "hello there world" {
				t.Errorf("content = %q", got)
			}
			if len(evs) != 3 {
				t.Errorf("got %d events, want 3 chunks", len(evs))
			}
		}},
		{"THINK Yes.", func(t *testing.T, evs []transcript.Event) {
			if got := text(evs, transcript.EvReasoningDelta); got != "Thinking about it." {
				t.Errorf("reasoning = %q", got)
			}
			if got := text(evs, transcript.EvContentDelta); got != "Yes." {
				t.Errorf("content = %q", got)
			}
			if evs[0].Type != transcript.EvReasoningDelta || evs[len(evs)-1].Type != transcript.EvContentDelta {
				t.Errorf("order: %v then %v", evs[0].Type, evs[len(evs)-1].Type)
			}
		}},
		{"PLAN", func(t *testing.T, evs []transcript.Event) {
			var plans [][]transcript.PlanEntry
			for _, e := range evs {
				if e.Type == transcript.EvPlanUpdated {
					plans = append(plans, e.Entries)
				}
			}
			if len(plans) != 3 {
				t.Fatalf("got %d plan updates, want 3", len(plans))
			}
			last := plans[2]
			if len(last) != 3 || last[0].Content != "Read the code" || last[2].Status != "completed" || last[0].Priority != "medium" {
				t.Errorf("last plan = %+v", last)
			}
			if plans[1][1].Status != "in_progress" {
				t.Errorf("second plan = %+v", plans[1])
			}
		}},
		{"TOOLS", func(t *testing.T, evs []transcript.Event) {
			ids := toolIDs(evs)
			if len(ids) != 1 {
				t.Fatalf("tool ids = %v, want one", ids)
			}
			seg, _ := lastTool(evs, ids[0])
			if seg.Status != "completed" || seg.Name != "Read file again" || seg.ProviderKind != "read" || seg.Output != "file contents" {
				t.Errorf("merged tool = %+v", seg)
			}
			if string(seg.Input) != `{"path":"README.md"}` {
				t.Errorf("input = %s", seg.Input)
			}
		}},
		{"OPEN", func(t *testing.T, evs []transcript.Event) {
			ids := toolIDs(evs)
			if len(ids) != 1 {
				t.Fatalf("tool ids = %v", ids)
			}
			seg, _ := lastTool(evs, ids[0])
			if seg.Status != "error" || seg.Error != ToolErrTurnEnded {
				t.Errorf("open tool after the turn = %+v", seg)
			}
			if evs[len(evs)-1].Segment == nil || evs[len(evs)-1].Segment.ID != ids[0] {
				t.Errorf("closing event is not last: %+v", evs[len(evs)-1])
			}
		}},
		{"NOISE", func(t *testing.T, evs []transcript.Event) {
			want := "a" + strings.Repeat("x", 9<<20) + "b"
			if got := text(evs, transcript.EvContentDelta); got != want {
				t.Errorf("content = %d bytes, want a + 9 MB + b (noise, unknown kinds, images, user chunks and over-long lines skipped)", len(got))
			}
			// The 11 MB line was dropped: a tool segment with status error
			// says so, between the 9 MB chunk and "b".
			if len(evs) != 4 {
				t.Fatalf("%d events, want 4", len(evs))
			}
			if s := evs[2].Segment; evs[2].Type != transcript.EvActivityUpsert || s == nil || s.Type != transcript.SegTool ||
				s.ID != "ochat-dropped-1" || s.Name != DroppedToolName || s.Status != string(transcript.ToolError) ||
				!strings.HasPrefix(s.Error, "agent sent a 11 MB line; it was dropped") {
				t.Errorf("third event should mark the dropped 11 MB line: %+v %+v", evs[2], evs[2].Segment)
			}
		}},
		{"hello", func(t *testing.T, evs []transcript.Event) {
			if got := text(evs, transcript.EvContentDelta); got != "echo: hello" {
				t.Errorf("content = %q", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(strings.Fields(tt.prompt)[0], func(t *testing.T) {
			info := f.session(t)
			if stop := f.prompt(t, info.ID, tt.prompt); stop != "end_turn" {
				t.Errorf("stop reason = %q", stop)
			}
			tt.check(t, f.rec.eventsOf(info.ID))
		})
	}
	// NOISE also sent an update for another session id: routed there.
	if got := text(f.rec.eventsOf("other-session"), transcript.EvContentDelta); got != "for another session" {
		t.Errorf("other session content = %q", got)
	}
	select {
	case <-f.conn.Done():
		t.Fatalf("agent exited: %v", f.conn.Err())
	default:
	}
}

func TestStateUpdates(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	f.prompt(t, info.ID, "PLAIN one")
	f.prompt(t, info.ID, "PLAIN two")
	var title string
	var usage *Usage
	for _, st := range f.rec.statesOf(info.ID) {
		if st.Title != "" {
			title = st.Title
		}
		if st.Usage != nil {
			usage = st.Usage
		}
	}
	if title != "PLAIN one" {
		t.Errorf("title = %q", title)
	}
	if usage == nil || usage.Used != 20 || usage.Size != 1000 || usage.Cost == nil || *usage.Cost != 0.02 {
		t.Errorf("usage = %+v", usage)
	}
	st := f.conn.State(info.ID)
	if st.Title != "PLAIN one" || st.Usage == nil || st.Usage.Used != 20 || len(st.Commands) != 2 {
		t.Errorf("accumulated state = %+v", st)
	}
}

func TestWritePermission(t *testing.T) {
	tests := []struct {
		name     string
		answer   string // option id
		wantTool string
		wantFile bool
	}{
		{"allow", "allow", "completed", true},
		{"always", "always", "completed", true},
		{"reject", "reject", "error", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := start(t, nil, nil)
			f.rec.answer = func(ctx context.Context, req PermissionRequest) (PermissionOutcome, error) {
				return PermissionOutcome{OptionID: tt.answer}, nil
			}
			info := f.session(t)
			f.prompt(t, info.ID, `WRITE sub/hello.txt line one\nline two\n`)
			path := filepath.Join(f.ws, "sub", "hello.txt")
			if len(f.rec.perms) != 1 {
				t.Fatalf("got %d permission requests", len(f.rec.perms))
			}
			req := f.rec.perms[0]
			if len(req.Options) != 3 || req.Options[0] != (PermissionOption{OptionID: "allow", Name: "Allow", Kind: "allow_once"}) ||
				req.Options[2].Kind != "reject_once" {
				t.Errorf("options = %+v", req.Options)
			}
			if req.ToolCall.Name != "Write sub/hello.txt" || req.ToolCall.ProviderKind != "edit" || req.ToolCall.ID == "" {
				t.Errorf("tool call = %+v", req.ToolCall)
			}
			// The input came from the earlier tool_call, merged.
			if !strings.Contains(string(req.ToolCall.Input), `"path":"sub/hello.txt"`) {
				t.Errorf("input = %s", req.ToolCall.Input)
			}
			if len(req.FileChanges) != 1 {
				t.Fatalf("file changes = %+v", req.FileChanges)
			}
			fc := req.FileChanges[0]
			if fc.Path != path || *fc.Additions != 2 || *fc.Deletions != 0 || fc.OldText != nil || *fc.NewText != "line one\nline two\n" || fc.ToolCallID != req.ToolCall.ID {
				t.Errorf("file change = %+v", fc)
			}
			if !strings.Contains(fc.Diff, "+++ b/sub/hello.txt\n") || !strings.Contains(fc.Diff, "+line two\n") {
				t.Errorf("diff = %q", fc.Diff)
			}
			evs := f.rec.eventsOf(info.ID)
			seg, _ := lastTool(evs, req.ToolCall.ID)
			if seg.Status != tt.wantTool {
				t.Errorf("tool status = %q, want %q", seg.Status, tt.wantTool)
			}
			fcs := fileChanges(evs)
			if len(fcs) != 1 || fcs[0].Path != path {
				t.Errorf("fileChange events = %+v", fcs)
			}
			_, err := os.Stat(path)
			if (err == nil) != tt.wantFile {
				t.Errorf("file exists = %v, want %v", err == nil, tt.wantFile)
			}
			if tt.wantTool == "error" && seg.Error != "rejected by the user" {
				t.Errorf("tool error = %q", seg.Error)
			}
		})
	}
}

func TestPermissionBeforeToolCall(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	f.prompt(t, info.ID, "ASK new.txt hi")
	if len(f.rec.perms) != 1 {
		t.Fatalf("permission requests: %d", len(f.rec.perms))
	}
	req := f.rec.perms[0]
	if req.ToolCall.Name != "Write new.txt" || req.ToolCall.Status != "pending" {
		t.Errorf("tool call = %+v", req.ToolCall)
	}
	fc := req.FileChanges[0]
	if fc.OldText == nil || *fc.OldText != "" || *fc.Additions != 1 {
		t.Errorf("file change = %+v", fc)
	}
	evs := f.rec.eventsOf(info.ID)
	if evs[0].Type != transcript.EvActivityUpsert || evs[0].Segment.Status != "pending" {
		t.Errorf("first event = %+v, want the tool from the permission request", evs[0])
	}
	if seg, _ := lastTool(evs, req.ToolCall.ID); seg.Status != "completed" {
		t.Errorf("tool = %+v", seg)
	}
}

func TestPermissionCancel(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	sawCancel := make(chan struct{})
	f.rec.answer = func(ctx context.Context, req PermissionRequest) (PermissionOutcome, error) {
		<-ctx.Done()
		close(sawCancel)
		return PermissionOutcome{Cancelled: true}, nil
	}
	done := make(chan struct{})
	var stop string
	var perr error
	go func() {
		stop, perr = f.conn.Prompt(context.Background(), info.ID, prompt("WRITE x.txt data"))
		close(done)
	}()
	f.rec.waitFor(t, "permission request", func() bool {
		f.rec.mu.Lock()
		defer f.rec.mu.Unlock()
		return len(f.rec.perms) == 1
	})
	if err := f.conn.Cancel(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	<-sawCancel
	<-done
	if perr != nil || stop != "cancelled" {
		t.Fatalf("Prompt = %q, %v; want cancelled", stop, perr)
	}
	evs := f.rec.eventsOf(info.ID)
	id := f.rec.perms[0].ToolCall.ID
	if seg, _ := lastTool(evs, id); seg.Status != "error" || seg.Error != ToolErrCancelled {
		t.Errorf("tool after cancel = %+v", seg)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "x.txt")); err == nil {
		t.Error("file written after a cancelled permission")
	}
	// A late cancel never reaches the next turn.
	if err := f.conn.Cancel(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	f.rec.answer = nil
	if stop := f.prompt(t, info.ID, "SLOW 3"); stop != "end_turn" {
		t.Errorf("turn after a late cancel: stop = %q", stop)
	}
}

func TestCancelSlow(t *testing.T) {
	f := start(t, nil, nil)
	t.Run("Cancel", func(t *testing.T) {
		info := f.session(t)
		go func() {
			f.rec.waitFor(t, "first chunk", func() bool { return len(f.rec.eventsOf(info.ID)) > 0 })
			f.conn.Cancel(context.Background(), info.ID)
		}()
		stop := f.prompt(t, info.ID, "SLOW 200")
		if stop != "cancelled" {
			t.Errorf("stop = %q", stop)
		}
		if n := len(f.rec.eventsOf(info.ID)); n >= 200 {
			t.Errorf("%d chunks: not cancelled", n)
		}
	})
	t.Run("ctx", func(t *testing.T) {
		info := f.session(t)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			f.rec.waitFor(t, "first chunk", func() bool { return len(f.rec.eventsOf(info.ID)) > 0 })
			cancel()
		}()
		stop, err := f.conn.Prompt(ctx, info.ID, prompt("SLOW 200"))
		if err != nil || stop != "cancelled" {
			t.Errorf("Prompt = %q, %v", stop, err)
		}
	})
}

func TestBusySession(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	done := make(chan struct{})
	go func() {
		f.conn.Prompt(context.Background(), info.ID, prompt("SLOW 100"))
		close(done)
	}()
	f.rec.waitFor(t, "first chunk", func() bool { return len(f.rec.eventsOf(info.ID)) > 0 })
	if _, err := f.conn.Prompt(context.Background(), info.ID, prompt("PLAIN x")); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("second prompt: %v, want busy", err)
	}
	f.conn.Cancel(context.Background(), info.ID)
	<-done
}

func TestFail(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	_, err := f.conn.Prompt(context.Background(), info.ID, prompt("FAIL"))
	var re *RequestError
	if !errors.As(err, &re) || re.Err.Code != -32603 || !strings.Contains(err.Error(), "scripted failure") {
		t.Fatalf("err = %v", err)
	}
	if stop := f.prompt(t, info.ID, "PLAIN still alive"); stop != "end_turn" {
		t.Errorf("stop = %q", stop)
	}
}

func TestCrashMidTurn(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	_, err := f.conn.Prompt(context.Background(), info.ID, prompt("CRASH"))
	var exit *ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("err = %v, want *ExitError", err)
	}
	if exit.Status != "exit status 3" || !strings.Contains(exit.Stderr, "crashing on purpose") {
		t.Errorf("exit = %+v", exit)
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "crashing on purpose") {
		t.Errorf("message %q lacks the status or stderr", err)
	}
	if got := text(f.rec.eventsOf(info.ID), transcript.EvContentDelta); got != "about to crash" {
		t.Errorf("content before the crash = %q", got)
	}
	select {
	case <-f.conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed")
	}
	if !errors.As(f.conn.Err(), &exit) {
		t.Errorf("Err = %v", f.conn.Err())
	}
	// Every later call fails with the exit.
	if _, err := f.conn.NewSession(context.Background()); !errors.As(err, &exit) {
		t.Errorf("NewSession after exit: %v", err)
	}
}

func TestFlood(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	const n = 20000
	f.prompt(t, info.ID, fmt.Sprintf("FLOOD %d", n))
	evs := f.rec.eventsOf(info.ID)
	if len(evs) != n {
		t.Fatalf("got %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if e.Delta != fmt.Sprintf("%d ", i) {
			t.Fatalf("event %d = %q: lost or reordered", i, e.Delta)
		}
	}
}

func TestInitTimeout(t *testing.T) {
	ws := t.TempDir()
	_, err := Start(context.Background(), testSpec(map[string]string{"TESTAGENT_INIT_DELAY_MS": "30000"}),
		Options{Workspace: ws, Logger: quietLogger(), InitTimeout: 300 * time.Millisecond, KillGrace: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not answer initialize within 300ms") {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err does not wrap DeadlineExceeded: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		name string
		spec Spec
		opts Options
		want string
	}{
		{"missing command", Spec{Name: "nope", Command: "ochat-no-such-agent-xyz"}, Options{Workspace: ws}, "executable file not found"},
		{"no command", Spec{Name: "empty"}, Options{Workspace: ws}, "no command"},
		{"no workspace", testSpec(nil), Options{}, "no workspace"},
		{"bad workspace", testSpec(nil), Options{Workspace: filepath.Join(ws, "missing")}, "workspace"},
		{"exits at once", Spec{Name: "false", Command: "false"}, Options{Workspace: ws}, "exited (exit status 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Logger = quietLogger()
			_, err := Start(context.Background(), tt.spec, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestClose(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	pid := f.conn.pgid
	if err := f.conn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.conn.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(f.conn.Err(), ErrClosed) {
		t.Errorf("Err = %v, want ErrClosed", f.conn.Err())
	}
	if err := syscallKill0(pid); err == nil {
		t.Errorf("process %d still exists", pid)
	}
	if _, err := f.conn.Prompt(context.Background(), info.ID, prompt("PLAIN x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Prompt after Close: %v", err)
	}
}

func TestLoadAndResume(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("replayAfter=%v", after), func(t *testing.T) {
			state := t.TempDir()
			env := map[string]string{"TESTAGENT_STATE": state}
			if after {
				env["TESTAGENT_REPLAY"] = "after"
			}
			f1 := start(t, env, nil)
			info := f1.session(t)
			f1.prompt(t, info.ID, "PLAIN first turn")
			f1.prompt(t, info.ID, "PLAIN second turn")
			f1.conn.Close()

			rec := newRecorder()
			c2, err := Start(context.Background(), testSpec(env), Options{Workspace: f1.ws, Handler: rec, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			got, err := c2.LoadSession(context.Background(), info.ID)
			if err != nil {
				t.Fatalf("LoadSession: %v", err)
			}
			if got.ID != info.ID || got.State.Modes == nil || len(got.State.ConfigOptions) != 2 {
				t.Errorf("loaded = %+v", got)
			}
			if after {
				// The replay comes after the answer, then the commands.
				rec.waitFor(t, "commands after the replay", func() bool { return len(rec.statesOf(info.ID)) > 0 })
			}
			if evs := rec.eventsOf(info.ID); len(evs) != 0 {
				t.Fatalf("history replay delivered as events: %+v", evs)
			}
			f2 := &fixture{conn: c2, rec: rec, ws: f1.ws}
			f2.prompt(t, info.ID, "PLAIN third")
			evs := rec.eventsOf(info.ID)
			if got := text(evs, transcript.EvContentDelta); got != "third" {
				t.Errorf("content after load = %q", got)
			}
			if ids := toolIDs(evs); len(ids) != 0 {
				t.Errorf("replayed tools reached the live turn: %v", ids)
			}

			// Resume in a third process: no replay, prompts work.
			rec3 := newRecorder()
			c3, err := Start(context.Background(), testSpec(env), Options{Workspace: f1.ws, Handler: rec3, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer c3.Close()
			if _, err := c3.ResumeSession(context.Background(), info.ID); err != nil {
				t.Fatalf("ResumeSession: %v", err)
			}
			f3 := &fixture{conn: c3, rec: rec3}
			f3.prompt(t, info.ID, "PLAIN fourth")
			if got := text(rec3.eventsOf(info.ID), transcript.EvContentDelta); got != "fourth" {
				t.Errorf("content after resume = %q", got)
			}
			if _, err := c3.LoadSession(context.Background(), "ts-unknown"); err == nil {
				t.Error("loading an unknown session succeeded")
			}
		})
	}
}

func TestSetConfigOption(t *testing.T) {
	t.Run("configOptions", func(t *testing.T) {
		f := start(t, nil, nil)
		info := f.session(t)
		st, err := f.conn.SetConfigOption(context.Background(), info.ID, "model", "smart")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.ConfigOptions) != 2 || st.ConfigOptions[1].Select.CurrentValue != "smart" {
			t.Errorf("state = %+v", st)
		}
		if _, err := f.conn.SetConfigOption(context.Background(), info.ID, "mode", "plan"); err != nil {
			t.Fatal(err)
		}
		// current_mode_update reaches the handler with the full mode state.
		var modes *acp.SessionModeState
		for _, s := range f.rec.statesOf(info.ID) {
			if s.Modes != nil {
				modes = s.Modes
			}
		}
		if modes == nil || modes.CurrentModeId != "plan" || len(modes.AvailableModes) != 2 {
			t.Errorf("modes = %+v", modes)
		}
		_, err = f.conn.SetConfigOption(context.Background(), info.ID, "model", "huge")
		var re *RequestError
		if !errors.As(err, &re) || re.Err.Code != -32602 {
			t.Errorf("bad value: %v", err)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		f := start(t, map[string]string{"TESTAGENT_NO_CONFIG": "1"}, nil)
		info := f.session(t)
		if info.State.ConfigOptions != nil || info.State.Models == nil {
			t.Fatalf("state = %+v", info.State)
		}
		st, err := f.conn.SetConfigOption(context.Background(), info.ID, "mode", "plan")
		if err != nil {
			t.Fatal(err)
		}
		if st.Modes == nil || st.Modes.CurrentModeId != "plan" || len(st.Modes.AvailableModes) != 2 {
			t.Errorf("mode state = %+v", st.Modes)
		}
		st, err = f.conn.SetConfigOption(context.Background(), info.ID, "model", "smart")
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			CurrentModelID string `json:"currentModelId"`
		}
		if json.Unmarshal(st.Models, &m); m.CurrentModelID != "smart" {
			t.Errorf("models = %s", st.Models)
		}
		if _, err := f.conn.SetConfigOption(context.Background(), info.ID, "effort", "high"); err == nil {
			t.Error("unknown option without fallback succeeded")
		}
	})
}

func syscallKill0(pid int) error { return syscall.Kill(pid, 0) }

// countHandler counts events; it is the cheapest possible Handler.
type countHandler struct {
	nopHandler
	n atomic.Int64
}

func (h *countHandler) Event(string, transcript.Event) { h.n.Add(1) }

// BenchmarkPromptFlood streams 10,000 agent_message_chunks per prompt turn
// from the scripted agent through the whole client path (pipe, line filter,
// SDK connection, mapping, Handler) and reports the sustained rate.
func BenchmarkPromptFlood(b *testing.B) {
	const n = 10000
	h := &countHandler{}
	c, err := Start(context.Background(), testSpec(nil), Options{Workspace: b.TempDir(), Handler: h, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	info, err := c.NewSession(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Prompt(context.Background(), info.ID, prompt(fmt.Sprintf("FLOOD %d", n))); err != nil {
			b.Fatal(err)
		}
	}
	if got := h.n.Load(); got != int64(n*b.N) {
		b.Fatalf("delivered %d events, want %d", got, n*b.N)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "updates/s")
}

// TestStringRequestID: a permission request with a UUID string id (codex-acp)
// is answered with the same id, verbatim.
func TestStringRequestID(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	f.prompt(t, info.ID, "UUIDPERM")
	got := text(f.rec.eventsOf(info.ID), transcript.EvContentDelta)
	var resp struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(got), &resp); err != nil {
		t.Fatalf("agent saw %q: %v", got, err)
	}
	if string(resp.ID) != `"0b6b7a7e-5e1d-4c7a-9f3e-uuid-perm"` || resp.Result.Outcome.Outcome != "selected" || resp.Result.Outcome.OptionID != "approved" {
		t.Errorf("response = %s", got)
	}
	if len(f.rec.perms) != 1 || f.rec.perms[0].ToolCall.ID != "uuid-tool" {
		t.Errorf("perms = %+v", f.rec.perms)
	}
}

// slowHandler delays every event: the agent must be slowed down (stdout
// backpressure), not the SDK's notification queue overflowed.
type slowHandler struct {
	*recorder
	delay time.Duration
}

func (h slowHandler) Event(sid string, ev transcript.Event) {
	time.Sleep(h.delay)
	h.recorder.Event(sid, ev)
}

func TestSlowHandlerBackpressure(t *testing.T) {
	rec := newRecorder()
	f := start(t, nil, func(o *Options) { o.Handler = slowHandler{rec, 200 * time.Microsecond} })
	f.rec = rec
	info := f.session(t)
	const n = 1300
	f.prompt(t, info.ID, fmt.Sprintf("FLOOD %d", n))
	evs := rec.eventsOf(info.ID)
	if len(evs) != n {
		t.Fatalf("got %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if e.Delta != fmt.Sprintf("%d ", i) {
			t.Fatalf("event %d = %q", i, e.Delta)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitDead polls until pid is gone (reaping by init is asynchronous).
func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still alive", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCloseKillsGroup: an agent that ignores SIGTERM is killed after
// KillGrace, and its child (sharing stdout) dies with the group.
func TestCloseKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	f := start(t, map[string]string{"TESTAGENT_IGNORE_TERM": "1", "TESTAGENT_IGNORE_EOF": "1", "TESTAGENT_CHILD_PIDFILE": pidFile},
		func(o *Options) { o.KillGrace = 200 * time.Millisecond })
	child := readPID(t, pidFile)
	info := f.session(t)
	f.prompt(t, info.ID, "PLAIN alive")
	agentPID := f.conn.pgid
	if err := f.conn.Close(); err != nil {
		t.Fatal(err)
	}
	waitDead(t, agentPID, "agent")
	waitDead(t, child, "agent's child")
	if !strings.Contains(f.conn.Err().Error(), "signal: killed") {
		t.Errorf("Err = %v, want killed (SIGTERM ignored)", f.conn.Err())
	}
}

// TestCrashKillsGroup: when the agent dies, its child holding stdout is
// killed too, so Done closes and the exit is reported.
func TestCrashKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	f := start(t, map[string]string{"TESTAGENT_CHILD_PIDFILE": pidFile}, nil)
	child := readPID(t, pidFile)
	info := f.session(t)
	_, err := f.conn.Prompt(context.Background(), info.ID, prompt("CRASH"))
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Status != "exit status 3" {
		t.Fatalf("err = %v", err)
	}
	<-f.conn.Done()
	waitDead(t, child, "agent's child")
}

// TestPromptBlocks: the scenario comes from the last text block (a handoff
// block may precede it) and every block reaches the agent.
func TestPromptBlocks(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	blocks := []acp.ContentBlock{
		acp.TextBlock("<handoff>\nPLAIN earlier turn\n</handoff>"),
		acp.TextBlock("ECHOALL"),
		acp.ResourceLinkBlock("a.txt", "file:///w/a.txt"),
	}
	if _, err := f.conn.Prompt(context.Background(), info.ID, blocks); err != nil {
		t.Fatal(err)
	}
	want := "<handoff>\nPLAIN earlier turn\n</handoff>\nECHOALL\n[a.txt](file:///w/a.txt)"
	if got := text(f.rec.eventsOf(info.ID), transcript.EvContentDelta); got != want {
		t.Errorf("agent received %q, want %q", got, want)
	}
}

// TestHungAgent: an agent that ignores session/cancel: Prompt returns the
// ctx error after the cancel grace, and Close kills it.
func TestHungAgent(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.KillGrace, o.CancelGrace = 200*time.Millisecond, 200*time.Millisecond })
	info := f.session(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := f.conn.Prompt(ctx, info.ID, prompt("HANG"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// The session is free again.
	if _, err := f.conn.SetConfigOption(context.Background(), info.ID, "mode", "plan"); err != nil {
		t.Errorf("agent still serves other requests: %v", err)
	}
	f.conn.Close()
	select {
	case <-f.conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not killed")
	}
}

func TestConfigReplay(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	for _, kv := range [][2]string{{"mode", "plan"}, {"model", "smart"}} {
		if _, err := f.conn.SetConfigOption(context.Background(), info.ID, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	f.prompt(t, info.ID, "CONFIG")
	if got := text(f.rec.eventsOf(info.ID), transcript.EvContentDelta); got != "mode=plan model=smart" {
		t.Errorf("agent config = %q", got)
	}
	if st := f.conn.State(info.ID); st.ConfigOptions[0].Select.CurrentValue != "plan" {
		t.Errorf("state config = %+v", st.ConfigOptions[0].Select)
	}
}

func TestCloseSession(t *testing.T) {
	f := start(t, nil, nil)
	info := f.session(t)
	f.prompt(t, info.ID, "PLAIN x")
	if err := f.conn.CloseSession(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.conn.Prompt(context.Background(), info.ID, prompt("PLAIN y")); err == nil {
		t.Error("prompt in a closed session succeeded")
	}
	var re *RequestError
	if err := f.conn.CloseSession(context.Background(), "ts-unknown"); !errors.As(err, &re) || re.Err.Code != -32002 {
		t.Errorf("closing an unknown session: %v", err)
	}
}
