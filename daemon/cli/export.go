package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// runExport is `ochatd export REF [--format events|markdown|json] [-o FILE]`:
// a conversation (REF = conversation id) or a native session (native id or
// session file) as a session event log, Markdown or canonical JSON, through
// ochat/export. What the event log cannot express is listed on stderr.
func runExport(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "export", &c, false)
	format := fs.String("format", daemon.FormatEvents, "events (session event log, JSON Lines), markdown or json")
	out := fs.String("o", "", "write to FILE instead of stdout")
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd export [--workspace DIR] [--format events|markdown|json] [-o FILE] CONVERSATION_ID | SESSION_ID | SESSION_FILE")
		return 2
	}
	switch *format {
	case daemon.FormatEvents, daemon.FormatMarkdown, daemon.FormatJSON:
	default:
		return fail(env, "export: --format must be events, markdown or json, not %q", *format)
	}
	ref := pos[0]
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	cl, err := dial(ctx, env, ws)
	if err != nil {
		return fail(env, "%v", err)
	}
	defer cl.Close()
	sp, err := sessionRef(ref)
	if err != nil {
		return fail(env, "export: %v", err)
	}
	var res daemon.ExportConversationResult
	err = errNotTried
	if sp.SessionID != "" {
		err = cl.Call(ctx, daemon.MethodExport, daemon.ExportParams{ConversationID: ref, Format: *format}, &res)
	}
	if err != nil && (errors.Is(err, errNotTried) || isNotFound(err)) {
		err = cl.Call(ctx, daemon.MethodExport, daemon.ExportParams{SessionID: sp.SessionID, Path: sp.Path, Format: *format}, &res)
		if isNotFound(err) && sp.SessionID != "" {
			return fail(env, "export %s: no conversation and no native session has this id (see `ochatd sessions`)", ref)
		}
	}
	if err != nil {
		return fail(env, "export %s: %v", ref, err)
	}
	if *out != "" && *out != "-" {
		if err := os.WriteFile(*out, []byte(res.Content), 0o644); err != nil {
			return fail(env, "export: %v", err)
		}
	} else if _, err := io.WriteString(env.Stdout, res.Content); err != nil {
		return fail(env, "export: %v", err)
	}
	for _, d := range res.Degradations {
		fmt.Fprintf(env.Stderr, "ochatd export: not in the event log: message %s: %s: %s\n", d.MessageID, d.Kind, d.Detail)
	}
	return 0
}

var errNotTried = errors.New("not tried")

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
// FILE:LINE: reason; the rest is imported.
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
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	cl, err := dial(ctx, env, ws)
	if err != nil {
		return fail(env, "%v", err)
	}
	defer cl.Close()
	events, _ := json.Marshal(string(data))
	var res daemon.ImportConversationResult
	if err := cl.Call(ctx, daemon.MethodImport, daemon.ImportParams{Events: events, Title: *title}, &res); err != nil {
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
	fmt.Fprintf(env.Stdout, "%s\t%d messages\t%s\n", res.ConversationID, res.Messages, res.Conversation.Title)
	return 0
}

// runValidate is `ochatd validate FILE`: checks a session event log
// (transcript.Validate; "-" reads stdin) and prints one line per violation,
// "LINE: message", exiting 1 if there is any. It needs no daemon.
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
