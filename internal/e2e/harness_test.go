// Package e2e holds end-to-end tests that run the real ACP adapters
// (claude-agent-acp, codex-acp from the npm registry, pinned in npm/)
// against the fake model server (internal/fakemodel) and, through a real
// ochatd daemon, check what a client sees and what is stored. They run only
// with OCHAT_E2E=1 (CI sets it); docs/real-agents.md says how.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/internal/demo"
	"github.com/ochat-dev/ochat/internal/fakemodel"
)

// need skips the test unless OCHAT_E2E=1.
func need(t *testing.T) {
	t.Helper()
	if os.Getenv("OCHAT_E2E") != "1" {
		t.Skip("end-to-end test with real adapters: set OCHAT_E2E=1 (needs node + npm and the npm registry on first run)")
	}
}

// readPackage reads a pinned package.json + package-lock.json from dir.
func readPackage(t *testing.T, name, dir string) demo.NPMPackage {
	t.Helper()
	pj, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	return demo.NPMPackage{Name: name, PackageJSON: pj, Lock: lock}
}

// extraAdapters installs (or reuses) Gemini CLI and OpenCode (npm-extra/).
func extraAdapters(t *testing.T) demo.Install { return extra.get(t, "e2e-extra", "npm-extra") }

// setupExtraAgent configures "gemini" or "opencode" against s with private
// state under root (research/real-agents/README.md, agents 3 and 4).
func setupExtraAgent(t *testing.T, name string, s *fakemodel.Server, in demo.Install, root string) agentSetup {
	t.Helper()
	a := agentSetup{name: name, allowKind: "allow_once"}
	var err error
	switch name {
	case "gemini":
		a.command = "node"
		a.args = []string{filepath.Join(in.Dir, "node_modules", "@google", "gemini-cli", "bundle", "gemini.js"), "--acp"}
		a.env, err = s.GeminiEnv(filepath.Join(root, "home-gemini"))
	case "opencode":
		arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
		a.command = filepath.Join(in.Dir, "node_modules", "opencode-"+runtime.GOOS+"-"+arch, "bin", "opencode")
		a.args = []string{"acp"}
		a.env, err = s.OpencodeEnv(filepath.Join(root, "opencode"))
	default:
		t.Fatalf("unknown agent %q", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// e2ePackage pins the current adapters (npm/package.json + lock):
// @agentclientprotocol/claude-agent-acp and @agentclientprotocol/codex-acp.
func e2ePackage(t *testing.T) demo.NPMPackage {
	t.Helper()
	return readPackage(t, "e2e", "npm")
}

// installCache installs (or reuses from the cache) one pinned package at
// most once per test binary.
type installCache struct {
	once   sync.Once
	in     demo.Install
	err    error
	logged bool
}

func (c *installCache) get(t *testing.T, name, dir string) demo.Install {
	t.Helper()
	c.prefetch(name, dir)
	if c.err != nil {
		t.Fatal(c.err)
	}
	if !c.logged {
		c.logged = true
		t.Logf("metric: %s install reused=%v took %v (%s)", name, c.in.Reused, c.in.Duration.Round(time.Millisecond), c.in.Dir)
	}
	return c.in
}

var current, legacy installCache

// adapters installs (or reuses) the current Claude and Codex adapters.
func adapters(t *testing.T) demo.Install { return current.get(t, "e2e", "npm") }

// legacyAdapters installs (or reuses) the older @zed-industries releases
// (claude-agent-acp 0.23.1, codex-acp 0.16.0) that users still run.
func legacyAdapters(t *testing.T) demo.Install { return legacy.get(t, "e2e-legacy", "npm-legacy") }

// fakeModel starts a fake model server for one test.
func fakeModel(t *testing.T) *fakemodel.Server {
	t.Helper()
	s, err := fakemodel.Start(context.Background(), fakemodel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			for _, r := range s.Requests() {
				t.Logf("model request #%d %s %s%s scenario=%s text=%q last=%q", r.Seq, r.Method, r.Path, "?"+r.Query,
					r.Reply.Scenario, r.Reply.Text, r.LastUserText())
			}
		}
	})
	return s
}

// agentSetup is one adapter configured against a fake model with private
// state: the command to run and its environment (on top of baseEnv).
type agentSetup struct {
	name    string
	command string
	args    []string
	env     map[string]string
	// allowKind is the permission option kind the test picks.
	allowKind string
}

// setupAgent configures the named adapter ("claude" or "codex") against s
// with a private home under root.
func setupAgent(t *testing.T, name string, s *fakemodel.Server, in demo.Install, root string) agentSetup {
	t.Helper()
	home := filepath.Join(root, "home-"+name)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	a := agentSetup{name: name, allowKind: "allow_once"}
	var err error
	switch name {
	case "claude":
		a.command, a.args, err = in.ClaudeACP()
		a.env = s.ClaudeEnv(home)
	case "codex":
		a.command, a.args, err = in.CodexACP()
		if err == nil {
			// "untrusted" asks before every patch; "danger-full-access"
			// because the Linux sandbox cannot run in containers.
			// codex 0.137 (codex-acp 0.16): "untrusted" asks before every
			// patch, "danger-full-access" because the Linux sandbox cannot
			// run in containers. codex 0.166 (codex-acp 2.x) refuses
			// "untrusted"; its "read-only" mode asks before every write.
			approval, sandbox := "on-request", "read-only"
			if strings.Contains(strings.Join(a.args, " ")+a.command, "@zed-industries") {
				approval, sandbox = "untrusted", "danger-full-access"
			}
			a.env, err = s.CodexEnv(filepath.Join(root, "codex-home"), home, approval, sandbox)
			// Keep codex's helper binaries out of /tmp (it warns there).
			a.env["TMPDIR"] = filepath.Join(home, "tmp")
			os.MkdirAll(a.env["TMPDIR"], 0o700)
		}
	default:
		t.Fatalf("unknown agent %q", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// baseEnv is the environment every child starts from: PATH and locale
// only, so nothing of the user's agent configuration leaks in.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "TERM"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// envList returns baseEnv plus m.
func envList(m map[string]string) []string {
	env := baseEnv()
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	return env
}

// proc is a child process in its own process group.
type proc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

// startProc starts cmd in its own process group with stderr captured and
// registers a cleanup that kills the whole group.
func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	if cmd.Stderr == nil {
		cmd.Stderr = p.stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(2 * time.Second)
		if t.Failed() {
			t.Logf("stderr of %s (tail):\n%s", filepath.Base(cmd.Path), p.stderr.tail(4000))
		}
	})
	return p
}

// stop sends SIGTERM to the process group, then SIGKILL after grace. The
// group is killed even when the leader has exited (Claude Code's child can
// outlive its adapter).
func (p *proc) stop(grace time.Duration) {
	pid := p.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	<-p.done
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) tail(n int) string {
	s := l.String()
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric logs one measured figure in a form bench/real-agents.sh greps.
func metric(t *testing.T, name string, d time.Duration) {
	t.Helper()
	t.Logf("metric: %s %s", name, fmt.Sprint(d.Round(time.Millisecond)))
}

// realpath resolves symlinks (macOS /tmp, private tmp dirs) so paths
// compare equal to what agents report.
func realpath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimRight(r, "/")
}

var extra, piPkg installCache

// piAdapters installs (or reuses) pi-acp, pi, Oh My Pi and bun (npm-pi/).
func piAdapters(t *testing.T) demo.Install { return piPkg.get(t, "e2e-pi", "npm-pi") }

// prefetch runs the install without a test, for warming installs in
// parallel; get reports its error later.
func (c *installCache) prefetch(name, dir string) {
	c.once.Do(func() {
		cache, err := demo.CacheDir()
		if err != nil {
			c.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		pj, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			c.err = err
			return
		}
		lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
		if err != nil {
			c.err = err
			return
		}
		// npm-pi's lock cannot pass npm ci (demo.NPMPackage.LockedInstall).
		c.in, c.err = demo.NPMPackage{Name: name, PackageJSON: pj, Lock: lock, LockedInstall: dir == "npm-pi"}.Install(ctx, cache, nil)
	})
}

// setupPiAgent configures "pi" (pi-acp, which runs `pi --mode rpc`) or
// "omp" (`omp acp` under bun) against s's chat-completions endpoint, with
// a private home under root. Neither asks before a file write: pi has no
// permission prompts; allowKind is still set for omp's.
func setupPiAgent(t *testing.T, name string, s *fakemodel.Server, in demo.Install, root string) agentSetup {
	t.Helper()
	home := filepath.Join(root, "home-"+name)
	a := agentSetup{name: name, allowKind: "allow_once"}
	nm := filepath.Join(in.Dir, "node_modules")
	var err error
	switch name {
	case "pi":
		a.command = "node"
		a.args = []string{filepath.Join(nm, "pi-acp", "dist", "index.js")}
		a.env, err = s.PiEnv(home, filepath.Join(home, ".pi", "agent"))
		if err == nil {
			// pi 1.6 needs Node 22.19+; bun (pinned beside it) runs it on
			// any machine. pi-acp starts PI_ACP_PI_COMMAND --mode rpc.
			wrapper := filepath.Join(home, "pi")
			script := "#!/bin/sh\nexec '" + bunBinary(t, nm) + "' '" + filepath.Join(nm, "@earendil-works", "pi-coding-agent", "dist", "bundle", "cli.js") + "' \"$@\"\n"
			err = os.WriteFile(wrapper, []byte(script), 0o755)
			a.env["PI_ACP_PI_COMMAND"] = wrapper
		}
	case "omp":
		a.command = bunBinary(t, nm)
		a.args = []string{filepath.Join(nm, "@oh-my-pi", "pi-coding-agent", "dist", "cli.js"), "acp"}
		a.env, err = s.PiEnv(home, filepath.Join(home, ".omp", "agent"))
	default:
		t.Fatalf("unknown agent %q", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// bunBinary finds bun in an install: npm ci --ignore-scripts leaves it in
// the platform package; the bun package's postinstall moves it to bin/.
func bunBinary(t *testing.T, nm string) string {
	t.Helper()
	arch := map[string]string{"amd64": "x64", "arm64": "aarch64"}[runtime.GOARCH]
	for _, p := range []string{
		filepath.Join(nm, "@oven", "bun-"+runtime.GOOS+"-"+arch, "bin", "bun"),
		filepath.Join(nm, "bun", "bin", "bun.exe"),
	} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() > 1<<20 {
			return p
		}
	}
	t.Fatalf("no bun binary under %s", nm)
	return ""
}
