package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
)

// queueUsage is `ochatd queue --help`'s synopsis.
const queueUsage = `usage: ochatd queue [--workspace DIR] [--json] CONVERSATION_ID
       ochatd queue [--workspace DIR] [--json] remove CONVERSATION_ID QUEUE_ID
       ochatd queue [--workspace DIR] [--json] edit CONVERSATION_ID QUEUE_ID TEXT|-
       ochatd queue [--workspace DIR] [--json] send-now CONVERSATION_ID QUEUE_ID

Lists the messages waiting in a conversation's queue (sent with ochatd chat, or from an editor,
while a turn ran), oldest first: each is sent as its own turn when the turn before it ends.
remove drops one; edit replaces its text (- reads it from stdin); send-now cancels the running
turn and sends that message next, ahead of the others.`

// runQueue is `ochatd queue`: list, remove, edit or send-now a
// conversation's queued messages through the daemon.
func runQueue(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "queue", &c, true)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), queueUsage)
		fmt.Fprintln(fs.Output(), "\nflags:")
		fs.PrintDefaults()
	}
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	verb := ""
	if len(pos) > 0 {
		switch pos[0] {
		case "remove", "edit", "send-now":
			verb, pos = pos[0], pos[1:]
		}
	}
	want := map[string]int{"": 1, "remove": 2, "send-now": 2, "edit": 3}[verb]
	if len(pos) != want {
		fmt.Fprintln(env.Stderr, queueUsage)
		return 2
	}
	params := daemon.QueueItemParams{ConversationID: pos[0]}
	if verb != "" {
		params.ID = pos[1]
	}
	if verb == "edit" {
		params.Text = pos[2]
		if params.Text == "-" {
			b, err := io.ReadAll(env.Stdin)
			if err != nil {
				return fail(env, "read the new text from stdin: %v", err)
			}
			params.Text = string(b)
		}
	}
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	method := map[string]string{"remove": daemon.MethodQueueRemove, "edit": daemon.MethodQueueUpdate, "send-now": daemon.MethodQueueSendNow}[verb]
	var res daemon.QueueResult
	if verb == "" {
		var got daemon.GetConversationResult
		err = call(ctx, cl, quickCall, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: params.ConversationID}, &got)
		res = daemon.QueueResult{ConversationID: params.ConversationID, Items: got.Queue}
	} else {
		err = call(ctx, cl, quickCall, method, params, &res)
	}
	if err != nil {
		var je *jsonrpc2.Error
		if errors.As(err, &je) {
			return fail(env, "queue: %s", cliMessage(je))
		}
		return fail(env, "queue: %v", err)
	}
	if res.Items == nil {
		res.Items = []history.QueuedMessage{}
	}
	if c.json {
		return printJSON(env, res)
	}
	switch verb {
	case "remove":
		fmt.Fprintf(env.Stdout, "removed %s from the queue of %s\n", params.ID, params.ConversationID)
	case "edit":
		fmt.Fprintf(env.Stdout, "edited %s\n", params.ID)
	case "send-now":
		if res.Cancelled {
			fmt.Fprintf(env.Stdout, "cancelling the running turn of %s; %s is sent next\n", params.ConversationID, params.ID)
		} else {
			fmt.Fprintf(env.Stdout, "%s is sent next\n", params.ID)
		}
	}
	if verb != "" && len(res.Items) == 0 {
		return 0
	}
	printQueue(env, params.ConversationID, res.Items)
	return 0
}

// printQueue lists queued messages, oldest (next) first, one line each.
func printQueue(env *Env, convID string, items []history.QueuedMessage) {
	if len(items) == 0 {
		fmt.Fprintf(env.Stdout, "no message is queued in %s\n", convID)
		return
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tID\tAGENT\tQUEUED\tTEXT")
	for i, m := range items {
		text := oneLine(m.Text)
		if r := []rune(text); len(r) > 60 {
			text = string(r[:59]) + "…"
		}
		if n := len(m.Attachments); n > 0 {
			text += fmt.Sprintf(" [+%d attachment(s)]", n)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, m.ID, termSafe(m.Agent), fmtTime(m.CreatedAt), termSafe(text))
	}
	tw.Flush()
}

// queuedNote is what `ochatd chat` prints on stderr when its message was
// queued behind the running turn.
func queuedNote(res daemon.SendResult) string {
	return fmt.Sprintf("queued behind the running turn; it will be sent when that turn ends (to drop it: ochatd queue remove %s %s)", res.ConversationID, res.QueueID)
}

// queueChange handles an ochat/queue notification while chat's message
// waits in the queue: when the daemon sends it, the turn it became is
// followed from then on; when it leaves the queue unsent (removed by
// another client, or by Ctrl-C here), chat ends. done reports the end,
// with code the exit status.
func (t *chatTurn) queueChange(p daemon.QueueParams) (code int, done bool) {
	t.cancelMu.Lock()
	id := t.queueID
	if id == "" || p.ConversationID != t.res.ConversationID {
		t.cancelMu.Unlock()
		return 0, false
	}
	if p.Sent != nil && p.Sent.ID == id {
		t.queueID = ""
		t.res.UserMessageID, t.res.AssistantMessageID, t.res.TurnID = p.Sent.UserMessageID, p.Sent.AssistantMessageID, p.Sent.TurnID
		t.cancelMu.Unlock()
		if !t.json {
			fmt.Fprintln(t.env.Stderr, "ochatd: the turn before ended; sending the queued message")
		}
		return 0, false
	}
	sig := t.signal
	t.cancelMu.Unlock()
	for _, m := range p.Items {
		if m.ID == id {
			return 0, false
		}
	}
	if sig != nil {
		fmt.Fprintln(t.env.Stderr, "ochatd: the queued message was removed; nothing was sent")
		return signalExit(sig), true
	}
	fmt.Fprintln(t.env.Stderr, "ochatd: the queued message was removed (from another client) before it was sent")
	return exitCancelledElsewhere, true
}

// waitingInQueue is the queue id chat's message waits under, "" once it
// was sent (or was never queued).
func (t *chatTurn) waitingInQueue() string {
	t.cancelMu.Lock()
	defer t.cancelMu.Unlock()
	return t.queueID
}

// unqueue drops chat's waiting message from the queue (a signal while it
// waits: the running turn is not ours to cancel). It reports false when the
// message has left the queue meanwhile (it is being sent: cancel its turn).
func (t *chatTurn) unqueue(ctx context.Context, id string) bool {
	err := call(ctx, t.cl, quickCall, daemon.MethodQueueRemove, daemon.QueueItemParams{ConversationID: t.res.ConversationID, ID: id}, nil)
	var je *jsonrpc2.Error
	if errors.As(err, &je) && je.Code == jsonrpc2.InvalidParams && strings.Contains(je.Message, "is not a queued message") {
		return false
	}
	t.cancelErr = err
	return true
}

// resyncQueued re-subscribes after chat fell behind while its message
// waited in the queue (id): the snapshot's queue says whether it still
// waits. One that left the queue meanwhile cannot be told from the others
// it may have become, so chat ends and says where to look.
func (t *chatTurn) resyncQueued(ctx context.Context, id string) (code int, done bool) {
	var sub daemon.SubscribeResult
	if err := call(ctx, t.cl, quickCall, daemon.MethodSubscribe, daemon.ConversationParams{ConversationID: t.res.ConversationID}, &sub); err != nil {
		return fail(t.env, "resubscribe after falling behind: %v", err), true
	}
	for _, m := range sub.Queue {
		if m.ID == id {
			return 0, false
		}
	}
	return fail(t.env, "the queued message %s left the queue while this client had fallen behind; see ochatd show %s", id, t.res.ConversationID), true
}
