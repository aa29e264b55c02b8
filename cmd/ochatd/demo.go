package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ochat-dev/ochat/daemon/cli"
	"github.com/ochat-dev/ochat/internal/demo"
)

func init() {
	extraCommands = append(extraCommands, cli.Command{
		Name:    "demo",
		Summary: "offline tour: a real agent (codex-acp) and a bundled fake model write a file after asking you",
		Run:     runDemo,
	})
}

// runDemo is `ochatd demo [--yes] [--keep]`; all the work is in package
// internal/demo.
func runDemo(ctx context.Context, env *cli.Env, args []string) int {
	fs := flag.NewFlagSet("ochatd demo", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	yes := fs.Bool("yes", false, "allow the file write without asking")
	keep := fs.Bool("keep", false, "keep the temporary workspace, store and agent home, and print where")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: ochatd demo [--yes] [--keep]")
		fmt.Fprintln(env.Stderr, "Runs codex-acp (installed once with npm into $OCHAT_CACHE or ~/.cache/ochat/npm) against a fake model")
		fmt.Fprintln(env.Stderr, "on 127.0.0.1, through a real ochatd daemon for a temporary workspace. No account needed.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := demo.Run(ctx, demo.Options{Yes: *yes, Keep: *keep, In: env.Stdin, Out: env.Stdout, Err: env.Stderr})
	if err != nil {
		fmt.Fprintln(env.Stderr, "ochatd demo:", err)
		return 1
	}
	return 0
}
