package native

import (
	"os"
	"testing"

	"github.com/ochat-dev/ochat/internal/testenv"
)

// TestMain keeps the user's environment (CLAUDE_CONFIG_DIR, CODEX_HOME,
// XDG_*…) out of these tests: each sets its own.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m.Run)) }
