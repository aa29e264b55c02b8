package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// runChat is `ochatd chat [--workspace DIR] [--agent NAME] [--conversation
// ID] [--yes|--no] [--json] PROMPT`: one turn through the daemon. The answer
// streams to stdout (tool calls and file changes as lines; with --json each
// ochat/event's params as one JSON line); permission questions go to the
// terminal unless --yes (allow once) or --no (reject). The conversation id is
// printed on stderr. Exit status: 0 completed or cancelled, 1 failed, 2 usage.
// An interrupt (Ctrl-C) cancels the turn; a second one leaves it running.
func runChat(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "chat", &c, true)
	agent := fs.String("agent", "", "agent to answer (default: the conversation's last agent, else the first available)")
	convID := fs.String("conversation", "", "conversation to continue (default: a new one)")
	yes := fs.Bool("yes", false, "answer permission requests: allow once")
	no := fs.Bool("no", false, "answer permission requests: reject")
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if *yes && *no {
		fmt.Fprintln(env.Stderr, "ochatd chat: --yes and --no exclude each other")
		return 2
	}
	prompt := strings.Join(pos, " ")
	if strings.TrimSpace(prompt) == "" || prompt == "-" {
		b, err := io.ReadAll(env.Stdin)
		if err != nil {
			return fail(env, "read prompt from stdin: %v", err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		fmt.Fprintln(env.Stderr, "usage: ochatd chat [--workspace DIR] [--agent NAME] [--conversation ID] [--yes|--no] [--json] PROMPT")
		return 2
	}
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	cl, err := dial(ctx, env, ws)
	if err != nil {
		return fail(env, "%v", err)
	}
	defer cl.Close()
	var res daemon.SendResult
	if err := cl.Call(ctx, daemon.MethodChatSend, daemon.SendParams{ConversationID: *convID, Agent: *agent, Text: prompt}, &res); err != nil {
		var je *jsonrpc2.Error
		if errors.As(err, &je) {
			return fail(env, "%s", je.Message)
		}
		return fail(env, "send: %v", err)
	}
	t := &chatTurn{env: env, cl: cl, res: res, json: c.json, in: bufio.NewReader(env.Stdin), atLineStart: true, tools: map[string]string{}, files: map[string]string{}}
	switch {
	case *yes:
		t.auto = "allow"
	case *no:
		t.auto = "reject"
	}
	status := t.run(ctx)
	fmt.Fprintf(env.Stderr, "conversation: %s\n", res.ConversationID)
	return status
}

// chatTurn follows one turn's notifications.
type chatTurn struct {
	env         *Env
	cl          *daemon.Client
	res         daemon.SendResult
	json        bool
	auto        string // "", "allow", "reject"
	in          *bufio.Reader
	atLineStart bool
	tools       map[string]string // tool id → last printed status
	files       map[string]string // path → last printed line
	lastSeq     int64
}

func (t *chatTurn) run(ctx context.Context) int {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	interrupts := 0
	go func() {
		for range sig {
			interrupts++
			if interrupts > 1 {
				fmt.Fprintln(t.env.Stderr, "\nochatd: leaving the turn running in the daemon")
				os.Exit(130)
			}
			fmt.Fprintln(t.env.Stderr, "\nochatd: cancelling (Ctrl-C again to leave it running)")
			var r daemon.CancelResult
			t.cl.Call(ctx, daemon.MethodChatCancel, daemon.ConversationParams{ConversationID: t.res.ConversationID}, &r)
		}
	}()
	for {
		n, err := t.cl.Next(ctx)
		if err != nil {
			return fail(t.env, "connection to the daemon ended before the turn did: %v", err)
		}
		switch n.Method {
		case daemon.NotifyEvent:
			var p daemon.EventParams
			if err := json.Unmarshal(n.Params, &p); err != nil || p.TurnID != t.res.TurnID {
				continue
			}
			if p.Event.Seq <= t.lastSeq {
				continue
			}
			t.lastSeq = p.Event.Seq
			if t.json {
				fmt.Fprintln(t.env.Stdout, string(n.Params))
			} else {
				t.show(p.Event)
			}
			if p.Event.Terminal() {
				return t.end(p.Event)
			}
		case daemon.NotifyPermission:
			var p daemon.PermissionParams
			if err := json.Unmarshal(n.Params, &p); err != nil || p.TurnID != t.res.TurnID {
				continue
			}
			t.permission(ctx, p)
		case daemon.NotifyResync:
			if code, done := t.resync(ctx); done {
				return code
			}
		}
	}
}

// resync re-subscribes after the daemon dropped us for falling behind.
func (t *chatTurn) resync(ctx context.Context) (int, bool) {
	var sub daemon.SubscribeResult
	if err := t.cl.Call(ctx, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: t.res.ConversationID}, &sub); err != nil {
		return fail(t.env, "resubscribe: %v", err), true
	}
	if sub.Running == nil || sub.Running.TurnID != t.res.TurnID {
		for _, m := range sub.Messages {
			if m.ID == t.res.TurnID {
				ev := transcript.Event{Type: transcript.EvTurnCompleted, StopReason: m.StopReason}
				if m.Status == transcript.StatusFailed {
					ev = transcript.Event{Type: transcript.EvTurnFailed, Message: m.Error}
				}
				return t.end(ev), true
			}
		}
		return fail(t.env, "turn %s vanished", t.res.TurnID), true
	}
	for _, ev := range sub.Running.Events {
		if ev.Seq > t.lastSeq {
			t.lastSeq = ev.Seq
			if !t.json {
				t.show(ev)
			}
		}
	}
	if sub.Running.LastSeq > t.lastSeq {
		t.lastSeq = sub.Running.LastSeq
	}
	for _, p := range sub.Permissions {
		t.permission(ctx, p)
	}
	return 0, false
}

func (t *chatTurn) end(ev transcript.Event) int {
	t.newline()
	if ev.Type == transcript.EvTurnFailed {
		fmt.Fprintf(t.env.Stderr, "ochatd: turn failed: %s\n", ev.Message)
		return 1
	}
	if ev.StopReason != "" && ev.StopReason != "end_turn" {
		fmt.Fprintf(t.env.Stderr, "(stopped: %s)\n", ev.StopReason)
	}
	return 0
}

func (t *chatTurn) write(s string) {
	if s == "" {
		return
	}
	io.WriteString(t.env.Stdout, s)
	t.atLineStart = strings.HasSuffix(s, "\n")
}

func (t *chatTurn) newline() {
	if !t.atLineStart {
		t.write("\n")
	}
}

func (t *chatTurn) line(s string) {
	t.newline()
	t.write(s + "\n")
}

// show prints one event for a human.
func (t *chatTurn) show(ev transcript.Event) {
	switch ev.Type {
	case transcript.EvContentDelta:
		t.write(ev.Delta)
	case transcript.EvActivityUpsert:
		s := ev.Segment
		if s == nil {
			return
		}
		switch s.Type {
		case transcript.SegTool:
			if t.tools[s.ID] != s.Status {
				t.tools[s.ID] = s.Status
				t.line(segmentText(*s))
			}
		case transcript.SegFileChange:
			l := fileLine(*s)
			if t.files[s.Path] != l {
				t.files[s.Path] = l
				t.line(l)
			}
		}
	case transcript.EvPlanUpdated:
		t.line(segmentText(transcript.Segment{Type: transcript.SegPlan, Entries: ev.Entries}))
	}
}

// permission answers one request: --yes / --no, else a question on the
// terminal (stderr, answer on stdin).
func (t *chatTurn) permission(ctx context.Context, p daemon.PermissionParams) {
	t.newline()
	w := t.env.Stderr
	fmt.Fprintf(w, "%s asks permission: %s\n", p.Agent, oneLine(orUnknown(p.ToolCall.Name)))
	for _, f := range p.FileChanges {
		fmt.Fprintf(w, "  %s\n", fileLine(f))
	}
	resp := daemon.RespondParams{PermissionID: p.PermissionID}
	if t.auto != "" {
		resp.OptionID = pickOption(p.Options, t.auto)
		if resp.OptionID == "" {
			resp.Cancelled = true
		}
		fmt.Fprintf(w, "  → %s (--%s)\n", describeAnswer(p.Options, resp), map[string]string{"allow": "yes", "reject": "no"}[t.auto])
	} else {
		for i, o := range p.Options {
			fmt.Fprintf(w, "  %d) %s [%s]\n", i+1, o.Name, o.Kind)
		}
		fmt.Fprintf(w, "choose 1-%d (empty: cancel): ", len(p.Options))
		line, _ := t.in.ReadString('\n')
		line = strings.TrimSpace(line)
		if n, err := strconv.Atoi(line); err == nil && n >= 1 && n <= len(p.Options) {
			resp.OptionID = p.Options[n-1].OptionID
		} else {
			resp.Cancelled = true
		}
	}
	if err := t.cl.Call(ctx, daemon.MethodPermissionRespond, resp, nil); err != nil {
		var je *jsonrpc2.Error
		if errors.As(err, &je) && je.Code == daemon.CodeNotFound {
			fmt.Fprintln(w, "  (already answered elsewhere)")
			return
		}
		fmt.Fprintf(w, "ochatd: answer permission: %v\n", err)
	}
}

// pickOption returns the first option of kind allow_once (then
// allow_always) for "allow", reject_once (then reject_always) for "reject".
func pickOption(opts []agents.PermissionOption, want string) string {
	kinds := []string{"allow_once", "allow_always"}
	if want == "reject" {
		kinds = []string{"reject_once", "reject_always"}
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionID
			}
		}
	}
	return ""
}

func describeAnswer(opts []agents.PermissionOption, r daemon.RespondParams) string {
	if r.Cancelled {
		return "cancelled (no matching option)"
	}
	for _, o := range opts {
		if o.OptionID == r.OptionID {
			return o.Name
		}
	}
	return r.OptionID
}
