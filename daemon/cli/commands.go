package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

func exitFlag(err error) int {
	if isFlagHelp(err) {
		return 0
	}
	return 2
}

// runConnect is `ochatd connect [--workspace DIR]`: the stdio forwarder.
func runConnect(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "connect", &c, false)
	if _, err := parse(fs, args); err != nil {
		return exitFlag(err)
	}
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	nc, err := daemon.Dial(ctx, dialOptions(env, ws))
	if err != nil {
		return fail(env, "%v", err)
	}
	if err := daemon.Forward(ctx, nc, env.Stdin, env.Stdout); err != nil {
		return fail(env, "%v", err)
	}
	return 0
}

// runAgents is `ochatd agents [--json]`.
func runAgents(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "agents", &c, true)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if extraArgs(env, "agents", pos) {
		return 2
	}
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var res daemon.AgentsListResult
	if err := call(ctx, cl, quickCall, daemon.MethodAgentsList, nil, &res); err != nil {
		return fail(env, "agents: %v", err)
	}
	if c.json {
		return printJSON(env, res)
	}
	printAgents(env, res.Agents)
	printProblems(env, res.Problems)
	return 0
}

// printProblems lists settings files or entries left out of the registry.
func printProblems(env *Env, probs []agents.Problem) {
	for _, p := range probs {
		fmt.Fprintf(env.Stdout, "\nsettings problem (%s, left out): %s\n", p.Source, p)
	}
}

func printAgents(env *Env, list []agents.Status) {
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tSOURCE\tCOMMAND")
	for _, a := range list {
		status := a.StateLine()
		cmd := strings.TrimSpace(a.Command + " " + strings.Join(a.Args, " "))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Name, status, a.Source, cmd)
	}
	tw.Flush()
	for _, a := range list {
		if a.Available && a.Note != "" {
			fmt.Fprintf(env.Stdout, "\n%s: %s\n", a.Name, a.Note)
		}
		if a.State == agents.StateNotLoggedIn && a.Login != "" {
			fmt.Fprintf(env.Stdout, "\n%s: not logged in\n  to fix: %s\n", a.Name, a.Login)
		}
		if !a.Available {
			fmt.Fprintf(env.Stdout, "\n%s: %s", a.Name, termSafe(a.Reason))
			if a.Untrusted && a.Source == "workspace" {
				// A redefinition's Reason says what trusting would change;
				// an agent only the untrusted file defines is new.
				fmt.Fprintf(env.Stdout, "\n  only the untrusted file defines %s: trusting it would add the agent, running `%s`", a.Name, termSafe(strings.TrimSpace(a.Command+" "+strings.Join(a.Args, " "))))
			}
			if a.Install != "" && (a.Untrusted || a.Source != "builtin") {
				fmt.Fprintf(env.Stdout, "\n  to fix: %s", a.Install)
			} else if a.Install != "" {
				fmt.Fprintf(env.Stdout, "\n  install: %s", a.Install)
			}
			fmt.Fprintln(env.Stdout)
		}
	}
}

// runConversations is `ochatd conversations [--json]`.
func runConversations(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "conversations", &c, true)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if extraArgs(env, "conversations", pos) {
		return 2
	}
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var res daemon.ListConversationsResult
	if err := call(ctx, cl, quickCall, daemon.MethodConversationsList, nil, &res); err != nil {
		return fail(env, "conversations: %v", err)
	}
	if c.json {
		return printJSON(env, res.Conversations)
	}
	if len(res.Conversations) == 0 {
		fmt.Fprintln(env.Stdout, `no conversations yet (start one with: ochatd chat "your question")`)
		return 0
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tAGENTS\tTITLE")
	for _, cv := range res.Conversations {
		title := termSafe(oneLine(cv.Title))
		if cv.Running {
			title += " (running)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cv.ID, fmtTime(cv.UpdatedAt), strings.Join(cv.Agents, ","), title)
	}
	tw.Flush()
	return 0
}

// ShowJSON is what `ochatd show ID --json` prints.
type ShowJSON struct {
	ID       string               `json:"id"`
	Title    string               `json:"title"`
	Agents   []string             `json:"agents"`
	Messages []transcript.Message `json:"messages"`
}

// runShow is `ochatd show ID [--json]`.
func runShow(ctx context.Context, env *Env, args []string) int {
	var c common
	fs := newFlags(env, "show", &c, true)
	pos, err := parse(fs, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.Stderr, "usage: ochatd show [--workspace DIR] [--json] CONVERSATION_ID")
		return 2
	}
	cl, _, code := c.connect(ctx, env)
	if cl == nil {
		return code
	}
	defer cl.Close()
	var res daemon.GetConversationResult
	if err := call(ctx, cl, quickCall, daemon.MethodConversationsGet, daemon.ConversationParams{ConversationID: pos[0]}, &res); err != nil {
		return fail(env, "show %s: %v", pos[0], err)
	}
	if c.json {
		return printJSON(env, ShowJSON{ID: res.Conversation.ID, Title: res.Conversation.Title, Agents: res.Conversation.Agents, Messages: res.Messages})
	}
	w := termSafeWriter{env.Stdout}
	fmt.Fprintf(w, "# %s\n%s · %s\n", orUntitled(res.Conversation.Title), res.Conversation.ID, fmtTime(res.Conversation.CreatedAt))
	for _, m := range res.Messages {
		if m.Role == transcript.RoleUser {
			if m.Hidden {
				continue
			}
			fmt.Fprintf(w, "\n## User · %s\n\n%s\n", fmtTime(m.Timestamp), m.Content)
			for _, a := range m.Attachments {
				fmt.Fprintf(w, "[attachment] %s %s\n", a.Kind, a.Path)
			}
			continue
		}
		fmt.Fprintf(w, "\n## %s · %s", orUnknown(m.Agent), m.Status)
		if m.StopReason != "" && m.StopReason != "end_turn" && m.StopReason != string(m.Status) {
			fmt.Fprintf(w, " (%s)", m.StopReason)
		}
		if m.DurationMs > 0 {
			fmt.Fprintf(w, " · %s", (time.Duration(m.DurationMs) * time.Millisecond).Round(time.Millisecond))
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w)
		for _, s := range m.Segments {
			fmt.Fprintln(w, segmentText(s))
		}
		if m.Error != "" {
			fmt.Fprintf(w, "[error] %s\n", m.Error)
		}
	}
	return 0
}

func orUntitled(s string) string {
	if s == "" {
		return "(untitled)"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "assistant"
	}
	return s
}

// segmentText renders one segment for a terminal.
func segmentText(s transcript.Segment) string {
	switch s.Type {
	case transcript.SegContent:
		return s.Content
	case transcript.SegReasoning:
		return "> " + strings.ReplaceAll(strings.TrimSpace(s.Content), "\n", "\n> ")
	case transcript.SegTool:
		line := fmt.Sprintf("[tool] %s (%s)", oneLine(s.Name), s.Status)
		if s.Error != "" {
			line += ": " + oneLine(s.Error)
		}
		return line
	case transcript.SegFileChange:
		return fileLine(s)
	case transcript.SegPlan:
		var b strings.Builder
		b.WriteString("[plan]")
		for _, e := range s.Entries {
			fmt.Fprintf(&b, "\n  - [%s] %s", e.Status, e.Content)
		}
		return b.String()
	case transcript.SegWorkspace:
		return fmt.Sprintf("[workspace] %s", strings.Join(s.Files, ", "))
	}
	return fmt.Sprintf("[%s]", s.Type)
}

func fileLine(s transcript.Segment) string {
	line := "[file] " + s.Path
	if s.Additions != nil || s.Deletions != nil {
		a, d := 0, 0
		if s.Additions != nil {
			a = *s.Additions
		}
		if s.Deletions != nil {
			d = *s.Deletions
		}
		line += fmt.Sprintf(" +%d -%d", a, d)
	}
	switch s.Status {
	case "":
	case daemon.FileRejected: // tool failed or permission refused: the file was not written
		line += " (not applied)"
	default:
		line += " (" + s.Status + ")"
	}
	return line
}

func printJSON(env *Env, v any) int {
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(env, "%v", err)
	}
	return 0
}

// runDoctor is `ochatd doctor`'s checks (flags parsed into c): the
// workspace, the socket and daemon, the store, the native stores, and each
// agent's command and login. It returns 1 when any check failed, else 0.
func runDoctor(ctx context.Context, env *Env, c common) int {
	w := env.Stdout
	problems := 0
	ok := func(format string, a ...any) { fmt.Fprintf(w, "ok    "+format+"\n", a...) }
	bad := func(fix, format string, a ...any) {
		problems++
		fmt.Fprintf(w, "FAIL  "+format+"\n", a...)
		if fix != "" {
			fmt.Fprintf(w, "      fix: %s\n", fix)
		}
	}
	note := func(format string, a ...any) { fmt.Fprintf(w, "note  "+format+"\n", a...) }

	ws, err := c.resolve()
	if err != nil {
		bad("run ochatd inside your project or pass --workspace DIR", "workspace: %v", err)
		return 1
	}
	ok("workspace %s", ws)
	sock, err := daemon.SocketPath(ws)
	if err != nil {
		bad("set XDG_RUNTIME_DIR to a directory only you can access", "socket directory: %v", err)
	} else {
		ok("socket directory %s", filepath.Dir(sock))
	}
	daemonUp := false
	if sock != "" {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		nc, err := daemon.Dial(dctx, daemon.DialOptions{Workspace: ws, Socket: sock})
		if err == nil {
			cl, err := daemon.NewClient(dctx, nc, "ochatd-doctor", env.Version)
			if err == nil {
				daemonUp = true
				ok("daemon answers on %s (version %s)", sock, cl.Init.ServerInfo.Version)
				cl.Close()
			} else {
				bad("stop the process on "+sock+" and run `ochatd serve`", "socket %s answers but not as ochatd: %v", sock, err)
				nc.Close()
			}
		} else {
			// Started with another XDG_RUNTIME_DIR or TMPDIR? Its record
			// beside the store says where it listens.
			var ue *daemon.UnreachableError
			nc, err := daemon.Dial(dctx, daemon.DialOptions{Workspace: ws})
			switch {
			case err == nil:
				nc.Close()
				daemonUp = true
				rp, _ := daemon.RecordPath(ws)
				ok("daemon answers on the socket recorded in %s, not on %s (it was started with another XDG_RUNTIME_DIR or TMPDIR; commands find it there)", rp, sock)
			case errors.As(err, &ue):
				bad(fmt.Sprintf("run ochatd with the daemon's environment, or stop it with `kill %d`", ue.PID), "%v", err)
			default:
				note("no daemon running for this workspace (it starts on demand: `ochatd connect` / `ochatd chat`)")
			}
		}
		cancel()
	}
	dbPath, err := history.DefaultPath(ws)
	if err != nil {
		bad("set XDG_STATE_HOME or HOME", "store path: %v", err)
	} else if daemonUp {
		ok("store %s (held by the daemon)", dbPath)
	} else if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		note("store %s does not exist yet (created on first start)", dbPath)
	} else {
		st, err := history.Open(dbPath)
		switch {
		case errors.Is(err, history.ErrLocked):
			bad("another process holds the store: stop it (is a daemon running with another socket dir?)", "store %s is locked", dbPath)
		case err != nil:
			bad("move the file aside to start afresh", "store %s: %v", dbPath, err)
		default:
			if err := st.Check(); err != nil {
				bad("move the file aside to start afresh (it is a bbolt file)", "store %s is damaged: %v", dbPath, err)
			} else {
				ok("store %s", dbPath)
			}
			st.Close()
		}
	}
	doctorNative(ctx, env, ws, ok, bad, note)
	cfg, err := os.UserConfigDir()
	if err != nil {
		bad("set XDG_CONFIG_HOME or HOME", "config dir: %v", err)
		return 1
	}
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	trustPath, err := agents.DefaultTrustPath(getenv)
	if err != nil {
		bad("set XDG_STATE_HOME or HOME", "trust store: %v", err)
		return 1
	}
	reg, err := agents.NewRegistry(agents.RegistryOptions{UserConfigDir: cfg, Workspace: ws, Trust: agents.NewTrustStore(trustPath), Getenv: getenv})
	if err != nil {
		bad("fix the settings file named above", "agents: %v", err)
		return 1
	}
	for _, p := range reg.Problems() {
		bad("fix "+p.Path+" (JSON with comments; other agents still work)", "settings %s", p)
	}
	var held []string
	for _, a := range reg.List() {
		if a.Untrusted {
			held = append(held, a.Name)
		}
	}
	switch settings, state, terr := reg.WorkspaceTrust(); {
	case settings == "":
	case terr != nil:
		bad("fix or remove "+trustPath, "workspace settings %s: %v", settings, terr)
	case state == agents.TrustOK:
		ok("workspace settings %s trusted (%s)", settings, trustPath)
	case state == agents.TrustChanged:
		note("workspace settings %s changed since you trusted them: agents %s stay inactive; review it, then run `ochatd trust`", settings, strings.Join(held, ", "))
	default:
		note("workspace settings %s are not trusted: agents %s stay inactive; review it, then run `ochatd trust`", settings, strings.Join(held, ", "))
	}
	anyReady := false
	for _, a := range reg.List() {
		if a.Untrusted {
			continue // said once above
		}
		switch {
		case a.State == agents.StateNotLoggedIn:
			note("agent %s not logged in: %s (to fix: %s)", a.Name, a.Command, a.Login)
		case a.State == agents.StateNotInstalled:
			anyReady = true
			note("agent %s %s (install: %s)", a.Name, a.StateLine(), a.Install)
		case a.Available:
			anyReady = true
			ok("agent %s: %s", a.Name, a.Command)
			if a.Note != "" {
				note("agent %s %s", a.Name, a.Note)
			}
		default:
			fix := a.Install
			if fix == "" {
				fix = "install it or fix agent_servers." + a.Name + " in settings.json"
			}
			label := "to fix"
			if a.Source == "builtin" {
				label = "install"
			}
			note("agent %s unavailable: %s (%s: %s)", a.Name, a.Reason, label, fix)
		}
	}
	if !anyReady {
		bad("install one agent (see `ochatd agents`) or add one to agent_servers in "+filepath.Join(cfg, "ochat", "settings.json"), "no agent is ready to start")
	}
	if problems > 0 {
		return 1
	}
	return 0
}

var _ = flag.ErrHelp
