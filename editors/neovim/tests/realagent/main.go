// Command realagent prepares a real ACP adapter for the Neovim plugin's end-to-end test: it starts the project's fake
// model server on 127.0.0.1 (internal/fakemodel), installs or reuses the pinned codex-acp (internal/demo's npm pin,
// cached under $OCHAT_CACHE or the user cache dir), lays out a private world under -root (workspace/, codex-home/,
// home/, config/ochat/settings.json naming the adapter as agent "codex" with its environment pointed at the fake
// model, state/, run/), prints one JSON line {"workspace","agent","env":{…},"model"} on stdout and serves the fake
// model until stdin closes or it is signalled.
//
// It never touches the user's own agent settings or sessions: everything lives under -root.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/ochat-dev/ochat/internal/demo"
	"github.com/ochat-dev/ochat/internal/fakemodel"
)

func main() {
	root := flag.String("root", "", "folder for the private world (required)")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "realagent:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	if root == "" {
		return fmt.Errorf("-root is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	model, err := fakemodel.Start(ctx, fakemodel.Options{})
	if err != nil {
		return err
	}
	defer model.Close()
	cache, err := demo.CacheDir()
	if err != nil {
		return err
	}
	in, err := demo.DemoPackage.Install(ctx, cache, os.Stderr)
	if err != nil {
		return fmt.Errorf("install codex-acp: %w", err)
	}
	command, args, err := in.CodexACP()
	if err != nil {
		return err
	}
	ws := filepath.Join(root, "workspace")
	home := filepath.Join(root, "home")
	for _, d := range []string{ws, home, filepath.Join(root, "config", "ochat"), filepath.Join(root, "state"), filepath.Join(root, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("make %s: %w", d, err)
		}
	}
	agentEnv, err := model.CodexEnv(filepath.Join(root, "codex-home"), home, "untrusted", "danger-full-access")
	if err != nil {
		return fmt.Errorf("codex env: %w", err)
	}
	settings := map[string]any{"agent_servers": map[string]any{
		demo.AgentName: map[string]any{"command": command, "args": args, "env": agentEnv},
	}}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "config", "ochat", "settings.json"), b, 0o600); err != nil {
		return fmt.Errorf("write settings: %w", err)
	}
	out, err := json.Marshal(map[string]any{
		"workspace": ws,
		"agent":     demo.AgentName,
		"model":     model.URL(),
		"env": map[string]string{
			"XDG_CONFIG_HOME": filepath.Join(root, "config"),
			"XDG_STATE_HOME":  filepath.Join(root, "state"),
			"XDG_RUNTIME_DIR": filepath.Join(root, "run"),
		},
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	return nil
}
