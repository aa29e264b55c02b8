package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// NPMPackage is a pinned set of npm packages: a package.json and the
// package-lock.json that fixes every version and integrity hash. Install
// runs `npm ci` on exactly these files.
type NPMPackage struct {
	Name        string // short name, used in the cache folder name
	PackageJSON []byte
	Lock        []byte
	// LockedInstall runs `npm install --no-save` on the lock instead of
	// `npm ci`, for a lock npm ci refuses because a dependency lists
	// optional platform packages that were never published (Oh My Pi's
	// @oh-my-pi/pi-natives 18.2.3 has only -linux-x64): the locked
	// versions are still the ones installed.
	LockedInstall bool
}

//go:embed npm/package.json
var demoPackageJSON []byte

//go:embed npm/package-lock.json
var demoLock []byte

// DemoPackage pins the adapter `ochatd demo` runs:
// @zed-industries/codex-acp 0.16.0 (internal/demo/npm).
var DemoPackage = NPMPackage{Name: "demo", PackageJSON: demoPackageJSON, Lock: demoLock}

// Install is an installed NPMPackage.
type Install struct {
	Dir      string        // folder holding package.json and node_modules
	Reused   bool          // true when an earlier install was found in the cache
	Duration time.Duration // time spent (ms resolution is plenty), including npm ci
}

// CacheDir is where pinned npm installs are kept between runs:
// $OCHAT_CACHE if set, else $XDG_CACHE_HOME/ochat/npm (os.UserCacheDir).
func CacheDir() (string, error) {
	if d := os.Getenv("OCHAT_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache dir (set OCHAT_CACHE): %w", err)
	}
	return filepath.Join(d, "ochat", "npm"), nil
}

// key names an install by the hash of its package.json and lock, so a new
// pin gets a new folder and an old one stays valid.
func (p NPMPackage) key() string {
	h := sha256.New()
	h.Write(p.PackageJSON)
	h.Write([]byte{0})
	h.Write(p.Lock)
	return p.Name + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// stampFile marks a finished install.
const stampFile = ".ochat-installed"

// Install makes sure the package is installed under cacheRoot and returns
// where. An install already in the cache is reused; otherwise it runs
// `npm ci --ignore-scripts` in a temporary folder (npm's output goes to
// log) and renames it into place, so an interrupted install never looks
// finished and two concurrent installs do not collide. It needs npm on
// PATH; the error says how to get it.
func (p NPMPackage) Install(ctx context.Context, cacheRoot string, log io.Writer) (Install, error) {
	start := time.Now()
	dir := filepath.Join(cacheRoot, p.key())
	if _, err := os.Stat(filepath.Join(dir, stampFile)); err == nil {
		return Install{Dir: dir, Reused: true, Duration: time.Since(start)}, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return Install{}, fmt.Errorf("install %s adapters: npm not found on PATH (install Node.js 20 or later with npm): %w", p.Name, err)
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return Install{}, fmt.Errorf("install %s adapters: %w", p.Name, err)
	}
	tmp, err := os.MkdirTemp(cacheRoot, ".tmp-"+p.Name+"-")
	if err != nil {
		return Install{}, fmt.Errorf("install %s adapters: %w", p.Name, err)
	}
	defer os.RemoveAll(tmp) // no-op once renamed
	for name, data := range map[string][]byte{"package.json": p.PackageJSON, "package-lock.json": p.Lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return Install{}, fmt.Errorf("install %s adapters: %w", p.Name, err)
		}
	}
	if log == nil {
		log = io.Discard
	}
	var tail bytes.Buffer
	args := []string{"ci"}
	if p.LockedInstall {
		args = []string{"install", "--no-save"}
	}
	cmd := exec.CommandContext(ctx, npm, append(args, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")...)
	cmd.Dir = tmp
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = io.MultiWriter(log, &tail)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		return Install{}, fmt.Errorf("install %s adapters: npm %s in %s: %w\n%s", p.Name, args[0], tmp, err, clip(tail.Bytes(), 1500))
	}
	if err := os.WriteFile(filepath.Join(tmp, stampFile), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return Install{}, fmt.Errorf("install %s adapters: %w", p.Name, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have finished the same install first.
		if _, serr := os.Stat(filepath.Join(dir, stampFile)); serr == nil {
			return Install{Dir: dir, Reused: true, Duration: time.Since(start)}, nil
		}
		return Install{}, fmt.Errorf("install %s adapters: %w", p.Name, err)
	}
	return Install{Dir: dir, Duration: time.Since(start)}, nil
}

// clip returns b, or its first and last n/2 bytes when longer than n
// (npm puts the reason first and a long usage text after it).
func clip(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	out := append([]byte(nil), b[:n/2]...)
	out = append(out, "\n…\n"...)
	return append(out, b[len(b)-n/2:]...)
}

// adapterScopes are the npm scopes the Claude and Codex adapters have been
// published under, newest first: @zed-industries renamed them to
// @agentclientprotocol (claude-agent-acp 0.24+, codex-acp 1.0+).
var adapterScopes = []string{"@agentclientprotocol", "@zed-industries"}

// CodexACP returns the command that starts codex-acp from this install:
// the current JS launcher (@agentclientprotocol/codex-acp 2.x, which runs
// the `codex app-server` of @openai/codex), else the older platform binary
// or node launcher (@zed-industries/codex-acp 0.x).
func (in Install) CodexACP() (command string, args []string, err error) {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	nm := filepath.Join(in.Dir, "node_modules")
	candidates := []struct{ path, runner string }{
		{filepath.Join(nm, "@agentclientprotocol", "codex-acp", "dist", "index.js"), "node"},
		{filepath.Join(nm, "@zed-industries", "codex-acp-"+runtime.GOOS+"-"+arch, "bin", "codex-acp"), ""},
		{filepath.Join(nm, "@zed-industries", "codex-acp", "bin", "codex-acp.js"), "node"},
	}
	for _, c := range candidates {
		if st, err := os.Stat(c.path); err == nil && !st.IsDir() {
			if c.runner == "" {
				return c.path, nil, nil
			}
			return c.runner, []string{c.path}, nil
		}
	}
	return "", nil, fmt.Errorf("codex-acp is not in %s (looked for %s)", in.Dir, candidates[0].path)
}

// ClaudeACP returns the command that starts claude-agent-acp from this
// install (node + dist/index.js), under either scope.
func (in Install) ClaudeACP() (command string, args []string, err error) {
	var first string
	for _, scope := range adapterScopes {
		js := filepath.Join(in.Dir, "node_modules", scope, "claude-agent-acp", "dist", "index.js")
		if _, err := os.Stat(js); err == nil {
			return "node", []string{js}, nil
		}
		if first == "" {
			first = js
		}
	}
	return "", nil, fmt.Errorf("claude-agent-acp is not in %s (looked for %s)", in.Dir, first)
}
