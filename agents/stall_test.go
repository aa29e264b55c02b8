package agents

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestStartStalledNonACP: a command that prints text that is not ACP and
// then waits fails Start after StallTimeout (10 s by default, not the 60 s
// initialize timeout), quoting what it printed; an agent that speaks ACP
// after some text starts.
func TestStartStalledNonACP(t *testing.T) {
	if DefaultStallTimeout != 10*time.Second {
		t.Errorf("DefaultStallTimeout = %v, want 10s", DefaultStallTimeout)
	}
	spec := Spec{Name: "chatty", Command: "sh", Args: []string{"-c", `echo "Please log in: open https://example.test/login"; exec sleep 60`}}
	_, err := Start(context.Background(), spec, Options{Workspace: t.TempDir(), Logger: quietLogger(), StallTimeout: 300 * time.Millisecond, KillGrace: time.Second})
	if err == nil {
		t.Fatal("Start succeeded")
	}
	if !strings.Contains(err.Error(), "agent chatty") || !strings.Contains(err.Error(), "Please log in: open https://example.test/login") || !strings.Contains(err.Error(), "not ACP") {
		t.Errorf("error %q", err)
	}

	// Text first, then ACP: the testagent behind a banner starts fine.
	spec = Spec{Name: "banner", Command: "sh", Args: []string{"-c", `echo "starting up…"; exec "$0"`, testagentBin}}
	c, err := Start(context.Background(), spec, Options{Workspace: t.TempDir(), Logger: quietLogger(), StallTimeout: 300 * time.Millisecond, KillGrace: time.Second})
	if err != nil {
		t.Fatalf("agent with a banner: %v", err)
	}
	c.Close()
}
