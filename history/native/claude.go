package native

import (
	"bytes"
	"encoding/json"
	"fmt"
	sjson "github.com/segmentio/encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ochat-dev/ochat/transcript"
)

// Claude Code store (closed source; shapes from Claude Code 2.0–2.1.83 files
// and public fixtures, see docs/native-stores.md §1):
//
//	$CLAUDE_CONFIG_DIR (comma-separated list) or ~/.claude, ~/.config/claude
//	  projects/<encoded cwd>/<sessionId>.jsonl
//	  projects/<encoded cwd>/<sessionId>/subagents/agent-<agentId>.jsonl (+ .meta.json)
//	  projects/<encoded cwd>/agent-<agentId>.jsonl  (old flat sidechain layout)

// claudeProjectsDirs returns every projects/ dir to look in.
func claudeProjectsDirs(env Env) []string {
	var roots []string
	if env.ClaudeConfigDir != "" {
		for _, d := range strings.Split(env.ClaudeConfigDir, ",") {
			if d = strings.TrimSpace(d); d != "" {
				roots = append(roots, d)
			}
		}
	} else if env.Home != "" {
		roots = append(roots, filepath.Join(env.Home, ".claude"), filepath.Join(env.Home, ".config", "claude"))
	}
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		out = append(out, filepath.Join(r, "projects"))
	}
	return out
}

var nonAlnum = regexp.MustCompile(`[^a-zA-Z0-9]`)

// claudeMaxDirName is the length after which Claude Code truncates the
// encoded cwd and appends "-<hash>" (the hash differs between the native
// CLI and the Node SDK, so only the prefix can be matched).
const claudeMaxDirName = 200

// ClaudeProjectDirName encodes a cwd the way Claude Code names its project
// folder: every byte that is not an ASCII letter or digit becomes '-'. For a
// result longer than 200 characters only the first 200 are returned and
// long is true: the real folder is that prefix + "-" + a hash.
func ClaudeProjectDirName(cwd string) (name string, long bool) {
	// JavaScript replaces per UTF-16 unit; non-ASCII runes become one '-'
	// each per unit. Map runes, counting astral runes twice.
	var sb strings.Builder
	for _, r := range cwd {
		switch {
		case r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			sb.WriteRune(r)
		case r > 0xFFFF:
			sb.WriteString("--")
		default:
			sb.WriteByte('-')
		}
	}
	name = sb.String()
	if len(name) > claudeMaxDirName {
		return name[:claudeMaxDirName], true
	}
	return name, false
}

// claudeSessionFiles lists the candidate session files of workspace
// (unconfirmed: the caller checks the recorded cwd).
func claudeSessionFiles(env Env, workspace string) (files []string, diags []Diagnostic) {
	name, long := ClaudeProjectDirName(workspace)
	for _, pd := range claudeProjectsDirs(env) {
		entries, err := os.ReadDir(pd)
		if err != nil {
			diags = append(diags, storeDiag(AgentClaude, pd, err))
			continue
		}
		for _, e := range entries {
			n := e.Name()
			if !(n == name && !long) && !(long && strings.HasPrefix(n, name+"-")) {
				continue
			}
			dir := filepath.Join(pd, n)
			fs, err := os.ReadDir(dir)
			if err != nil {
				diags = append(diags, Diagnostic{Level: "warning", Agent: AgentClaude, Path: dir, Message: fmt.Sprintf("cannot read project folder: %v", err)})
				continue
			}
			for _, f := range fs {
				fn := f.Name()
				if !strings.HasSuffix(fn, ".jsonl") || strings.HasPrefix(fn, "agent-") {
					continue
				}
				files = append(files, filepath.Join(dir, fn))
			}
		}
	}
	return files, diags
}

// claudeLine is one decoded line of a Claude Code transcript. Unknown
// fields are ignored; Message and ToolUseResult are decoded on demand.
type claudeLine struct {
	Type              string          `json:"type"`
	Subtype           string          `json:"subtype"`
	UUID              string          `json:"uuid"`
	ParentUUID        string          `json:"parentUuid"`
	LogicalParentUUID string          `json:"logicalParentUuid"`
	IsSidechain       bool            `json:"isSidechain"`
	IsMeta            bool            `json:"isMeta"`
	IsCompactSummary  bool            `json:"isCompactSummary"`
	IsAPIErrorMessage bool            `json:"isApiErrorMessage"`
	Cwd               string          `json:"cwd"`
	SessionID         string          `json:"sessionId"`
	GitBranch         string          `json:"gitBranch"`
	Timestamp         string          `json:"timestamp"`
	Message           json.RawMessage `json:"message"`
	ToolUseResult     json.RawMessage `json:"toolUseResult"`
	Content           json.RawMessage `json:"content"`
	CompactMetadata   *struct {
		Trigger   string `json:"trigger"`
		PreTokens int64  `json:"preTokens"`
	} `json:"compactMetadata"`
	DurationMs  int64  `json:"durationMs"`
	Summary     string `json:"summary"`
	CustomTitle string `json:"customTitle"`
	AITitle     string `json:"aiTitle"`
	AgentName   string `json:"agentName"`
	LastPrompt  string `json:"lastPrompt"`
	Operation   string `json:"operation"`
	AgentID     string `json:"agentId"`

	// decoded once at ingest (Message is then dropped)
	msg    claudeMessage
	text   string
	blocks []claudeBlock
	tur    *claudeTUR // toolUseResult of an edit or subagent call
}

// claudeTUR is what the reader uses of a toolUseResult object.
type claudeTUR struct {
	Type     string // Write: "create" | "update"
	FilePath string
	Content  string
	Diff     string // structuredPatch lines joined
	Add, Del int
	Patch    bool // structuredPatch present
	AgentID  string
}

func parseClaudeToolUseResult(raw []byte) *claudeTUR {
	var res struct {
		Type            string `json:"type"`
		FilePath        string `json:"filePath"`
		Content         string `json:"content"`
		AgentID         string `json:"agentId"`
		StructuredPatch []struct {
			Lines []string `json:"lines"`
		} `json:"structuredPatch"`
	}
	if len(raw) == 0 || raw[0] != '{' || decodeLenient(raw, &res) != nil {
		return nil
	}
	t := &claudeTUR{Type: res.Type, FilePath: res.FilePath, AgentID: res.AgentID, Patch: res.StructuredPatch != nil}
	if res.Type == "create" {
		t.Content = res.Content
	}
	var diff strings.Builder
	for _, h := range res.StructuredPatch {
		for _, ln := range h.Lines {
			switch {
			case strings.HasPrefix(ln, "+"):
				t.Add++
			case strings.HasPrefix(ln, "-"):
				t.Del++
			}
			diff.WriteString(ln)
			diff.WriteByte('\n')
		}
	}
	t.Diff = diff.String()
	return t
}

type claudeMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Model      string          `json:"model"`
	Content    json.RawMessage `json:"content"`
	StopReason string          `json:"stop_reason"`
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	out       string          // tool_result: flattened Content, computed at ingest
	// listing skim only: raw text/thinking values until finishSkimBlocks
	rawText, rawThinking []byte
	Source               *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// claudeKnownTypes are line types the reader understands or deliberately
// ignores; any other type is noted once in the diagnostics.
var claudeKnownTypes = map[string]bool{
	"user": true, "assistant": true, "system": true, "summary": true, "custom-title": true, "ai-title": true,
	"agent-name": true, "last-prompt": true, "file-history-snapshot": true, "queue-operation": true,
	"attachment": true, "progress": true, "permission-mode": true, "mode": true, "pr-link": true,
	"frame-link": true, "worktree-state": true, "relocated": true, "bridge-session": true, "atis-latch": true,
	"attribution-snapshot": true, "started": true, "result": true, "tag": true,
}

// blocks decodes message content that is either a string or a block array.
func claudeBlocks(raw json.RawMessage) (text string, blocks []claudeBlock, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, true
	}
	if raw[0] == '"' {
		return jsonString(raw), nil, true
	}
	if err := sjson.Unmarshal(raw, &blocks); err != nil {
		return "", nil, false
	}
	return "", blocks, true
}

// flattenToolResult turns tool_result content (string or blocks) into text.
func flattenToolResult(raw json.RawMessage) string {
	text, blocks, _ := claudeBlocks(raw)
	if blocks == nil {
		return text
	}
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "image":
			parts = append(parts, "[image]")
		}
	}
	return strings.Join(parts, "\n")
}

// claudeUserText classifies the text of a user line: the visible prompt
// text, whether it is a slash command, an interruption marker, or scaffolding.
func claudeUserText(s string) (text string, kind string) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return "", "empty"
	case strings.HasPrefix(t, "[Request interrupted by user"):
		return t, "interrupted"
	case strings.HasPrefix(t, "<command-name>"):
		name := between(t, "<command-name>", "</command-name>")
		args := between(t, "<command-args>", "</command-args>")
		return strings.TrimSpace(name + " " + args), "command"
	case isScaffold(t):
		return "", "scaffold"
	}
	return s, "prompt"
}

// stripReminders removes <system-reminder>…</system-reminder> spans that
// the CLI injects into user text.
func stripReminders(s string) string {
	const open, close = "<system-reminder>", "</system-reminder>"
	for {
		i := strings.Index(s, open)
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], close)
		if j < 0 {
			return s[:i]
		}
		s = s[:i] + s[i+j+len(close):]
	}
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	if j := strings.Index(s, b); j >= 0 {
		return s[:j]
	}
	return s
}

// claudeReader accumulates the lines of one session file.
type claudeReader struct {
	t   Transcript
	sub bool // a subagent file: its lines are all sidechain lines
	// side holds in-file sidechain lines by agentId (old layout)
	side      map[string]*claudeReader
	sideOrder []string
	lines     []*claudeLine // conversation lines with a uuid, file order
	byUUID    map[string]int
	unknown   map[string]int
	titles    struct{ custom, ai, agentName, summary, firstPrompt string }
	lastLine  int
	// skim is the listing mode: messages are skimmed (skimClaudeMessage),
	// not decoded; counts, title, model and id come out as in a full read.
	skim bool
	// lastSessionID is the sessionId of the last main-thread line;
	// nameIsSession is set when some line's sessionId is the file name.
	lastSessionID string
	nameIsSession bool
	// firstOtherID is the first main-thread sessionId that is not the
	// file's own: in a fork, the id of the session it was copied from.
	firstOtherID string
}

func newClaudeReader(path string) *claudeReader {
	r := &claudeReader{byUUID: map[string]int{}, unknown: map[string]int{}}
	r.t.Agent = AgentClaude
	r.t.Path = path
	r.t.ID = strings.TrimSuffix(filepath.Base(path), ".jsonl")
	return r
}

// add takes one line. Bad lines are counted, never fatal.
func (r *claudeReader) add(n int, line []byte) {
	l, sm, ok := skimClaudeLineMode(line, r.skim)
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
	if !claudeKnownTypes[l.Type] {
		r.unknown[l.Type]++
	}
	if l.IsSidechain && !r.sub {
		// old CLIs wrote subagent lines into the main file: keep them apart
		key := l.AgentID
		if key == "" {
			key = "sidechain"
		}
		if r.side == nil {
			r.side = map[string]*claudeReader{}
		}
		sr := r.side[key]
		if sr == nil {
			sr = newClaudeReader(r.t.Path)
			sr.sub = true
			sr.skim = r.skim
			r.side[key] = sr
			r.sideOrder = append(r.sideOrder, key)
		}
		sr.add(n, line)
		return
	}
	switch l.Type {
	case "custom-title":
		r.titles.custom = l.CustomTitle
	case "ai-title":
		r.titles.ai = l.AITitle
	case "agent-name":
		r.titles.agentName = l.AgentName
	case "summary":
		r.titles.summary = l.Summary
	}
	if l.Cwd != "" && r.t.Cwd == "" {
		r.t.Cwd = l.Cwd
	}
	if l.GitBranch != "" {
		r.t.GitBranch = l.GitBranch
	}
	if l.SessionID != "" && !r.sub {
		r.lastSessionID = l.SessionID
		if l.SessionID == r.nameID() {
			r.nameIsSession = true
		} else if r.firstOtherID == "" {
			r.firstOtherID = l.SessionID
		}
	}
	if l.UUID == "" {
		return
	}
	if _, dup := r.byUUID[l.UUID]; dup {
		return // copied history (fork/resume into a new file, sidechain replay)
	}
	switch l.Type {
	case "user", "assistant", "system":
		// decode the message once; keep private copies of the raw values
		// the build needs (the line buffer is reused)
		if r.skim && sm.present {
			if !sm.ok {
				r.t.Diagnostics.SkippedLines++
				r.t.Diagnostics.problemf("line %d: message is not valid JSON, skipped", n)
				l = claudeLine{Type: "bookkeeping", UUID: l.UUID, ParentUUID: l.ParentUUID, LogicalParentUUID: l.LogicalParentUUID, IsSidechain: l.IsSidechain}
				break
			}
			l.msg, l.text, l.blocks = sm.msg, sm.text, sm.blocks
			finishSkimBlocks(l.blocks, l.Type == "user")
			l.Message = json.RawMessage("{}")
		} else if r.skim {
			l.Message = nil
		} else if len(l.Message) > 0 && string(l.Message) != "null" {
			ok := decodeLenient(l.Message, &l.msg) == nil
			if ok {
				l.text, l.blocks, ok = claudeBlocks(l.msg.Content)
				l.msg.Content = nil
				for i := range l.blocks {
					if l.blocks[i].Type == "tool_result" {
						l.blocks[i].out = flattenToolResult(l.blocks[i].Content)
						l.blocks[i].Content = nil
					}
				}
			}
			if !ok {
				r.t.Diagnostics.SkippedLines++
				r.t.Diagnostics.problemf("line %d: message is not valid JSON, skipped", n)
				l = claudeLine{Type: "bookkeeping", UUID: l.UUID, ParentUUID: l.ParentUUID, LogicalParentUUID: l.LogicalParentUUID, IsSidechain: l.IsSidechain}
				break
			}
			l.Message = json.RawMessage("{}")
		} else {
			l.Message = nil
		}
		if r.skim {
			// markers, file changes and subagent links do not count
			l.Content, l.ToolUseResult = nil, nil
			break
		}
		l.Content = bytes.Clone(l.Content)
		if bytes.Contains(l.ToolUseResult, []byte(`"structuredPatch"`)) || bytes.Contains(l.ToolUseResult, []byte(`"agentId"`)) {
			l.tur = parseClaudeToolUseResult(l.ToolUseResult)
		}
		l.ToolUseResult = nil
	default:
		// keep only the chain links of bookkeeping lines
		l = claudeLine{Type: l.Type, UUID: l.UUID, ParentUUID: l.ParentUUID, LogicalParentUUID: l.LogicalParentUUID, IsSidechain: l.IsSidechain}
	}
	r.byUUID[l.UUID] = len(r.lines)
	r.lines = append(r.lines, &l)
}

// skimClaudeLine reads the top-level fields of one line without decoding
// the large values (message, toolUseResult stay raw and alias line).
func skimClaudeLine(line []byte) (claudeLine, bool) {
	l, _, ok := skimClaudeLineMode(line, false)
	return l, ok
}

// skimClaudeLineMode is skimClaudeLine that, with skim set, also parses
// the message in place (the listing's single pass; see claude_skim.go).
func skimClaudeLineMode(line []byte, skim bool) (claudeLine, claudeSkimMsg, bool) {
	var l claudeLine
	var sm claudeSkimMsg
	if !validLine(line) {
		return l, sm, false
	}
	var hook valueHook
	if skim {
		hook = func(k, b []byte, i int) (int, bool, bool) {
			if string(k) != "message" {
				return 0, false, false
			}
			e, m, ok := skimClaudeMessageAt(b, i)
			sm = m
			return e, true, ok
		}
	}
	str := func(v []byte) string {
		if s, ok := rawString(v); ok {
			return s
		}
		return jsonString(v)
	}
	start := skipSpace(line, 0)
	end, ok := objectFieldsHook(line, start, hook, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			l.Type = str(v)
		case "subtype":
			l.Subtype = str(v)
		case "uuid":
			l.UUID = str(v)
		case "parentUuid":
			l.ParentUUID = str(v)
		case "logicalParentUuid":
			l.LogicalParentUUID = str(v)
		case "isSidechain":
			l.IsSidechain = string(v) == "true"
		case "isMeta":
			l.IsMeta = string(v) == "true"
		case "isCompactSummary":
			l.IsCompactSummary = string(v) == "true"
		case "isApiErrorMessage":
			l.IsAPIErrorMessage = string(v) == "true"
		case "cwd":
			l.Cwd = str(v)
		case "sessionId":
			l.SessionID = str(v)
		case "gitBranch":
			l.GitBranch = str(v)
		case "timestamp":
			l.Timestamp = str(v)
		case "message":
			l.Message = v
		case "toolUseResult":
			l.ToolUseResult = v
		case "content":
			l.Content = v
		case "compactMetadata":
			_ = decodeLenient(v, &l.CompactMetadata)
		case "durationMs":
			l.DurationMs, _ = strconv.ParseInt(string(v), 10, 64)
		case "summary":
			l.Summary = str(v)
		case "customTitle":
			l.CustomTitle = str(v)
		case "aiTitle":
			l.AITitle = str(v)
		case "agentName":
			l.AgentName = str(v)
		case "lastPrompt":
			l.LastPrompt = str(v)
		case "operation":
			l.Operation = str(v)
		case "agentId":
			l.AgentID = str(v)
		}
		return true
	})
	ok = ok && skipSpace(line, end) == len(line)
	return l, sm, ok && l.Type != ""
}

// validLine rejects lines with NUL bytes or raw control characters outside
// strings that encoding/json might otherwise half-accept.
func validLine(b []byte) bool {
	return bytes.IndexByte(b, 0) < 0
}

// activePath returns the indices of the lines on the visible conversation:
// the chain from the leaf (chooseLeaf) back to the root, linking a compact
// boundary to its logical parent, plus the tool results that sit on side
// branches of it (sideResults). A missing parent (corrupt or removed line)
// or an earlier independent chain continues with the latest earlier line,
// so nothing before a break is lost.
func (r *claudeReader) activePath() []int {
	leaf := r.chooseLeaf()
	if leaf < 0 {
		return nil
	}
	on := make([]bool, len(r.lines))
	cur := leaf
	for cur >= 0 && !on[cur] {
		on[cur] = true
		l := r.lines[cur]
		next := r.parentOf(cur)
		if next < 0 {
			if l.ParentUUID != "" {
				r.t.Diagnostics.problemf("parent %s of %s not found; continuing with the previous line", l.ParentUUID, l.UUID)
			}
			for j := cur - 1; j >= 0; j-- {
				if (r.sub || !r.lines[j].IsSidechain) && !on[j] {
					next = j
					break
				}
			}
		}
		cur = next
	}
	r.sideResults(on)
	var path []int
	for i, ok := range on {
		if ok {
			path = append(path, i)
		}
	}
	return path
}

// parentOf is the index of line i's parent (parentUuid, else the logical
// parent of a compact boundary), or -1.
func (r *claudeReader) parentOf(i int) int {
	l := r.lines[i]
	if p, ok := r.byUUID[l.ParentUUID]; ok && l.ParentUUID != "" {
		return p
	}
	if p, ok := r.byUUID[l.LogicalParentUUID]; ok && l.LogicalParentUUID != "" {
		return p
	}
	return -1
}

func (r *claudeReader) isMsg(i int) bool {
	l := r.lines[i]
	return (r.sub || !l.IsSidechain) && (l.Type == "user" || l.Type == "assistant")
}

// hasToolResult reports a user line that answers tool calls (never a
// typed prompt).
func hasToolResult(l *claudeLine) bool {
	for _, bl := range l.blocks {
		if bl.Type == "tool_result" {
			return true
		}
	}
	return false
}

// chooseLeaf picks the end of the visible conversation: the last message
// line, unless that line is a tool result off the branch of the latest
// assistant message. Such a line is a late write to an old branch (an
// orphaned permission answer to an old tool_use, or the result of an
// earlier parallel call written after its sibling's); the leaf is then the
// latest line that descends from the latest assistant message, so the
// latest exchange is never dropped.
func (r *claudeReader) chooseLeaf() int {
	last, lastAsst := -1, -1
	for i := len(r.lines) - 1; i >= 0 && (last < 0 || lastAsst < 0); i-- {
		if !r.isMsg(i) {
			continue
		}
		if last < 0 {
			last = i
		}
		if r.lines[i].Type == "assistant" {
			lastAsst = i
		}
	}
	if last < 0 || lastAsst < 0 || last == lastAsst || !hasToolResult(r.lines[last]) {
		return last
	}
	for cur, n := last, 0; cur >= 0 && n <= len(r.lines); cur, n = r.parentOf(cur), n+1 {
		if cur == lastAsst {
			return last
		}
	}
	desc := make([]bool, len(r.lines)-lastAsst)
	desc[0] = true
	best := lastAsst
	for i := lastAsst + 1; i < len(r.lines); i++ {
		if p := r.parentOf(i); p >= lastAsst && desc[p-lastAsst] {
			desc[i-lastAsst] = true
			if r.isMsg(i) {
				best = i
			}
		}
	}
	return best
}

// sideResults adds to the path the tool results it lacks for tool calls
// on it. Parallel tool calls are written as a chain of assistant lines,
// and a result can hang off an earlier one of them: a side branch that the
// walk from the leaf never visits. A result for a call that is already
// answered on the path (a stale duplicate) stays off.
func (r *claudeReader) sideResults(on []bool) {
	pending := map[string]bool{}
	for i, ok := range on {
		if !ok {
			continue
		}
		l := r.lines[i]
		for _, bl := range l.blocks {
			switch {
			case l.Type == "assistant" && (bl.Type == "tool_use" || bl.Type == "server_tool_use") && bl.ID != "":
				pending[bl.ID] = true
			case l.Type == "user" && bl.Type == "tool_result":
				delete(pending, bl.ToolUseID)
			}
		}
	}
	if len(pending) == 0 {
		return
	}
	for i, ok := range on {
		if ok || !r.isMsg(i) || r.lines[i].Type != "user" {
			continue
		}
		l := r.lines[i]
		answers := false
		for _, bl := range l.blocks {
			if bl.Type == "tool_result" && pending[bl.ToolUseID] {
				answers = true
			}
		}
		if !answers {
			continue
		}
		on[i] = true
		for _, bl := range l.blocks {
			if bl.Type == "tool_result" {
				delete(pending, bl.ToolUseID)
			}
		}
	}
}

// build maps the active path into canonical messages.
func (r *claudeReader) build() *Transcript {
	t := &r.t
	t.Messages, t.Markers, t.Subagents = nil, nil, nil
	b := newBuilder(t, AgentClaude)
	edits := map[string]claudeBlock{} // tool_use id → edit tool call (for fallback diffs)
	for _, i := range r.activePath() {
		l := r.lines[i]
		if l.IsSidechain && !r.sub {
			continue
		}
		ts := parseTime(l.Timestamp)
		switch l.Type {
		case "system":
			switch l.Subtype {
			case "compact_boundary", "microcompact_boundary":
				text := "Conversation compacted"
				if m := l.CompactMetadata; m != nil {
					text = fmt.Sprintf("Conversation compacted (%s, %d tokens before)", m.Trigger, m.PreTokens)
				}
				b.marker("compaction", text, ts)
			case "turn_duration":
				if b.cur >= 0 {
					t.Messages[b.cur].DurationMs = l.DurationMs
				}
			case "api_error", "error", "api_refusal":
				if s := jsonString(l.Content); s != "" {
					b.marker("error", s, ts)
				}
			}
		case "user":
			r.userLine(b, l, ts, edits)
		case "assistant":
			r.assistantLine(b, l, ts, edits)
		}
	}
	b.finish()
	r.finishMeta()
	return t
}

func (r *claudeReader) userLine(b *builder, l *claudeLine, ts int64, edits map[string]claudeBlock) {
	t := &r.t
	if l.Message == nil {
		return
	}
	text, blocks := l.text, l.blocks
	var texts []string
	var atts []transcript.Attachment
	hasResult := false
	for _, bl := range blocks {
		switch bl.Type {
		case "tool_result":
			hasResult = true
			out := bl.out
			if !b.result(bl.ToolUseID, out, bl.IsError, ts) {
				t.Diagnostics.problemf("%s: result for unknown tool call %s", l.UUID, bl.ToolUseID)
				continue
			}
			if !bl.IsError {
				r.fileChanges(b, bl.ToolUseID, l.tur, edits, ts)
				if l.tur != nil && l.tur.AgentID != "" {
					r.t.Subagents = append(r.t.Subagents, Subagent{ToolCallID: bl.ToolUseID, AgentID: l.tur.AgentID})
				}
			}
		case "text":
			if tx := stripReminders(bl.Text); strings.TrimSpace(tx) != "" {
				texts = append(texts, tx)
			}
		case "image":
			a := transcript.Attachment{Kind: "image"}
			if bl.Source != nil {
				a.MimeType = bl.Source.MediaType
				a.Size = int64(len(bl.Source.Data)) * 3 / 4
			}
			atts = append(atts, a)
		}
	}
	if blocks == nil {
		texts = []string{stripReminders(text)}
	}
	if hasResult && len(texts) == 0 && len(atts) == 0 {
		return
	}
	joined := strings.Join(texts, "\n")
	switch {
	case l.IsCompactSummary:
		b.marker("compaction", joined, ts)
		return
	case l.IsMeta:
		return
	}
	vis, kind := claudeUserText(joined)
	switch kind {
	case "interrupted":
		if b.cur >= 0 {
			t.Messages[b.cur].Status = transcript.StatusCancelled
		}
		b.marker("interrupted", vis, ts)
	case "command":
		b.user(l.UUID, ts, vis, nil, true)
	case "prompt":
		b.user(l.UUID, ts, vis, atts, false)
		if r.titles.firstPrompt == "" {
			r.titles.firstPrompt = vis
		}
	default:
		if len(atts) > 0 {
			b.user(l.UUID, ts, "", atts, false)
		}
	}
}

func (r *claudeReader) assistantLine(b *builder, l *claudeLine, ts int64, edits map[string]claudeBlock) {
	t := &r.t
	if l.Message == nil {
		return
	}
	m, blocks := l.msg, l.blocks
	if m.Model == "<synthetic>" || l.IsAPIErrorMessage {
		var parts []string
		for _, bl := range blocks {
			if bl.Type == "text" {
				parts = append(parts, bl.Text)
			}
		}
		b.marker("error", strings.Join(parts, "\n"), ts)
		return
	}
	if m.Model != "" {
		t.Model = m.Model
	}
	id := m.ID
	if id == "" {
		id = l.UUID
	}
	for k, bl := range blocks {
		switch bl.Type {
		case "thinking":
			b.text(id, ts, transcript.SegReasoning, bl.Thinking)
		case "redacted_thinking":
			b.assistant(id, ts)
		case "text":
			b.text(id, ts, transcript.SegContent, bl.Text)
		case "tool_use", "server_tool_use":
			if bl.ID == "" {
				bl.ID = fmt.Sprintf("%s#%d", l.UUID, k)
			}
			if bl.Name == "TodoWrite" {
				if entries, ok := todoEntries(bl.Input); ok {
					b.plan(id, ts, bl.ID, entries)
					continue
				}
			}
			switch bl.Name {
			case "Edit", "MultiEdit", "Write", "NotebookEdit":
				edits[bl.ID] = bl
			}
			b.tool(id, ts, transcript.Segment{Type: transcript.SegTool, ID: bl.ID, Name: bl.Name, Input: bl.Input})
		}
	}
}

// todoEntries maps TodoWrite input {todos:[{content,status,activeForm,priority}]}.
func todoEntries(input json.RawMessage) ([]transcript.PlanEntry, bool) {
	var in struct {
		Todos []struct {
			Content  string `json:"content"`
			Status   string `json:"status"`
			Priority string `json:"priority"`
		} `json:"todos"`
	}
	if json.Unmarshal(input, &in) != nil || in.Todos == nil {
		return nil, false
	}
	out := make([]transcript.PlanEntry, 0, len(in.Todos))
	for _, e := range in.Todos {
		out = append(out, transcript.PlanEntry{Content: e.Content, Status: e.Status, Priority: e.Priority})
	}
	return out, true
}

// fileChanges derives fileChange segments from a successful edit tool's
// toolUseResult (structuredPatch), falling back to the tool input.
func (r *claudeReader) fileChanges(b *builder, callID string, tur *claudeTUR, edits map[string]claudeBlock, ts int64) {
	call, isEdit := edits[callID]
	if tur == nil || tur.FilePath == "" || !tur.Patch {
		if !isEdit {
			return
		}
		// fallback: diff the tool input
		var in struct {
			FilePath  string  `json:"file_path"`
			Notebook  string  `json:"notebook_path"`
			OldString string  `json:"old_string"`
			NewString string  `json:"new_string"`
			Content   *string `json:"content"`
			Edits     []struct {
				OldString string `json:"old_string"`
				NewString string `json:"new_string"`
			} `json:"edits"`
		}
		if json.Unmarshal(call.Input, &in) != nil {
			return
		}
		p := in.FilePath
		if p == "" {
			p = in.Notebook
		}
		if p == "" {
			return
		}
		add, del := countLines(in.NewString), countLines(in.OldString)
		for _, e := range in.Edits {
			add += countLines(e.NewString)
			del += countLines(e.OldString)
		}
		if in.Content != nil {
			add = countLines(*in.Content)
		}
		b.fileChange("", ts, transcript.Segment{Path: p, Additions: intp(add), Deletions: intp(del), ToolCallID: callID})
		return
	}
	add := tur.Add
	if tur.Type == "create" && tur.Diff == "" {
		add = countLines(tur.Content)
	}
	fc := transcript.Segment{Path: tur.FilePath, Additions: intp(add), Deletions: intp(tur.Del), ToolCallID: callID, Diff: tur.Diff}
	if tur.Type == "create" {
		fc.NewText = strp(tur.Content)
	}
	b.fileChange("", ts, fc)
}

// finishMeta sets the title by Claude Code's priority: custom title > AI
// title > agent name > summary > first prompt; and the resume command.
func (r *claudeReader) finishMeta() {
	t := &r.t
	for _, s := range []string{r.titles.custom, r.titles.ai, r.titles.agentName, r.titles.summary, r.titles.firstPrompt} {
		if strings.TrimSpace(s) != "" {
			t.Title = truncate(s, 200)
			break
		}
	}
	if len(r.unknown) > 0 {
		keys := make([]string, 0, len(r.unknown))
		for k := range r.unknown {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Diagnostics.problemf("unknown line type %q (%d lines) ignored", k, r.unknown[k])
		}
	}
	// the id inside the file wins over the file name (a copied or renamed
	// file), unless the file name is one of the ids it holds (a fork keeps
	// the copied lines' old sessionId)
	if !r.sub && r.lastSessionID != "" && !r.nameIsSession {
		t.ID = r.lastSessionID
	}
	if !r.sub && r.nameIsSession && r.firstOtherID != "" {
		t.ForkedFrom = r.firstOtherID
	}
	t.Resume = ResumeCommand(AgentClaude, t.ID, t.Path)
}

// nameID is the session id the file name gives: <id>.jsonl.
func (r *claudeReader) nameID() string {
	return strings.TrimSuffix(filepath.Base(r.t.Path), ".jsonl")
}

// ReadClaude reads one Claude Code session file, with its subagents.
func ReadClaude(path string) (*Transcript, error) {
	t, err := readClaudeFile(path, false)
	if err != nil {
		return nil, err
	}
	attachClaudeSubagents(t)
	return t, nil
}

func readClaudeFile(path string, sub bool) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read claude session: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read claude session: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read claude session %s: is a directory", path)
	}
	r := newClaudeReader(path)
	r.sub = sub
	r.t.Size = fi.Size()
	if err := eachLine(f, &r.t.Diagnostics, r.add); err != nil {
		r.t.Diagnostics.problemf("read stopped: %v", err)
	}
	t := r.build()
	for _, k := range r.sideOrder {
		st := r.side[k].build()
		t.Subagents = append(t.Subagents, Subagent{AgentID: k, Path: path, Messages: st.Messages})
	}
	t.fillTimes(fi.ModTime().UnixMilli())
	return t, nil
}

// attachClaudeSubagents reads <id>/subagents/agent-*.jsonl (and the old
// flat agent-*.jsonl files that name this session) and links each to its
// parent tool call: by meta.json toolUseId, else by toolUseResult.agentId,
// else to the earliest Task/Agent call not yet linked.
func attachClaudeSubagents(t *Transcript) {
	dir := filepath.Join(strings.TrimSuffix(t.Path, ".jsonl"), "subagents")
	files, _ := filepath.Glob(filepath.Join(dir, "agent-*.jsonl"))
	// old flat layout: agent-*.jsonl beside the session, naming it in sessionId
	flat, _ := filepath.Glob(filepath.Join(filepath.Dir(t.Path), "agent-*.jsonl"))
	for _, f := range flat {
		if strings.Contains(fileHead(f, 8<<10), `"sessionId":"`+t.ID+`"`) {
			files = append(files, f)
		}
	}
	byAgent := map[string]int{}
	for i, s := range t.Subagents {
		byAgent[s.AgentID] = i
	}
	linked := map[string]bool{}
	for _, s := range t.Subagents {
		linked[s.ToolCallID] = true
	}
	for _, f := range files {
		agentID := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "agent-"), ".jsonl")
		sub, err := readClaudeFile(f, true)
		if err != nil {
			t.Diagnostics.problemf("subagent %s: %v", agentID, err)
			continue
		}
		var meta struct {
			Description string `json:"description"`
			ToolUseID   string `json:"toolUseId"`
		}
		if b, err := os.ReadFile(strings.TrimSuffix(f, ".jsonl") + ".meta.json"); err == nil {
			_ = json.Unmarshal(b, &meta)
		}
		sa := Subagent{AgentID: agentID, Description: meta.Description, Path: f, Messages: sub.Messages, ToolCallID: meta.ToolUseID}
		if sa.ToolCallID == "" {
			if i, ok := byAgent[agentID]; ok {
				sa.ToolCallID = t.Subagents[i].ToolCallID
			}
		}
		if sa.ToolCallID == "" {
			sa.ToolCallID = firstUnlinkedTask(t, linked)
		}
		linked[sa.ToolCallID] = true
		if i, ok := byAgent[agentID]; ok {
			t.Subagents[i] = sa
		} else {
			t.Subagents = append(t.Subagents, sa)
		}
	}
	// in-file sidechains have no link: give them the remaining Task calls
	for i := range t.Subagents {
		if t.Subagents[i].ToolCallID == "" {
			t.Subagents[i].ToolCallID = firstUnlinkedTask(t, linked)
			linked[t.Subagents[i].ToolCallID] = true
		}
	}
	// links without a file stay (the file may have been cleaned up)
}

func firstUnlinkedTask(t *Transcript, linked map[string]bool) string {
	for _, m := range t.Messages {
		for _, s := range m.Segments {
			if s.Type == transcript.SegTool && (s.Name == "Task" || s.Name == "Agent") && !linked[s.ID] {
				return s.ID
			}
		}
	}
	return ""
}

// claudeMeta is the listing fast path: the full reader in skim mode (see
// claude_skim.go), so the listing shows what Read gives, while tool
// results, toolUseResult and assistant text are skipped, not decoded. It
// returns ok=false for a file with no conversation (orphan snapshot-only
// files).
func claudeMeta(path string, rd io.Reader, size int64) (Session, bool, error) {
	r := newClaudeReader(path)
	r.skim = true
	r.t.Size = size
	err := eachLine(rd, &r.t.Diagnostics, r.add)
	t := r.build()
	return t.Session, len(t.Messages) > 0, err
}

// ClaudeForkedFrom tells whether the Claude session file path is a fork
// (--fork-session, or a --resume that forked into a new file): its history
// was copied with the old session's sessionId, and its name is its own new
// id. It reads the head only: parent is the first main-thread sessionId
// when that is not the name's id. decided is false while the head holds no
// sessionId yet (a file just created): ask again when it grows.
func ClaudeForkedFrom(path string) (parent string, decided bool) {
	name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	if len(name) != 36 || strings.Count(name, "-") != 4 || strings.HasPrefix(filepath.Base(path), "agent-") {
		return "", true // not named after a session id: a copy, not a fork
	}
	head := fileHead(path, 64<<10)
	for _, ln := range strings.Split(head, "\n") {
		l, ok := skimClaudeLine([]byte(ln))
		if !ok || l.IsSidechain || l.SessionID == "" {
			continue
		}
		if l.SessionID == name {
			return "", true
		}
		return l.SessionID, true
	}
	return "", false
}
