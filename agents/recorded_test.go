package agents

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/ochat-dev/ochat/transcript"
)

// recordedLine is one line of testdata/acp/*.ndjson (see testdata/SOURCES.md).
type recordedLine struct {
	Dir  string   `json:"dir"`
	Proc int      `json:"proc"`
	Msg  envelope `json:"msg"`
}

// replayResult is what the mapping made of one recorded process.
type replayResult struct {
	events   []transcript.Event // in arrival order, all sessions
	perms    []PermissionRequest
	session  State // from the session/new result
	state    State // merged state updates
	initCaps acp.AgentCapabilities
	kinds    map[string]int
}

// replayRecorded feeds the agent→client traffic of process proc through the
// same decoding and mapping the live connection uses.
func replayRecorded(t *testing.T, file string, proc int) replayResult {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "acp", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	methods := map[string]string{} // client request id → method
	m := newMapper(nil, "/home/dev/project")
	res := replayResult{kinds: map[string]int{}}
	for sc.Scan() {
		var l recordedLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if l.Proc != proc {
			continue
		}
		if l.Dir == "client->agent" {
			if l.Msg.ID != nil && l.Msg.Method != "" {
				methods[string(*l.Msg.ID)] = l.Msg.Method
			}
			continue
		}
		switch {
		case l.Msg.Method == "session/update":
			p, err := decodeNotification(l.Msg.Params)
			if err != nil {
				t.Fatalf("decode %s: %v", l.Msg.Params, err)
			}
			out := m.apply(&p.Update, true)
			res.kinds[out.kind]++
			res.events = append(res.events, out.events...)
			if out.state != nil {
				res.state.Merge(*out.state)
			}
		case l.Msg.Method == "session/request_permission":
			var p permissionParams
			if err := json.Unmarshal(l.Msg.Params, &p); err != nil {
				t.Fatal(err)
			}
			u, err := decodeUpdate(p.ToolCall)
			if err != nil {
				t.Fatal(err)
			}
			tool, fcs, evs := m.mergePermissionTool(u)
			res.perms = append(res.perms, PermissionRequest{ToolCall: tool, FileChanges: fcs, Options: p.Options})
			res.events = append(res.events, evs...)
		case l.Msg.Method == "" && l.Msg.ID != nil:
			switch methods[string(*l.Msg.ID)] {
			case "initialize":
				var r acp.InitializeResponse
				if err := json.Unmarshal(l.Msg.Result, &r); err != nil {
					t.Fatalf("%s: initialize result does not decode: %v", file, err)
				}
				res.initCaps = r.AgentCapabilities
			case "session/new":
				var r sessionResult
				if err := json.Unmarshal(l.Msg.Result, &r); err != nil {
					t.Fatal(err)
				}
				res.session = r.state()
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return res
}

func configIDs(opts []acp.SessionConfigOption) []string {
	var ids []string
	for _, o := range opts {
		if o.Select != nil {
			ids = append(ids, string(o.Select.Id))
		}
	}
	return ids
}

func TestRecordedTraffic(t *testing.T) {
	const path = "/home/dev/project/hello-go.txt"
	tests := []struct {
		file       string
		toolID     string // prefix
		output     string // prefix of the final tool output
		oldText    *string
		configIDs  string
		modes      int
		models     bool
		options    []string // permission option ids
		firstSight bool     // the permission request is the first sight of the tool
	}{
		{file: "claude-agent-acp.ndjson", toolID: "toolu_fake_2", output: "File created successfully at: " + path,
			configIDs: "mode,model", modes: 5, models: true, options: []string{"allow_always", "allow", "reject"}},
		{file: "codex-acp.ndjson", toolID: "call_fake_2", output: "Success. Updated the following files:\nA " + path,
			configIDs: "mode,model,reasoning_effort", modes: 3, options: []string{"approved", "abort"}},
		{file: "gemini.ndjson", toolID: "write_file__write_file_", oldText: new(""),
			modes: 4, models: true, options: []string{"proceed_always", "proceed_once", "cancel"}, firstSight: true},
		{file: "opencode.ndjson", toolID: "call_fake_3", output: "Wrote file successfully.", oldText: new(""),
			configIDs: "model,mode", options: []string{"once", "always", "reject"}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".ndjson"), func(t *testing.T) {
			r := replayRecorded(t, tt.file, 1)
			if !r.initCaps.LoadSession {
				t.Error("initialize: loadSession not decoded")
			}
			if got := strings.Join(configIDs(r.session.ConfigOptions), ","); got != tt.configIDs {
				t.Errorf("config options = %q, want %q", got, tt.configIDs)
			}
			nModes := 0
			if r.session.Modes != nil {
				nModes = len(r.session.Modes.AvailableModes)
			}
			if nModes != tt.modes || (r.session.Models != nil) != tt.models {
				t.Errorf("modes %d models %v, want %d %v", nModes, r.session.Models != nil, tt.modes, tt.models)
			}
			if len(r.state.Commands) == 0 {
				t.Error("no available commands")
			}
			content := text(r.events, transcript.EvContentDelta)
			if !strings.Contains(content, "PONG from fake LLM") || !strings.Contains(content, "Done: created "+path) {
				t.Errorf("content = %q", content)
			}
			ids := toolIDs(r.events)
			if len(ids) != 1 || !strings.HasPrefix(ids[0], tt.toolID) {
				t.Fatalf("tool ids = %v, want one %s…", ids, tt.toolID)
			}
			if tt.firstSight && (r.events[0].Type == transcript.EvContentDelta && len(r.perms) == 0) {
				t.Error("tool not created from the permission request")
			}
			tool, _ := lastTool(r.events, ids[0])
			if tool.Status != "completed" || tool.ProviderKind != "edit" || tool.Name == "" {
				t.Errorf("tool = %+v", tool)
			}
			if !strings.HasPrefix(tool.Output, tt.output) {
				t.Errorf("tool output = %q, want prefix %q", tool.Output, tt.output)
			}
			fcs := fileChanges(r.events)
			if len(fcs) != 1 {
				t.Fatalf("fileChange events = %+v, want one (deduplicated)", fcs)
			}
			fc := fcs[0]
			if fc.Path != path || *fc.Additions != 1 || *fc.Deletions != 0 || *fc.NewText != "hello from fake llm\n" || fc.ToolCallID != ids[0] {
				t.Errorf("fileChange = %+v", fc)
			}
			if !strings.HasPrefix(fc.Diff, "--- ") || !strings.Contains(fc.Diff, "+++ b/hello-go.txt\n") || !strings.Contains(fc.Diff, "+hello from fake llm\n") {
				t.Errorf("diff = %q", fc.Diff)
			}
			if !sameText(fc.OldText, tt.oldText) {
				t.Errorf("oldText = %v, want %v", fc.OldText, tt.oldText)
			}
			if len(r.perms) != 1 {
				t.Fatalf("permission requests = %d", len(r.perms))
			}
			p := r.perms[0]
			var optIDs []string
			for _, o := range p.Options {
				optIDs = append(optIDs, o.OptionID)
			}
			if strings.Join(optIDs, ",") != strings.Join(tt.options, ",") {
				t.Errorf("options = %v, want %v", optIDs, tt.options)
			}
			if p.ToolCall.ID != ids[0] || len(p.FileChanges) != 1 || p.FileChanges[0].Path != path {
				t.Errorf("permission request = %+v", p)
			}
		})
	}
}

// TestRecordedLoadReplay: a load's replay (process 2) yields no live events.
func TestRecordedLoadReplay(t *testing.T) {
	for _, file := range []string{"claude-agent-acp.ndjson", "codex-acp.ndjson", "opencode.ndjson", "gemini.ndjson"} {
		f, err := os.ReadFile(filepath.Join("testdata", "acp", file))
		if err != nil {
			t.Fatal(err)
		}
		m := newMapper(nil)
		n := 0
		for _, line := range strings.Split(string(f), "\n") {
			var l recordedLine
			if json.Unmarshal([]byte(line), &l) != nil || l.Proc != 2 || l.Msg.Method != "session/update" {
				continue
			}
			p, err := decodeNotification(l.Msg.Params)
			if err != nil {
				t.Fatal(err)
			}
			u := &p.Update
			if u.SessionUpdate == "user_message_chunk" {
				n++
			}
			if out := m.apply(u, false); len(out.events) != 0 {
				t.Errorf("%s: replayed %s produced events", file, u.SessionUpdate)
			}
		}
		if n == 0 {
			t.Errorf("%s: no user_message_chunk in the load replay", file)
		}
		if len(m.tools) != 0 {
			t.Errorf("%s: replayed tools entered the tool map", file)
		}
	}
}
