package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the scripted agent built once per test binary, so test
// runs leave nothing in $TMPDIR.
func TestMain(m *testing.M) {
	code := m.Run()
	if testagentErr == nil && testagentBin != "" {
		os.RemoveAll(filepath.Dir(testagentBin))
	}
	os.Exit(code)
}
