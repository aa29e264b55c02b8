package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/daemon/cli"
	"github.com/ochat-dev/ochat/internal/fakemodel"
)

// AgentName is the agent the demo configures (codex-acp: the fastest
// adapter to install and start).
const AgentName = "codex"

// Options configure Run.
type Options struct {
	// Exe is the ochatd binary whose `serve` and `chat` subcommands run the
	// turn; "" means os.Executable().
	Exe string
	// Yes answers the permission question "allow once" without asking.
	Yes bool
	// Keep leaves the temporary folder (workspace, store, agent home) in
	// place and prints where it is.
	Keep bool
	// CacheDir holds the npm install; "" means CacheDir().
	CacheDir string
	// In, Out, Err are the terminal; nil means os.Stdin, os.Stdout,
	// os.Stderr.
	In       io.Reader
	Out, Err io.Writer
}

// Run is `ochatd demo`: it starts the fake model in-process, installs (or
// reuses) codex-acp, makes a temporary workspace with a private
// CODEX_HOME, ochat config, store and socket folder, starts
// `ochatd serve` for it and runs `ochatd chat` with a prompt that makes the
// agent create hello.txt, so the user sees the stream, a tool call, the
// permission question and the file change; then it shows the file and
// stops the daemon. Everything but the npm cache is removed unless Keep.
//
// Cleanup (stop the daemon, remove the folder) runs on every path: an
// interrupt, SIGTERM or SIGHUP, and a closed output (`ochatd demo | head`:
// SIGPIPE is caught so a write fails with EPIPE instead of killing the
// process) all cancel ctx and return an error saying what happened.
func Run(ctx context.Context, o Options) (err error) {
	// Stop is deferred first so it runs last, after the cleanup.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stopSignals()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() {
		if err != nil && context.Cause(ctx) != nil {
			err = fmt.Errorf("demo: stopped (%w); the daemon was stopped and the temporary folder removed", context.Cause(ctx))
		}
	}()
	if o.In == nil {
		o.In = os.Stdin
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Err == nil {
		o.Err = os.Stderr
	}
	o.Out = &pipeWriter{w: o.Out, cancel: cancel}
	if o.Exe == "" {
		if o.Exe, err = os.Executable(); err != nil {
			return fmt.Errorf("demo: find the ochatd binary: %w", err)
		}
	}
	if o.CacheDir == "" {
		if o.CacheDir, err = CacheDir(); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	say := func(format string, a ...any) { fmt.Fprintf(o.Out, format+"\n", a...) }

	say("ochat demo: a real coding agent (Codex, through codex-acp) runs one chat turn through a real ochatd")
	say("daemon, against a fake model server on 127.0.0.1. No account, no network beyond the npm registry.")
	say("")

	model, err := fakemodel.Start(ctx, fakemodel.Options{})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer model.Close()
	say("• fake model listening on %s", model.URL())

	say("• installing @zed-industries/codex-acp 0.16.0 with npm into %s (first run only)…", o.CacheDir)
	in, err := DemoPackage.Install(ctx, o.CacheDir, nil)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if in.Reused {
		say("  reused the cached install")
	} else {
		say("  installed in %.1f s", in.Duration.Seconds())
	}
	command, args, err := in.CodexACP()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	root, err := os.MkdirTemp("", "ochat-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if o.Keep {
		// The store lives under the demo's own XDG folders: say how to reach it.
		defer say("\nKept %s (workspace, store, agent home, daemon.log). To look inside:\n"+
			"  XDG_CONFIG_HOME=%[1]s/config XDG_STATE_HOME=%[1]s/state XDG_RUNTIME_DIR=%[1]s/run ochatd conversations --workspace %[1]s/workspace",
			root)
	} else {
		defer os.RemoveAll(root)
	}
	w, err := newWorld(model, root, command, args)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	say("• workspace %s, agent home %s", w.workspace, w.codexHome)

	stopDaemon, err := w.startDaemon(ctx, o.Exe)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer stopDaemon()
	say("• ochatd serve is running for that workspace")
	say("")

	target := filepath.Join(w.workspace, "hello.txt")
	prompt := "WRITE_FILE " + target
	chatArgs := []string{"chat", "--workspace", w.workspace, "--agent", AgentName}
	if o.Yes {
		chatArgs = append(chatArgs, "--yes")
	}
	chatArgs = append(chatArgs, prompt)
	say("$ ochatd %s", strings.Join(quoteArgs(chatArgs), " "))
	chat := exec.CommandContext(ctx, o.Exe, chatArgs...)
	// On cancel, interrupt chat (it cancels the turn and exits) rather
	// than kill it; a terminal's Ctrl-C reaches it directly too.
	chat.Cancel = func() error { return chat.Process.Signal(os.Interrupt) }
	chat.WaitDelay = 5 * time.Second
	chat.Env = w.env
	chat.Dir = w.workspace
	convID := &convIDWriter{w: o.Err}
	chat.Stdin, chat.Stdout, chat.Stderr = o.In, o.Out, convID
	chatErr := chat.Run()
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	say("")

	b, ferr := os.ReadFile(target)
	switch {
	case ferr == nil:
		say("• the agent created %s:", target)
		for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			say("    %s", line)
		}
	case errors.Is(ferr, os.ErrNotExist) && rejected(chatErr):
		say("• you rejected the write: nothing was created")
		chatErr = nil
	case errors.Is(ferr, os.ErrNotExist):
		say("• %s was not created (permission rejected?)", target)
	default:
		return fmt.Errorf("demo: read %s: %w", target, ferr)
	}
	if chatErr != nil {
		return fmt.Errorf("demo: ochatd chat: %w (daemon log: %s)", chatErr, lastLines(w.logPath, 20))
	}
	say("• the fake model answered %s", plural(len(model.ModelRequests()), "request"))
	if id := convID.id(); id != "" {
		say("• the daemon stored the conversation; `ochatd show` prints it back from the store:")
		say("")
		show := exec.CommandContext(ctx, o.Exe, "show", "--workspace", w.workspace, id)
		show.Env = w.env
		show.Dir = w.workspace
		show.Stdout, show.Stderr = o.Out, o.Err
		if err := show.Run(); err != nil {
			return fmt.Errorf("demo: ochatd show: %w", err)
		}
	}
	say("")
	say(nextStep(exec.LookPath))
	return nil
}

// nextStep is the demo's last line. `go run ./cmd/ochatd demo` puts no
// ochatd on PATH, so then it says how to get one or how to go on without.
func nextStep(lookPath func(string) (string, error)) string {
	if _, err := lookPath("ochatd"); err == nil {
		return "Next: configure a real agent (`ochatd agents` lists them) and run `ochatd chat \"your prompt\"` in a repository."
	}
	return "Next: ochatd is not on your PATH (`go run` built a temporary binary). Install it with `go install ./cmd/ochatd` " +
		"(it lands in $(go env GOPATH)/bin), or go on with `go run ./cmd/ochatd agents` to list real agents and " +
		"`go run ./cmd/ochatd chat \"your prompt\"` in a repository."
}

// world is the demo's private environment.
type world struct {
	root, workspace, codexHome, logPath string
	env                                 []string // for ochatd serve and chat
}

// newWorld lays out root: workspace/, codex-home/ (config.toml against
// model), config/ochat/settings.json (codex as a user agent), state/,
// run/ (socket), home/.
func newWorld(model *fakemodel.Server, root, command string, args []string) (*world, error) {
	w := &world{root: root, workspace: filepath.Join(root, "workspace"), codexHome: filepath.Join(root, "codex-home"),
		logPath: filepath.Join(root, "daemon.log")}
	home := filepath.Join(root, "home")
	for _, d := range []string{w.workspace, home, filepath.Join(root, "config", "ochat"), filepath.Join(root, "state"), filepath.Join(root, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	agentEnv, err := model.CodexEnv(w.codexHome, home, "untrusted", "danger-full-access")
	if err != nil {
		return nil, err
	}
	settings := map[string]any{"agent_servers": map[string]any{
		AgentName: map[string]any{"command": command, "args": args, "env": agentEnv},
	}}
	b, _ := json.MarshalIndent(settings, "", "  ")
	if err := os.WriteFile(filepath.Join(root, "config", "ochat", "settings.json"), b, 0o600); err != nil {
		return nil, err
	}
	w.env = append(os.Environ(),
		"XDG_CONFIG_HOME="+filepath.Join(root, "config"),
		"XDG_STATE_HOME="+filepath.Join(root, "state"),
		"XDG_RUNTIME_DIR="+filepath.Join(root, "run"),
	)
	return w, nil
}

// startDaemon runs `exe serve --workspace W` in its own process group,
// waits until its socket answers, and returns a function that stops it
// (SIGTERM to the group, SIGKILL after 5 s).
func (w *world) startDaemon(ctx context.Context, exe string) (stop func(), err error) {
	logf, err := os.Create(w.logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve", "--workspace", w.workspace)
	cmd.Env = w.env
	cmd.Dir = w.workspace
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start ochatd serve: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	stop = func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	sock := filepath.Join(w.root, "run", "ochat", daemon.WorkspaceHash(w.workspace)+".sock")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return stop, nil
		}
		select {
		case <-done:
			return nil, fmt.Errorf("ochatd serve exited early: %s", lastLines(w.logPath, 20))
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("ochatd serve did not open %s within 20 s: %s", sock, lastLines(w.logPath, 20))
		}
	}
}

// rejected reports whether `ochatd chat` ended with cli.ExitRejected: the
// user rejected the agent's permission request and the agent stopped.
func rejected(chatErr error) bool {
	var ee *exec.ExitError
	return errors.As(chatErr, &ee) && ee.ExitCode() == cli.ExitRejected
}

// convIDWriter passes `ochatd chat`'s stderr through and remembers the
// conversation id it prints ("conversation: ID").
type convIDWriter struct {
	w    io.Writer
	mu   sync.Mutex
	buf  []byte
	last string
}

func (c *convIDWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			break
		}
		// The line may follow a question that had no newline.
		line := string(c.buf[:i])
		// "conversation: ID (to stop the turn from elsewhere: …)"
		if j := strings.LastIndex(line, "conversation: "); j >= 0 {
			if f := strings.Fields(line[j+len("conversation: "):]); len(f) > 0 {
				c.last = f[0]
			}
		}
		c.buf = c.buf[i+1:]
	}
	c.mu.Unlock()
	return c.w.Write(p)
}

func (c *convIDWriter) id() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// lastLines returns the last n lines of a file, for error messages.
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "\n" + string(bytes.Join(lines, []byte("\n")))
}

// errOutputClosed is the cancel cause when the reader of the demo's
// output went away.
var errOutputClosed = errors.New("output closed")

// pipeWriter cancels the demo when a write fails because the reader went
// away (EPIPE).
type pipeWriter struct {
	w      io.Writer
	cancel context.CancelCauseFunc
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.cancel(errOutputClosed)
	}
	return n, err
}

// plural renders "1 request", "2 requests".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// quoteArgs quotes arguments that contain spaces, for display.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t'\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}
