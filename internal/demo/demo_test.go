package demo

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/internal/fakemodel"
)

// emptyPackage is a package with no dependencies: npm ci installs it
// without the network.
var emptyPackage = NPMPackage{
	Name:        "empty",
	PackageJSON: []byte(`{"name":"empty","version":"1.0.0","private":true}`),
	Lock:        []byte(`{"name":"empty","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"empty","version":"1.0.0"}}}`),
}

func TestInstallReusesTheCache(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not on PATH")
	}
	cache := t.TempDir()
	ctx := context.Background()
	first, err := emptyPackage.Install(ctx, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Reused {
		t.Error("first install reported reused")
	}
	for _, f := range []string{"package.json", "package-lock.json", stampFile} {
		if _, err := os.Stat(filepath.Join(first.Dir, f)); err != nil {
			t.Errorf("install lacks %s: %v", f, err)
		}
	}
	second, err := emptyPackage.Install(ctx, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Reused || second.Dir != first.Dir {
		t.Errorf("second install %+v, want reuse of %s", second, first.Dir)
	}
	// A different pin is a different folder.
	other := emptyPackage
	other.PackageJSON = []byte(`{"name":"empty","version":"1.0.1","private":true}`)
	if other.key() == emptyPackage.key() {
		t.Error("different package.json, same cache key")
	}
	// Nothing half-done is left behind.
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("leftover temp folder %s", e.Name())
		}
	}
}

func TestInstallErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("no npm", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := emptyPackage.Install(ctx, t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), "npm not found") {
			t.Errorf("err = %v, want npm not found", err)
		}
	})
	t.Run("bad lock", func(t *testing.T) {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skip("npm not on PATH")
		}
		bad := emptyPackage
		bad.Lock = []byte(`not json`)
		cache := t.TempDir()
		if _, err := bad.Install(ctx, cache, nil); err == nil {
			t.Fatal("install with a broken lock succeeded")
		}
		if _, err := os.Stat(filepath.Join(cache, bad.key(), stampFile)); err == nil {
			t.Error("failed install marked finished")
		}
	})
}

func TestCacheDir(t *testing.T) {
	t.Setenv("OCHAT_CACHE", "/some/where")
	if d, _ := CacheDir(); d != "/some/where" {
		t.Errorf("CacheDir = %q with OCHAT_CACHE set", d)
	}
	t.Setenv("OCHAT_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg/cache")
	if d, _ := CacheDir(); d != "/xdg/cache/ochat/npm" {
		t.Errorf("CacheDir = %q", d)
	}
}

func TestAdapterCommands(t *testing.T) {
	dir := t.TempDir()
	in := Install{Dir: dir}
	if _, _, err := in.CodexACP(); err == nil {
		t.Error("CodexACP in an empty folder: no error")
	}
	if _, _, err := in.ClaudeACP(); err == nil {
		t.Error("ClaudeACP in an empty folder: no error")
	}
	js := filepath.Join(dir, "node_modules", "@zed-industries", "codex-acp", "bin", "codex-acp.js")
	os.MkdirAll(filepath.Dir(js), 0o755)
	os.WriteFile(js, nil, 0o644)
	if cmd, args, err := in.CodexACP(); err != nil || cmd != "node" || len(args) != 1 || args[0] != js {
		t.Errorf("CodexACP = %s %v %v", cmd, args, err)
	}
}

func TestNewWorld(t *testing.T) {
	model, err := fakemodel.Start(context.Background(), fakemodel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	root := t.TempDir()
	w, err := newWorld(model, root, "/bin/codex-acp", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "config", "ochat", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		AgentServers map[string]struct {
			Command string            `json:"command"`
			Env     map[string]string `json:"env"`
		} `json:"agent_servers"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	codex, ok := s.AgentServers[AgentName]
	if !ok || codex.Command != "/bin/codex-acp" || codex.Env["CODEX_HOME"] != w.codexHome {
		t.Errorf("settings %s", b)
	}
	toml, err := os.ReadFile(filepath.Join(w.codexHome, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`approval_policy = "untrusted"`, `base_url = "` + model.URL() + `/v1"`} {
		if !strings.Contains(string(toml), want) {
			t.Errorf("config.toml lacks %s:\n%s", want, toml)
		}
	}
	env := strings.Join(w.env, "\n")
	for _, want := range []string{"XDG_CONFIG_HOME=" + root, "XDG_STATE_HOME=" + root, "XDG_RUNTIME_DIR=" + root} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
}

func TestConvIDWriter(t *testing.T) {
	var out strings.Builder
	w := &convIDWriter{w: &out}
	for _, chunk := range []string{"codex asks permission\nchoose 1-2 (empty: cancel): ", "conver", "sation: 01ABC\n", "tail"} {
		w.Write([]byte(chunk))
	}
	if w.id() != "01ABC" {
		t.Errorf("id = %q", w.id())
	}
	if !strings.HasSuffix(out.String(), "01ABC\ntail") {
		t.Errorf("passed through %q", out.String())
	}
}
