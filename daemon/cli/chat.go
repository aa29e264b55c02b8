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
	"sync"
	"syscall"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// runChat is `ochatd chat [--workspace DIR] [--agent NAME] [--conversation
// ID] [--yes|--no] [--json] PROMPT`: one turn through the daemon. The answer
// streams to stdout (tool calls and file changes as lines; with --json each
// ochat/event's params as one JSON line, see ChatResyncJSON for the one
// other line); permission questions go to the terminal unless --yes (allow
// once) or --no (reject). The conversation id and how to cancel the turn
// are printed on stderr as soon as the daemon has accepted the prompt.
// Reasoning prints as "thinking: …" (dimmed on a terminal) unless --quiet.
// Human-readable output goes through termSafe. Exit status (chatUsage): 0
// completed, 1 failed, 2 usage or cancelled by another client or the
// daemon, 130 cancelled by Ctrl-C (129 SIGHUP, 143 SIGTERM), 141 the reader
// of stdout or stderr went away (SIGPIPE), 3 stopped after the user (or
// --no) rejected a permission request (ExitRejected). An interrupt, hangup
// or terminate signal cancels the turn, and so does a write to a closed
// pipe (EPIPE: SIGPIPE is caught, so it does not kill chat before the
// cancel); a second signal stops waiting for the cancelled turn to end.
func runChat(ctx context.Context, env *Env, args []string) int {
	// A write to stdout or stderr whose reader is gone returns EPIPE
	// instead of killing chat with SIGPIPE (os/signal, "SIGPIPE"): the
	// outputWatch below then cancels the turn.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	ow := &outputWatch{}
	dim := colorTerminal(env)
	wenv := *env
	wenv.Stdout, wenv.Stderr = ow.wrap(env.Stdout), ow.wrap(env.Stderr)
	env = &wenv
	var c common
	fs := newFlags(env, "chat", &c, true)
	agent := fs.String("agent", "", "agent to answer (default: the conversation's last agent, else the first available)")
	convID := fs.String("conversation", "", "conversation to continue (default: a new one)")
	yes := fs.Bool("yes", false, "answer permission requests: allow once")
	no := fs.Bool("no", false, "answer permission requests: reject")
	quiet := fs.Bool("quiet", false, "do not print the agent's reasoning")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), chatUsage)
		fs.PrintDefaults()
	}
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if *yes && *no {
		fmt.Fprintln(env.Stderr, "ochatd chat: --yes and --no exclude each other")
		return 2
	}
	prompt := strings.Join(pos, " ")
	promptFromStdin := false
	if strings.TrimSpace(prompt) == "" || prompt == "-" {
		promptFromStdin = true
		b, err := io.ReadAll(env.Stdin)
		if err != nil {
			return fail(env, "read prompt from stdin: %v", err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		fmt.Fprintln(env.Stderr, "ochatd chat: empty prompt")
		fmt.Fprintln(env.Stderr, chatUsage)
		return 2
	}
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var res daemon.SendResult
	if err := call(ctx, cl, slowCall, daemon.MethodChatSend, daemon.SendParams{ConversationID: *convID, Agent: *agent, Text: prompt}, &res); err != nil {
		var je *jsonrpc2.Error
		if errors.As(err, &je) {
			if isNotFound(err) && *convID != "" {
				if hint := unknownConversationHint(ctx, env, cl, *convID); hint != "" {
					return fail(env, "%s: %s", je.Message, hint)
				}
			}
			return fail(env, "%s", je.Message)
		}
		return fail(env, "send: %v", err)
	}
	t := &chatTurn{env: env, cl: cl, res: res, json: c.json, workspace: c.workspace, stdin: env.Stdin, promptFromStdin: promptFromStdin, quiet: *quiet,
		dim: dim, atLineStart: true, tools: map[string]string{}, toolNames: map[string]string{}, files: map[string]string{},
		asked: map[string]bool{}, interrupted: make(chan struct{}), cancelSent: make(chan struct{}), queueID: res.QueueID}
	ow.onGone(func() {
		if t.startCancel(syscall.SIGPIPE) {
			go t.sendCancel(ctx)
		}
	})
	if res.Queued {
		fmt.Fprintln(env.Stderr, "ochatd: "+queuedNote(res))
	}
	fmt.Fprintf(env.Stderr, "conversation: %s (to stop the turn from elsewhere: %s)\n", res.ConversationID, t.cancelCommand())
	switch {
	case *yes:
		t.auto = "allow"
	case *no:
		t.auto = "reject"
	}
	return t.run(ctx)
}

// chatUsage is `ochatd chat --help`'s first lines.
const chatUsage = `usage: ochatd chat [--workspace DIR] [--agent NAME] [--conversation ID] [--yes|--no] [--quiet] [--json] PROMPT|-

Runs one prompt turn and streams the answer. PROMPT "-" (or none) reads the prompt from stdin; then
permission questions cannot be answered on stdin: pass --yes or --no. --conversation ID continues a
conversation (ids: ochatd conversations). A permission question accepts the option's number, id or
name, y/yes (allow once) or n/no (reject once).

On a conversation whose turn is running the prompt is queued (a note on stderr says so; ochatd queue
lists, edits or drops it) and its own turn streams when the daemon sends it; Ctrl-C while it waits
removes it from the queue.

The conversation id, and the command that cancels the turn from another terminal, go to stderr as soon
as the daemon accepts the prompt. Text from the agent is printed with terminal control characters made
visible (ESC as ^[); --json prints each ochat/event's params raw, one per line. A client that falls
behind the daemon catches up from it: text already printed is not printed again; with --json the
missed events are printed, or, if the daemon no longer has them, one {"resync":{…}} line carrying the
assistant message so far stands for them. The last line is always the turn's turn.completed or
turn.failed event.

Exit status: 0 completed, 1 failed (also when the daemon stopped mid-turn), 2 usage error or turn
cancelled by another client or the daemon, 3 the agent stopped because you (or --no) rejected its
permission request, 130 cancelled by Ctrl-C, 129 / 143 cancelled because the terminal closed (SIGHUP) /
by SIGTERM, 141 cancelled because the reader of the output went away (SIGPIPE: "| head" exited; nothing
more is printed). A second signal stops waiting for the cancelled turn to end: the cancel has been
sent, and if the agent does not end the turn the daemon stops it after its cancel grace (10 s by
default). timeout(1) sends SIGTERM twice (to chat and to its process group), so under timeout chat
exits at once after sending the cancel.`

// Exit statuses of `ochatd chat`.
const (
	exitCancelledElsewhere = 2
	exitInterrupted        = 130 // 128 + SIGINT; SIGHUP, SIGTERM and SIGPIPE give 128 + their number
)

// outputWatch wraps chat's stdout and stderr and notices the first write
// that fails with EPIPE: the reader of the output has gone (`| head`
// exited). Writes after that still fail as the pipe makes them fail.
type outputWatch struct {
	mu   sync.Mutex
	gone bool   // a write failed with EPIPE
	fn   func() // called once at the first EPIPE (or at onGone, if that came later)
	done bool   // fn has been called
}

// wrap returns w whose writes report EPIPE to o.
func (o *outputWatch) wrap(w io.Writer) io.Writer { return watchedWriter{w, o} }

// onGone sets fn, called once, synchronously in the failing write, when
// the output is gone; at once if it is gone already.
func (o *outputWatch) onGone(fn func()) {
	o.mu.Lock()
	o.fn = fn
	call := o.gone && !o.done
	o.done = o.done || call
	o.mu.Unlock()
	if call {
		fn()
	}
}

func (o *outputWatch) failed(err error) {
	if !errors.Is(err, syscall.EPIPE) {
		return
	}
	o.mu.Lock()
	o.gone = true
	fn := o.fn
	call := fn != nil && !o.done
	o.done = o.done || call
	o.mu.Unlock()
	if call {
		fn()
	}
}

type watchedWriter struct {
	w io.Writer
	o *outputWatch
}

func (w watchedWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		w.o.failed(err)
	}
	return n, err
}

// daemonStopped is the turn.failed message of a turn the daemon ended
// because it was stopping (daemon.Server.Close).
const daemonStopped = "daemon stopped"

// cancelSignals are the signals that cancel the turn: Ctrl-C, the terminal
// closing, and a polite kill.
var cancelSignals = []os.Signal{os.Interrupt, syscall.SIGHUP, syscall.SIGTERM}

// signalExit is the exit status after sig cancelled the turn: 128 plus the
// signal's number, as a shell reports a process killed by it.
func signalExit(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitInterrupted
}

// ChatResyncJSON is the line `ochatd chat --json` prints, in place of
// events, after it fell behind the daemon (ochat/resync) and the events it
// missed are gone (the turn's replay buffer was truncated, or the turn
// ended meanwhile). Message is the assistant message as of LastSeq (the
// live events that follow continue at LastSeq+1), or, when the turn has
// ended (LastSeq 0), the stored final message; the turn's terminal event
// follows then as the last line, without a seq. Events the daemon still
// had are printed as ordinary event lines instead, with no resync line.
type ChatResyncJSON struct {
	ConversationID string     `json:"conversationId"`
	TurnID         string     `json:"turnId"`
	MessageID      string     `json:"messageId"`
	Agent          string     `json:"agent,omitempty"`
	Resync         ChatResync `json:"resync"`
}

// ChatResync says what a ChatResyncJSON line stands for.
type ChatResync struct {
	// Reason is the daemon's ochat/resync reason.
	Reason string `json:"reason"`
	// AfterSeq is the seq of the last event printed before this line.
	AfterSeq int64 `json:"afterSeq"`
	// LastSeq is the seq of the last event Message covers; 0 when the turn
	// has ended.
	LastSeq int64 `json:"lastSeq,omitempty"`
	// Message is the assistant message (segments included).
	Message transcript.Message `json:"message"`
}

// ExitRejected (3) is `ochatd chat`'s exit status when the turn stopped
// (stop reason cancelled) after the user, or --no, rejected one of its
// permission requests: the user's own choice, not a failure.
const ExitRejected = 3

// chatTurn follows one turn's notifications.
type chatTurn struct {
	env             *Env
	cl              *daemon.Client
	res             daemon.SendResult
	json            bool
	quiet           bool   // hide reasoning
	dim             bool   // stdout is a colour terminal: dim the reasoning
	auto            string // "", "allow", "reject"
	stdin           io.Reader
	promptFromStdin bool
	workspace       string                   // --workspace as given ("" if not), for the cancel hint
	lines           chan string              // stdin lines, read by one goroutine; closed at EOF
	stdinEOF        bool                     // lines was closed
	notes           chan daemon.Notification // the daemon's notifications, read by one goroutine; closed when the connection ends
	notesErr        error                    // why notes was closed
	pending         []daemon.Notification    // notifications that arrived while a question waited
	rejected        bool                     // the user (or --no) rejected a permission request of this turn
	asked           map[string]bool          // permission ids already answered or dropped here
	cancelMu        sync.Mutex               // guards signal while the cancel starts, and queueID
	queueID         string                   // the message waits in the conversation's queue under this id (queue.go)
	interrupted     chan struct{}            // closed at the first cancelling signal (SIGPIPE: the output is gone)
	signal          os.Signal                // that signal; set before interrupted is closed
	cancelSent      chan struct{}            // closed once ochat/chat/cancel has been answered (or failed)
	cancelErr       error                    // why the cancel failed; read after cancelSent is closed
	atLineStart     bool
	heldCR          bool // write holds a trailing CR back
	inReasoning     bool
	agent           string            // the answering agent, from the events
	tools           map[string]string // tool id → last printed status
	toolNames       map[string]string // tool id → last known title
	files           map[string]string // path → last printed line
	plan            string            // last printed plan
	contentBytes    int               // bytes of content deltas printed (before termSafe)
	reasoningBytes  int               // bytes of reasoning deltas seen (printed unless quiet)
	lastSeq         int64
}

// colorTerminal reports whether stdout is a terminal that takes colour
// (not with NO_COLOR or TERM=dumb).
func colorTerminal(env *Env) bool {
	f, ok := env.Stdout.(*os.File)
	if !ok || env.Getenv == nil || env.Getenv("NO_COLOR") != "" || env.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (t *chatTurn) run(ctx context.Context) int {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, cancelSignals...)
	defer signal.Stop(sig)
	go func() {
		for s := range sig {
			if t.startCancel(s) {
				if t.waitingInQueue() != "" {
					fmt.Fprintf(t.env.Stderr, "\nochatd: %v: removing the queued message\n", s)
				} else if s == os.Interrupt {
					fmt.Fprintln(t.env.Stderr, "\nochatd: cancelling (Ctrl-C again to stop waiting for the turn to end)")
				} else {
					fmt.Fprintf(t.env.Stderr, "\nochatd: %v: cancelling the turn\n", s)
				}
				t.sendCancel(ctx)
				continue
			}
			// Cancelling already (an earlier signal, or the output went
			// away): stop waiting, once the cancel has been sent.
			<-t.cancelSent
			t.giveUp(s)
			os.Exit(signalExit(s))
		}
	}()
	t.notes = make(chan daemon.Notification)
	go func() {
		defer close(t.notes)
		for {
			n, err := t.cl.Next(ctx)
			if err != nil {
				t.notesErr = err
				return
			}
			select {
			case t.notes <- n:
			case <-ctx.Done():
				t.notesErr = ctx.Err()
				return
			}
		}
	}()
	for {
		n, ok := t.next()
		if !ok {
			t.endReasoning()
			t.newline()
			code := fail(t.env, "connection to the daemon ended before the turn did: %v", t.notesErr)
			// The daemon died mid-turn (killed, crashed): what it stored
			// before is kept and marked interrupted at its next start.
			fmt.Fprintf(t.stderrSafe(), "hint: the daemon stopped (its process ended); the answer so far is kept: ochatd show %s\n", t.res.ConversationID)
			return code
		}
		switch n.Method {
		case daemon.NotifyEvent:
			var p daemon.EventParams
			if err := json.Unmarshal(n.Params, &p); err != nil || p.TurnID != t.res.TurnID {
				continue
			}
			if p.Agent != "" {
				t.agent = p.Agent
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
			if err := json.Unmarshal(n.Params, &p); err != nil || p.TurnID != t.res.TurnID || t.asked[p.PermissionID] {
				continue
			}
			t.permission(ctx, p)
		case daemon.NotifyQueue:
			var p daemon.QueueParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				continue
			}
			if code, done := t.queueChange(p); done {
				return code
			}
		case daemon.NotifyAgentProgress:
			// A slow start (npx download, adapter start, session/load)
			// says what it is doing; "ready" needs no line.
			var p daemon.AgentProgressParams
			if err := json.Unmarshal(n.Params, &p); err != nil || p.ConversationID != t.res.ConversationID ||
				p.Stage == daemon.ProgressReady || p.Stage == daemon.ProgressFailed || t.json {
				continue
			}
			t.newline()
			fmt.Fprintf(t.stderrSafe(), "ochatd: %s\n", p.Message)
		case daemon.NotifyResync:
			var p daemon.ResyncParams
			if err := json.Unmarshal(n.Params, &p); err != nil || p.ConversationID != t.res.ConversationID {
				continue
			}
			if id := t.waitingInQueue(); id != "" {
				if code, done := t.resyncQueued(ctx, id); done {
					return code
				}
				continue
			}
			if code, done := t.resync(ctx, p.Reason); done {
				return code
			}
		}
	}
}

// startCancel records sig as what cancels the turn and closes
// interrupted, if nothing has yet; it reports whether it did. The caller
// then sends the cancel (sendCancel).
func (t *chatTurn) startCancel(sig os.Signal) bool {
	t.cancelMu.Lock()
	defer t.cancelMu.Unlock()
	if t.signal != nil {
		return false
	}
	t.signal = sig
	close(t.interrupted)
	return true
}

// sendCancel sends ochat/chat/cancel for the turn and closes cancelSent
// when the daemon has answered (cancelErr says if it failed).
func (t *chatTurn) sendCancel(ctx context.Context) {
	if id := t.waitingInQueue(); id != "" && t.unqueue(ctx, id) {
		close(t.cancelSent)
		return
	}
	var r daemon.CancelResult
	t.cancelErr = call(ctx, t.cl, quickCall, daemon.MethodChatCancel, daemon.ConversationParams{ConversationID: t.res.ConversationID}, &r)
	close(t.cancelSent)
}

// giveUp says, on stderr, that chat stops waiting for the cancelled turn
// to end (a second signal, sig), and what becomes of the turn: the cancel
// was sent and the daemon ends the turn, stopping an agent that ignores
// the cancel after its cancel grace (daemon.DefaultCancelGrace unless
// `ochatd serve --cancel-grace`). cancelSent must be closed.
func (t *chatTurn) giveUp(sig os.Signal) {
	w := t.env.Stderr
	what := "ochatd: "
	if sig != os.Interrupt {
		what += sig.String() + ": "
	}
	if t.cancelErr != nil {
		fmt.Fprintf(w, "\n%snot waiting for the turn to end; the cancel could not be sent (%v)\ncancel it with: %s\n", what, t.cancelErr, t.cancelCommand())
		return
	}
	fmt.Fprintf(w, "\n%snot waiting for the turn to end: the cancel was sent; if the agent does not end the turn, the daemon stops the agent after its cancel grace (%v by default)\nconversation: %s (to see how it ended: %s)\n",
		what, daemon.DefaultCancelGrace, t.res.ConversationID, t.showCommand())
}

// showCommand is the command line that shows this conversation, with
// --workspace when chat was given one.
func (t *chatTurn) showCommand() string {
	if t.workspace != "" {
		return "ochatd show --workspace " + shellQuote(t.workspace) + " " + t.res.ConversationID
	}
	return "ochatd show " + t.res.ConversationID
}

// cancelCommand is the command line that cancels this turn later, with
// --workspace when chat was given one.
func (t *chatTurn) cancelCommand() string {
	if t.workspace != "" {
		return "ochatd cancel --workspace " + shellQuote(t.workspace) + " " + t.res.ConversationID
	}
	return "ochatd cancel " + t.res.ConversationID
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=+,:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// next returns the next notification: one held back while a question
// waited, else the next from the daemon. A stdin line typed while no
// question waits is dropped (it answered a question already resolved
// elsewhere). ok is false when the connection has ended.
func (t *chatTurn) next() (daemon.Notification, bool) {
	if len(t.pending) > 0 {
		n := t.pending[0]
		t.pending = t.pending[1:]
		return n, true
	}
	for {
		var lines chan string
		if !t.stdinEOF {
			lines = t.lines // nil until the first question: no read is pending
		}
		select {
		case n, ok := <-t.notes:
			return n, ok
		case _, ok := <-lines:
			if !ok {
				t.stdinEOF = true
			}
		}
	}
}

// resync catches up after the daemon dropped this client from the
// conversation's live events for falling behind (ochat/resync, reason as
// the daemon gave it): it subscribes again and applies the snapshot.
func (t *chatTurn) resync(ctx context.Context, reason string) (int, bool) {
	var sub daemon.SubscribeResult
	if err := call(ctx, t.cl, quickCall, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: t.res.ConversationID}, &sub); err != nil {
		return fail(t.env, "resubscribe after falling behind: %v", err), true
	}
	return t.catchUp(ctx, sub, reason)
}

// catchUp prints what sub holds of this turn that was not printed yet and,
// when the turn has ended, its end (done is then true and code the exit
// status). Three cases, as docs/protocol.md ochat/subscribe describes:
//
//   - the turn runs and the daemon still has its events: the events after
//     lastSeq are printed as if they had arrived live;
//   - the turn runs but its replay buffer was truncated: what the message
//     as of running.lastSeq holds beyond what was printed (plain), or a
//     ChatResyncJSON line (--json); live events continue after lastSeq;
//   - the turn has ended: the same from the stored message, then its end.
//
// Pending permission requests of the turn not asked yet are asked.
func (t *chatTurn) catchUp(ctx context.Context, sub daemon.SubscribeResult, reason string) (code int, done bool) {
	r := sub.Running
	if r == nil || r.TurnID != t.res.TurnID {
		for _, m := range sub.Messages {
			if m.ID == t.res.TurnID {
				ev := terminalOf(m)
				if t.json {
					t.jsonLine(ChatResyncJSON{ConversationID: t.res.ConversationID, TurnID: t.res.TurnID, MessageID: t.res.AssistantMessageID, Agent: orString(m.Agent, t.agent),
						Resync: ChatResync{Reason: reason, AfterSeq: t.lastSeq, Message: m}})
					t.jsonLine(daemon.EventParams{ConversationID: t.res.ConversationID, TurnID: t.res.TurnID, MessageID: t.res.AssistantMessageID, Agent: orString(m.Agent, t.agent), Event: ev})
				} else {
					t.showMessage(m)
				}
				if m.Agent != "" {
					t.agent = m.Agent
				}
				return t.end(ev), true
			}
		}
		return fail(t.env, "turn %s is neither running nor stored in conversation %s", t.res.TurnID, t.res.ConversationID), true
	}
	if r.Agent != "" {
		t.agent = r.Agent
	}
	if r.Truncated && r.Message != nil && r.LastSeq > t.lastSeq {
		if t.json {
			t.jsonLine(ChatResyncJSON{ConversationID: t.res.ConversationID, TurnID: t.res.TurnID, MessageID: t.res.AssistantMessageID, Agent: t.agent,
				Resync: ChatResync{Reason: reason, AfterSeq: t.lastSeq, LastSeq: r.LastSeq, Message: *r.Message}})
		} else {
			t.showMessage(*r.Message)
		}
		t.lastSeq = r.LastSeq
	}
	for _, ev := range r.Events {
		if ev.Seq <= t.lastSeq {
			continue
		}
		t.lastSeq = ev.Seq
		if t.json {
			t.jsonLine(daemon.EventParams{ConversationID: t.res.ConversationID, TurnID: t.res.TurnID, MessageID: t.res.AssistantMessageID, Agent: t.agent, Event: ev})
		} else {
			t.show(ev)
		}
		if ev.Terminal() {
			return t.end(ev), true
		}
	}
	if r.LastSeq > t.lastSeq {
		t.lastSeq = r.LastSeq
	}
	for _, p := range sub.Permissions {
		if p.TurnID == t.res.TurnID && !t.asked[p.PermissionID] {
			t.permission(ctx, p)
		}
	}
	return 0, false
}

// terminalOf is the terminal event of the ended turn stored as m.
func terminalOf(m transcript.Message) transcript.Event {
	switch m.Status {
	case transcript.StatusCompleted, transcript.StatusCancelled:
		sr := m.StopReason
		if sr == "" && m.Status == transcript.StatusCancelled {
			sr = "cancelled"
		}
		return transcript.Event{Type: transcript.EvTurnCompleted, StopReason: sr}
	case transcript.StatusFailed:
		return transcript.Event{Type: transcript.EvTurnFailed, Message: m.Error}
	case transcript.StatusInterrupted:
		return transcript.Event{Type: transcript.EvTurnFailed, Message: orString(m.Error, "interrupted: the daemon stopped before the turn ended")}
	}
	return transcript.Event{Type: transcript.EvTurnFailed, Message: fmt.Sprintf("the turn ended without a final status (stored as %q)", m.Status)}
}

func orString(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// jsonLine prints v as one JSON line (--json).
func (t *chatTurn) jsonLine(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(t.env.Stderr, "ochatd: encode %T: %v\n", v, err)
		return
	}
	t.env.Stdout.Write(append(b, '\n'))
}

// showMessage prints what the assistant message m holds beyond what was
// printed so far: the content and reasoning after the bytes already
// printed, tool and file lines whose status changed, a changed plan. It
// walks m's segments in order, so what it prints keeps their order.
func (t *chatTurn) showMessage(m transcript.Message) {
	var content, reasoning int // bytes of m's content / reasoning before s
	for _, s := range m.Segments {
		switch s.Type {
		case transcript.SegContent:
			if rest := unseen(s.Content, t.contentBytes-content); rest != "" {
				t.show(transcript.Event{Type: transcript.EvContentDelta, Delta: rest})
			}
			content += len(s.Content)
		case transcript.SegReasoning:
			if rest := unseen(s.Content, t.reasoningBytes-reasoning); rest != "" {
				t.show(transcript.Event{Type: transcript.EvReasoningDelta, Delta: rest})
			}
			reasoning += len(s.Content)
		case transcript.SegTool, transcript.SegFileChange:
			t.show(transcript.Event{Type: transcript.EvActivityUpsert, Segment: &s})
		case transcript.SegPlan:
			t.show(transcript.Event{Type: transcript.EvPlanUpdated, Entries: s.Entries})
		}
	}
	// The counters count what m holds, so a later catch-up compares with
	// the message, not with the skipped part of a cut rune.
	t.contentBytes = max(t.contentBytes, content)
	t.reasoningBytes = max(t.reasoningBytes, reasoning)
}

// unseen is s after its first seen bytes (all of s when seen ≤ 0, "" when
// seen ≥ len(s)), starting at a rune boundary.
func unseen(s string, seen int) string {
	if seen <= 0 {
		return s
	}
	if seen >= len(s) {
		return ""
	}
	for seen < len(s) && !utf8.RuneStart(s[seen]) {
		seen++
	}
	return s[seen:]
}

func (t *chatTurn) end(ev transcript.Event) int {
	t.endReasoning()
	t.newline()
	w := t.stderrSafe()
	if ev.Type == transcript.EvTurnFailed {
		fmt.Fprintf(w, "ochatd: turn failed: %s\n", ev.Message)
		if ev.Message == daemonStopped {
			fmt.Fprintf(w, "hint: the daemon stopped (ochatd stop, or its process was ended); the answer so far is kept: ochatd show %s\n", t.res.ConversationID)
		} else if h := agents.Hint(t.agent, ev.Message); h != "" {
			fmt.Fprintf(w, "hint: %s\n", h)
		}
		return 1
	}
	select {
	case <-t.interrupted:
		if t.signal == syscall.SIGPIPE {
			// Nobody reads the output any more: whatever the end, it
			// was cut; say nothing (the pipe is likely stderr too).
			return signalExit(t.signal)
		}
	default:
	}
	if ev.StopReason == "cancelled" {
		select {
		case <-t.interrupted:
			fmt.Fprintln(w, "(stopped: cancelled)")
			return signalExit(t.signal)
		default:
			if t.rejected {
				fmt.Fprintln(w, "(stopped: you rejected the permission request)")
				return ExitRejected
			}
			fmt.Fprintln(w, "(stopped: cancelled by another client or the daemon)")
			return exitCancelledElsewhere
		}
	}
	if ev.StopReason != "" && ev.StopReason != "end_turn" {
		fmt.Fprintf(w, "(stopped: %s)\n", ev.StopReason)
	}
	return 0
}

// reasoning prints a reasoning delta after a "thinking: " prefix, dimmed
// on a colour terminal.
func (t *chatTurn) reasoning(delta string) {
	t.reasoningBytes += len(delta)
	if t.quiet || delta == "" {
		return
	}
	if !t.inReasoning {
		t.newline()
		t.inReasoning = true
		if t.dim {
			io.WriteString(t.env.Stdout, "\x1b[2m")
		}
		t.write("thinking: ")
	}
	t.write(delta)
}

// endReasoning closes a reasoning run before other output.
func (t *chatTurn) endReasoning() {
	if !t.inReasoning {
		return
	}
	t.inReasoning = false
	if t.dim {
		io.WriteString(t.env.Stdout, "\x1b[0m")
	}
	t.newline()
}

// toolLine renders a tool segment, naming it by its last known title, else
// its id (an update can arrive before the call that names it).
func (t *chatTurn) toolLine(s transcript.Segment) string {
	if s.Name != "" {
		t.toolNames[s.ID] = s.Name
	} else if n := t.toolNames[s.ID]; n != "" {
		s.Name = n
	} else {
		s.Name = s.ID
	}
	return segmentText(s)
}

// stderrSafe is stderr through termSafe, for lines that carry an agent's
// text (tool names, options, errors).
func (t *chatTurn) stderrSafe() io.Writer { return termSafeWriter{t.env.Stderr} }

// write prints s (through termSafe) to stdout.
// A CR at the end of s is held back until the next write, so a CRLF split
// across two deltas stays a line end rather than a visible ^M.
func (t *chatTurn) write(s string) {
	if t.heldCR {
		s, t.heldCR = "\r"+s, false
	}
	if strings.HasSuffix(s, "\r") {
		s, t.heldCR = s[:len(s)-1], true
	}
	if s == "" {
		return
	}
	s = termSafe(s)
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
	if ev.Type == transcript.EvReasoningDelta {
		t.reasoning(ev.Delta)
		return
	}
	t.endReasoning()
	switch ev.Type {
	case transcript.EvContentDelta:
		t.contentBytes += len(ev.Delta)
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
				t.line(t.toolLine(*s))
			}
		case transcript.SegFileChange:
			l := fileLine(*s)
			if t.files[s.Path] != l {
				t.files[s.Path] = l
				t.line(l)
			}
		}
	case transcript.EvPlanUpdated:
		if l := segmentText(transcript.Segment{Type: transcript.SegPlan, Entries: ev.Entries}); l != t.plan {
			t.plan = l
			t.line(l)
		}
	}
}

// permission answers one request: --yes / --no, else a question on the
// terminal (stderr, answer on stdin).
func (t *chatTurn) permission(ctx context.Context, p daemon.PermissionParams) {
	t.asked[p.PermissionID] = true
	t.newline()
	w := t.stderrSafe()
	fmt.Fprintf(w, "%s asks permission: %s\n", p.Agent, oneLine(orUnknown(p.ToolCall.Name)))
	for _, f := range p.FileChanges {
		fmt.Fprintf(w, "  %s\n", fileLine(f))
	}
	resp := daemon.RespondParams{PermissionID: p.PermissionID}
	select {
	case <-t.interrupted: // the turn is being cancelled: --yes must not allow now
		resp.Cancelled = true
		fmt.Fprintln(w, "  (cancelled)")
		t.respond(ctx, w, p, resp)
		return
	default:
	}
	if t.auto != "" {
		resp.OptionID = pickOption(p.Options, t.auto)
		if resp.OptionID == "" {
			resp.Cancelled = true
		}
		fmt.Fprintf(w, "  → %s (--%s)\n", describeAnswer(p.Options, resp), map[string]string{"allow": "yes", "reject": "no"}[t.auto])
	} else {
		var how askEnd
		resp, how = t.ask(p)
		switch how {
		case askResolvedElsewhere, askConnectionEnded:
			return
		case askInterrupted:
			fmt.Fprintln(w, "  (cancelled)")
		}
	}
	t.respond(ctx, w, p, resp)
}

// respond sends the answer resp to permission request p.
func (t *chatTurn) respond(ctx context.Context, w io.Writer, p daemon.PermissionParams, resp daemon.RespondParams) {
	if isReject(p.Options, resp.OptionID) {
		t.rejected = true
	}
	if err := call(ctx, t.cl, quickCall, daemon.MethodPermissionRespond, resp, nil); err != nil {
		var je *jsonrpc2.Error
		if errors.As(err, &je) && je.Code == daemon.CodeNotFound {
			if !resp.Cancelled {
				t.rejected = false
				fmt.Fprintln(w, "  (already answered elsewhere)")
			}
			return
		}
		fmt.Fprintf(w, "ochatd: answer permission: %v\n", err)
	}
}

// maxAsks is how often an unclear permission answer is asked again.
const maxAsks = 3

// askEnd says how a permission question ended.
type askEnd int

const (
	askAnswered          askEnd = iota // answered here (or rejected for lack of a clear answer)
	askInterrupted                     // Ctrl-C: answer cancelled
	askResolvedElsewhere               // ochat/permissionResolved arrived: another client answered, or the turn ended
	askConnectionEnded                 // the daemon connection ended
)

// ask puts a permission question on the terminal (stderr) and reads the
// answer from stdin: the option's number, id or name, y/yes or n/no. An
// unclear answer asks again (3 times in all, then rejects); EOF rejects;
// Ctrl-C answers cancelled (the turn is being cancelled). While it waits,
// an ochat/permissionResolved for this permission (another client answered)
// drops the question at once: the pending stdin read is abandoned (next
// drops the line it yields). Other notifications are held for next.
func (t *chatTurn) ask(p daemon.PermissionParams) (daemon.RespondParams, askEnd) {
	w := t.stderrSafe()
	resp := daemon.RespondParams{PermissionID: p.PermissionID}
	reject := func(why string) (daemon.RespondParams, askEnd) {
		resp.OptionID = pickOption(p.Options, "reject")
		resp.Cancelled = resp.OptionID == ""
		fmt.Fprintf(w, "  %s: answering %s\n", why, describeAnswer(p.Options, resp))
		return resp, askAnswered
	}
	if t.promptFromStdin {
		return reject("stdin is the prompt; use --yes or --no")
	}
	if t.stdinEOF {
		return reject("stdin closed (use --yes / --no in scripts)")
	}
	if t.lines == nil {
		t.lines = make(chan string)
		go readLines(t.stdin, t.lines)
	}
	notes := t.notes
	for try := 0; try < maxAsks; try++ {
		for i, o := range p.Options {
			fmt.Fprintf(w, "  %d) %s [%s]\n", i+1, o.Name, o.Kind)
		}
		fmt.Fprintf(w, "choose 1-%d, y (allow once) or n (reject): ", len(p.Options))
	wait:
		select { // a notification other than this question's resolution waits in t.pending; goto wait keeps the same try
		case <-t.interrupted: // the Ctrl-C handler has ended the question's line
			resp.Cancelled = true
			return resp, askInterrupted
		case n, ok := <-notes:
			if !ok {
				fmt.Fprintln(w)
				return resp, askConnectionEnded // next then reports the ended connection
			}
			if n.Method == daemon.NotifyPermissionResolved {
				var r daemon.PermissionResolvedParams
				if json.Unmarshal(n.Params, &r) == nil && r.PermissionID == p.PermissionID {
					select {
					case <-t.interrupted: // our own Ctrl-C cancelled the turn and so this question
						fmt.Fprintln(w, "  (cancelled)")
						return resp, askResolvedElsewhere
					default:
					}
					fmt.Fprintln(w)
					if r.Outcome == "cancelled" || r.OptionID == "" {
						fmt.Fprintln(w, "  (cancelled by another client or the daemon)")
					} else {
						fmt.Fprintf(w, "  (answered in another editor: %s)\n", describeAnswer(p.Options, daemon.RespondParams{OptionID: r.OptionID}))
					}
					return resp, askResolvedElsewhere
				}
			}
			t.pending = append(t.pending, n)
			goto wait
		case line, ok := <-t.lines:
			if !ok {
				t.stdinEOF = true
				fmt.Fprintln(w)
				return reject("stdin closed (use --yes / --no in scripts)")
			}
			if !isTerminal(t.stdin) {
				fmt.Fprintln(w, strings.TrimSpace(line)) // a terminal echoes the answer; a pipe does not
			}
			if id := matchOption(p.Options, line); id != "" {
				resp.OptionID = id
				return resp, askAnswered
			}
			fmt.Fprintf(w, "  %q is not one of the options\n", strings.TrimSpace(line))
		}
	}
	return reject("no clear answer")
}

// isReject reports whether id names a reject_once or reject_always option.
func isReject(opts []agents.PermissionOption, id string) bool {
	for _, o := range opts {
		if o.OptionID == id {
			return o.Kind == "reject_once" || o.Kind == "reject_always"
		}
	}
	return false
}

// isTerminal reports whether f (stdin, stdout) is a character device (a
// terminal).
func isTerminal(f any) bool {
	fd, ok := f.(*os.File)
	if !ok {
		return false
	}
	fi, err := fd.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// readLines sends stdin's lines to ch and closes it at EOF or error.
func readLines(r io.Reader, ch chan<- string) {
	defer close(ch)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			ch <- line
		}
		if err != nil {
			return
		}
	}
}

// matchOption maps an answer to an option id: its 1-based number, its id,
// its name (case-insensitive), y/yes (the allow_once option, else
// allow_always), n/no (reject_once, else reject_always); "" if none.
func matchOption(opts []agents.PermissionOption, answer string) string {
	a := strings.TrimSpace(answer)
	if a == "" {
		return ""
	}
	if n, err := strconv.Atoi(a); err == nil {
		if n >= 1 && n <= len(opts) {
			return opts[n-1].OptionID
		}
		return ""
	}
	for _, o := range opts {
		if o.OptionID == a {
			return o.OptionID
		}
	}
	for _, o := range opts {
		if strings.EqualFold(o.Name, a) {
			return o.OptionID
		}
	}
	switch strings.ToLower(a) {
	case "y", "yes":
		return pickOption(opts, "allow")
	case "n", "no":
		return pickOption(opts, "reject")
	}
	return ""
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
