package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ochat-dev/ochat/internal/testenv"
)

// TestMain removes the scripted agent built once per test binary, so test
// runs leave nothing in $TMPDIR.
func TestMain(m *testing.M) {
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
