package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// FileChangeJSON is one line of `ochatd apply|revert --json`: the file and
// the daemon's answer, or the error.
type FileChangeJSON struct {
	Path   string                   `json:"path"`
	Result *daemon.FileChangeResult `json:"result,omitempty"`
	Error  string                   `json:"error,omitempty"`
}

// runApply is `ochatd apply`; runRevert is `ochatd revert`.
func runApply(ctx context.Context, env *Env, args []string) int {
	return runFileChange(ctx, env, args, false)
}

func runRevert(ctx context.Context, env *Env, args []string) int {
	return runFileChange(ctx, env, args, true)
}

// runFileChange is `ochatd apply|revert [--force] [--json] CONVERSATION_ID
// [MESSAGE_ID [PATH...]]` through ochat/fileChange/apply|revert. The CLI
// declares no applyEdit, so the daemon changes the disk. Without
// MESSAGE_ID: the conversation's last assistant message with file changes;
// without PATH: every file change of that message (reverted last first).
// Exit 1 if any file failed.
func runFileChange(ctx context.Context, env *Env, args []string, revert bool) int {
	name, method, done := "apply", daemon.MethodFileChangeApply, "applied"
	if revert {
		name, method, done = "revert", daemon.MethodFileChangeRevert, "reverted"
	}
	var c common
	fs := newFlags(env, name, &c, true)
	force := fs.Bool("force", false, "also when the file changed since the turn: its current content is kept in a checkpoint first (printed), so this can be undone")
	reason := fs.String("reason", "", "after reverting, send the agent this note as the next message (queued if a turn is running)")
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) < 1 {
		fmt.Fprintf(env.Stderr, "usage: ochatd %s [--workspace DIR] [--force] [--json] CONVERSATION_ID [MESSAGE_ID [PATH...]]\n", name)
		return 2
	}
	cl, ws, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var conv daemon.GetConversationResult
	if err := call(ctx, cl, quickCall, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: pos[0]}, &conv); err != nil {
		return fail(env, "%s: %v", name, err)
	}
	msgID, paths := "", pos[min(2, len(pos)):]
	if len(pos) > 1 {
		msgID = pos[1]
	}
	if msgID == "" {
		for _, m := range slices.Backward(conv.Messages) {
			if m.Role == transcript.RoleAssistant && len(fileChangePaths(m)) > 0 {
				msgID = m.ID
				break
			}
		}
		if msgID == "" {
			return fail(env, "%s: conversation %s has no file changes", name, pos[0])
		}
	}
	if len(paths) == 0 {
		for _, m := range conv.Messages {
			if m.ID == msgID {
				paths = fileChangePaths(m)
			}
		}
		if len(paths) == 0 {
			return fail(env, "%s: message %s of conversation %s has no file changes", name, msgID, pos[0])
		}
		if revert {
			slices.Reverse(paths)
		}
	}
	var out []FileChangeJSON
	failed := false
	for _, p := range paths {
		var res daemon.FileChangeResult
		err := call(ctx, cl, slowCall, method, daemon.FileChangeParams{ConversationID: pos[0], MessageID: msgID, Path: p, Force: *force}, &res)
		shown := relTo(ws, p)
		err = cliConflictHint(err)
		if err != nil {
			failed = true
			out = append(out, FileChangeJSON{Path: p, Error: err.Error()})
			if !c.json {
				fmt.Fprintf(env.Stderr, "ochatd: %s %s: %v\n", name, shown, err)
			}
			continue
		}
		out = append(out, FileChangeJSON{Path: p, Result: &res})
		if c.json {
			continue
		}
		if res.Checkpoint != "" {
			fmt.Fprintf(env.Stdout, "kept the current %s in checkpoint %s (undo: ochatd restore %s %s)\n", shown, res.Checkpoint, res.Checkpoint, relTo(ws, p))
		}
		switch {
		case res.Applied:
			fmt.Fprintf(env.Stdout, "%s %s\n", done, shown)
		case strings.HasPrefix(res.Reason, "already"):
			fmt.Fprintf(env.Stdout, "%s %s\n", res.Reason, shown)
		default:
			failed = true
			fmt.Fprintf(env.Stderr, "ochatd: %s %s: not done: %s\n", name, shown, res.Reason)
		}
	}
	if *reason != "" && !failed {
		var shown []string
		for _, p := range paths {
			shown = append(shown, relTo(ws, p))
		}
		note := fmt.Sprintf("I %s your change to %s. Reason: %s", done, strings.Join(shown, ", "), *reason)
		var sr daemon.SendResult
		if err := call(ctx, cl, quickCall, daemon.MethodChatSend, daemon.SendParams{ConversationID: pos[0], Text: note}, &sr); err != nil {
			return fail(env, "%s: the files were %s, but the note was not sent: %v", name, done, err)
		}
		if !c.json {
			fmt.Fprintf(env.Stdout, "sent the agent: %s\n", note)
		}
	}
	if c.json {
		if code := printJSON(env, out); code != 0 {
			return code
		}
	}
	if failed {
		return 1
	}
	return 0
}

// fileChangePaths lists the paths of m's fileChange segments in order.
func fileChangePaths(m transcript.Message) []string {
	var out []string
	for _, s := range m.Segments {
		if s.Type == transcript.SegFileChange && s.Path != "" {
			out = append(out, s.Path)
		}
	}
	return out
}

// relTo is p relative to ws when inside it, else p.
func relTo(ws, p string) string {
	if rel, err := filepath.Rel(ws, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
		return rel
	}
	return p
}

// forceHint matches the daemon's conflict hint for editors ("review the
// diff (or revert with force: true to overwrite it)"), which the CLI cannot
// follow: the daemon overwrites a changed file only through an editor.
var forceHint = regexp.MustCompile(`review the diff \(or \w+ with force: true to overwrite it\)`)

// ckptForceHint matches the checkpoint-backed conflict hint ("or revert
// with force: true (the current content is kept …").
var ckptForceHint = regexp.MustCompile(`or (\w+) with force: true \(`)

// cliConflictHint rewrites a CodeConflict error's hint for the terminal:
// "open the diff in VS Code or Neovim to overwrite it there (undoable), or
// edit the file by hand". Other errors pass unchanged.
func cliConflictHint(err error) error {
	var je *jsonrpc2.Error
	if errors.As(err, &je) && je.Code == daemon.CodeConflict && ckptForceHint.MatchString(je.Message) {
		return &jsonrpc2.Error{Code: je.Code, Message: ckptForceHint.ReplaceAllString(je.Message, "or run ochatd $1 again with --force ("), Data: je.Data}
	}
	if !errors.As(err, &je) || je.Code != daemon.CodeConflict || !forceHint.MatchString(je.Message) {
		return err
	}
	return &jsonrpc2.Error{Code: je.Code, Message: forceHint.ReplaceAllLiteralString(je.Message, "open the diff in VS Code or Neovim to overwrite it there (undoable), or edit the file by hand"), Data: je.Data}
}
