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
// printed on stderr. Reasoning prints as "thinking: …" (dimmed on a
// terminal) unless --quiet. Exit status (chatUsage): 0 completed, 1 failed,
// 2 usage or cancelled by another client or the daemon, 130 cancelled by
// Ctrl-C, 3 stopped after the user (or --no) rejected a permission request
// (ExitRejected). An interrupt cancels the turn; a second one leaves it
// running.
func runChat(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "chat", &c, true)
	agent := fs.String("agent", "", "agent to answer (default: the conversation's last agent, else the first available)")
	convID := fs.String("conversation", "", "conversation to continue (default: a new one)")
	yes := fs.Bool("yes", false, "answer permission requests: allow once")
	no := fs.Bool("no", false, "answer permission requests: reject")
	quiet := fs.Bool("quiet", false, "do not print the agent's reasoning")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, chatUsage)
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
			return fail(env, "%s", je.Message)
		}
		return fail(env, "send: %v", err)
	}
	t := &chatTurn{env: env, cl: cl, res: res, json: c.json, workspace: c.workspace, stdin: env.Stdin, promptFromStdin: promptFromStdin, quiet: *quiet,
		dim: colorTerminal(env), atLineStart: true, tools: map[string]string{}, toolNames: map[string]string{}, files: map[string]string{},
		interrupted: make(chan struct{})}
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

// chatUsage is `ochatd chat --help`'s first lines.
const chatUsage = `usage: ochatd chat [--workspace DIR] [--agent NAME] [--conversation ID] [--yes|--no] [--quiet] [--json] PROMPT|-

Runs one prompt turn and streams the answer. PROMPT "-" (or none) reads the prompt from stdin; then
permission questions cannot be answered on stdin: pass --yes or --no. --conversation ID continues a
conversation (ids: ochatd conversations). A permission question accepts the option's number, id or
name, y/yes (allow once) or n/no (reject once).

Exit status: 0 completed, 1 failed, 2 usage error or turn cancelled by another client or the daemon,
3 the agent stopped because you (or --no) rejected its permission request, 130 cancelled by Ctrl-C
(a second Ctrl-C leaves the turn running in the daemon).`

// Exit statuses of `ochatd chat`.
const (
	exitCancelledElsewhere = 2
	exitInterrupted        = 130
)

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
	interrupted     chan struct{}            // closed at the first Ctrl-C
	atLineStart     bool
	inReasoning     bool
	agent           string            // the answering agent, from the events
	tools           map[string]string // tool id → last printed status
	toolNames       map[string]string // tool id → last known title
	files           map[string]string // path → last printed line
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
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	interrupts := 0
	go func() {
		for range sig {
			interrupts++
			if interrupts > 1 {
				fmt.Fprintln(t.env.Stderr, "\nochatd: leaving the turn running in the daemon")
				fmt.Fprintf(t.env.Stderr, "conversation: %s\ncancel it with: %s\n", t.res.ConversationID, t.cancelCommand())
				os.Exit(130)
			}
			fmt.Fprintln(t.env.Stderr, "\nochatd: cancelling (Ctrl-C again to leave it running)")
			close(t.interrupted)
			var r daemon.CancelResult
			call(ctx, t.cl, quickCall, daemon.MethodChatCancel, daemon.ConversationParams{ConversationID: t.res.ConversationID}, &r)
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
			return fail(t.env, "connection to the daemon ended before the turn did: %v", t.notesErr)
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

// resync re-subscribes after the daemon dropped us for falling behind.
func (t *chatTurn) resync(ctx context.Context) (int, bool) {
	var sub daemon.SubscribeResult
	if err := call(ctx, t.cl, quickCall, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: t.res.ConversationID}, &sub); err != nil {
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
	t.endReasoning()
	t.newline()
	if ev.Type == transcript.EvTurnFailed {
		fmt.Fprintf(t.env.Stderr, "ochatd: turn failed: %s\n", ev.Message)
		if h := agents.Hint(t.agent, ev.Message); h != "" {
			fmt.Fprintf(t.env.Stderr, "hint: %s\n", h)
		}
		return 1
	}
	if ev.StopReason == "cancelled" {
		select {
		case <-t.interrupted:
			fmt.Fprintln(t.env.Stderr, "(stopped: cancelled)")
			return exitInterrupted
		default:
			if t.rejected {
				fmt.Fprintln(t.env.Stderr, "(stopped: you rejected the permission request)")
				return ExitRejected
			}
			fmt.Fprintln(t.env.Stderr, "(stopped: cancelled by another client or the daemon)")
			return exitCancelledElsewhere
		}
	}
	if ev.StopReason != "" && ev.StopReason != "end_turn" {
		fmt.Fprintf(t.env.Stderr, "(stopped: %s)\n", ev.StopReason)
	}
	return 0
}

// reasoning prints a reasoning delta after a "thinking: " prefix, dimmed
// on a colour terminal.
func (t *chatTurn) reasoning(delta string) {
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
	if ev.Type == transcript.EvReasoningDelta {
		t.reasoning(ev.Delta)
		return
	}
	t.endReasoning()
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
		var how askEnd
		resp, how = t.ask(p)
		switch how {
		case askResolvedElsewhere, askConnectionEnded:
			return
		case askInterrupted:
			fmt.Fprintln(w, "  (cancelled)")
		}
	}
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
	w := t.env.Stderr
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

// isTerminal reports whether r is a character device (a terminal).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
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
