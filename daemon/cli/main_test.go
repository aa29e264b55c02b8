package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ochat-dev/ochat/internal/testenv"
)

// TestMain removes the scripted agent built once per test binary, so test
// runs leave nothing in $TMPDIR. Run as `TESTBINARY serve …` — which is how
// daemon.Dial auto-starts a daemon from a test, the test binary being
// os.Executable() — it is `ochatd serve …`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Version: "test", Getenv: os.Getenv}
		os.Exit(Main(context.Background(), env, os.Args[1:]))
	}
	cleanup, err := testenv.Hermetic()
	if err != nil {
		panic(err)
	}
	code := m.Run()
	cleanup()
	if testagentErr == nil && testagentBin != "" {
		os.RemoveAll(filepath.Dir(testagentBin))
	}
	os.Exit(code)
}
