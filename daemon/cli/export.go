package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/transcript"
)

// runExport is `ochatd export REF [--format events|markdown|json] [-o FILE]`:
// a conversation (REF = conversation id) or a native session (native id or
// session file) as a session event log, Markdown or canonical JSON, through
// ochat/export. What the event log cannot express is listed on stderr. -o
// refuses an existing FILE unless --force.
func runExport(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "export", &c, false)
	format := fs.String("format", daemon.FormatEvents, "events (session event log, JSON Lines), markdown or json")
	out := fs.String("o", "", "write to FILE instead of stdout (an existing FILE only with --force)")
	force := fs.Bool("force", false, "let -o overwrite an existing file")
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd export [--workspace DIR] [--format events|markdown|json] [-o FILE [--force]] CONVERSATION_ID | SESSION_ID | SESSION_FILE")
		return 2
	}
	toFile := *out != "" && *out != "-"
	if toFile {
		// Checked before the export too, so a refusal costs nothing.
		if fi, err := os.Stat(*out); err == nil && fi.IsDir() {
			return fail(env, "export: %s is a directory: -o takes a file name (say %s)", *out, filepath.Join(*out, "conversation"+exportExt(*format)))
		}
		if _, err := os.Lstat(*out); err == nil && !*force {
			return fail(env, "export: %s exists; pass --force to overwrite it", *out)
		}
	}
	switch *format {
	case daemon.FormatEvents, daemon.FormatMarkdown, daemon.FormatJSON:
	default:
		return fail(env, "export: --format must be events, markdown or json, not %q", *format)
	}
	ref := pos[0]
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	sp, err := sessionRef(ref)
	if err != nil {
		return fail(env, "export: %v", err)
	}
	var res daemon.ExportConversationResult
	err = errNotTried
	if sp.SessionID != "" {
		err = call(ctx, cl, slowCall, daemon.MethodExport, daemon.ExportParams{ConversationID: ref, Format: *format}, &res)
	}
	if err != nil && (errors.Is(err, errNotTried) || isNotFound(err)) {
		err = call(ctx, cl, slowCall, daemon.MethodExport, daemon.ExportParams{SessionID: sp.SessionID, Path: sp.Path, Format: *format}, &res)
		if isNotFound(err) && sp.SessionID != "" {
			return fail(env, "export %s: no conversation and no native session has this id (see `ochatd sessions`)%s", ref, notFoundHint(env, cl.Init.Daemon))
		}
	}
	if err != nil {
		return fail(env, "export %s: %v", ref, err)
	}
	content := res.Content
	if !toFile && isTerminal(env.Stdout) {
		// Shown, not saved: keep agents' control sequences off the terminal.
		content = termSafe(content)
	}
	if toFile {
		err = writeExport(*out, []byte(content), *force)
	} else {
		_, err = io.WriteString(env.Stdout, content)
	}
	if err != nil {
		return fail(env, "export: %v", err)
	}
	for _, d := range res.Degradations {
		fmt.Fprintf(env.Stderr, "ochatd export: not in the event log: message %s: %s: %s\n", d.MessageID, d.Kind, d.Detail)
	}
	return 0
}

var errNotTried = errors.New("not tried")

// exportExt is the usual file extension of an export format.
func exportExt(format string) string {
	switch format {
	case daemon.FormatMarkdown:
		return ".md"
	case daemon.FormatJSON:
		return ".json"
	}
	return ".jsonl"
}

// writeExport writes data to path (mode 0644); an existing path is
// refused (os.ErrExist, with the --force hint) unless force.
func writeExport(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; pass --force to overwrite it: %w", path, os.ErrExist)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// fromJSONExport recognises a file `ochatd export --format json` wrote: one
// JSON object with "id", "title" and "messages" (canonical messages, each
// with a role; Gemini CLI's legacy session files hold "messages" too, but
// no "id" and messages without a role). ok is false for anything else,
// event logs included. The messages are checked by the daemon on import.
func fromJSONExport(data []byte) (ej daemon.ExportJSON, ok bool) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return ej, false
	}
	var probe struct {
		ID       *string           `json:"id"`
		Title    *string           `json:"title"`
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(trimmed, &probe) != nil || probe.ID == nil || probe.Title == nil || probe.Messages == nil {
		return ej, false
	}
	for _, m := range probe.Messages {
		var r struct {
			Role *string `json:"role"`
		}
		if json.Unmarshal(m, &r) != nil || r.Role == nil {
			return ej, false
		}
	}
	if json.Unmarshal(trimmed, &ej) != nil {
		return ej, false
	}
	return ej, true
}

// wholeJSON reports whether data is one JSON document spread over lines (an
// object or array, pretty-printed), not JSON Lines.
func wholeJSON(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && bytes.ContainsRune(t, '\n') && json.Valid(t)
}

// notEventLog names what data is when it is plainly no session event log:
// an `ochatd export --format json` file, an `ochatd export --format
// markdown` file (its first line is a "# " heading), or another JSON
// document: an array, or one over several lines (its first line a lone "{"
// or "[", as a pretty-printed or cut-off document starts). It is ""
// otherwise.
func notEventLog(data []byte) string {
	t := bytes.TrimSpace(data)
	first, _, _ := bytes.Cut(t, []byte("\n"))
	first = bytes.TrimSpace(first)
	switch {
	case len(t) == 0:
		return ""
	case t[0] == '{' || t[0] == '[':
		if _, ok := fromJSONExport(t); ok {
			return "an `ochatd export --format json` file"
		}
		if wholeJSON(t) || (t[0] == '[' && json.Valid(t)) || bytes.Equal(first, []byte("{")) || bytes.Equal(first, []byte("[")) {
			return "one JSON document"
		}
	case bytes.HasPrefix(first, []byte("# ")):
		return "an `ochatd export --format markdown` file"
	}
	return ""
}

// visibleCount says how many messages msgs holds the way listings count
// them: "11 messages", or "11 messages (3 hidden)" when hidden scaffolding
// (a handoff prompt, a CLI command such as /model) was kept besides.
func visibleCount(total, hidden int) string {
	s := fmt.Sprintf("%d messages", total-hidden)
	if hidden > 0 {
		s += fmt.Sprintf(" (%d hidden)", hidden)
	}
	return s
}

func countHidden(msgs []transcript.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Hidden {
			n++
		}
	}
	return n
}

// maxProblems is how many validator problems a refused import lists.
const maxProblems = 5

// importNonLog handles a file without one importable event: a native
// session file is opened through ochat/sessions/open; anything else is
// refused with the validator's first problems.
func importNonLog(ctx context.Context, env *Env, cl *daemon.Client, name string, data []byte, asJSON bool) int {
	if name != "-" {
		if abs, err := filepath.Abs(name); err == nil {
			var res daemon.OpenSessionResult
			if err := call(ctx, cl, slowCall, daemon.MethodSessionsOpen, daemon.SessionRefParams{Path: abs}, &res); err == nil {
				if asJSON {
					return printJSON(env, res)
				}
				agent := ""
				if res.Conversation.Native != nil {
					agent = res.Conversation.Native.Agent + " "
				}
				verb := "opened"
				if !res.Created {
					verb = "already opened as"
				}
				fmt.Fprintf(env.Stderr, "ochatd import: %s is a native %ssession, not an event log: %s a conversation through ochat/sessions/open\n", name, agent, verb)
				if msg := syncSummary(res.Sync); msg != "" {
					fmt.Fprintf(env.Stderr, "ochatd import: %s\n", termSafe(msg))
				}
				fmt.Fprintf(env.Stdout, "%s\t%s\t%s\n", res.ConversationID, visibleCount(len(res.Messages), countHidden(res.Messages)), termSafe(res.Conversation.Title))
				return 0
			} else if msg := err.Error(); strings.Contains(msg, native.ErrNoSessionID.Error()) {
				// Shaped like a native session, but no session: say what
				// it lacks rather than list it as a broken event log.
				msg = msg[strings.Index(msg, native.ErrNoSessionID.Error()):]
				return fail(env, "import %s: %s; nothing was imported", name, msg)
			}
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fail(env, "import %s: the file is empty; nothing was imported", name)
	}
	if kind := notEventLog(data); strings.Contains(kind, "markdown") {
		return fail(env, "import %s: this is %s, for people, not a session event log; nothing was imported. import takes `ochatd export REF --format events` or `--format json`", name, kind)
	}
	if wholeJSON(data) {
		return fail(env, "import %s: this is one JSON document, not a session event log (JSON Lines, one event a line); nothing was imported. import takes the event log: `ochatd export REF --format events`, or an `ochatd export REF --format json` file", name)
	}
	vs := transcript.Validate(data)
	fmt.Fprintf(env.Stderr, "ochatd: import %s: not a session event log (no valid event) and not a native session file; nothing was imported\n", name)
	for i, v := range vs {
		if i == maxProblems {
			fmt.Fprintf(env.Stderr, "  … %d more (ochatd validate %s)\n", len(vs)-maxProblems, name)
			break
		}
		fmt.Fprintf(env.Stderr, "  %s:%d: %s\n", name, v.Line, v.Message)
	}
	return 1
}

// runRename is `ochatd rename CONVERSATION_ID TITLE...`.
func runRename(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "rename", &c, false)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) < 2 {
		fmt.Fprintln(env.Stderr, "usage: ochatd rename [--workspace DIR] CONVERSATION_ID TITLE")
		return 2
	}
	title := strings.Join(pos[1:], " ")
	if strings.TrimSpace(title) == "" {
		fmt.Fprintln(env.Stderr, "ochatd rename: the title is blank: give the conversation a title")
		return 2
	}
	return convCall(ctx, env, c, daemon.MethodConversationsRename, daemon.RenameParams{ConversationID: pos[0], Title: &title},
		fmt.Sprintf("renamed %s to %q", pos[0], title))
}

// runDelete is `ochatd delete CONVERSATION_ID`.
func runDelete(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "delete", &c, false)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd delete [--workspace DIR] CONVERSATION_ID")
		return 2
	}
	return convCall(ctx, env, c, daemon.MethodConversationsDelete, daemon.ConversationParams{ConversationID: pos[0]},
		"deleted "+pos[0])
}

// convCall makes one conversation request through the daemon and prints
// done on success.
func convCall(ctx context.Context, env *Env, c common, method string, params any, done string) int {
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	if err := call(ctx, cl, slowCall, method, params, nil); err != nil {
		var je *jsonrpc2.Error
		if errors.As(err, &je) {
			return fail(env, "%s", cliMessage(je))
		}
		return fail(env, "%s: %v", method, err)
	}
	fmt.Fprintln(env.Stdout, done)
	return 0
}

// cliMessage is a daemon error's message as the CLI says it: a request
// the daemon refuses because a turn is running names `ochatd cancel ID`
// rather than the protocol method.
func cliMessage(je *jsonrpc2.Error) string {
	if je.Code == daemon.CodeConflict {
		if id, ok := runningIn(je.Message); ok {
			return strings.Replace(je.Message, "ochat/chat/cancel", "ochatd cancel "+id, 1)
		}
	}
	return je.Message
}

// runningIn finds the conversation id in the daemon's "a turn is running
// in conversation ID: …" message.
func runningIn(msg string) (string, bool) {
	const lead = "a turn is running in conversation "
	_, rest, ok := strings.Cut(msg, lead)
	if !ok || !strings.Contains(rest, "ochat/chat/cancel") {
		return "", false
	}
	id, _, _ := strings.Cut(rest, ":")
	if id = strings.TrimSpace(id); id == "" || strings.ContainsAny(id, " \t") {
		return "", false
	}
	return id, true
}

// readInput reads FILE, or stdin for "-".
func readInput(env *Env, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(env.Stdin)
	}
	return os.ReadFile(name)
}

// runImport is `ochatd import FILE [--title T]`: a session event log
// (JSON Lines; "-" reads stdin) becomes a new conversation through
// ochat/import. Lines that could not be imported are listed on stderr as
// FILE:LINE: reason; the rest is imported. An `ochatd export --format json`
// file is imported whole, its messages as they are (ochat/import with
// messages). A file with no valid event is refused (exit 1, nothing
// created) with the validator's first problems, unless it is a native
// session file (Claude, Codex, Gemini, OpenCode, pi): that is opened
// through ochat/sessions/open (which links, not copies, the native session)
// and the output says so; one shaped like a session but naming no session
// id is refused, saying so. The count printed is of visible messages, as
// `ochatd sessions` counts, with the hidden ones named apart.
func runImport(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "import", &c, true)
	title := fs.String("title", "", "title of the new conversation (default: the log's session/title)")
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd import [--workspace DIR] [--title T] [--json] FILE")
		return 2
	}
	data, err := readInput(env, pos[0])
	if err != nil {
		return fail(env, "import: %v", err)
	}
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	if ej, ok := fromJSONExport(data); ok {
		return importJSONExport(ctx, env, cl, pos[0], ej, *title, c.json)
	}
	if ir := transcript.Import(data); len(ir.Messages) == 0 {
		return importNonLog(ctx, env, cl, pos[0], data, c.json)
	}
	events, _ := json.Marshal(string(data))
	var res daemon.ImportConversationResult
	if err := call(ctx, cl, slowCall, daemon.MethodImport, daemon.ImportParams{Events: events, Title: *title}, &res); err != nil {
		return fail(env, "import %s: %v", pos[0], err)
	}
	if c.json {
		return printJSON(env, res)
	}
	for _, v := range res.Skipped {
		fmt.Fprintf(env.Stderr, "%s:%d: skipped: %s\n", pos[0], v.Line, v.Message)
	}
	for _, v := range res.Repaired {
		fmt.Fprintf(env.Stderr, "%s:%d: repaired: %s\n", pos[0], v.Line, v.Message)
	}
	fmt.Fprintf(env.Stdout, "%s\t%s\t%s\n", res.ConversationID, visibleCount(res.Messages, res.Hidden), termSafe(res.Conversation.Title))
	return 0
}

// importJSONExport imports an `ochatd export --format json` file's messages
// as they are (ochat/import with messages): file changes, attachments'
// metadata, hidden messages and all.
func importJSONExport(ctx context.Context, env *Env, cl *daemon.Client, name string, ej daemon.ExportJSON, title string, asJSON bool) int {
	if len(ej.Messages) == 0 {
		return fail(env, "import %s: this `ochatd export --format json` file holds no messages; nothing was imported", name)
	}
	if title == "" {
		title = ej.Title
	}
	if ej.Agent != "" {
		// A native session's export names its CLI once, not per turn.
		for i := range ej.Messages {
			if m := &ej.Messages[i]; m.Role == transcript.RoleAssistant && m.Agent == "" {
				m.Agent = ej.Agent
			}
		}
	}
	var res daemon.ImportConversationResult
	if err := call(ctx, cl, slowCall, daemon.MethodImport, daemon.ImportParams{Messages: ej.Messages, Title: title}, &res); err != nil {
		var je *jsonrpc2.Error
		if errors.As(err, &je) {
			return fail(env, "import %s: %s; nothing was imported", name, strings.TrimPrefix(je.Message, "invalid params: "))
		}
		return fail(env, "import %s: %v", name, err)
	}
	if asJSON {
		return printJSON(env, res)
	}
	fmt.Fprintf(env.Stderr, "ochatd import: %s is an `ochatd export --format json` file: imported its messages as they are\n", name)
	fmt.Fprintf(env.Stdout, "%s\t%s\t%s\n", res.ConversationID, visibleCount(res.Messages, res.Hidden), termSafe(res.Conversation.Title))
	return 0
}

// runValidate is `ochatd validate FILE`: checks a session event log
// (transcript.Validate; "-" reads stdin) and prints one line per violation,
// "LINE: message", exiting 1 if there is any. A file that is plainly no
// event log (a json or markdown export, another JSON document: notEventLog)
// gets one line saying what it is instead, exit 1. It needs no daemon.
func runValidate(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "validate", &c, true)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd validate [--json] FILE")
		return 2
	}
	data, err := readInput(env, pos[0])
	if err != nil {
		return fail(env, "validate: %v", err)
	}
	if kind := notEventLog(data); kind != "" {
		msg := fmt.Sprintf("%s is %s, not an event log: validate checks event logs (`ochatd export REF --format events`)", pos[0], kind)
		if c.json {
			printJSON(env, []transcript.Violation{{Line: 1, Message: msg}})
			return 1
		}
		return fail(env, "validate: %s", msg)
	}
	vs := transcript.Validate(data)
	if c.json {
		if vs == nil {
			vs = []transcript.Violation{}
		}
		if code := printJSON(env, vs); code != 0 {
			return code
		}
	} else {
		for _, v := range vs {
			fmt.Fprintf(env.Stdout, "%d: %s\n", v.Line, v.Message)
		}
	}
	if len(vs) > 0 {
		return 1
	}
	return 0
}
