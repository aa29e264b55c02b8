package cli

// ochatd changes, ochatd rewind, ochatd restore: a turn's real changes
// (from its checkpoints), the workspace and conversation back to before
// turn N, and a checkpoint restored (the undo of a forced revert).

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ochat-dev/ochat/daemon"
)

// runChanges is `ochatd changes [--json] CONVERSATION_ID [N]`.
func runChanges(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "changes", &c, true)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) < 1 || len(pos) > 2 {
		fmt.Fprintln(env.Stderr, "usage: ochatd changes [--workspace DIR] [--json] CONVERSATION_ID [N]")
		return 2
	}
	p := daemon.ChangesParams{ConversationID: pos[0]}
	if len(pos) == 2 {
		if p.Turn, err = strconv.Atoi(pos[1]); err != nil || p.Turn < 1 {
			fmt.Fprintf(env.Stderr, "ochatd changes: N must be a turn number from 1, not %q\n", pos[1])
			return 2
		}
	}
	cl, ws, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var res daemon.ChangesResult
	if err := call(ctx, cl, quickCall, daemon.MethodChanges, p, &res); err != nil {
		return fail(env, "changes: %v", err)
	}
	if c.json {
		return printJSON(env, res)
	}
	w := termSafeWriter{env.Stdout}
	for _, t := range res.Turns {
		fmt.Fprintf(w, "## Turn %d: %s\n", t.Turn, firstLine(t.Prompt))
		if t.Note != "" {
			fmt.Fprintf(w, "(%s)\n", t.Note)
		}
		if len(t.Files) == 0 {
			fmt.Fprintln(w, "no file changes")
		}
		for _, f := range t.Files {
			line := fmt.Sprintf("%-9s %s", changeKind(f.Change), relTo(ws, f.Path))
			if f.OldPath != "" {
				line += " (from " + relTo(ws, f.OldPath) + ")"
			}
			if f.Additions != nil && f.Deletions != nil {
				line += fmt.Sprintf(" +%d -%d", *f.Additions, *f.Deletions)
			}
			if f.ModeChange != "" {
				line += " mode " + f.ModeChange
			}
			if f.Binary {
				line += " binary"
			}
			if f.Origin != "" {
				line += " by " + f.Origin
			}
			if f.Status != "" {
				line += " [" + f.Status + "]"
			}
			if f.Note != "" {
				line += " — " + f.Note
			}
			fmt.Fprintln(w, line)
			if f.Diff != "" {
				fmt.Fprint(w, f.Diff)
			}
		}
		fmt.Fprintln(w)
	}
	return 0
}

func changeKind(s string) string {
	if s == "" {
		return "changed"
	}
	return s
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i] + " …"
		}
		if i > 72 {
			return s[:i] + "…"
		}
	}
	return s
}

// runRewind is `ochatd rewind [--code-only|--conversation-only] [--json]
// CONVERSATION_ID N`, or `ochatd rewind --undo CONVERSATION_ID`.
func runRewind(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "rewind", &c, true)
	codeOnly := fs.Bool("code-only", false, "restore the workspace's files only; keep the conversation")
	convOnly := fs.Bool("conversation-only", false, "drop turn N and later from the conversation only; keep the files")
	undo := fs.Bool("undo", false, "restore the files as they were before the conversation's last rewind")
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if *undo && len(pos) != 1 || !*undo && len(pos) != 2 || *codeOnly && *convOnly {
		fmt.Fprintln(env.Stderr, "usage: ochatd rewind [--workspace DIR] [--code-only|--conversation-only] [--json] CONVERSATION_ID N\n       ochatd rewind --undo CONVERSATION_ID")
		return 2
	}
	cl, ws, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var res daemon.RewindResult
	if *undo {
		err = call(ctx, cl, slowCall, daemon.MethodRewindUndo, daemon.ConversationParams{ConversationID: pos[0]}, &res)
	} else {
		n, aerr := strconv.Atoi(pos[1])
		if aerr != nil || n < 1 {
			fmt.Fprintf(env.Stderr, "ochatd rewind: N must be a turn number from 1 (as ochatd changes numbers them), not %q\n", pos[1])
			return 2
		}
		p := daemon.RewindParams{ConversationID: pos[0], Turn: n}
		if *codeOnly {
			p.Mode = "code"
		}
		if *convOnly {
			p.Mode = "conversation"
		}
		err = call(ctx, cl, slowCall, daemon.MethodRewind, p, &res)
	}
	if err != nil {
		return fail(env, "rewind: %v", err)
	}
	if c.json {
		return printJSON(env, res)
	}
	for _, p := range res.Restored {
		fmt.Fprintf(env.Stdout, "restored %s\n", relTo(ws, p))
	}
	if res.Truncated {
		fmt.Fprintf(env.Stdout, "conversation %s now ends before turn %s\n", pos[0], pos[1])
	}
	if res.Backup != "" {
		fmt.Fprintf(env.Stdout, "the files before this are in checkpoint %s; undo with: ochatd rewind --undo %s\n", res.Backup, pos[0])
	}
	return 0
}

// runRestore is `ochatd restore [--json] CHECKPOINT [PATH...]`.
func runRestore(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "restore", &c, true)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) < 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd restore [--workspace DIR] [--json] CHECKPOINT [PATH...]")
		return 2
	}
	cl, ws, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var paths []string
	for _, p := range pos[1:] {
		paths = append(paths, relTo(ws, p))
	}
	var res daemon.RewindResult
	if err := call(ctx, cl, slowCall, daemon.MethodCheckpointRestore, daemon.CheckpointRestoreParams{Checkpoint: pos[0], Paths: paths}, &res); err != nil {
		return fail(env, "restore: %v", err)
	}
	if c.json {
		return printJSON(env, res)
	}
	for _, p := range res.Restored {
		fmt.Fprintf(env.Stdout, "restored %s\n", p)
	}
	if res.Backup != "" {
		fmt.Fprintf(env.Stdout, "the files before this are in checkpoint %s\n", res.Backup)
	}
	return 0
}
