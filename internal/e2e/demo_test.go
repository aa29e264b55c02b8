package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemo runs `ochatd demo --yes` as a newcomer would and checks that it
// shows the tool call, the permission question and the created file, and
// leaves no temporary folder behind.
func TestDemo(t *testing.T) {
	need(t)
	bin := ochatd(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--yes")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	metric(t, "ochatd demo --yes", time.Since(start))
	if err != nil {
		t.Fatalf("ochatd demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		"[tool] Edit ",
		"codex asks permission",
		"[file] ",
		"Done: created ",
		"the agent created ",
		"    hello from fake llm",
		"## codex · completed",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "ochat-demo-*"))
	if len(left) != 0 {
		t.Errorf("demo left %v behind", left)
	}
}
