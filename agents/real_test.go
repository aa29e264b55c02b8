package agents

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/internal/fakemodel"
	"github.com/ochat-dev/ochat/transcript"
)

// TestRealAgents runs the real adapters (claude-agent-acp, codex-acp,
// gemini --acp) against the fake model server on 127.0.0.1 through Conn:
// a plain answer, a file write after a permission prompt, a cancel, a turn
// after the cancel, and session/load in a new process. It needs the
// adapters installed from npm; set OCHAT_AGENT_BIN to the directories
// holding them (colon-separated, e.g. node_modules/.bin). Skipped otherwise.
func TestRealAgents(t *testing.T) {
	dirs := os.Getenv("OCHAT_AGENT_BIN")
	if dirs == "" {
		t.Skip("OCHAT_AGENT_BIN not set (directories holding claude-agent-acp, codex-acp, gemini)")
	}
	find := func(name string) string {
		for _, d := range filepath.SplitList(dirs) {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
		return ""
	}
	fm, err := fakemodel.Start(context.Background(), fakemodel.Options{StallTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fm.Close()

	type agentCase struct {
		name, bin string
		args      []string
		env       func(t *testing.T) map[string]string
		fs        *bool
		load      bool
	}
	cases := []agentCase{
		{name: "claude", bin: "claude-agent-acp", load: true, env: func(t *testing.T) map[string]string {
			return fm.ClaudeEnv(t.TempDir())
		}},
		{name: "codex", bin: "codex-acp", load: true, env: func(t *testing.T) map[string]string {
			env, err := fm.CodexEnv(t.TempDir(), t.TempDir(), "on-request", "read-only")
			if err != nil {
				t.Fatal(err)
			}
			return env
		}},
		// gemini-cli 0.61.0 cannot load a session in the minute it was
		// created; load is covered by the recorded traffic instead.
		{name: "gemini", bin: "gemini", args: []string{"--acp"}, fs: new(false), env: func(t *testing.T) map[string]string {
			env, err := fm.GeminiEnv(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return env
		}},
	}
	for _, ac := range cases {
		t.Run(ac.name, func(t *testing.T) {
			bin := find(ac.bin)
			if bin == "" {
				t.Skipf("%s not found in OCHAT_AGENT_BIN", ac.bin)
			}
			spec := Spec{Name: ac.name, Command: bin, Args: ac.args, Env: ac.env(t), Source: "builtin", FSCapabilities: ac.fs}
			ws := t.TempDir()
			rec := newRecorder()
			opts := Options{Workspace: ws, Handler: rec, Logger: quietLogger(), InitTimeout: 60 * time.Second}
			c, err := Start(context.Background(), spec, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f := &fixture{conn: c, rec: rec, ws: ws}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			info, err := c.NewSession(ctx)
			if err != nil {
				t.Fatal(err)
			}

			// Plain answer.
			if stop := f.prompt(t, info.ID, "PLAIN: say hello"); stop != "end_turn" {
				t.Errorf("plain: stop = %q", stop)
			}
			if got := text(rec.eventsOf(info.ID), transcript.EvContentDelta); !strings.Contains(got, fakemodel.PlainPrefix) {
				t.Errorf("plain: content = %q", got)
			}

			// A file write after a permission prompt (allow_once).
			path := filepath.Join(ws, "hello.txt")
			n0 := len(rec.eventsOf(info.ID))
			f.prompt(t, info.ID, "WRITE_FILE "+path)
			evs := rec.eventsOf(info.ID)[n0:]
			if b, err := os.ReadFile(path); err != nil || string(b) != fakemodel.FileContent {
				t.Errorf("file on disk: %q, %v", b, err)
			}
			if len(rec.perms) != 1 {
				t.Fatalf("permission requests: %d", len(rec.perms))
			}
			req := rec.perms[0]
			if len(req.FileChanges) != 1 || req.FileChanges[0].Path != path || *req.FileChanges[0].Additions != 1 {
				t.Errorf("permission file changes = %+v", req.FileChanges)
			}
			ids := toolIDs(evs)
			if len(ids) == 0 {
				t.Fatal("no tool call")
			}
			if seg, _ := lastTool(evs, ids[len(ids)-1]); seg.Status != "completed" {
				t.Errorf("tool = %+v", seg)
			}
			fcs := fileChanges(evs)
			if len(fcs) == 0 || fcs[0].Path != path || *fcs[0].Additions != 1 || !strings.Contains(fcs[0].Diff, "+++ b/hello.txt") {
				t.Errorf("fileChanges = %+v", fcs)
			}

			// Cancel a slow turn, then a turn after it.
			n1 := len(rec.eventsOf(info.ID))
			go func() {
				for len(rec.eventsOf(info.ID)) == n1 {
					time.Sleep(20 * time.Millisecond)
				}
				c.Cancel(context.Background(), info.ID)
			}()
			if stop := f.prompt(t, info.ID, "SLOW: take your time"); stop != "cancelled" {
				t.Errorf("slow: stop = %q", stop)
			}
			f.prompt(t, info.ID, "PLAIN: after cancel")
			if c.Err() != nil {
				t.Fatalf("agent exited: %v", c.Err())
			}
			c.Close()

			if !ac.load {
				return
			}
			rec2 := newRecorder()
			opts.Handler = rec2
			c2, err := Start(context.Background(), spec, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			if _, err := c2.LoadSession(ctx, info.ID); err != nil {
				t.Fatalf("LoadSession: %v", err)
			}
			if evs := rec2.eventsOf(info.ID); len(evs) != 0 {
				t.Errorf("load replay delivered %d events", len(evs))
			}
			f2 := &fixture{conn: c2, rec: rec2, ws: ws}
			f2.prompt(t, info.ID, "PLAIN: after load")
			if got := text(rec2.eventsOf(info.ID), transcript.EvContentDelta); !strings.Contains(got, fakemodel.PlainPrefix) {
				t.Errorf("after load: content = %q", got)
			}
			if ids := toolIDs(rec2.eventsOf(info.ID)); len(ids) != 0 {
				t.Errorf("replayed tools reached the live turn: %v", ids)
			}
			if err := c2.CloseSession(ctx, info.ID); err != nil && !errors.Is(err, ErrUnsupported) {
				t.Errorf("CloseSession: %v", err)
			}
		})
	}
}
