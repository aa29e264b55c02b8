package native

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ochat-dev/ochat/transcript"
)

// pi coding agent store (badlogic/pi-mono session-manager.ts, session
// format v1–v3; docs/native-stores.md §5):
//
//	$PI_CODING_AGENT_SESSION_DIR | $PI_CODING_AGENT_DIR/sessions | ~/.pi/agent/sessions
//	  --<cwd without leading '/', '/' '\' ':' → '-'>--/<ISO ts>_<uuid>.jsonl
//
// Line 1 is {"type":"session","version":3,"id","cwd"}; entries carry
// id/parentId (v2+) and form a tree: the visible branch is the path from the
// last entry to the root.

func piSessionsDir(env Env) string {
	switch {
	case env.PiSessionDir != "":
		return env.PiSessionDir
	case env.PiAgentDir != "":
		return filepath.Join(env.PiAgentDir, "sessions")
	case env.Home != "":
		return filepath.Join(env.Home, ".pi", "agent", "sessions")
	}
	return ""
}

// PiDirName is the folder pi keeps a cwd's sessions in.
func PiDirName(cwd string) string {
	s := strings.TrimPrefix(cwd, "/")
	s = strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(s)
	return "--" + s + "--"
}

func listPi(ctx context.Context, env Env, ws string, cache Cache) ([]Session, []Diagnostic) {
	root := piSessionsDir(env)
	if root == "" {
		return nil, nil
	}
	if _, err := os.Stat(root); err != nil {
		return nil, []Diagnostic{storeDiag(AgentPi, root, err)}
	}
	files, _ := filepath.Glob(filepath.Join(root, PiDirName(ws), "*.jsonl"))
	// the dir name is lossy (/a-b vs /a/b): confirm with the header cwd
	return listFiles(ctx, AgentPi, ws, files, cache, piMeta, func(s Session) bool { return sameDir(s.Cwd, ws) })
}

// piMeta is the pi listing metadata: the full reader (the active branch
// decides what counts, so the listing maps the session like Read does).
func piMeta(path string, r io.Reader, size int64) (Session, bool, error) {
	pr := newPiReader(path)
	pr.t.Size = size
	err := eachLine(r, &pr.t.Diagnostics, pr.add)
	t := pr.build()
	return t.Session, len(t.Messages) > 0, err
}

func findPiByID(env Env, id string) string {
	root := piSessionsDir(env)
	if root == "" {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(root, "*", "*_"+id+".jsonl"))
	if len(m) > 0 {
		return m[0]
	}
	return ""
}

// ReadPi reads one pi session file.
func ReadPi(path string) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read pi session: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read pi session: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read pi session %s: is a directory", path)
	}
	pr := newPiReader(path)
	pr.t.Size = fi.Size()
	if err := eachLine(f, &pr.t.Diagnostics, pr.add); err != nil {
		pr.t.Diagnostics.problemf("read stopped: %v", err)
	}
	t := pr.build()
	t.fillTimes(fi.ModTime().UnixMilli())
	return t, nil
}

type piEntry struct {
	n         int
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	ParentID  string          `json:"parentId"`
	Timestamp string          `json:"timestamp"`
	Message   json.RawMessage `json:"message"`
	Summary   string          `json:"summary"`
	Name      string          `json:"name"`
	ModelID   string          `json:"modelId"`
	Cwd       string          `json:"cwd"`
	Content   json.RawMessage `json:"content"`
	Display   bool            `json:"display"`
}

type piMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Model        string          `json:"model"`
	StopReason   string          `json:"stopReason"`
	ErrorMessage string          `json:"errorMessage"`
	ToolCallID   string          `json:"toolCallId"`
	ToolName     string          `json:"toolName"`
	IsError      bool            `json:"isError"`
	Details      struct {
		Diff string `json:"diff"`
	} `json:"details"`
	Command  string `json:"command"`
	Output   string `json:"output"`
	ExitCode *int   `json:"exitCode"`
	Summary  string `json:"summary"`
}

type piBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	MimeType  string          `json:"mimeType"`
	Data      string          `json:"data"`
}

type piReader struct {
	t       Transcript
	entries []*piEntry
	byID    map[string]int
	name    string
}

func newPiReader(path string) *piReader {
	r := &piReader{byID: map[string]int{}}
	r.t.Agent = AgentPi
	r.t.Path = path
	return r
}

func (r *piReader) add(n int, line []byte) {
	var e piEntry
	if !validLine(line) || decodeLenient(line, &e) != nil || e.Type == "" {
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
	e.n = n
	switch e.Type {
	case "session":
		if r.t.ID == "" {
			r.t.ID, r.t.Cwd = e.ID, e.Cwd
			r.t.CreatedAt = parseTime(e.Timestamp)
		}
		return
	case "session_info":
		if e.Name != "" {
			r.name = e.Name
		}
	case "model_change":
		if e.ModelID != "" {
			r.t.Model = e.ModelID
		}
	}
	if e.ID != "" {
		if _, dup := r.byID[e.ID]; dup {
			return
		}
		r.byID[e.ID] = len(r.entries)
	}
	r.entries = append(r.entries, &e)
}

// branch returns the entries of the active branch in order: for a tree
// (v2+) the path from the last entry with an id to the root; for v1 files
// (no ids) every entry.
func (r *piReader) branch() []*piEntry {
	leaf := -1
	for i := len(r.entries) - 1; i >= 0; i-- {
		if r.entries[i].ID != "" {
			leaf = i
			break
		}
	}
	if leaf < 0 {
		return r.entries
	}
	var path []*piEntry
	seen := map[int]bool{}
	for cur := leaf; cur >= 0 && !seen[cur]; {
		seen[cur] = true
		e := r.entries[cur]
		path = append(path, e)
		p, ok := r.byID[e.ParentID]
		if !ok || e.ParentID == "" {
			if e.ParentID != "" {
				r.t.Diagnostics.problemf("entry %s: parent %s not found", e.ID, e.ParentID)
			}
			break
		}
		cur = p
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

func piBlocks(raw json.RawMessage) []piBlock {
	if len(raw) > 0 && raw[0] == '"' {
		return []piBlock{{Type: "text", Text: jsonString(raw)}}
	}
	var bs []piBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func (r *piReader) build() *Transcript {
	t := &r.t
	t.Messages, t.Markers = nil, nil
	b := newBuilder(t, AgentPi)
	args := map[string]json.RawMessage{} // tool call id → arguments
	first := ""
	for _, e := range r.branch() {
		ts := parseTime(e.Timestamp)
		id := e.ID
		if id == "" {
			id = fmt.Sprintf("L%d", e.n)
		}
		switch e.Type {
		case "compaction":
			b.marker("compaction", e.Summary, ts)
		case "branch_summary":
			b.marker("notice", e.Summary, ts)
		case "custom_message":
			if e.Display {
				b.marker("notice", jsonString(e.Content), ts)
			}
		case "message":
			var m piMessage
			if decodeLenient(e.Message, &m) != nil {
				t.Diagnostics.problemf("line %d: unreadable message", e.n)
				continue
			}
			switch m.Role {
			case "user":
				var texts []string
				var atts []transcript.Attachment
				for _, bl := range piBlocks(m.Content) {
					switch bl.Type {
					case "text":
						texts = append(texts, bl.Text)
					case "image":
						atts = append(atts, transcript.Attachment{Kind: "image", MimeType: bl.MimeType, Size: int64(len(bl.Data)) * 3 / 4})
					}
				}
				text := strings.Join(texts, "\n")
				tt := strings.TrimSpace(text)
				if tt == "" && len(atts) == 0 {
					continue
				}
				if strings.HasPrefix(tt, "/") && !strings.Contains(tt, " ") {
					b.user(id, ts, tt, nil, true)
					continue
				}
				b.user(id, ts, text, atts, false)
				if first == "" {
					first = text
				}
			case "assistant":
				if m.Model != "" {
					t.Model = m.Model
				}
				msg := b.assistant(id, ts)
				for _, bl := range piBlocks(m.Content) {
					switch bl.Type {
					case "thinking":
						b.text(id, ts, transcript.SegReasoning, bl.Thinking)
					case "text":
						b.text(id, ts, transcript.SegContent, bl.Text)
					case "toolCall":
						args[bl.ID] = bl.Arguments
						b.tool(id, ts, transcript.Segment{Type: transcript.SegTool, ID: bl.ID, Name: bl.Name, Input: bl.Arguments})
					}
				}
				msg = &t.Messages[b.cur]
				switch m.StopReason {
				case "aborted":
					msg.Status = transcript.StatusCancelled
				case "error":
					msg.Status, msg.Error = transcript.StatusFailed, m.ErrorMessage
				}
			case "toolResult":
				var parts []string
				for _, bl := range piBlocks(m.Content) {
					if bl.Type == "text" {
						parts = append(parts, bl.Text)
					}
				}
				if !b.result(m.ToolCallID, strings.Join(parts, "\n"), m.IsError, ts) {
					t.Diagnostics.problemf("line %d: result for unknown tool call %s", e.n, m.ToolCallID)
					continue
				}
				if !m.IsError {
					if fc, ok := piFileChange(m, args[m.ToolCallID]); ok {
						fc.ToolCallID = m.ToolCallID
						b.fileChange(id, ts, fc)
					}
				}
			case "bashExecution":
				st := transcript.ToolCompleted
				seg := transcript.Segment{Type: transcript.SegTool, ID: id, Name: "bash", Output: m.Output}
				if m.ExitCode != nil && *m.ExitCode != 0 {
					st, seg.Error, seg.Output = transcript.ToolError, m.Output, ""
				}
				seg.Status = string(st)
				seg.Input, _ = json.Marshal(map[string]string{"command": m.Command})
				b.tool(id, ts, seg)
			case "compactionSummary", "branchSummary":
				b.marker("compaction", m.Summary, ts)
			}
		}
	}
	b.finish()
	t.Title = truncate(first, 200)
	if r.name != "" {
		t.Title = truncate(r.name, 200)
	}
	if t.ID == "" {
		t.ID = strings.TrimSuffix(filepath.Base(t.Path), ".jsonl")
	}
	t.Resume = ResumeCommand(AgentPi, t.ID, t.Path)
	return t
}

// piFileChange maps edit (details.diff in pi's numbered format: lines
// "+NNN text", "-NNN text", "  NNN text") and write results.
func piFileChange(m piMessage, args json.RawMessage) (transcript.Segment, bool) {
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	_ = json.Unmarshal(args, &a)
	switch m.ToolName {
	case "edit":
		if m.Details.Diff == "" || a.Path == "" {
			return transcript.Segment{}, false
		}
		add, del := countPatch(m.Details.Diff)
		return transcript.Segment{Path: a.Path, Additions: intp(add), Deletions: intp(del)}, true
	case "write":
		if a.Path == "" {
			return transcript.Segment{}, false
		}
		return transcript.Segment{Path: a.Path, Additions: intp(countLines(a.Content)), Deletions: intp(0), NewText: strp(a.Content)}, true
	}
	return transcript.Segment{}, false
}
