package native

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ochat-dev/ochat/transcript"
)

// Codex CLI store (openai/codex rollout recorder, shapes checked against
// Codex 0.137 files and public fixtures back to 0.50; docs/native-stores.md §2):
//
//	$CODEX_HOME or ~/.codex
//	  sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl[.zst]
//	  sessions/rollout-*.jsonl            (very old flat layout)
//	  archived_sessions/rollout-*.jsonl   (`codex archive`)
//	  session_index.jsonl                 thread names {"id","thread_name"}; last wins
//
// Each line is {"timestamp","type","payload"}; the oldest files have bare
// ResponseItems after a {"id","timestamp","instructions"} header.

func codexHome(env Env) string {
	if env.CodexHome != "" {
		return env.CodexHome
	}
	if env.Home == "" {
		return ""
	}
	return filepath.Join(env.Home, ".codex")
}

// codexFiles lists every rollout file, deduplicated by thread file name:
// sessions/ wins over archived_sessions/, and .jsonl over .jsonl.zst.
func codexFiles(env Env) ([]string, []Diagnostic) {
	home := codexHome(env)
	if home == "" {
		return nil, nil
	}
	var diags []Diagnostic
	seen := map[string]bool{}
	var out []string
	for _, sub := range []string{"sessions", "archived_sessions"} {
		root := filepath.Join(home, sub)
		var plain, zst []string
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == root {
					return err
				}
				diags = append(diags, Diagnostic{Level: "warning", Agent: AgentCodex, Path: p, Message: fmt.Sprintf("cannot read: %v", err)})
				return nil
			}
			if d.IsDir() {
				if rel, _ := filepath.Rel(root, p); strings.Count(rel, string(os.PathSeparator)) >= 3 {
					return fs.SkipDir
				}
				return nil
			}
			n := d.Name()
			if !strings.HasPrefix(n, "rollout-") {
				return nil
			}
			switch {
			case strings.HasSuffix(n, ".jsonl"):
				plain = append(plain, p)
			case strings.HasSuffix(n, ".jsonl.zst"):
				zst = append(zst, p)
			}
			return nil
		})
		if err != nil {
			diags = append(diags, storeDiag(AgentCodex, root, err))
			continue
		}
		for _, p := range plain {
			if k := filepath.Base(p); !seen[k] {
				seen[k] = true
				out = append(out, p)
			}
		}
		for _, p := range zst {
			if k := strings.TrimSuffix(filepath.Base(p), ".zst"); !seen[k] {
				seen[k] = true
				out = append(out, p)
			}
		}
	}
	return out, diags
}

// codexThreadNames reads session_index.jsonl (last name per id wins).
func codexThreadNames(env Env) map[string]string {
	names := map[string]string{}
	home := codexHome(env)
	if home == "" {
		return names
	}
	f, err := os.Open(filepath.Join(home, "session_index.jsonl"))
	if err != nil {
		return names
	}
	defer f.Close()
	var d Diagnostics
	_ = eachLine(f, &d, func(_ int, line []byte) {
		var e struct {
			ID         string `json:"id"`
			ThreadName string `json:"thread_name"`
		}
		if json.Unmarshal(line, &e) == nil && e.ID != "" && e.ThreadName != "" {
			names[e.ID] = e.ThreadName
		}
	})
	return names
}

func listCodex(ctx context.Context, env Env, ws string, cache Cache) ([]Session, []Diagnostic) {
	files, diags := codexFiles(env)
	names := codexThreadNames(env)
	meta := func(path string, r io.Reader, size int64) (Session, bool, error) {
		// cheap filter: the first session_meta and turn_context in the head
		br := bufio.NewReaderSize(r, 64<<10)
		head, _ := br.Peek(64 << 10)
		if cwd := codexHeadCwd(head); cwd != "" && !sameDir(cwd, ws) {
			return Session{Agent: AgentCodex, Path: path, Cwd: cwd}, false, nil
		}
		return codexMeta(path, br, size, names)
	}
	ss, ds := listFiles(ctx, AgentCodex, ws, files, cache, meta, func(s Session) bool { return sameDir(s.Cwd, ws) })
	return ss, append(diags, ds...)
}

// codexHeadCwd finds the first recorded cwd in the head of a rollout.
func codexHeadCwd(head []byte) string {
	var d Diagnostics
	cwd := ""
	_ = eachLine(strings.NewReader(string(head)), &d, func(_ int, line []byte) {
		if cwd != "" {
			return
		}
		var l struct {
			Type    string `json:"type"`
			Payload struct {
				Cwd string `json:"cwd"`
			} `json:"payload"`
		}
		if json.Unmarshal(line, &l) == nil && (l.Type == "session_meta" || l.Type == "turn_context") {
			cwd = l.Payload.Cwd
		}
	})
	return cwd
}

// ReadCodex reads one Codex rollout file (.jsonl or .jsonl.zst).
func ReadCodex(path string) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read codex session: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read codex session: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read codex session %s: is a directory", path)
	}
	rd, closeFn, err := decompressFor(path, f)
	if err != nil {
		return nil, fmt.Errorf("read codex session: %w", err)
	}
	defer closeFn()
	cr := newCodexReader(path)
	cr.t.Size = fi.Size()
	if err := eachLine(rd, &cr.t.Diagnostics, cr.add); err != nil {
		cr.t.Diagnostics.problemf("read stopped: %v", err)
	}
	// thread names live beside sessions/: …/.codex/sessions/YYYY/MM/DD/file
	names := map[string]string{}
	if home := codexHomeOf(path); home != "" {
		names = codexThreadNames(Env{CodexHome: home})
	}
	t := cr.build(names)
	t.fillTimes(fi.ModTime().UnixMilli())
	return t, nil
}

func codexHomeOf(path string) string {
	for d := filepath.Dir(path); d != filepath.Dir(d); d = filepath.Dir(d) {
		if b := filepath.Base(d); b == "sessions" || b == "archived_sessions" {
			return filepath.Dir(d)
		}
	}
	return ""
}

func findCodexByID(env Env, id string) string {
	files, _ := codexFiles(env)
	for _, f := range files {
		if strings.Contains(filepath.Base(f), id) {
			return f
		}
	}
	return ""
}

type codexLine struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	// bare-era header
	ID string `json:"id"`
}

type codexPayload struct {
	Type string `json:"type"`
	// session_meta / turn_context
	ID        string `json:"id"`
	Cwd       string `json:"cwd"`
	Timestamp string `json:"timestamp"`
	Model     string `json:"model"`
	Git       *struct {
		Branch string `json:"branch"`
	} `json:"git"`
	ParentThreadID string          `json:"parent_thread_id"`
	Source         json.RawMessage `json:"source"` // "cli" | {"subagent":{"thread_spawn":{"parent_thread_id"}}} | …
	// message
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// reasoning
	Summary json.RawMessage `json:"summary"` // reasoning: [{text}]; turn_context: a string
	// calls
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
	Status    string          `json:"status"`
	Action    json.RawMessage `json:"action"`
	// event_msg
	Message       string                 `json:"message"`
	Success       *bool                  `json:"success"`
	Changes       map[string]codexChange `json:"changes"`
	Stderr        string                 `json:"stderr"`
	AggregatedOut string                 `json:"aggregated_output"`
	ExitCode      *int                   `json:"exit_code"`
	DurationMs    int64                  `json:"duration_ms"`
	NumTurns      int                    `json:"num_turns"`
	Reason        string                 `json:"reason"`
	Invocation    *struct {
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"invocation"`
	Result json.RawMessage `json:"result"`
	Item   *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
}

type codexChange struct {
	Type        string `json:"type"`
	Content     string `json:"content"`
	UnifiedDiff string `json:"unified_diff"`
	MovePath    string `json:"move_path"`
}

type codexReader struct {
	t       Transcript
	lines   []codexRec
	unknown map[string]int
	// skim is the listing mode (codex_meta.go): lines are skimmed and
	// payloads slimmed before decoding; the build is the same.
	skim bool
}

type codexRec struct {
	n   int
	ts  int64
	typ string
	p   *codexPayload
}

func newCodexReader(path string) *codexReader {
	r := &codexReader{unknown: map[string]int{}}
	r.t.Agent = AgentCodex
	r.t.Path = path
	return r
}

var codexResponseTypes = map[string]bool{
	"message": true, "reasoning": true, "function_call": true, "function_call_output": true,
	"custom_tool_call": true, "custom_tool_call_output": true, "local_shell_call": true, "web_search_call": true,
}

func (r *codexReader) add(n int, line []byte) {
	var l codexLine
	ok := false
	if r.skim {
		l, ok = skimCodexLine(line)
	} else {
		ok = validLine(line) && decodeLenient(line, &l) == nil
	}
	if !ok {
		if parts := gluedRecords(line); parts != nil {
			for _, part := range parts {
				r.add(n, part)
			}
			return
		}
		r.t.Diagnostics.SkippedLines++
		r.t.Diagnostics.problemf("line %d: not a JSON record, skipped", n)
		return
	}
	decode := func(raw []byte, p *codexPayload) error {
		if r.skim {
			raw = slimCodexPayload(raw)
		}
		return decodeLenient(raw, p)
	}
	if len(l.Payload) == 0 {
		// bare era: header line or a bare ResponseItem
		switch {
		case codexResponseTypes[l.Type]:
			var p codexPayload
			if decode(line, &p) == nil {
				r.lines = append(r.lines, codexRec{n, 0, "response_item", &p})
			}
		case l.Type == "" && l.ID != "":
			r.lines = append(r.lines, codexRec{n, parseTime(l.Timestamp), "session_meta", &codexPayload{ID: l.ID, Timestamp: l.Timestamp}})
		case l.Type == "" || bytesHasRecordType(line):
		default:
			r.unknown[l.Type]++
		}
		return
	}
	var p codexPayload
	if decode(l.Payload, &p) != nil {
		r.t.Diagnostics.SkippedLines++
		r.t.Diagnostics.problemf("line %d: payload is not an object, skipped", n)
		return
	}
	switch l.Type {
	case "session_meta", "response_item", "event_msg", "turn_context", "compacted":
		r.lines = append(r.lines, codexRec{n, parseTime(l.Timestamp), l.Type, &p})
	case "world_state", "inter_agent_communication", "inter_agent_communication_metadata", "security_risk_score", "realtime_item":
	default:
		r.unknown[l.Type]++
	}
}

func bytesHasRecordType(line []byte) bool { return strings.Contains(string(line), `"record_type"`) }

var exitCodeRe = regexp.MustCompile(`(?m)^(?:Exit code: |Process exited with code )(-?\d+)`)

// codexOutput flattens a call output (string, content items or object)
// and tells whether it reports a failure.
func codexOutput(raw json.RawMessage) (string, bool) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 {
		return "", false
	}
	var text string
	switch raw[0] {
	case '"':
		text = jsonString(raw)
		// custom tools often wrap {"output":…,"metadata":{"exit_code":…}} in the string
		if strings.HasPrefix(text, "{") {
			var w struct {
				Output   string `json:"output"`
				Metadata struct {
					ExitCode *int `json:"exit_code"`
				} `json:"metadata"`
			}
			if json.Unmarshal([]byte(text), &w) == nil && (w.Output != "" || w.Metadata.ExitCode != nil) {
				return w.Output, w.Metadata.ExitCode != nil && *w.Metadata.ExitCode != 0
			}
		}
	case '[':
		var items []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &items)
		var parts []string
		for _, it := range items {
			if it.Text != "" {
				parts = append(parts, it.Text)
			} else if strings.Contains(it.Type, "image") {
				parts = append(parts, "[image]")
			}
		}
		text = strings.Join(parts, "\n")
	case '{':
		var o struct {
			Content string `json:"content"`
			Output  string `json:"output"`
			Success *bool  `json:"success"`
		}
		_ = json.Unmarshal(raw, &o)
		text = o.Content + o.Output
		if text == "" {
			text = string(raw)
		}
		if o.Success != nil && !*o.Success {
			return text, true
		}
	}
	if m := exitCodeRe.FindStringSubmatch(text); m != nil {
		if c, _ := strconv.Atoi(m[1]); c != 0 {
			return text, true
		}
	}
	return text, false
}

func codexText(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		return jsonString(raw)
	}
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &items)
	var parts []string
	for _, it := range items {
		if it.Text != "" {
			parts = append(parts, it.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func codexImages(raw json.RawMessage) []transcript.Attachment {
	var items []struct {
		Type     string `json:"type"`
		ImageURL string `json:"image_url"`
	}
	_ = json.Unmarshal(raw, &items)
	var out []transcript.Attachment
	for _, it := range items {
		if it.Type == "input_image" {
			a := transcript.Attachment{Kind: "image"}
			if strings.HasPrefix(it.ImageURL, "data:") {
				a.MimeType = strings.TrimPrefix(strings.SplitN(it.ImageURL, ";", 2)[0], "data:")
			}
			out = append(out, a)
		}
	}
	return out
}

// build maps the records into messages.
func (r *codexReader) build(names map[string]string) *Transcript {
	t := &r.t
	t.Messages, t.Markers = nil, nil
	b := newBuilder(t, AgentCodex)
	metaSeen := false
	firstPrompt := ""
	cwd := ""
	patched := map[string]bool{}
	patches := map[string]string{} // call id → apply_patch text
	for _, rec := range r.lines {
		p, ts := rec.p, rec.ts
		id := fmt.Sprintf("L%d", rec.n)
		switch rec.typ {
		case "session_meta":
			if metaSeen {
				continue // a fork/subagent file repeats its parent's meta
			}
			metaSeen = true
			t.ID, t.Cwd = p.ID, p.Cwd
			cwd = p.Cwd
			t.ParentID = p.ParentThreadID
			if t.ParentID == "" && len(p.Source) > 0 && p.Source[0] == '{' {
				var src struct {
					Subagent struct {
						ThreadSpawn struct {
							ParentThreadID string `json:"parent_thread_id"`
						} `json:"thread_spawn"`
					} `json:"subagent"`
				}
				_ = json.Unmarshal(p.Source, &src)
				t.ParentID = src.Subagent.ThreadSpawn.ParentThreadID
			}
			if p.Git != nil {
				t.GitBranch = p.Git.Branch
			}
			if c := parseTime(p.Timestamp); c != 0 {
				t.CreatedAt = c
			}
		case "turn_context":
			if p.Model != "" {
				t.Model = p.Model
			}
			if p.Cwd != "" {
				cwd = p.Cwd
				if t.Cwd == "" {
					t.Cwd = p.Cwd
				}
			}
		case "compacted":
			b.marker("compaction", "Conversation compacted", ts)
		case "response_item":
			switch p.Type {
			case "message":
				text := codexText(p.Content)
				switch p.Role {
				case "user":
					if isScaffold(text) || strings.HasPrefix(strings.TrimSpace(text), "<") {
						continue
					}
					atts := codexImages(p.Content)
					if strings.TrimSpace(text) == "" && len(atts) == 0 {
						continue
					}
					b.user(id, ts, text, atts, false)
					if firstPrompt == "" {
						firstPrompt = text
					}
				case "assistant":
					b.text(id, ts, transcript.SegContent, text)
				}
			case "reasoning":
				var parts []string
				if s := codexText(p.Summary); s != "" {
					parts = append(parts, s)
				}
				if c := codexText(p.Content); c != "" {
					parts = append(parts, c)
				}
				b.text(id, ts, transcript.SegReasoning, strings.Join(parts, "\n\n"))
			case "function_call":
				callID := p.CallID
				if callID == "" {
					callID = id
				}
				if p.Name == "update_plan" {
					if entries, ok := codexPlan(p.Arguments); ok {
						b.plan(id, ts, callID, entries)
						continue
					}
				}
				name := p.Name
				if p.Namespace != "" {
					name = p.Namespace + "." + name
				}
				input := json.RawMessage(p.Arguments)
				if !json.Valid(input) {
					input, _ = json.Marshal(p.Arguments)
				}
				if p.Name == "apply_patch" {
					var a struct {
						Input string `json:"input"`
					}
					_ = json.Unmarshal(input, &a)
					patches[callID] = a.Input
				}
				b.tool(id, ts, transcript.Segment{Type: transcript.SegTool, ID: callID, Name: name, Input: input})
			case "custom_tool_call":
				callID := p.CallID
				if callID == "" {
					callID = id
				}
				input, _ := json.Marshal(p.Input)
				if p.Name == "apply_patch" {
					patches[callID] = p.Input
				}
				b.tool(id, ts, transcript.Segment{Type: transcript.SegTool, ID: callID, Name: p.Name, Input: input})
			case "local_shell_call":
				b.tool(id, ts, transcript.Segment{Type: transcript.SegTool, ID: orID(p.CallID, id), Name: "shell", Input: p.Action, Status: codexStatus(p.Status)})
			case "web_search_call":
				b.tool(id, ts, transcript.Segment{Type: transcript.SegTool, ID: orID(p.CallID, id), Name: "web_search", Input: p.Action, Status: codexStatus(p.Status)})
			case "function_call_output", "custom_tool_call_output":
				out, failed := codexOutput(p.Output)
				if !b.result(p.CallID, out, failed, ts) {
					t.Diagnostics.problemf("line %d: output for unknown call %s", rec.n, p.CallID)
					continue
				}
				if patch, ok := patches[p.CallID]; ok && !patched[p.CallID] && !failed {
					for _, fc := range parseApplyPatch(patch, cwd) {
						fc.ToolCallID = p.CallID
						b.fileChange(id, ts, fc)
					}
					patched[p.CallID] = true
				}
			}
		case "event_msg":
			switch p.Type {
			case "patch_apply_end":
				if p.Success != nil && !*p.Success {
					b.result(p.CallID, p.Stderr, true, ts)
					patched[p.CallID] = true
					continue
				}
				for _, fc := range codexChanges(p.Changes) {
					fc.ToolCallID = p.CallID
					b.fileChange(id, ts, fc)
				}
				patched[p.CallID] = true
			case "exec_command_end":
				if s := b.toolSeg(p.CallID); s != nil && s.Output == "" && s.Error == "" {
					failed := p.ExitCode != nil && *p.ExitCode != 0
					b.result(p.CallID, p.AggregatedOut, failed, ts)
				}
			case "mcp_tool_call_end":
				if p.Invocation != nil {
					out, failed := codexMCPResult(p.Result)
					st := transcript.ToolCompleted
					seg := transcript.Segment{Type: transcript.SegTool, ID: orID(p.CallID, id), Name: p.Invocation.Server + "." + p.Invocation.Tool, Input: p.Invocation.Arguments, Output: out}
					if failed {
						st = transcript.ToolError
						seg.Error, seg.Output = out, ""
					}
					seg.Status = string(st)
					b.tool(id, ts, seg)
				}
			case "turn_aborted":
				if b.cur >= 0 {
					t.Messages[b.cur].Status = transcript.StatusCancelled
				}
				b.marker("interrupted", p.Reason, ts)
			case "task_complete":
				if b.cur >= 0 && p.DurationMs > 0 {
					t.Messages[b.cur].DurationMs = p.DurationMs
				}
			case "thread_rolled_back":
				b.rollback(p.NumTurns)
				b.marker("rollback", fmt.Sprintf("%d turns rolled back", p.NumTurns), ts)
			case "context_compacted":
				b.marker("compaction", "Context compacted", ts)
			case "error":
				b.marker("error", p.Message, ts)
			case "item_completed":
				if p.Item != nil && p.Item.Type == "Plan" && p.Item.Text != "" {
					b.plan(id, ts, "", []transcript.PlanEntry{{Content: p.Item.Text, Status: "pending"}})
				}
			}
		}
	}
	b.finish()
	if t.ID == "" {
		t.ID = codexIDFromName(t.Path)
	}
	switch {
	case names[t.ID] != "":
		t.Title = truncate(names[t.ID], 200)
	default:
		t.Title = truncate(firstPrompt, 200)
	}
	for k, n := range r.unknown {
		t.Diagnostics.problemf("unknown line type %q (%d lines) ignored", k, n)
	}
	t.Resume = ResumeCommand(AgentCodex, t.ID, t.Path)
	return t
}

var uuidRe = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func codexIDFromName(path string) string {
	return uuidRe.FindString(filepath.Base(path))
}

func orID(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func codexStatus(s string) string {
	switch s {
	case "completed":
		return string(transcript.ToolCompleted)
	case "failed", "declined":
		return string(transcript.ToolError)
	case "in_progress", "searching":
		return string(transcript.ToolRunning)
	}
	return string(transcript.ToolPending)
}

func codexMCPResult(raw json.RawMessage) (string, bool) {
	var r struct {
		Ok *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"Ok"`
		Err json.RawMessage `json:"Err"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return string(raw), false
	}
	if len(r.Err) > 0 {
		return jsonString(r.Err) + strings.Trim(string(r.Err), `"`)[:0], true
	}
	if r.Ok == nil {
		return string(raw), false
	}
	var parts []string
	for _, c := range r.Ok.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n"), r.Ok.IsError
}

// codexPlan maps update_plan arguments {explanation?, plan:[{step,status}]}.
func codexPlan(args string) ([]transcript.PlanEntry, bool) {
	var a struct {
		Plan []struct {
			Step   string `json:"step"`
			Status string `json:"status"`
		} `json:"plan"`
	}
	if json.Unmarshal([]byte(args), &a) != nil || a.Plan == nil {
		return nil, false
	}
	out := make([]transcript.PlanEntry, 0, len(a.Plan))
	for _, e := range a.Plan {
		out = append(out, transcript.PlanEntry{Content: e.Step, Status: e.Status})
	}
	return out, true
}

// codexChanges maps patch_apply_end.changes (sorted by path).
func codexChanges(ch map[string]codexChange) []transcript.Segment {
	paths := make([]string, 0, len(ch))
	for p := range ch {
		paths = append(paths, p)
	}
	sortStrings(paths)
	var out []transcript.Segment
	for _, p := range paths {
		c := ch[p]
		fc := transcript.Segment{Path: p}
		switch c.Type {
		case "add":
			fc.Additions, fc.Deletions = intp(countLines(c.Content)), intp(0)
			fc.NewText = strp(c.Content)
		case "delete":
			fc.Additions, fc.Deletions = intp(0), intp(countLines(c.Content))
			fc.OldText = strp(c.Content)
		default:
			a, d := countPatch(c.UnifiedDiff)
			fc.Additions, fc.Deletions, fc.Diff = intp(a), intp(d), c.UnifiedDiff
			if c.MovePath != "" {
				fc.Path = c.MovePath
			}
		}
		out = append(out, fc)
	}
	return out
}

// parseApplyPatch reads the apply_patch grammar (*** Begin Patch, *** Add
// File:, *** Delete File:, *** Update File: [*** Move to:], hunks) into
// fileChanges; relative paths are joined to cwd.
func parseApplyPatch(patch, cwd string) []transcript.Segment {
	var out []transcript.Segment
	var cur *transcript.Segment
	var add, del int
	flush := func() {
		if cur != nil {
			cur.Additions, cur.Deletions = intp(add), intp(del)
			out = append(out, *cur)
		}
		cur, add, del = nil, 0, 0
	}
	abs := func(p string) string {
		p = strings.TrimSpace(p)
		if !filepath.IsAbs(p) && cwd != "" {
			p = filepath.Join(cwd, p)
		}
		return p
	}
	for _, l := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(l, "*** Add File: "):
			flush()
			cur = &transcript.Segment{Path: abs(l[len("*** Add File: "):])}
		case strings.HasPrefix(l, "*** Delete File: "):
			flush()
			cur = &transcript.Segment{Path: abs(l[len("*** Delete File: "):])}
		case strings.HasPrefix(l, "*** Update File: "):
			flush()
			cur = &transcript.Segment{Path: abs(l[len("*** Update File: "):])}
		case strings.HasPrefix(l, "*** Move to: "):
			if cur != nil {
				cur.Path = abs(l[len("*** Move to: "):])
			}
		case strings.HasPrefix(l, "***"):
		case cur != nil && strings.HasPrefix(l, "+"):
			add++
		case cur != nil && strings.HasPrefix(l, "-"):
			del++
		}
	}
	flush()
	return out
}
