package native

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ochat-dev/ochat/transcript"
)

// Gemini CLI store (google-gemini/gemini-cli chatRecordingService, JSONL
// since v0.40 / April 2026, checked against 0.61 files; docs/native-stores.md §3):
//
//	$GEMINI_CLI_HOME or ~ / .gemini
//	  projects.json                         {"projects": {"/abs/root": "slug"}}
//	  tmp/<slug>/.project_root              the absolute project root
//	  tmp/<slug>/chats/session-<ts>-<id8>.jsonl   metadata line, then messages, {"$set"}, {"$rewindTo"}
//	  tmp/<slug>/chats/session-<ts>-<id8>.json    legacy: one ConversationRecord object
//
// The file holds no cwd; projectHash = sha256(project root) confirms it.

func geminiRoot(env Env) string {
	h := env.GeminiCLIHome
	if h == "" {
		h = env.Home
	}
	if h == "" {
		return ""
	}
	return filepath.Join(h, ".gemini")
}

var slugRe = regexp.MustCompile(`[^a-z0-9]+`)

// geminiSlug is the folder name Gemini CLI gives a project root (before a
// "-N" collision suffix).
func geminiSlug(root string) string {
	return strings.Trim(slugRe.ReplaceAllString(strings.ToLower(filepath.Base(root)), "-"), "-")
}

// geminiProjectDirs returns the tmp/<slug> dirs that may belong to ws and
// whether each one is known (projects.json, .project_root, sha256 name) to
// be ws's rather than guessed from the slug.
func geminiProjectDirs(env Env, ws string) (map[string]bool, []Diagnostic) {
	root := geminiRoot(env)
	if root == "" {
		return nil, nil
	}
	tmp := filepath.Join(root, "tmp")
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, []Diagnostic{storeDiag(AgentGemini, tmp, err)}
	}
	dirs := map[string]bool{}
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	if b, err := os.ReadFile(filepath.Join(root, "projects.json")); err == nil {
		_ = json.Unmarshal(b, &reg)
	}
	for p, slug := range reg.Projects {
		if sameDir(p, ws) {
			dirs[filepath.Join(tmp, slug)] = true
		}
	}
	hash := sha256.Sum256([]byte(ws))
	hashName := hex.EncodeToString(hash[:])
	slug := geminiSlug(ws)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(tmp, e.Name())
		if b, err := os.ReadFile(filepath.Join(d, ".project_root")); err == nil {
			if sameDir(strings.TrimSpace(string(b)), ws) {
				dirs[d] = true
			}
			continue
		}
		switch {
		case e.Name() == hashName:
			dirs[d] = true
		case e.Name() == slug || strings.HasPrefix(e.Name(), slug+"-"):
			if _, known := dirs[d]; !known {
				dirs[d] = false
			}
		}
	}
	return dirs, nil
}

func geminiSessionFiles(dir string) []string {
	chats := filepath.Join(dir, "chats")
	entries, err := os.ReadDir(chats)
	if err != nil {
		return nil
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name()] = true
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "session-") {
			continue
		}
		// after migration a .json and a .jsonl share a stem: the .jsonl wins
		if strings.HasSuffix(n, ".jsonl") || (strings.HasSuffix(n, ".json") && !have[n+"l"]) {
			out = append(out, filepath.Join(chats, n))
		}
	}
	return out
}

func listGemini(ctx context.Context, env Env, ws string, cache Cache) ([]Session, []Diagnostic) {
	dirs, diags := geminiProjectDirs(env, ws)
	hash := sha256.Sum256([]byte(ws))
	want := hex.EncodeToString(hash[:])
	var files []string
	known := map[string]bool{}
	for d, k := range dirs {
		for _, f := range geminiSessionFiles(d) {
			files = append(files, f)
			known[f] = k
		}
	}
	ss, ds := listFiles(ctx, AgentGemini, ws, files, cache, geminiMeta, func(s Session) bool {
		// projectHash is sha256 of the root; a guessed slug dir must match it
		return known[s.Path] || s.Cwd == want || s.Cwd == ""
	})
	for i := range ss {
		ss[i].Cwd = ws
	}
	return ss, append(diags, ds...)
}

// geminiMeta is the Gemini listing metadata: the full reader (Gemini files
// are small and rewritten by id, so there is no cheaper exact count).
func geminiMeta(path string, r io.Reader, size int64) (Session, bool, error) {
	gr := newGeminiReader(path)
	gr.t.Size = size
	err := gr.readAll(r)
	t := gr.build()
	return t.Session, len(t.Messages) > 0, err
}

func findGeminiByID(env Env, id string) string {
	root := geminiRoot(env)
	if root == "" || len(id) < 8 {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(root, "tmp", "*", "chats", "session-*-"+id[:8]+".json*"))
	// resume can leave a second, nearly empty file with the same id: take
	// the one with the most messages
	best, most := "", -1
	for _, p := range m {
		gr := newGeminiReader(p)
		if f, err := os.Open(p); err == nil {
			_ = gr.readAll(f)
			f.Close()
			if gr.t.ID == id && len(gr.order) > most {
				best, most = p, len(gr.order)
			}
		}
	}
	return best
}

// ReadGemini reads one Gemini CLI session file (.jsonl or legacy .json).
func ReadGemini(path string) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read gemini session: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read gemini session: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read gemini session %s: is a directory", path)
	}
	gr := newGeminiReader(path)
	gr.t.Size = fi.Size()
	if err := gr.readAll(f); err != nil {
		gr.t.Diagnostics.problemf("read stopped: %v", err)
	}
	t, links := gr.buildLinks()
	t.fillTimes(fi.ModTime().UnixMilli())
	t.Cwd = geminiProjectRoot(path, t.Cwd)
	// subagent chats: chats/<sessionId>/<subagentSessionId>.jsonl
	subs, _ := filepath.Glob(filepath.Join(filepath.Dir(path), t.ID, "*.jsonl"))
	for _, sp := range subs {
		st, err := ReadGemini(sp)
		if err != nil {
			t.Diagnostics.problemf("subagent %s: %v", filepath.Base(sp), err)
			continue
		}
		t.Subagents = append(t.Subagents, Subagent{ToolCallID: links[st.ID], AgentID: st.ID, Path: sp, Description: st.Title, Messages: st.Messages})
	}
	return t, nil
}

// geminiProjectRoot finds the project root of a session file in
// tmp/<dir>/chats/: the dir's .project_root, else the projects.json entry
// for the dir, else the root whose sha256 is the file's projectHash among
// those entries; "" if unknown.
func geminiProjectRoot(path, hash string) string {
	dir := filepath.Dir(filepath.Dir(path))
	if b, err := os.ReadFile(filepath.Join(dir, ".project_root")); err == nil {
		return strings.TrimSpace(string(b))
	}
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(dir)), "projects.json")); err == nil {
		_ = json.Unmarshal(b, &reg)
	}
	for root, slug := range reg.Projects {
		sum := sha256.Sum256([]byte(root))
		if slug == filepath.Base(dir) || hex.EncodeToString(sum[:]) == hash {
			return root
		}
	}
	return ""
}

type geminiMsg struct {
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	// DisplayContent is what the user typed when Content holds the
	// expansion (@file contents read into the prompt).
	DisplayContent json.RawMessage `json:"displayContent"`
	Thoughts       []struct {
		Subject     string `json:"subject"`
		Description string `json:"description"`
	} `json:"thoughts"`
	Model     string           `json:"model"`
	ToolCalls []geminiToolCall `json:"toolCalls"`
}

type geminiToolCall struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Args          json.RawMessage `json:"args"`
	Result        json.RawMessage `json:"result"`
	Status        string          `json:"status"`
	ResultDisplay json.RawMessage `json:"resultDisplay"`
	AgentID       string          `json:"agentId"` // invoke_agent: the subagent's session id
}

type geminiReader struct {
	t       Transcript
	order   []string
	msgs    map[string]json.RawMessage
	summary string
	hash    string
}

func newGeminiReader(path string) *geminiReader {
	r := &geminiReader{msgs: map[string]json.RawMessage{}}
	r.t.Agent = AgentGemini
	r.t.Path = path
	return r
}

// readAll reads a JSONL log, or a legacy JSON object (a file whose first
// byte is '{' and whose first line is not a complete object).
func (r *geminiReader) readAll(rd io.Reader) error {
	if strings.HasSuffix(r.t.Path, ".json") {
		b, err := io.ReadAll(io.LimitReader(rd, 256<<20))
		if err != nil {
			return err
		}
		r.legacy(b)
		return nil
	}
	return eachLine(rd, &r.t.Diagnostics, r.add)
}

func (r *geminiReader) legacy(b []byte) {
	var rec struct {
		SessionID   string            `json:"sessionId"`
		ProjectHash string            `json:"projectHash"`
		StartTime   string            `json:"startTime"`
		LastUpdated string            `json:"lastUpdated"`
		Summary     string            `json:"summary"`
		Messages    []json.RawMessage `json:"messages"`
	}
	if decodeLenient(b, &rec) != nil {
		// a legacy file is rewritten in place and can be caught half-written
		r.t.Diagnostics.SkippedLines++
		r.t.Diagnostics.problemf("legacy JSON session is not complete JSON (being rewritten?)")
		return
	}
	r.t.ID, r.hash, r.summary = rec.SessionID, rec.ProjectHash, rec.Summary
	r.t.CreatedAt, r.t.UpdatedAt = parseTime(rec.StartTime), parseTime(rec.LastUpdated)
	r.setMessages(rec.Messages)
}

func (r *geminiReader) setMessages(ms []json.RawMessage) {
	r.order = r.order[:0]
	r.msgs = map[string]json.RawMessage{}
	for i, m := range ms {
		var h struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(m, &h)
		if h.ID == "" {
			h.ID = fmt.Sprintf("m%d", i)
		}
		if _, ok := r.msgs[h.ID]; !ok {
			r.order = append(r.order, h.ID)
		}
		r.msgs[h.ID] = m
	}
}

func (r *geminiReader) add(n int, line []byte) {
	var h struct {
		Set         map[string]json.RawMessage `json:"$set"`
		RewindTo    *string                    `json:"$rewindTo"`
		ID          string                     `json:"id"`
		Type        string                     `json:"type"`
		SessionID   string                     `json:"sessionId"`
		ProjectHash string                     `json:"projectHash"`
		StartTime   string                     `json:"startTime"`
		LastUpdated string                     `json:"lastUpdated"`
		Summary     string                     `json:"summary"`
	}
	if !validLine(line) || decodeLenient(line, &h) != nil {
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
	switch {
	case h.Set != nil:
		if raw, ok := h.Set["messages"]; ok {
			var ms []json.RawMessage
			if json.Unmarshal(raw, &ms) == nil {
				r.setMessages(ms)
			}
		}
		if raw, ok := h.Set["summary"]; ok {
			r.summary = jsonString(raw)
		}
		if raw, ok := h.Set["lastUpdated"]; ok {
			if u := parseTime(jsonString(raw)); u > r.t.UpdatedAt {
				r.t.UpdatedAt = u
			}
		}
	case h.RewindTo != nil:
		cut := len(r.order)
		for i, id := range r.order {
			if id == *h.RewindTo {
				cut = i
				break
			}
		}
		if cut == len(r.order) {
			cut = 0 // unknown id: everything goes
		}
		for _, id := range r.order[cut:] {
			delete(r.msgs, id)
		}
		r.order = r.order[:cut]
	case h.ProjectHash != "" && h.ID == "":
		if r.t.ID == "" {
			r.t.ID = h.SessionID
			r.t.CreatedAt = parseTime(h.StartTime)
		}
		r.hash = h.ProjectHash
		if h.Summary != "" {
			r.summary = h.Summary
		}
	case h.ID != "" && h.Type != "":
		if _, ok := r.msgs[h.ID]; !ok {
			r.order = append(r.order, h.ID)
		}
		r.msgs[h.ID] = append(json.RawMessage(nil), line...)
	default:
		r.t.Diagnostics.problemf("line %d: unknown record ignored", n)
	}
}

// geminiParts flattens PartListUnion content (string | Part | Part[]).
func geminiParts(raw json.RawMessage) (text string, onlyResponses bool, atts []transcript.Attachment) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false, nil
	}
	if raw[0] == '"' {
		return jsonString(raw), false, nil
	}
	if raw[0] == '{' {
		raw = append(append(json.RawMessage{'['}, raw...), ']')
	}
	var parts []struct {
		Text             string          `json:"text"`
		FunctionResponse json.RawMessage `json:"functionResponse"`
		InlineData       *struct {
			MimeType string `json:"mimeType"`
			Data     string `json:"data"`
		} `json:"inlineData"`
	}
	_ = json.Unmarshal(raw, &parts)
	var texts []string
	responses := 0
	for _, p := range parts {
		switch {
		case p.FunctionResponse != nil:
			responses++
		case p.InlineData != nil:
			atts = append(atts, transcript.Attachment{Kind: "image", MimeType: p.InlineData.MimeType, Size: int64(len(p.InlineData.Data)) * 3 / 4})
		case p.Text != "":
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), responses > 0 && len(texts) == 0, atts
}

// geminiReferencedFiles lists the files an @-expansion read into a prompt
// ("Content from @<path>:" headers, Gemini CLI's atCommandProcessor).
func geminiReferencedFiles(expanded string) []transcript.Attachment {
	var atts []transcript.Attachment
	const head = "Content from @"
	for rest := expanded; ; {
		i := strings.Index(rest, head)
		if i < 0 {
			return atts
		}
		rest = rest[i+len(head):]
		j := strings.Index(rest, ":\n")
		if j <= 0 || strings.Contains(rest[:j], "\n") {
			continue
		}
		p := rest[:j]
		atts = append(atts, transcript.Attachment{Kind: "file", Name: filepath.Base(p), Path: p})
		rest = rest[j:]
	}
}

type geminiFunctionPart struct {
	ID       string                     `json:"id"`
	Name     string                     `json:"name"`
	Args     json.RawMessage            `json:"args"`
	Response map[string]json.RawMessage `json:"response"`
}

// geminiFunctionParts returns the functionCall or functionResponse parts
// of PartListUnion content.
func geminiFunctionParts(raw json.RawMessage, kind string) []geminiFunctionPart {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' || !bytes.Contains(raw, []byte(`"`+kind+`"`)) {
		return nil
	}
	var parts []map[string]json.RawMessage
	_ = json.Unmarshal(raw, &parts)
	var out []geminiFunctionPart
	for _, p := range parts {
		if v, ok := p[kind]; ok {
			var f geminiFunctionPart
			if decodeLenient(v, &f) == nil {
				out = append(out, f)
			}
		}
	}
	return out
}

func geminiToolOutput(tc geminiToolCall) string {
	var res []struct {
		FunctionResponse struct {
			Response struct {
				Output string `json:"output"`
				Error  string `json:"error"`
			} `json:"response"`
		} `json:"functionResponse"`
	}
	_ = json.Unmarshal(tc.Result, &res)
	var parts []string
	for _, r := range res {
		if o := r.FunctionResponse.Response.Output + r.FunctionResponse.Response.Error; o != "" {
			parts = append(parts, o)
		}
	}
	if len(parts) == 0 {
		if s := jsonString(tc.ResultDisplay); s != "" {
			return s
		}
	}
	return strings.Join(parts, "\n")
}

func (r *geminiReader) build() *Transcript {
	t, _ := r.buildLinks()
	return t
}

// buildLinks is build that also returns subagent session id → invoke_agent
// call id.
func (r *geminiReader) buildLinks() (*Transcript, map[string]string) {
	t := &r.t
	t.Messages, t.Markers = nil, nil
	b := newBuilder(t, AgentGemini)
	first := ""
	for _, id := range r.order {
		var m geminiMsg
		if decodeLenient(r.msgs[id], &m) != nil {
			t.Diagnostics.problemf("message %s unreadable", id)
			continue
		}
		if m.ID == "" {
			m.ID = id
		}
		ts := parseTime(m.Timestamp)
		switch m.Type {
		case "user":
			text, onlyResp, atts := geminiParts(m.Content)
			tt := strings.TrimSpace(text)
			for _, fr := range geminiFunctionParts(m.Content, "functionResponse") {
				out := jsonString(fr.Response["output"]) + jsonString(fr.Response["error"])
				b.result(fr.ID, out, fr.Response["error"] != nil, ts)
			}
			if onlyResp || isScaffold(tt) || (tt == "" && len(atts) == 0) {
				continue
			}
			if strings.HasPrefix(tt, "/") && !strings.Contains(tt, " ") || strings.HasPrefix(tt, "/chat ") {
				b.user(m.ID, ts, tt, nil, true)
				continue
			}
			if shown, _, _ := geminiParts(m.DisplayContent); strings.TrimSpace(shown) != "" && shown != text {
				// show and title with what was typed; the expansion stays
				// as hidden context after it
				b.user(m.ID, ts, shown, append(atts, geminiReferencedFiles(text)...), false)
				b.user(m.ID+"#context", ts, text, nil, true)
				text = shown
			} else {
				b.user(m.ID, ts, text, atts, false)
			}
			if first == "" {
				first = text
			}
		case "gemini":
			if m.Model != "" {
				t.Model = m.Model
			}
			b.assistant(m.ID, ts)
			for _, th := range m.Thoughts {
				s := th.Description
				if th.Subject != "" {
					s = th.Subject + ": " + s
				}
				b.text(m.ID, ts, transcript.SegReasoning, s)
			}
			text, _, _ := geminiParts(m.Content)
			b.text(m.ID, ts, transcript.SegContent, text)
			for _, tc := range m.ToolCalls {
				r.toolCall(b, m.ID, ts, tc)
			}
			// a $set.messages rewrite stores calls as API functionCall parts
			for k, fc := range geminiFunctionParts(m.Content, "functionCall") {
				if fc.ID == "" {
					fc.ID = fmt.Sprintf("%s#%d", m.ID, k)
				}
				if b.toolSeg(fc.ID) == nil {
					b.tool(m.ID, ts, transcript.Segment{Type: transcript.SegTool, ID: fc.ID, Name: fc.Name, Input: fc.Args})
				}
			}
		case "info", "warning", "error":
			text, _, _ := geminiParts(m.Content)
			b.marker(map[string]string{"info": "notice", "warning": "notice", "error": "error"}[m.Type], text, ts)
		}
	}
	b.finish()
	t.Title = truncate(first, 200)
	if r.summary != "" {
		t.Title = truncate(r.summary, 200)
	}
	if t.ID == "" {
		t.ID = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(t.Path), ".jsonl"), ".json")
	}
	t.Cwd = r.hash // listing compares it with sha256(workspace); callers replace it
	t.Resume = ResumeCommand(AgentGemini, t.ID, t.Path)
	return t, b.children
}

func (r *geminiReader) toolCall(b *builder, msgID string, ts int64, tc geminiToolCall) {
	if tc.Name == "write_todos" {
		var a struct {
			Todos []struct {
				Description string `json:"description"`
				Status      string `json:"status"`
			} `json:"todos"`
		}
		if json.Unmarshal(tc.Args, &a) == nil && a.Todos != nil {
			entries := make([]transcript.PlanEntry, 0, len(a.Todos))
			for _, e := range a.Todos {
				entries = append(entries, transcript.PlanEntry{Content: e.Description, Status: e.Status})
			}
			b.plan(msgID, ts, tc.ID, entries)
			return
		}
	}
	seg := transcript.Segment{Type: transcript.SegTool, ID: tc.ID, Name: tc.Name, Input: tc.Args}
	if tc.AgentID != "" {
		b.children[tc.AgentID] = tc.ID
	}
	out := geminiToolOutput(tc)
	switch tc.Status {
	case "success":
		seg.Status, seg.Output = string(transcript.ToolCompleted), out
	case "error", "cancelled":
		seg.Status, seg.Error = string(transcript.ToolError), out
		if seg.Error == "" {
			seg.Error = tc.Status
		}
	case "executing":
		seg.Status = string(transcript.ToolRunning)
	default:
		seg.Status = string(transcript.ToolPending)
	}
	b.tool(msgID, ts, seg)
	if tc.Status != "success" {
		return
	}
	var fd struct {
		FileDiff        string  `json:"fileDiff"`
		FilePath        string  `json:"filePath"`
		OriginalContent *string `json:"originalContent"`
		NewContent      *string `json:"newContent"`
		DiffStat        *struct {
			Added   int `json:"model_added_lines"`
			Removed int `json:"model_removed_lines"`
		} `json:"diffStat"`
	}
	if len(tc.ResultDisplay) == 0 || tc.ResultDisplay[0] != '{' || json.Unmarshal(tc.ResultDisplay, &fd) != nil || (fd.FileDiff == "" && fd.FilePath == "") {
		return
	}
	fc := transcript.Segment{Path: fd.FilePath, Diff: fd.FileDiff, ToolCallID: tc.ID, OldText: fd.OriginalContent, NewText: fd.NewContent}
	if fc.Path == "" {
		var a struct {
			FilePath string `json:"file_path"`
		}
		_ = json.Unmarshal(tc.Args, &a)
		fc.Path = a.FilePath
	}
	if fd.DiffStat != nil {
		fc.Additions, fc.Deletions = intp(fd.DiffStat.Added), intp(fd.DiffStat.Removed)
	} else {
		a, d := countPatch(fd.FileDiff)
		fc.Additions, fc.Deletions = intp(a), intp(d)
	}
	b.fileChange(msgID, ts, fc)
}
