// Command ochatd is ochat's per-workspace daemon and its command line:
// `ochatd serve` runs the daemon, `ochatd connect` is the stdio forwarder
// editors spawn, and chat, conversations, show, agents and doctor are clients
// of the daemon. All logic lives in package
// github.com/ochat-dev/ochat/daemon/cli.
package main

import (
	"context"
	"os"

	"github.com/ochat-dev/ochat/daemon/cli"
	"github.com/ochat-dev/ochat/procguard"
)

// version is set with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// extraCommands lets other files of this package add subcommands (demo.go
// adds `demo`) from an init function.
var extraCommands []cli.Command

func main() {
	if len(os.Args) > 1 && os.Args[1] == procguard.ShimArg {
		// The daemon runs every agent under this shim (procguard).
		os.Exit(procguard.RunShim(os.Args[2:]))
	}
	env := &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Version: version, Getenv: os.Getenv}
	if exe, err := os.Executable(); err == nil {
		env.Shim = exe
	}
	os.Exit(cli.Main(context.Background(), env, os.Args[1:], extraCommands...))
}
