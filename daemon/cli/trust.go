package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ochat-dev/ochat/agents"
)

// TrustListEntry is one line of `ochatd trust --list --json`.
type TrustListEntry struct {
	agents.TrustEntry
	// State is "trusted" (the file is unchanged), "changed" or "missing"
	// (the file is gone).
	State string `json:"state"`
}

// runTrust is `ochatd trust [--workspace DIR] [--revoke | --list [--json]]`:
// trust the workspace's .ochat/settings.json as it is now (the agents it
// defines may then start), forget that trust, or list trusted workspaces.
// It edits the user's trust file directly (agents.DefaultTrustPath); the
// daemon reads it on every agents/list and chat/send, so no restart is
// needed.
func runTrust(ctx context.Context, env *Env, args []string) int {
	var c common
	fset := newFlags(env, "trust", &c, true)
	revoke := fset.Bool("revoke", false, "forget the trust in this workspace's settings")
	list := fset.Bool("list", false, "list trusted workspaces and whether their settings changed")
	pos, err := parse(fset, args)
	if err != nil {
		return exitFlag(err)
	}
	if len(pos) != 0 || (*revoke && *list) {
		fmt.Fprintln(env.Stderr, "usage: ochatd trust [--workspace DIR] [--revoke | --list [--json]]")
		return 2
	}
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	path, err := agents.DefaultTrustPath(getenv)
	if err != nil {
		return fail(env, "%v", err)
	}
	ts := agents.NewTrustStore(path)
	if *list {
		return trustList(env, ts, c.json)
	}
	ws, err := c.resolve()
	if err != nil {
		return fail(env, "%v", err)
	}
	if *revoke {
		found, err := ts.Revoke(ws)
		if err != nil {
			return fail(env, "%v", err)
		}
		if found {
			fmt.Fprintf(env.Stdout, "Revoked: agents from %s stay inactive until you run `ochatd trust` again.\n", agents.WorkspaceSettingsPath(ws))
		} else {
			fmt.Fprintf(env.Stdout, "%s was not trusted.\n", ws)
		}
		return 0
	}
	settings := agents.WorkspaceSettingsPath(ws)
	content, err := os.ReadFile(settings)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(env, "%s has no workspace settings (%s): nothing to trust", ws, settings)
	}
	if err != nil {
		return fail(env, "trust: %v", err)
	}
	specs, err := agents.SettingsAgents(content)
	if err != nil {
		return fail(env, "trust: %s: %v (fix the file; nothing was trusted)", settings, err)
	}
	// The registry's own checks, over the file as it would apply.
	if cfg, err := os.UserConfigDir(); err == nil {
		if _, err := agents.LoadRegistry(cfg, ws); err != nil {
			return fail(env, "trust: %v (fix the file; nothing was trusted)", err)
		}
	}
	sum := agents.SettingsHash(content)
	if st, err := ts.Check(ws, content); err != nil {
		return fail(env, "%v", err)
	} else if st == agents.TrustOK {
		fmt.Fprintf(env.Stdout, "%s is already trusted (sha256 %s).\n", settings, sum[:16])
		return 0
	}
	w := env.Stdout
	fmt.Fprintf(w, "%s (sha256 %s) defines:\n", settings, sum[:16])
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range specs {
		cmd := "(built-in command)"
		if s.Command != "" {
			cmd = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, cmd, envKeys(s.Env))
	}
	tw.Flush()
	if len(specs) == 0 {
		fmt.Fprintln(w, "  no agents (no \"agent_servers\")")
	}
	if _, err := ts.Trust(ws, content); err != nil {
		return fail(env, "%v", err)
	}
	fmt.Fprintf(w, "Trusted: these commands may now run as you, with %s as their working directory.\n", ws)
	fmt.Fprintln(w, "If the file changes, its agents stay inactive until you run `ochatd trust` again; `ochatd trust --revoke` undoes this.")
	return 0
}

// envKeys renders env as "env: K1, K2" (names only, never values).
func envKeys(env map[string]string) string {
	if len(env) == 0 {
		return ""
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return "env: " + strings.Join(keys, ", ")
}

func trustList(env *Env, ts *agents.TrustStore, asJSON bool) int {
	entries, err := ts.Entries()
	if err != nil {
		return fail(env, "%v", err)
	}
	out := make([]TrustListEntry, 0, len(entries))
	for _, e := range entries {
		state := "missing"
		if b, err := os.ReadFile(e.Settings); err == nil {
			state = "changed"
			if agents.SettingsHash(b) == e.SHA256 {
				state = "trusted"
			}
		}
		out = append(out, TrustListEntry{TrustEntry: e, State: state})
	}
	if asJSON {
		return printJSON(env, out)
	}
	if len(out) == 0 {
		fmt.Fprintf(env.Stdout, "No workspace is trusted (%s).\n", ts.Path())
		return 0
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tSTATE\tTRUSTED")
	for _, e := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Workspace, e.State, fmtTime(e.TrustedAt))
	}
	tw.Flush()
	return 0
}
