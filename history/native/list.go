package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// List returns the native sessions of every store whose recorded cwd is
// workspace, newest UpdatedAt first. Store-level problems (a missing or
// unreadable store, a session path that is a directory, a symlink loop, a
// locked database) come back as diagnostics; they never stop the listing.
func List(ctx context.Context, env Env, workspace string) ([]Session, []Diagnostic) {
	return ListWithCache(ctx, env, workspace, nil)
}

// ListWithCache is List with a metadata cache keyed by (agent, path, size,
// mtime): a file whose key is cached is not opened at all. cache may be nil.
func ListWithCache(ctx context.Context, env Env, workspace string, cache Cache) ([]Session, []Diagnostic) {
	ws := cleanAbs(workspace)
	var all []Session
	var diags []Diagnostic
	for _, st := range stores {
		if ctx.Err() != nil {
			diags = append(diags, Diagnostic{Level: "warning", Message: fmt.Sprintf("listing stopped: %v", ctx.Err())})
			break
		}
		ss, ds := st.list(ctx, env, ws, cache)
		all = append(all, dedupeSessions(ss)...)
		diags = append(diags, ds...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].UpdatedAt != all[j].UpdatedAt {
			return all[i].UpdatedAt > all[j].UpdatedAt
		}
		return all[i].Path < all[j].Path
	})
	return all, diags
}

// dedupeSessions keeps one session per id of one store: the id comes from
// the records, so a session file copied or renamed inside the store lists
// under the same id as its original. The kept one is the file named after
// the id (what the CLI resumes and Read by id finds first), else the one
// with most messages, else the first path; the others are named in its
// diagnostics.
func dedupeSessions(ss []Session) []Session {
	byID := map[string]int{}
	out := ss[:0:0]
	better := func(a, b Session) bool { // a before b
		an, bn := sessionFileNamesID(a), sessionFileNamesID(b)
		if an != bn {
			return an
		}
		if a.MessageCount != b.MessageCount {
			return a.MessageCount > b.MessageCount
		}
		return a.Path < b.Path
	}
	for _, s := range ss {
		i, dup := byID[s.ID]
		if !dup || s.ID == "" {
			byID[s.ID] = len(out)
			out = append(out, s)
			continue
		}
		kept, other := out[i], s
		if better(s, out[i]) {
			kept, other = s, out[i]
		}
		kept.Diagnostics.problemf("the same session id is also in %s", other.Path)
		out[i] = kept
	}
	return out
}

// sessionFileNamesID reports whether a session's file is named after its
// id (<id>.jsonl, or a name ending in the id as Codex and pi name theirs).
func sessionFileNamesID(s Session) bool {
	base := filepath.Base(s.Path)
	for _, ext := range []string{".zst", ".jsonl", ".json"} {
		base = strings.TrimSuffix(base, ext)
	}
	return s.ID != "" && strings.HasSuffix(base, s.ID)
}

// store is one native store: how to list a workspace's sessions.
type store struct {
	agent string
	list  func(ctx context.Context, env Env, ws string, cache Cache) ([]Session, []Diagnostic)
}

var stores = []store{
	{AgentClaude, listClaude},
	{AgentCodex, listCodex},
	{AgentGemini, listGemini},
	{AgentOpenCode, listOpenCode},
	{AgentPi, listPi},
	{AgentOmp, listOmp},
}

// metaFunc extracts listing metadata from one session file. ok=false drops
// the file from the listing (empty or not a conversation).
type metaFunc func(path string, r io.Reader, size int64) (s Session, ok bool, err error)

// fileResult is the outcome of listing one file.
type fileResult struct {
	s    Session
	ok   bool
	diag *Diagnostic
}

// listFiles runs meta over files with one worker per CPU, using cache.
// keep filters by the recorded session (e.g. cwd == workspace).
func listFiles(ctx context.Context, agent, ws string, files []string, cache Cache, meta metaFunc, keep func(Session) bool) ([]Session, []Diagnostic) {
	res := make([]fileResult, len(files))
	workers := runtime.GOMAXPROCS(0)
	if workers > len(files) {
		workers = len(files)
	}
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(files) || ctx.Err() != nil {
					return
				}
				res[i] = listOne(agent, ws, files[i], cache, meta)
			}
		}()
	}
	wg.Wait()
	var out []Session
	var diags []Diagnostic
	for _, r := range res {
		if r.diag != nil {
			diags = append(diags, *r.diag)
		}
		if r.ok && (keep == nil || keep(r.s)) {
			out = append(out, r.s)
		}
	}
	return out, diags
}

func listOne(agent, ws, path string, cache Cache, meta metaFunc) fileResult {
	diag := func(format string, args ...any) fileResult {
		return fileResult{diag: &Diagnostic{Level: "warning", Agent: agent, Path: path, Message: fmt.Sprintf(format, args...)}}
	}
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return diag("symlink loop")
		}
		if os.IsNotExist(err) {
			return fileResult{} // deleted meanwhile (cleanup, archive, compression)
		}
		return diag("cannot stat: %v", err)
	}
	if fi.IsDir() {
		return diag("session file is a directory")
	}
	if !fi.Mode().IsRegular() {
		return diag("not a regular file")
	}
	if fi.Size() == 0 {
		return fileResult{}
	}
	key := cacheKey(agent, ws, path, fi.Size(), fi.ModTime().UnixNano())
	mc, _ := cache.(MetaCache)
	if mc != nil {
		if s, listed, found := mc.GetMeta(key); found {
			return fileResult{s: s, ok: listed}
		}
	}
	if cache != nil {
		if b, ok := cache.Get(key); ok {
			var c cachedMeta
			if json.Unmarshal(b, &c) == nil {
				if mc != nil {
					mc.PutMeta(key, c.Session, c.OK)
				}
				return fileResult{s: c.Session, ok: c.OK}
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return diag("cannot open: %v", err)
	}
	defer f.Close()
	rd, closeFn, err := decompressFor(path, f)
	if err != nil {
		return diag("%v", err)
	}
	defer closeFn()
	s, ok, err := meta(path, rd, fi.Size())
	if err != nil {
		s.Diagnostics.problemf("read stopped: %v", err)
	}
	s.fillTimes(fi.ModTime().UnixMilli())
	if cache != nil {
		b, _ := json.Marshal(cachedMeta{Session: s, OK: ok})
		cache.Put(key, b)
		if mc != nil {
			mc.PutMeta(key, s, ok)
		}
	}
	return fileResult{s: s, ok: ok}
}

type cachedMeta struct {
	Session Session `json:"s"`
	OK      bool    `json:"ok"`
}

func listClaude(ctx context.Context, env Env, ws string, cache Cache) ([]Session, []Diagnostic) {
	files, diags := claudeSessionFiles(env, ws)
	_, long := ClaudeProjectDirName(ws)
	ss, ds := listFiles(ctx, AgentClaude, ws, files, cache, claudeMeta, func(s Session) bool {
		if s.Cwd == "" {
			return !long
		}
		return sameDir(s.Cwd, ws)
	})
	return ss, append(diags, ds...)
}

// sameDir compares a recorded cwd with the workspace (already cleaned).
func sameDir(recorded, ws string) bool {
	if recorded == ws {
		return true
	}
	return cleanAbs(recorded) == ws
}

// Read reads one native session into a transcript. ref is a path to a
// session file (or an OpenCode "<db>#<ses_id>") or a native session id,
// looked up in every store of env.
func Read(ctx context.Context, env Env, ref string) (*Transcript, error) {
	if ref == "" {
		return nil, errors.New("read native session: empty reference")
	}
	if db, id, ok := strings.Cut(ref, "#"); ok && strings.HasSuffix(db, ".db") {
		return ReadOpenCode(ctx, db, id)
	}
	if strings.ContainsRune(ref, os.PathSeparator) || strings.HasSuffix(ref, ".jsonl") || strings.HasSuffix(ref, ".json") || strings.HasSuffix(ref, ".zst") {
		return ReadFile(ctx, ref)
	}
	return readByID(ctx, env, ref)
}

// ReadFile reads a session file, detecting its store from the path and
// the first line.
func ReadFile(ctx context.Context, path string) (*Transcript, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read native session: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read native session %s: is a directory", path)
	}
	var t *Transcript
	agent := detectAgent(path)
	switch agent {
	case AgentClaude:
		t, err = ReadClaude(path)
	case AgentCodex:
		t, err = ReadCodex(path)
	case AgentGemini:
		t, err = ReadGemini(path)
	case AgentOpenCode:
		t, err = ReadOpenCodeJSON(path)
	case AgentPi:
		if isOmpPath(path) {
			t, err = ReadOmp(path)
		} else {
			t, err = ReadPi(path)
		}
	default:
		return nil, fmt.Errorf("read native session %s: unknown store format", path)
	}
	if err == nil && t.ID == "" {
		return nil, fmt.Errorf("read native session %s: %w (%s)", path, ErrNoSessionID, missingID(agent))
	}
	return t, err
}

// ErrNoSessionID is wrapped by ReadFile for a file shaped like a store's
// session that names no session id (say a Codex file with no session_meta
// id and no rollout-…-UUID name): it is no session, and nothing could link
// to or resume it.
var ErrNoSessionID = errors.New("not a session: it names no session id")

// missingID says where agent's sessions keep their id.
func missingID(agent string) string {
	switch agent {
	case AgentCodex:
		return "codex: no session_meta with an id, and no session uuid in the file name"
	case AgentOpenCode:
		return `opencode: no "id" in the session file`
	case AgentGemini:
		return "gemini: no sessionId and no file name to take it from"
	}
	return agent + ": no id in the file or its name"
}

// detectAgent tells the store of a session file from its records (the
// first 64 KiB), so a copied or renamed file is read by the right reader;
// the file name decides only when the records do not (a rollout-* or
// ses_*.json name, a session-* file under chats/).
func detectAgent(path string) string {
	if a := detectAgentFromHead(fileHead(path, 64<<10)); a != "" {
		return a
	}
	base := filepath.Base(path)
	switch {
	case strings.HasPrefix(base, "rollout-"):
		return AgentCodex
	case strings.HasPrefix(base, "session-") && strings.Contains(path, string(os.PathSeparator)+"chats"+string(os.PathSeparator)):
		return AgentGemini
	case strings.HasPrefix(base, "ses_") && strings.HasSuffix(base, ".json"):
		return AgentOpenCode
	}
	return ""
}

// claudeBookkeepingTypes are Claude Code line types no other store uses.
var claudeBookkeepingTypes = map[string]bool{
	"file-history-snapshot": true, "summary": true, "custom-title": true, "ai-title": true, "agent-name": true,
	"queue-operation": true, "last-prompt": true, "permission-mode": true,
}

// detectAgentFromHead classifies the first records of a session file by
// their top-level keys (store formats: docs/native-stores.md §1–§5):
// Codex session_meta/response_item/event_msg/turn_context envelopes or a
// bare {id, timestamp} header; a pi {"type":"session"} header or entries
// with parentId and message; Gemini headers with projectHash or $set /
// $rewindTo records; Claude lines with uuid, parentUuid, sessionId or a
// user/assistant line with a message. A head that is one multi-line JSON
// document is a legacy Gemini chat (sessionId + messages) or an OpenCode
// session (ses_ id).
func detectAgentFromHead(head string) string {
	lines := strings.Split(head, "\n")
	if len(lines) > 1 {
		lines = lines[:len(lines)-1] // the last may be cut by the head limit
	}
	parsed := 0
	for _, ln := range lines {
		ln = strings.TrimSpace(ln)
		if ln == "" {
			continue
		}
		var rec map[string]json.RawMessage
		if json.Unmarshal([]byte(ln), &rec) != nil {
			continue
		}
		parsed++
		typ := jsonString(rec["type"])
		_, hasPayload := rec["payload"]
		has := func(keys ...string) bool {
			for _, k := range keys {
				if _, ok := rec[k]; ok {
					return true
				}
			}
			return false
		}
		switch {
		case typ == "session_meta" || typ == "response_item" || typ == "event_msg" || typ == "turn_context" || (hasPayload && typ != ""):
			return AgentCodex
		case typ == "session" && has("cwd", "version", "id"):
			return AgentPi
		case has("projectHash", "$set", "$rewindTo"):
			return AgentGemini
		case has("uuid", "parentUuid", "leafUuid") || (has("sessionId") && has("cwd", "isSidechain")):
			return AgentClaude
		case (typ == "user" || typ == "assistant") && has("message"), claudeBookkeepingTypes[typ]:
			return AgentClaude
		case typ == "message" && has("parentId") && has("message"):
			return AgentPi
		case typ == "" && has("id") && has("timestamp") && parsed == 1:
			return AgentCodex // bare pre-envelope header
		case codexResponseTypes[typ] && has("role", "call_id", "summary"):
			return AgentCodex
		}
		if parsed >= 20 {
			break
		}
	}
	// one document (over one or several lines)
	t := strings.TrimSpace(head)
	if strings.HasPrefix(t, "{") && parsed <= 1 {
		switch {
		case strings.Contains(t, `"messages"`) && strings.Contains(t, `"sessionId"`), strings.Contains(t, `"projectHash"`):
			return AgentGemini
		case strings.Contains(t, `"ses_`) && (strings.Contains(t, `"directory"`) || strings.Contains(t, `"projectID"`)):
			return AgentOpenCode
		}
	}
	return ""
}

func fileHead(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	rd, closeFn, err := decompressFor(path, f)
	if err != nil {
		return ""
	}
	defer closeFn()
	b := make([]byte, n)
	k, _ := io.ReadFull(rd, b)
	return string(b[:k])
}

// readByID finds a native session id in every store.
func readByID(ctx context.Context, env Env, id string) (*Transcript, error) {
	if strings.ContainsAny(id, `*?[\`) {
		return nil, fmt.Errorf("read native session %q: invalid id", id)
	}
	for _, pd := range claudeProjectsDirs(env) {
		if m, _ := filepath.Glob(filepath.Join(pd, "*", id+".jsonl")); len(m) > 0 {
			return ReadClaude(m[0])
		}
	}
	if p := findCodexByID(env, id); p != "" {
		return ReadCodex(p)
	}
	if p := findGeminiByID(env, id); p != "" {
		return ReadGemini(p)
	}
	if p := findPiByID(env, id); p != "" {
		return ReadPi(p)
	}
	if p := findOmpByID(env, id); p != "" {
		return ReadOmp(p)
	}
	if strings.HasPrefix(id, "ses_") {
		if t, err := findOpenCodeByID(ctx, env, id); err == nil {
			return t, nil
		}
	}
	// a Claude session file renamed or copied inside the store is listed
	// under the sessionId its lines carry, not its name
	if p := findClaudeBySessionID(ctx, env, id); p != "" {
		return ReadClaude(p)
	}
	return nil, fmt.Errorf("read native session %q: %w", id, ErrNotFound)
}

// findClaudeBySessionID looks for a Claude session file not named after
// its id: of the files whose head (16 KiB) carries "sessionId":"<id>" and
// whose read gives that id, the one with most messages, else the first
// path (the one the listing keeps, see dedupeSessions). It is the last
// resort of readByID, after the cheap lookups by name.
func findClaudeBySessionID(ctx context.Context, env Env, id string) string {
	needle := `"sessionId":"` + id + `"`
	best, most := "", -1
	for _, pd := range claudeProjectsDirs(env) {
		files, _ := filepath.Glob(filepath.Join(pd, "*", "*.jsonl"))
		for _, f := range files {
			if ctx.Err() != nil {
				return ""
			}
			if strings.HasPrefix(filepath.Base(f), "agent-") {
				continue
			}
			head := fileHead(f, 16<<10)
			if !strings.Contains(head, needle) && !strings.Contains(head, `"sessionId": "`+id+`"`) {
				continue
			}
			if t, err := ReadClaude(f); err == nil && t.ID == id && t.MessageCount > most {
				best, most = f, t.MessageCount
			}
		}
	}
	return best
}

// ErrNotFound is returned (wrapped) by Read when no store holds the id.
var ErrNotFound = errors.New("native session not found")

// storeDiag describes a store directory that cannot be listed: "info" when
// it does not exist (that CLI is not used here), "warning" otherwise.
func storeDiag(agent, dir string, err error) Diagnostic {
	if errors.Is(err, os.ErrNotExist) {
		return Diagnostic{Level: "info", Agent: agent, Path: dir, Message: "no store here"}
	}
	return Diagnostic{Level: "warning", Agent: agent, Path: dir, Message: fmt.Sprintf("cannot read store: %v", err)}
}
