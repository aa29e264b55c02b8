// Package cli is the ochatd command line: flags and subcommands (serve,
// connect, agents, trust, chat, conversations, show, sessions, export, import,
// rename, delete, validate, cancel, queue, doctor). Every subcommand that
// reads or changes state is a client of the workspace daemon over its socket
// (started on demand, as `ochatd connect` does), so the CLI exercises the
// same path as the editors.
//
// It owns no state and parses no provider format; cmd/ochatd is a thin main
// around Main.
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ochat-dev/ochat/daemon"
)

// Command is one subcommand. Run returns the process exit status.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, env *Env, args []string) int
}

// Env is the process environment a command runs in.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Version        string
	// Getenv reads the environment (os.Getenv in main).
	Getenv func(string) string
	// Shim is the ochatd executable whose procguard.ShimArg subcommand the
	// daemon runs every agent under; "" (tests) runs agents directly.
	Shim string
}

// Main runs ochatd with args (without the program name) and returns the exit
// status. extra adds subcommands (for example `demo` from cmd/ochatd).
func Main(ctx context.Context, env *Env, args []string, extra ...Command) int {
	cmds := []Command{
		{"serve", "run the workspace daemon in the foreground", runServe},
		{"connect", "forward stdio to the workspace daemon, starting it if needed (editors spawn this)", runConnect},
		{"agents", "list agents, whether they can start, and how to install them", runAgents},
		{"trust", "let the agents of the workspace's .ochat/settings.json run (--revoke, --list)", runTrust},
		{"chat", "run one prompt turn and stream the answer", runChat},
		{"conversations", "list the workspace's conversations, newest first", runConversations},
		{"show", "print a conversation, or a terminal session's transcript (native id or session file)", runShowRef},
		{"sessions", "list terminal-started sessions and conversations, newest first", runSessions},
		{"export", "export a conversation or terminal session (--format events|markdown|json, -o FILE)", runExport},
		{"import", "import a session event log (or open a native session file) as a new conversation (--title T)", runImport},
		{"rename", "rename a conversation (CONVERSATION_ID TITLE)", runRename},
		{"delete", "delete a conversation (CONVERSATION_ID)", runDelete},
		{"validate", "check a session event log; one line per violation, exit 1 if any", runValidate},
		{"apply", "apply a turn's file changes again (CONVERSATION_ID [MESSAGE_ID [PATH...]], --force)", runApply},
		{"revert", "revert a turn's file changes (CONVERSATION_ID [MESSAGE_ID [PATH...]], --force)", runRevert},
		{"changes", "list a turn's file changes with diffs, from its checkpoints (CONVERSATION_ID [N], --json)", runChanges},
		{"rewind", "restore files and conversation to before turn N (CONVERSATION_ID N, --code-only, --conversation-only, --undo)", runRewind},
		{"restore", "restore files from a checkpoint (CHECKPOINT [PATH...]); a checkpoint of the current files is taken first", runRestore},
		{"cancel", "cancel the running turn of a conversation (CONVERSATION_ID)", runCancel},
		{"queue", "list a conversation's queued messages; remove, edit or send-now one (CONVERSATION_ID)", runQueue},
		{"stop", "stop the workspace daemon (it restarts on demand with the current environment)", runStop},
		{"doctor", "check what ochat needs and say how to fix what is missing", runDoctorDaemon},
	}
	cmds = append(cmds, extra...)
	args = workspaceFirst(args)
	if len(args) == 0 {
		usage(env.Stderr, cmds)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		// Asked for: the usage is the answer, on stdout. `ochatd help CMD`
		// is `ochatd CMD --help`.
		if args[0] == "help" && len(args) > 1 {
			for _, c := range cmds {
				if c.Name == args[1] {
					return c.Run(ctx, env, []string{"--help"})
				}
			}
			fmt.Fprintf(env.Stderr, "ochatd help: unknown command %q\n", args[1])
			usage(env.Stderr, cmds)
			return 2
		}
		usage(env.Stdout, cmds)
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintf(env.Stdout, "ochatd %s (protocol %d)\n", env.Version, daemon.ProtocolVersion)
		return 0
	}
	for _, c := range cmds {
		if c.Name == args[0] {
			return c.Run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(env.Stderr, "ochatd: unknown command %q\n", args[0])
	usage(env.Stderr, cmds)
	return 2
}

func usage(w io.Writer, cmds []Command) {
	fmt.Fprintln(w, "usage: ochatd <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-14s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nCommands that use a workspace take --workspace DIR (default: the git root of the current directory, else the current directory).")
	fmt.Fprintln(w, "ochatd --version prints the version; ochatd COMMAND --help (or ochatd help COMMAND) describes a command.")
}

// synopsis is what `ochatd NAME --help` prints after "usage: ochatd NAME
// [flags]": the positional arguments and, after a blank line, notes (exit
// status and the like); "" for a command that takes no arguments.
func synopsis(name string) (args, notes string) {
	switch name {
	case "show":
		return "REF", "REF is a conversation id, a terminal session's id (see ochatd sessions) or a native session file."
	case "export":
		return "REF", "REF is a conversation id, a terminal session's id or a native session file. Without -o the export goes to stdout."
	case "import":
		return "FILE", "FILE is a session event log (ochatd export REF --format events; - reads stdin) or a native session file."
	case "validate":
		return "FILE", "FILE is a session event log (- reads stdin). Exit status 1 if it has any violation."
	case "rename":
		return "CONVERSATION_ID TITLE", "The title must not be blank."
	case "delete":
		return "CONVERSATION_ID", "A conversation with a running turn is refused: ochatd cancel CONVERSATION_ID first."
	case "cancel":
		return "CONVERSATION_ID", ""
	case "apply", "revert":
		return "CONVERSATION_ID [MESSAGE_ID [PATH...]]", "Files come back with the exact bytes and mode of the turn's checkpoints; --reason TEXT (revert) sends the agent a note."
	case "changes":
		return "CONVERSATION_ID [N]", "N counts the conversation's turns from 1 (its user messages, as ochatd show lists them)."
	case "rewind":
		return "CONVERSATION_ID N", "A checkpoint of the files is taken first: ochatd rewind --undo CONVERSATION_ID brings them back (dropped turns stay dropped)."
	case "restore":
		return "CHECKPOINT [PATH...]", "PATHs are relative to the workspace; none restores every file."
	case "doctor":
		return "", "Exit status: 0 when every check passes (notes are fine), 1 when any check prints FAIL, 2 for a usage error."
	case "stop":
		return "", "It never starts a daemon. It finds one started with another XDG_RUNTIME_DIR through the record beside the store."
	}
	return "", ""
}

// flagOutput collects a FlagSet's output so that parse can send it where
// it belongs: the usage asked for with -h/--help to stdout, a flag error
// and the usage after it to stderr.
type flagOutput struct {
	env *Env
	buf bytes.Buffer
}

func (o *flagOutput) Write(p []byte) (int, error) { return o.buf.Write(p) }

// flush writes what was collected to stdout (help) or stderr.
func (o *flagOutput) flush(help bool) {
	w := o.env.Stderr
	if help {
		w = o.env.Stdout
	}
	w.Write(o.buf.Bytes())
	o.buf.Reset()
}

// common are the flags every subcommand has.
type common struct {
	workspace string
	json      bool
}

func newFlags(env *Env, name string, c *common, withJSON bool) *flag.FlagSet {
	fs := flag.NewFlagSet("ochatd "+name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{env: env})
	fs.Usage = func() {
		w := fs.Output()
		args, notes := synopsis(name)
		fmt.Fprintf(w, "usage: ochatd %s [flags]", name)
		if args != "" {
			fmt.Fprintf(w, " %s", args)
		}
		fmt.Fprintln(w)
		if notes != "" {
			fmt.Fprintf(w, "\n%s\n", notes)
		}
		fmt.Fprintln(w, "\nflags:")
		fs.PrintDefaults()
	}
	fs.Func("workspace", "workspace root `DIR` (default: git root of the current directory, else the current directory)", func(v string) error {
		if strings.TrimSpace(v) == "" {
			return errors.New("empty: name a directory, or leave --workspace out for the current project")
		}
		c.workspace = v
		return nil
	})
	if withJSON {
		fs.BoolVar(&c.json, "json", false, "print JSON")
	}
	return fs
}

// parse parses flags placed before, between or after positional arguments.
// The usage -h/--help asks for goes to stdout (and parse returns
// flag.ErrHelp); a flag error and its usage go to stderr.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		// An argument that starts with "-" but holds whitespace is a prompt
		// or a title, never a flag: parse up to it and take it as is.
		var held []string
		for i, a := range args {
			if a == "--" {
				break
			}
			if strings.HasPrefix(a, "-") && strings.ContainsAny(a, " \t\n") {
				args, held = args[:i], args[i:]
				break
			}
		}
		if err := fs.Parse(args); err != nil {
			if o, ok := fs.Output().(*flagOutput); ok {
				o.flush(isFlagHelp(err))
			}
			return nil, err
		}
		args = append(fs.Args(), held...)
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// workspace resolves --workspace or the default.
func (c *common) resolve() (string, error) {
	if c.workspace != "" {
		return daemon.AbsWorkspace(c.workspace)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	return daemon.ResolveWorkspace(wd)
}

// connect resolves the workspace and dials its daemon (dial). On failure it
// has told the user why and returns a nil client and the exit status.
func (c *common) connect(ctx context.Context, env *Env) (cl *daemon.Client, ws string, code int) {
	ws, err := c.resolve()
	if err != nil {
		return nil, "", fail(env, "%v", err)
	}
	cl, err = dial(ctx, env, ws)
	if err != nil {
		return nil, "", fail(env, "%v", err)
	}
	return cl, ws, 0
}

// dial connects to (starting if needed) the workspace daemon and initializes.
// Connecting and initializing take at most dialTimeout (it covers starting
// a daemon).
func dial(ctx context.Context, env *Env, ws string) (*daemon.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	nc, err := daemon.Dial(ctx, dialOptions(env, ws))
	if err != nil {
		return nil, err
	}
	c, err := daemon.NewClient(ctx, nc, "ochatd-cli", env.Version)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to daemon: %w", err)
	}
	return c, nil
}

// dialOptions: auto-start with $OCHATD_IDLE (a duration) as the started
// daemon's --idle.
func dialOptions(env *Env, ws string) daemon.DialOptions {
	o := daemon.DialOptions{Workspace: ws, AutoStart: true}
	if idle := env.Getenv("OCHATD_IDLE"); idle != "" {
		o.ServeArgs = append(o.ServeArgs, "--idle", idle)
	}
	return o
}

func fail(env *Env, format string, args ...any) int {
	fmt.Fprintf(env.Stderr, "ochatd: "+format+"\n", args...)
	return 1
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func fmtTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04")
}

func isFlagHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// extraArgs reports (and prints a usage error for) positional arguments
// given to a command that takes none.
func extraArgs(env *Env, name string, pos []string) bool {
	if len(pos) == 0 {
		return false
	}
	fmt.Fprintf(env.Stderr, "ochatd %s: takes no arguments (got %q); see ochatd %s --help\n", name, strings.Join(pos, " "), name)
	return true
}

// errDaemonGone is call's error when the daemon closed the connection
// (it exited) before answering.
var errDaemonGone = errors.New("the daemon closed the connection before answering (it exited)")

// Deadlines of the CLI's requests. jsonrpc2's Call waits for an answer
// until its context ends, even after the connection has closed, so every
// request goes through call with one of these.
const (
	// quickCall bounds a request the daemon answers from memory or its
	// store: lists, get, cancel, permission answers, stop.
	quickCall = 30 * time.Second
	// slowCall bounds a request that may start an agent (chat/send: an
	// adapter's first start can install it) or read or write a large
	// transcript (export, import, sessions/read, revert/apply).
	slowCall = 10 * time.Minute
	// dialTimeout bounds connecting (starting a daemon if needed) and the
	// initialize handshake.
	dialTimeout = time.Minute
)

// call is cl.Call bounded by timeout and by the connection: it returns
// errDaemonGone once the daemon has closed the connection without
// answering, and an error naming the method and the timeout when the
// daemon does not answer in time. A *jsonrpc2.Error from the daemon is
// returned as is.
func call(ctx context.Context, cl *daemon.Client, timeout time.Duration, method string, params, result any) error {
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s: no answer from the daemon within %s", method, timeout))
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-cl.Done():
			cancel(errDaemonGone)
		case <-ctx.Done():
		}
	}()
	err := cl.Call(ctx, method, params, result)
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
	}
	return err
}

// workspaceFirst turns `--workspace DIR COMMAND ARGS` (the workspace given
// before the command) into `COMMAND --workspace DIR ARGS`.
func workspaceFirst(args []string) []string {
	if len(args) == 0 {
		return args
	}
	a := args[0]
	switch {
	case (a == "--workspace" || a == "-workspace") && len(args) >= 3:
		return append([]string{args[2], a, args[1]}, args[3:]...)
	case (strings.HasPrefix(a, "--workspace=") || strings.HasPrefix(a, "-workspace=")) && len(args) >= 2:
		return append([]string{args[1], a}, args[2:]...)
	}
	return args
}
