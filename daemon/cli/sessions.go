package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	sjson "github.com/segmentio/encoding/json"
	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/transcript"
)

// runSessions is `ochatd sessions [--workspace DIR] [--json]`: every
// terminal-started session of the workspace's native stores and every
// conversation of the daemon, newest first (ochat/sessions/list).
func runSessions(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "sessions", &c, true)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if extraArgs(env, "sessions", pos) {
		return 2
	}
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var raw sjson.RawMessage
	if err := call(ctx, cl, slowCall, daemon.MethodSessionsList, nil, &raw); err != nil {
		return fail(env, "sessions: %v", err)
	}
	if c.json {
		// the daemon's answer as it came, indented: decoding 2,000 entries
		// only to encode them again cost more than the listing
		var out bytes.Buffer
		if err := sjson.Indent(&out, raw, "", "  "); err != nil {
			return fail(env, "sessions: %v", err)
		}
		out.WriteByte('\n')
		if _, err := env.Stdout.Write(out.Bytes()); err != nil {
			return fail(env, "sessions: %v", err)
		}
		return 0
	}
	var res daemon.SessionsListResult
	if err := sjson.Unmarshal(raw, &res); err != nil {
		return fail(env, "sessions: %v", err)
	}
	if len(res.Sessions) == 0 {
		fmt.Fprintln(env.Stdout, `no sessions yet: none of Claude Code, Codex, Gemini CLI, OpenCode or pi has a session for this workspace, and no conversations (start one with: ochatd chat "your question")`)
		return 0
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tUPDATED\tMSGS\tTITLE")
	for _, s := range res.Sessions {
		title := termSafe(oneLine(s.Title))
		if r := []rune(title); len(r) > 70 {
			title = string(r[:69]) + "…"
		}
		if s.Live {
			title += " (live)"
		}
		if s.Kind == daemon.SessionKindNative && s.ConversationID != "" {
			title += " [opened as " + s.ConversationID + "]"
		}
		msgs := fmt.Sprint(s.MessageCount)
		agent := s.Agent
		if s.Kind == daemon.SessionKindConversation {
			msgs, agent = "-", "ochat:"+strings.Join(s.Agents, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, agent, fmtTime(s.UpdatedAt), msgs, title)
	}
	tw.Flush()
	for _, d := range res.Diagnostics {
		if d.Level != "info" {
			fmt.Fprintf(env.Stderr, "ochatd: %s\n", d)
		}
	}
	return 0
}

// looksLikePath tells a file reference from an id: it names an existing
// file or contains a path separator.
func looksLikePath(ref string) bool {
	if strings.ContainsRune(ref, filepath.Separator) {
		return true
	}
	fi, err := os.Stat(ref)
	return err == nil && !fi.IsDir()
}

// sessionRef turns a CLI reference into ochat/sessions/* params (paths made
// absolute: the daemon runs in another directory).
func sessionRef(ref string) (daemon.SessionRefParams, error) {
	if !looksLikePath(ref) {
		return daemon.SessionRefParams{SessionID: ref}, nil
	}
	file, frag, hasFrag := strings.Cut(ref, "#")
	abs, err := filepath.Abs(file)
	if err != nil {
		return daemon.SessionRefParams{}, fmt.Errorf("%s: %w", ref, err)
	}
	if hasFrag {
		abs += "#" + frag
	}
	return daemon.SessionRefParams{Path: abs}, nil
}

func isNotFound(err error) bool {
	var je *jsonrpc2.Error
	return errors.As(err, &je) && je.Code == daemon.CodeNotFound
}

// runShowRef is `ochatd show REF [--json]`: REF is a conversation id, a
// native session id or a path to a native session file. Conversations print
// as runShow prints them; native sessions print their canonical transcript
// (JSON: ochat/sessions/read's answer, i.e. {"id","agent","title","cwd",
// "messages":[…],"diagnostics":{"skippedLines":N,…},…}).
func runShowRef(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "show", &c, true)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd show [--workspace DIR] [--json] CONVERSATION_ID | SESSION_ID | SESSION_FILE")
		return 2
	}
	ref := pos[0]
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	p, err := sessionRef(ref)
	if err != nil {
		return fail(env, "show: %v", err)
	}
	if p.SessionID != "" {
		var got daemon.GetConversationResult
		err := call(ctx, cl, quickCall, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: ref}, &got)
		if err == nil {
			printLinkedNotes(termSafeWriter{env.Stderr}, got)
			return runShow(ctx, env, args)
		}
		if !isNotFound(err) {
			return fail(env, "show %s: %v", ref, err)
		}
	}
	var tr daemon.SessionReadResult
	if err := call(ctx, cl, slowCall, daemon.MethodSessionsRead, p, &tr); err != nil {
		if isNotFound(err) && p.SessionID != "" {
			return fail(env, "show %s: no conversation and no native session has this id (see `ochatd sessions`)%s", ref, notFoundHint(env, cl.Init.Daemon))
		}
		return fail(env, "show %s: %v", ref, err)
	}
	if c.json {
		return printJSON(env, tr)
	}
	printNative(termSafeWriter{env.Stdout}, tr)
	return 0
}

// printLinkedNotes tells, on stderr, what the daemon's sync of a
// conversation linked to a native session did when there is something to
// tell (GetConversationResult.Sync: turns imported from the terminal, a
// rewind, why nothing could be imported), and every earlier rewind of the
// native session that left messages in the conversation it no longer has
// (Conversation.Native.Rewinds), one line each, prefixed "ochatd show: ".
func printLinkedNotes(w io.Writer, got daemon.GetConversationResult) {
	sy := got.Sync
	if msg := syncSummary(sy); msg != "" {
		fmt.Fprintf(w, "ochatd show: %s\n", oneLine(msg))
	}
	nr := got.Conversation.Native
	if nr == nil {
		return
	}
	rw := nr.Rewinds
	if sy != nil && sy.Rewound > 0 && len(rw) > 0 {
		rw = rw[:len(rw)-1] // the sync's note told the newest
	}
	for _, r := range rw {
		span := r.First
		if r.Last != r.First {
			span += " … " + r.Last
		}
		fmt.Fprintf(w, "ochatd show: %d message(s) (%s) were rewound in the %s terminal session at %s: they are no longer in it\n", r.Count, span, nr.Agent, fmtTime(r.At))
	}
}

// syncSummary says in one sentence what a linked conversation's sync did
// ("" when it did nothing worth saying).
func syncSummary(sy *daemon.NativeSync) string {
	if sy == nil || (sy.Imported == 0 && !sy.Updated && sy.Note == "") {
		return ""
	}
	msg := fmt.Sprintf("%d new message(s) from the terminal imported", sy.Imported)
	if sy.Updated {
		msg += ", the last one updated"
	}
	if sy.Note != "" {
		msg += "; " + sy.Note
	}
	return msg
}

// printNative renders a native transcript for a terminal: a header, the
// messages with markers between them, and what the reader skipped.
func printNative(w io.Writer, tr daemon.SessionReadResult) {
	fmt.Fprintf(w, "# %s\n%s session %s · %s · updated %s\n", orUntitled(tr.Title), tr.Agent, tr.ID, tr.Cwd, fmtTime(tr.UpdatedAt))
	if len(tr.Resume) > 0 {
		fmt.Fprintf(w, "resume in a terminal: %s\n", strings.Join(tr.Resume, " "))
	}
	if tr.ConversationID != "" {
		fmt.Fprintf(w, "opened as conversation %s\n", tr.ConversationID)
	}
	markers := map[string][]native.Marker{}
	for _, m := range tr.Markers {
		markers[m.AfterID] = append(markers[m.AfterID], m)
	}
	printMarkers := func(id string) {
		for _, m := range markers[id] {
			fmt.Fprintf(w, "\n-- %s", m.Kind)
			if m.Text != "" {
				fmt.Fprintf(w, ": %s", oneLine(m.Text))
			}
			fmt.Fprintln(w, " --")
		}
	}
	printMarkers("")
	for _, m := range tr.Messages {
		printMessage(w, m)
		printMarkers(m.ID)
	}
	for _, sa := range tr.Subagents {
		fmt.Fprintf(w, "\n[subagent %s of tool call %s: %d messages] %s\n", sa.AgentID, sa.ToolCallID, len(sa.Messages), oneLine(sa.Description))
	}
	if d := tr.Diagnostics; d.SkippedLines > 0 || len(d.Problems) > 0 {
		fmt.Fprintf(w, "\n(%s skipped", plural(d.SkippedLines, "line", "lines"))
		for _, p := range d.Problems {
			fmt.Fprintf(w, "; %s", p)
		}
		fmt.Fprintln(w, ")")
	}
}

func printMessage(w io.Writer, m transcript.Message) {
	if m.Role == transcript.RoleUser {
		if m.Hidden {
			return
		}
		fmt.Fprintf(w, "\n## User · %s\n\n%s\n", fmtTime(m.Timestamp), m.Content)
		for _, a := range m.Attachments {
			fmt.Fprintf(w, "[attachment] %s %s\n", a.Kind, a.Path)
		}
		return
	}
	fmt.Fprintf(w, "\n## %s", orUnknown(m.Agent))
	if m.Status != "" && m.Status != transcript.StatusCompleted {
		fmt.Fprintf(w, " · %s", m.Status)
	}
	fmt.Fprintf(w, " · %s\n\n", fmtTime(m.Timestamp))
	for _, s := range m.Segments {
		fmt.Fprintln(w, segmentText(s))
	}
	if m.Error != "" {
		fmt.Fprintf(w, "[error] %s\n", m.Error)
	}
}

// doctorNative reports each native store: found (with how many sessions of
// the workspace), not found, unreadable, or a locked OpenCode database. It
// reads the stores directly (read-only), as the daemon would.
func doctorNative(ctx context.Context, env *Env, ws string, ok func(format string, a ...any), bad func(fix, format string, a ...any), note func(format string, a ...any)) {
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	nenv := native.EnvFromLookup(func(k string) (string, bool) { v := getenv(k); return v, v != "" })
	sessions, diags := native.List(ctx, nenv, ws)
	count := map[string]int{}
	for _, s := range sessions {
		count[s.Agent]++
	}
	for _, agent := range []string{native.AgentClaude, native.AgentCodex, native.AgentGemini, native.AgentOpenCode, native.AgentPi} {
		var missing []string
		warned := false
		for _, d := range diags {
			if d.Agent != agent {
				continue
			}
			switch {
			case d.Level == "info":
				missing = append(missing, d.Path)
			case agent == native.AgentOpenCode && (strings.Contains(d.Message, "locked") || strings.Contains(d.Message, "busy")):
				warned = true
				bad("a running OpenCode holds the database; its sessions list again once it releases the lock (or quit OpenCode)", "native store %s: %s is locked: %s", agent, d.Path, d.Message)
			default:
				warned = true
				bad("check the permissions of "+orDash(d.Path)+" (ochat only reads it)", "native store %s: %s", agent, d.String())
			}
		}
		switch {
		case count[agent] > 0:
			ok("native store %s: sessions of this workspace: %d", agent, count[agent])
		case warned:
		case len(missing) > 0:
			note("native store %s: not found (%s)", agent, strings.Join(missing, ", "))
		default:
			ok("native store %s: found, no sessions of this workspace", agent)
		}
	}
	for _, d := range diags {
		if d.Agent == "" && d.Level != "info" {
			bad("", "native stores: %s", d.Message)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// unknownConversationHint explains why id, given where a conversation id
// belongs (`ochatd chat --conversation ID`), names no conversation: it is
// a terminal session's id (ochat/sessions/read finds it), already opened as
// a conversation or not yet; or the daemon looks for terminal sessions
// with another environment than this shell's. "" when none of these holds.
// The caller adds it to the daemon's "unknown conversation" error.
func unknownConversationHint(ctx context.Context, env *Env, cl *daemon.Client, id string) string {
	var tr daemon.SessionReadResult
	err := call(ctx, cl, slowCall, daemon.MethodSessionsRead, daemon.SessionRefParams{SessionID: id}, &tr)
	switch {
	case err == nil && tr.ConversationID != "":
		return fmt.Sprintf("%s is the id of a %s terminal session, which is open as conversation %s: pass --conversation %s", id, tr.Agent, tr.ConversationID, tr.ConversationID)
	case err == nil:
		ref := tr.Path
		if ref == "" {
			ref = "SESSION_FILE"
		}
		return fmt.Sprintf("%s is the id of a %s terminal session, not a conversation: open it as one first with `ochatd import %s`, then pass the conversation id it prints", id, tr.Agent, ref)
	case isNotFound(err):
		return strings.TrimPrefix(notFoundHint(env, cl.Init.Daemon), "; ")
	}
	return ""
}

// plural is "1 line", "2 lines" (n with the singular or plural word).
func plural[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
