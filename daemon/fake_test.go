package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/transcript"
)

// fakeRegistry is an AgentRegistry of in-process fake agents.
type fakeRegistry struct{ names []string }

func (r fakeRegistry) List() []agents.Status {
	var out []agents.Status
	for _, n := range r.names {
		out = append(out, agents.Status{Spec: agents.Spec{Name: n, Command: "fake-" + n, Source: "user"}, Available: true})
	}
	return out
}

func (r fakeRegistry) Lookup(name string) (agents.Spec, error) {
	for _, n := range r.names {
		if n == name {
			return agents.Spec{Name: n, Command: "fake-" + n, Source: "user"}, nil
		}
	}
	return agents.Spec{}, fmt.Errorf("unknown agent %q: add it to agent_servers in settings.json", name)
}

func (r fakeRegistry) Default() string {
	if len(r.names) == 0 {
		return ""
	}
	return r.names[0]
}

// fakeFactory starts fakeAgents and remembers them.
type fakeFactory struct {
	mu     sync.Mutex
	hung   bool
	starts int
	agents []*fakeAgent
}

func (f *fakeFactory) start(ctx context.Context, spec agents.Spec, o agents.Options) (AgentConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	a := &fakeAgent{name: spec.Name, h: o.Handler, ws: o.Workspace, done: make(chan struct{}), cancels: map[string]chan struct{}{}}
	if spec.Name == "hang" && !f.hung {
		f.hung, a.hang = true, true
	}
	f.agents = append(f.agents, a)
	return a, nil
}

func (f *fakeFactory) startCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts
}

// fakeAgent is an in-process AgentConn scripted by the prompt's last text
// block:
//
//	PLAIN            reasoning "thinking", content "Hello", ", world"; end_turn
//	WRITE name       permission (allow / reject); if allowed writes name with
//	                 "hello\n", tool + fileChange segments; end_turn
//	SLOW             a content delta every 2 ms until cancelled → "cancelled"
//	CRASH            one delta, then the process "exits" with an error
//	STREAM n [us]    n content deltas "x", us microseconds apart; end_turn
//	TIMED n rate     n deltas holding their send time in ns, rate per second
//	HOLD n           n deltas, then wait for a cancel
//	IGNORE           wait, ignoring session/cancel, until the prompt is abandoned
//
// The first agent named "hang" a factory starts never answers its first
// session/new (until ctx ends); an agent named "nosession" fails every
// session/new ("Authentication required").
type fakeAgent struct {
	name string
	hang bool
	h    agents.Handler
	ws   string
	done chan struct{}
	err  error

	mu       sync.Mutex
	sessions int
	cancels  map[string]chan struct{}
	prompts  [][]acp.ContentBlock
	closed   atomic.Bool
}

func (a *fakeAgent) Capabilities() acp.AgentCapabilities { return acp.AgentCapabilities{} }

func (a *fakeAgent) NewSession(ctx context.Context) (agents.SessionInfo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sessions++
	if a.name == "nosession" {
		return agents.SessionInfo{}, errors.New("session/new: Authentication required")
	}
	if a.hang && a.sessions == 1 {
		a.mu.Unlock()
		<-ctx.Done()
		a.mu.Lock()
		return agents.SessionInfo{}, fmt.Errorf("session/new: %w", ctx.Err())
	}
	return agents.SessionInfo{ID: fmt.Sprintf("sess-%p-%d", a, a.sessions)}, nil
}

func (a *fakeAgent) LoadSession(ctx context.Context, id string) (agents.SessionInfo, error) {
	return agents.SessionInfo{}, errors.New("loadSession not supported")
}

func (a *fakeAgent) Cancel(ctx context.Context, sid string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch := a.cancels[sid]; ch != nil {
		close(ch)
		delete(a.cancels, sid)
	}
	return nil
}

func (a *fakeAgent) Done() <-chan struct{} { return a.done }
func (a *fakeAgent) Err() error            { return a.err }
func (a *fakeAgent) Close() error {
	if a.closed.CompareAndSwap(false, true) {
		close(a.done)
	}
	return nil
}

func (a *fakeAgent) Prompt(ctx context.Context, sid string, prompt []acp.ContentBlock) (string, error) {
	text := ""
	for _, b := range prompt {
		if b.Text != nil {
			text = b.Text.Text
		}
	}
	cancel := make(chan struct{})
	a.mu.Lock()
	a.prompts = append(a.prompts, prompt)
	a.cancels[sid] = cancel
	a.mu.Unlock()
	delta := func(typ transcript.EventType, s string) {
		a.h.Event(sid, transcript.Event{Type: typ, Delta: s})
	}
	f := strings.Fields(text)
	if len(f) == 0 {
		return "end_turn", nil
	}
	switch f[0] {
	case "PLAIN":
		delta(transcript.EvReasoningDelta, "thinking")
		delta(transcript.EvContentDelta, "Hello")
		delta(transcript.EvContentDelta, ", world")
		return "end_turn", nil
	case "WRITE":
		name := "out.txt"
		if len(f) > 1 {
			name = f[1]
		}
		path := filepath.Join(a.ws, name)
		newText := "hello\n"
		one, zero := 1, 0
		tool := transcript.Segment{Type: transcript.SegTool, ID: "tool_1", Name: "Write " + path, Status: string(transcript.ToolPending), ProviderKind: "edit"}
		fc := transcript.Segment{Type: transcript.SegFileChange, Path: path, Additions: &one, Deletions: &zero, NewText: &newText, ToolCallID: "tool_1"}
		a.h.Event(sid, transcript.Event{Type: transcript.EvActivityUpsert, Segment: &tool})
		out, err := a.h.RequestPermission(ctx, sid, agents.PermissionRequest{
			ToolCall:    tool,
			FileChanges: []transcript.Segment{fc},
			Options: []agents.PermissionOption{
				{OptionID: "allow", Name: "Allow", Kind: "allow_once"},
				{OptionID: "reject", Name: "Reject", Kind: "reject_once"},
			},
		})
		if err != nil {
			return "", err
		}
		if out.Cancelled {
			tool.Status = string(transcript.ToolError)
			a.h.Event(sid, transcript.Event{Type: transcript.EvActivityUpsert, Segment: &tool})
			return "cancelled", nil
		}
		if out.OptionID != "allow" {
			tool.Status = string(transcript.ToolError)
			tool.Error = "rejected by user"
			a.h.Event(sid, transcript.Event{Type: transcript.EvActivityUpsert, Segment: &tool})
			delta(transcript.EvContentDelta, "not written")
			return "end_turn", nil
		}
		if err := os.WriteFile(path, []byte(newText), 0o644); err != nil {
			return "", err
		}
		tool.Status = string(transcript.ToolCompleted)
		a.h.Event(sid, transcript.Event{Type: transcript.EvActivityUpsert, Segment: &tool})
		fc.Status = "applied"
		a.h.Event(sid, transcript.Event{Type: transcript.EvActivityUpsert, Segment: &fc})
		delta(transcript.EvContentDelta, "wrote "+name)
		return "end_turn", nil
	case "SLOW":
		for {
			delta(transcript.EvContentDelta, ".")
			select {
			case <-cancel:
				return "cancelled", nil
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
	case "CRASH":
		delta(transcript.EvContentDelta, "partial")
		a.err = errors.New("exit status 2; stderr: boom")
		a.Close()
		return "", fmt.Errorf("agent exited mid-turn: %w", a.err)
	case "TIMED": // TIMED n rate: deltas carrying their send time (UnixNano), rate per second, evenly spaced
		n, _ := strconv.Atoi(f[1])
		rate, _ := strconv.Atoi(f[2])
		gap := time.Second / time.Duration(max(rate, 1))
		next := time.Now()
		for i := 0; i < n; i++ {
			next = next.Add(gap)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			delta(transcript.EvContentDelta, strconv.FormatInt(time.Now().UnixNano(), 10)+" ")
		}
		return "end_turn", nil
	case "HOLD": // HOLD n: n deltas, then wait for cancel
		n, _ := strconv.Atoi(f[1])
		for i := 0; i < n; i++ {
			delta(transcript.EvContentDelta, "word ")
		}
		select {
		case <-cancel:
			return "cancelled", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	case "IGNORE": // ignores session/cancel; ends only with ctx
		<-ctx.Done()
		return "", ctx.Err()
	case "STREAM":
		n, us := 100, 0
		if len(f) > 1 {
			n, _ = strconv.Atoi(f[1])
		}
		if len(f) > 2 {
			us, _ = strconv.Atoi(f[2])
		}
		for i := 0; i < n; i++ {
			delta(transcript.EvContentDelta, "x")
			if us > 0 {
				time.Sleep(time.Duration(us) * time.Microsecond)
			}
		}
		return "end_turn", nil
	}
	delta(transcript.EvContentDelta, "echo: "+text)
	return "end_turn", nil
}
