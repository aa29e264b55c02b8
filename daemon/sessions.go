package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/transcript"
)

// Terminal-started sessions (issue 4 §2–3): the native session stores of
// Claude Code, Codex, Gemini CLI, OpenCode and pi, read through
// history/native, listed beside the daemon's own conversations, watched,
// followed live and opened as conversations. docs/protocol.md "Terminal
// sessions" is the wire contract.

// Method and notification names of docs/protocol.md "Terminal sessions".
const (
	MethodSessionsList     = "ochat/sessions/list"
	MethodSessionsRead     = "ochat/sessions/read"
	MethodSessionsOpen     = "ochat/sessions/open"
	MethodSessionsFollow   = "ochat/sessions/follow"
	MethodSessionsUnfollow = "ochat/sessions/unfollow"

	NotifySessionsChanged = "ochat/sessions/changed"
	NotifySessionAppended = "ochat/sessionAppended"
)

// Session kinds of SessionEntry.Kind.
const (
	SessionKindNative       = "native"       // a native CLI session file (or OpenCode row)
	SessionKindConversation = "conversation" // one of the daemon's own conversations
)

// LiveWindow is how recently a native session must have changed to be
// listed as live (a CLI is probably still writing it).
const LiveWindow = 2 * time.Minute

// changedDebounce merges store changes into one ochat/sessions/changed.
const changedDebounce = 100 * time.Millisecond

// watchDebounce merges the file events of one session file before it is
// read again: the floor of append → ochat/sessionAppended latency. A CLI
// writes the lines of one step within a few ms.
const watchDebounce = 10 * time.Millisecond

// SessionEntry is one row of ochat/sessions/list: a native session
// (Kind "native", ID = the CLI's own session id) or a conversation of the
// daemon (Kind "conversation", ID = conversation id). Times are Unix ms.
type SessionEntry struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Agent is the native session's CLI (claude, codex, gemini, opencode,
	// pi); for a conversation, the agent of its last answer.
	Agent        string   `json:"agent,omitempty"`
	Agents       []string `json:"agents,omitempty"` // conversation: every agent that answered
	Title        string   `json:"title"`
	ParentID     string   `json:"parentId,omitempty"`   // native: spawning session of a subagent thread
	ForkedFrom   string   `json:"forkedFrom,omitempty"` // native: the session this one continues in a new file (fork)
	Cwd          string   `json:"cwd,omitempty"`
	GitBranch    string   `json:"gitBranch,omitempty"`
	Model        string   `json:"model,omitempty"`
	CreatedAt    int64    `json:"createdAt"`
	UpdatedAt    int64    `json:"updatedAt"`
	MessageCount int      `json:"messageCount"`           // native: visible user messages + assistant turns
	ToolCount    int      `json:"toolCount"`              // native: tool calls
	Path         string   `json:"path,omitempty"`         // native: session file, OpenCode "<db>#<ses_id>"
	Size         int64    `json:"size,omitempty"`         // native: bytes of the session file
	SkippedLines int      `json:"skippedLines,omitempty"` // native: lines the reader could not use
	// ResumeCommand continues a native session in a terminal (run in Cwd).
	ResumeCommand []string `json:"resumeCommand,omitempty"`
	// Live: native, changed within LiveWindow or followed; conversation, a
	// turn is running.
	Live bool `json:"live"`
	// ConversationID is the conversation a native session was opened as
	// (ochat/sessions/open), if any.
	ConversationID string `json:"conversationId,omitempty"`
}

// SessionsListResult answers ochat/sessions/list: every native session of
// the workspace and every conversation not opened from one, newest
// UpdatedAt first, plus store-level diagnostics (a store that does not
// exist is an "info", an unreadable one or a locked database a "warning").
type SessionsListResult struct {
	Sessions    []SessionEntry      `json:"sessions"`
	Diagnostics []native.Diagnostic `json:"diagnostics"`
}

// SessionRefParams name one native session: SessionID (the CLI's own id,
// looked up in every store) or Path (a session file inside one of the
// stores, or OpenCode's "<db>#<ses_id>"). Exactly one is required.
type SessionRefParams struct {
	SessionID string `json:"sessionId,omitempty"`
	Path      string `json:"path,omitempty"`
}

func (p *SessionRefParams) validate() error {
	switch {
	case p.SessionID == "" && p.Path == "":
		return fieldError("sessionId", `or "path" is required`)
	case p.SessionID != "" && p.Path != "":
		return fieldError("sessionId", `and "path" exclude each other`)
	case p.SessionID != "" && (strings.ContainsAny(p.SessionID, `/\#*?[`) || strings.HasSuffix(p.SessionID, ".jsonl") || strings.HasSuffix(p.SessionID, ".json") || strings.HasSuffix(p.SessionID, ".zst")):
		return fieldError("sessionId", fmt.Sprintf("%q is not a native session id (pass a file as \"path\")", p.SessionID))
	case p.Path != "" && !filepath.IsAbs(p.Path):
		return fieldError("path", fmt.Sprintf("%q must be an absolute path", p.Path))
	}
	return nil
}

// SessionReadResult answers ochat/sessions/read: the native session's
// canonical transcript (native.Transcript: metadata, "resume", messages,
// markers, subagents, "diagnostics" {skippedLines, problems}) and the
// conversation it was opened as, if any.
type SessionReadResult struct {
	native.Transcript
	ConversationID string `json:"conversationId,omitempty"`
}

// OpenSessionResult answers ochat/sessions/open: the conversation linked to
// the native session (Conversation.Native set, with its mark) and its
// messages. Created is false when the session had been opened before; then
// Sync says what the native session gained since and was imported first
// (nativesync.go).
type OpenSessionResult struct {
	ConversationID string               `json:"conversationId"`
	Conversation   history.Conversation `json:"conversation"`
	Messages       []transcript.Message `json:"messages"`
	Created        bool                 `json:"created"`
	Sync           *NativeSync          `json:"sync,omitempty"`
}

// FollowResult answers ochat/sessions/follow with the session as the
// daemon has it now; later changes arrive as ochat/sessionAppended.
type FollowResult struct {
	SessionID string               `json:"sessionId"`
	Agent     string               `json:"agent"`
	Path      string               `json:"path"`
	Session   native.Session       `json:"session"`
	Messages  []transcript.Message `json:"messages"`
	Markers   []native.Marker      `json:"markers"`
}

// SessionAppendedParams are an ochat/sessionAppended notification's params:
// what a followed session gained. Messages are new or changed messages to
// upsert by id, in transcript order; with Reset they are the whole
// transcript (the file was rewritten, truncated or replaced, or the client
// had fallen behind) and replace what the client had. SeenAt is when the
// daemon first saw the file change (Unix ms).
type SessionAppendedParams struct {
	SessionID string               `json:"sessionId"`
	Agent     string               `json:"agent"`
	Path      string               `json:"path"`
	Reset     bool                 `json:"reset"`
	Messages  []transcript.Message `json:"messages"`
	Markers   []native.Marker      `json:"markers,omitempty"`
	Session   native.Session       `json:"session"`
	SeenAt    int64                `json:"seenAt"`
}

// SessionsChangedParams are an ochat/sessions/changed notification's
// params: session files created or changed (Paths), gone (Removed), and
// store problems met while watching. Clients call ochat/sessions/list again
// (cheap: unchanged files come from the cache).
type SessionsChangedParams struct {
	Paths    []string `json:"paths"`
	Removed  []string `json:"removed,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// sessionsHub is the daemon's native-session side: the watcher, the
// clients that listen for store changes, and the followed sessions. Its zero
// value is ready; the watcher starts with StartNative or the first sessions
// request and stops with the daemon's base context.
type sessionsHub struct {
	once     sync.Once
	w        *native.Watcher
	startErr error

	listMu sync.Mutex   // one listing at a time; guards cache
	cache  *nativeCache // created on first listing
	parsed atomic.Int64 // session files parsed by listings (cache misses)
	openMu sync.Mutex   // one open at a time: one conversation per native session
	// syncing holds the linked conversations being synced with their
	// native session, each with a channel closed when that sync ends
	// (guarded by Server.mu; beginSync): no turn starts in them meanwhile.
	syncing map[string]chan struct{}
	// gone holds the linked conversations whose native session file is
	// gone and was not found by id either (guarded by mu; readLinked).
	gone map[string]goneSession
	// syncWait bounds how long a prompt or another sync waits for such a
	// sync (0: nativeSyncWait; guarded by Server.mu).
	syncWait time.Duration
	// linkedPending holds the native files whose change will sync the
	// subscribed conversations linked to them (guarded by mu).
	linkedPending map[string]bool
	// forkChecked holds the Claude files already checked for being a fork
	// of a linked session (followFork; guarded by mu).
	forkChecked map[string]bool

	mu        sync.Mutex
	clients   map[*client]bool // clients with a disconnect watcher
	listeners map[*client]struct{}
	follows   map[string]*followed // by path as the watcher reports it
	pending   SessionsChangedParams
	timer     *time.Timer
}

// followed is one followed session: its subscribers and its transcript as
// sent so far (so a later follower starts where the update stream is).
type followed struct {
	path    string
	session native.Session
	msgs    []transcript.Message
	idx     map[string]int
	markers []native.Marker
	subs    map[*client]*followSub
}

type followSub struct{ needReset bool }

func (f *followed) apply(u *native.TailUpdate) {
	f.session = u.Session
	if u.Reset {
		f.msgs = append([]transcript.Message(nil), u.Messages...)
		f.markers = append([]native.Marker(nil), u.Markers...)
		f.idx = make(map[string]int, len(f.msgs))
		for i, m := range f.msgs {
			f.idx[m.ID] = i
		}
		return
	}
	for _, m := range u.Messages {
		if i, ok := f.idx[m.ID]; ok {
			f.msgs[i] = m
			continue
		}
		f.idx[m.ID] = len(f.msgs)
		f.msgs = append(f.msgs, m)
	}
	f.markers = append(f.markers, u.Markers...)
}

func (f *followed) result() FollowResult {
	r := FollowResult{SessionID: f.session.ID, Agent: f.session.Agent, Path: f.path, Session: f.session,
		Messages: append([]transcript.Message{}, f.msgs...), Markers: append([]native.Marker{}, f.markers...)}
	return r
}

// nativeEnv is where the native stores are: Options.NativeEnv, else the
// process environment.
func (s *Server) nativeEnv() native.Env {
	if s.opts.NativeEnv != nil {
		return *s.opts.NativeEnv
	}
	return native.EnvFromLookup(os.LookupEnv)
}

// watcher starts the native store watcher once; nil if it cannot start
// (listing and reading still work; follow does not).
func (s *Server) watcher() (*native.Watcher, error) {
	h := &s.native
	h.once.Do(func() {
		w, err := native.NewWatcher(s.baseCtx, native.WatchOptions{
			Env: s.nativeEnv(), Workspace: s.opts.Workspace, Debounce: watchDebounce,
			Logger: slog.New(minLevel{slog.LevelWarn, s.log.Handler()}).With("component", "native-watcher"),
		})
		if err != nil {
			h.startErr = err
			s.log.Warn("native session watcher not started", "err", err)
			return
		}
		h.w = w
		go s.watchLoop(w)
	})
	return h.w, h.startErr
}

// watchLoop turns watcher events into notifications until the watcher ends.
func (s *Server) watchLoop(w *native.Watcher) {
	h := &s.native
	for ev := range w.Events() {
		switch ev.Kind {
		case native.WatchUpdate:
			h.deliver(s, ev)
			s.nativeFileChanged(ev.Agent, ev.Path)
		case native.WatchRemoved:
			h.removed(ev.Path)
			h.noteChange(s, ev)
		case native.WatchChanged:
			h.noteChange(s, ev)
			s.nativeFileChanged(ev.Agent, ev.Path)
		case native.WatchProblem:
			h.noteChange(s, ev)
		}
	}
}

// track makes sure c is forgotten when it disconnects. h.mu is held.
func (h *sessionsHub) trackLocked(c *client) {
	if h.clients == nil {
		h.clients = map[*client]bool{}
		h.listeners = map[*client]struct{}{}
		h.follows = map[string]*followed{}
	}
	if h.clients[c] {
		return
	}
	h.clients[c] = true
	go func() {
		<-c.stopCh
		h.drop(c)
	}()
}

// drop forgets a disconnected client: its listening and its follows.
func (h *sessionsHub) drop(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	delete(h.listeners, c)
	for path, f := range h.follows {
		delete(f.subs, c)
		h.maybeUnfollowLocked(path, f)
	}
}

func (h *sessionsHub) maybeUnfollowLocked(path string, f *followed) {
	if len(f.subs) == 0 {
		delete(h.follows, path)
		if h.w != nil {
			h.w.Unfollow(path)
		}
	}
}

func (h *sessionsHub) listen(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trackLocked(c)
	h.listeners[c] = struct{}{}
}

// behind reports a client whose queue holds ClientQueue notifications.
func (s *Server) behind(c *client) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notes >= s.opts.ClientQueue
}

// noteChange queues a store change for the debounced ochat/sessions/changed.
func (h *sessionsHub) noteChange(s *Server, ev native.WatchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.Kind {
	case native.WatchChanged:
		h.pending.Paths = appendOnce(h.pending.Paths, ev.Path)
	case native.WatchRemoved:
		h.pending.Removed = appendOnce(h.pending.Removed, ev.Path)
	case native.WatchProblem:
		msg := ev.Message
		if ev.Path != "" {
			msg = ev.Path + ": " + msg
		}
		h.pending.Problems = appendOnce(h.pending.Problems, msg)
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(changedDebounce, func() { h.flushChanged(s) })
	}
}

func appendOnce(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

func (h *sessionsHub) flushChanged(s *Server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer = nil
	p := h.pending
	h.pending = SessionsChangedParams{}
	if p.Paths == nil {
		p.Paths = []string{}
	}
	if len(h.listeners) == 0 {
		return
	}
	raw, err := marshalParams(p)
	if err != nil {
		s.log.Error("marshal notification", "method", NotifySessionsChanged, "err", err)
		return
	}
	frame := frameNotification(NotifySessionsChanged, raw)
	for c := range h.listeners {
		if !s.behind(c) { // a client that is behind lists again anyway
			c.push(outItem{frame: frame}, true)
		}
	}
}

// removed handles a followed session file that went away: a Codex rollout
// replaced by its compressed copy stays followed under the new path (the
// watcher follows it there); any other follow ends, its followers having
// been told by ochat/sessions/changed "removed".
func (h *sessionsHub) removed(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.follows[path]
	if f == nil {
		return
	}
	delete(h.follows, path)
	if zst := path + ".zst"; fileExistsPath(zst) && h.follows[zst] == nil {
		f.path = zst
		h.follows[zst] = f
	}
}

// deliver sends a followed session's update to its followers.
func (h *sessionsHub) deliver(s *Server, ev native.WatchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.follows[ev.Path]
	if f == nil || ev.Update == nil {
		return
	}
	f.apply(ev.Update)
	p := SessionAppendedParams{SessionID: f.session.ID, Agent: f.session.Agent, Path: f.path, Reset: ev.Update.Reset,
		Messages: ev.Update.Messages, Markers: ev.Update.Markers, Session: ev.Update.Session, SeenAt: ev.SeenAt}
	if p.Messages == nil {
		p.Messages = []transcript.Message{}
	}
	var frame, resetFrame []byte
	for c, sub := range f.subs {
		if s.behind(c) {
			sub.needReset = true
			continue
		}
		if sub.needReset {
			if resetFrame == nil {
				rp := p
				rp.Reset, rp.Messages, rp.Markers = true, append([]transcript.Message{}, f.msgs...), f.markers
				raw, err := marshalParams(rp)
				if err != nil {
					s.log.Error("marshal notification", "method", NotifySessionAppended, "err", err)
					return
				}
				resetFrame = frameNotification(NotifySessionAppended, raw)
			}
			sub.needReset = false
			c.push(outItem{frame: resetFrame}, true)
			continue
		}
		if frame == nil {
			raw, err := marshalParams(p)
			if err != nil {
				s.log.Error("marshal notification", "method", NotifySessionAppended, "err", err)
				return
			}
			frame = frameNotification(NotifySessionAppended, raw)
		}
		c.push(outItem{frame: frame}, true)
	}
}

// nativeCache is the listing cache (native.Cache): parsed metadata keyed by
// file identity (agent, workspace, path, size, mtime), held in memory and
// persisted in history's native index entries (bbolt), so a warm listing
// parses nothing and, after a restart, reads the entries in one
// transaction. New entries are written to bbolt after the listing, off the
// request path; entries a complete listing did not use (older versions of
// changed files, deleted files) are pruned.
type nativeCache struct {
	st     *history.Store
	parsed *atomic.Int64 // files parsed (cache misses) since start

	mu      sync.Mutex
	loaded  bool
	mem     map[string][]byte
	decoded map[string]decodedMeta // mem's entries decoded, filled on first use
	dirty   map[string][]byte      // not yet in bbolt
	deleted map[string]bool        // to delete from bbolt
	flushMu sync.Mutex             // one flush at a time
	flushes sync.WaitGroup         // flushes under way (tests wait for them)
}

func (c *nativeCache) loadLocked() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.mem, c.dirty, c.deleted = map[string][]byte{}, map[string][]byte{}, map[string]bool{}
	c.decoded = map[string]decodedMeta{}
	_ = c.st.ForEachIndexEntry(func(k string, v []byte) error {
		if strings.HasPrefix(k, "native/") {
			c.mem[k] = append([]byte(nil), v...)
		}
		return nil
	})
}

// listing is one listing's view of the cache: it records the keys used.
type listing struct {
	c    *nativeCache
	mu   sync.Mutex
	used map[string]bool
	puts int
}

func (c *nativeCache) begin() *listing {
	c.mu.Lock()
	c.loadLocked()
	c.mu.Unlock()
	return &listing{c: c, used: map[string]bool{}}
}

// Get implements native.Cache.
func (l *listing) Get(key string) ([]byte, bool) {
	l.c.mu.Lock()
	v, ok := l.c.mem[key]
	l.c.mu.Unlock()
	if ok {
		l.mu.Lock()
		l.used[key] = true
		l.mu.Unlock()
	}
	return v, ok
}

type decodedMeta struct {
	s      native.Session
	listed bool
}

// GetMeta implements native.MetaCache: a warm listing decodes no JSON.
func (l *listing) GetMeta(key string) (native.Session, bool, bool) {
	l.c.mu.Lock()
	d, ok := l.c.decoded[key]
	l.c.mu.Unlock()
	if ok {
		l.mu.Lock()
		l.used[key] = true
		l.mu.Unlock()
	}
	return d.s, d.listed, ok
}

// PutMeta implements native.MetaCache.
func (l *listing) PutMeta(key string, s native.Session, listed bool) {
	// the entry is shared by later listings: an append to a copy (the
	// listing's de-duplication notes) must not write into it
	s.Diagnostics.Problems = slices.Clip(s.Diagnostics.Problems)
	s.Resume = slices.Clip(s.Resume)
	l.c.mu.Lock()
	l.c.decoded[key] = decodedMeta{s: s, listed: listed}
	l.c.mu.Unlock()
}

// Put implements native.Cache: called once per parsed file.
func (l *listing) Put(key string, v []byte) {
	l.c.parsed.Add(1)
	l.mu.Lock()
	l.used[key] = true
	l.puts++
	l.mu.Unlock()
	l.c.mu.Lock()
	l.c.mem[key] = v
	l.c.dirty[key] = v
	delete(l.c.deleted, key)
	l.c.mu.Unlock()
}

// end prunes the entries a complete listing did not use and writes the
// changes to bbolt in the background.
func (l *listing) end(complete bool) {
	c := l.c
	c.mu.Lock()
	if complete {
		for k := range c.mem {
			if !l.used[k] {
				delete(c.mem, k)
				delete(c.decoded, k)
				delete(c.dirty, k)
				c.deleted[k] = true
			}
		}
	}
	work := len(c.dirty) > 0 || len(c.deleted) > 0
	c.mu.Unlock()
	if work {
		c.flushes.Add(1)
		go func() {
			defer c.flushes.Done()
			c.flush()
		}()
	}
}

// flush writes pending entries to bbolt (errors are ignored: the cache is
// only an optimisation).
func (c *nativeCache) flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	dirty, deleted := c.dirty, c.deleted
	c.dirty, c.deleted = map[string][]byte{}, map[string]bool{}
	c.mu.Unlock()
	for k, v := range dirty {
		_ = c.st.PutIndexEntry(k, v)
	}
	for k := range deleted {
		_ = c.st.DeleteIndexEntry(k)
	}
}

// listNative lists the workspace's native sessions through the cache.
func (s *Server) listNative(ctx context.Context) ([]native.Session, []native.Diagnostic) {
	h := &s.native
	h.listMu.Lock()
	defer h.listMu.Unlock()
	if h.cache == nil {
		h.cache = &nativeCache{st: s.store, parsed: &h.parsed}
	}
	l := h.cache.begin()
	sessions, diags := native.ListWithCache(ctx, s.nativeEnv(), s.opts.Workspace, l)
	l.end(ctx.Err() == nil)
	return sessions, diags
}

// StartNative starts watching the workspace's native session stores and,
// in the background, fills the listing cache, so that the first
// ochat/sessions/list answers from it. ochatd serve calls it once after New;
// without it the watcher starts with the first sessions request.
func (s *Server) StartNative() {
	go func() {
		if _, err := s.watcher(); err != nil {
			return // logged; listing still works
		}
		start := time.Now()
		sessions, _ := s.listNative(s.baseCtx)
		s.log.Debug("native session cache warmed", "sessions", len(sessions), "parsed", s.native.parsed.Load(), "took", time.Since(start))
	}()
}

// listSessions handles ochat/sessions/list; c then receives
// ochat/sessions/changed.
func (s *Server) listSessions(ctx context.Context, c *client) (any, error) {
	s.native.listen(c)
	if _, err := s.watcher(); err != nil {
		s.log.Debug("listing without a watcher", "err", err)
	}
	h := &s.native
	start := time.Now()
	sessions, diags := s.listNative(ctx)
	listed := time.Since(start)
	defer func() {
		s.log.Debug("sessions listed", "native", len(sessions), "nativeTook", listed, "took", time.Since(start))
	}()
	convs, err := s.store.ListConversations()
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	linked := map[string]string{} // agent + "\x00" + native id → conversation id
	for _, cv := range convs {
		if cv.Native != nil {
			linked[cv.Native.Agent+"\x00"+cv.Native.SessionID] = cv.ID
		}
	}
	h.mu.Lock()
	follows := make(map[string]bool, len(h.follows))
	for p := range h.follows {
		follows[p] = true
	}
	h.mu.Unlock()
	now := nowMs()
	out := SessionsListResult{Sessions: make([]SessionEntry, 0, len(sessions)+len(convs)), Diagnostics: diags}
	if out.Diagnostics == nil {
		out.Diagnostics = []native.Diagnostic{}
	}
	shown := map[string]bool{}
	for _, ns := range sessions {
		e := SessionEntry{
			ID: ns.ID, Kind: SessionKindNative, Agent: ns.Agent, Title: ns.Title, ParentID: ns.ParentID, ForkedFrom: ns.ForkedFrom, Cwd: ns.Cwd,
			GitBranch: ns.GitBranch, Model: ns.Model, CreatedAt: ns.CreatedAt, UpdatedAt: ns.UpdatedAt,
			MessageCount: ns.MessageCount, ToolCount: ns.ToolCount, Path: ns.Path, Size: ns.Size,
			SkippedLines: ns.Diagnostics.SkippedLines, ResumeCommand: ns.Resume,
			Live:           follows[ns.Path] || now-ns.UpdatedAt < LiveWindow.Milliseconds(),
			ConversationID: linked[ns.Agent+"\x00"+ns.ID],
		}
		if e.ConversationID != "" {
			shown[e.ConversationID] = true
		}
		out.Sessions = append(out.Sessions, e)
	}
	s.mu.Lock()
	for _, cv := range convs {
		if shown[cv.ID] {
			continue // listed as its native session, with conversationId
		}
		t := s.topics[cv.ID]
		e := SessionEntry{ID: cv.ID, Kind: SessionKindConversation, Agents: cv.Agents, Title: cv.Title,
			CreatedAt: cv.CreatedAt, UpdatedAt: cv.UpdatedAt, Live: t != nil && t.run != nil, ConversationID: cv.ID}
		if n := len(cv.Agents); n > 0 {
			e.Agent = cv.Agents[n-1]
		}
		out.Sessions = append(out.Sessions, e)
	}
	s.mu.Unlock()
	sort.SliceStable(out.Sessions, func(i, j int) bool { return out.Sessions[i].UpdatedAt > out.Sessions[j].UpdatedAt })
	return out, nil
}

// resolved is p with symbolic links resolved as far as they exist.
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// checkStorePath accepts a path to any existing file (or OpenCode's
// "<db>#<ses_id>"), in a known store or not: the socket admits only this
// user and the file is only read, so a session file copied elsewhere or
// under a store this daemon's environment does not name reads as well. A
// directory gets -32602, a missing file -32001; whether the file is a
// session is left to the native readers. It returns the path cleaned but
// otherwise as given, so that it matches the paths the listing and the
// watcher use.
func (s *Server) checkStorePath(env native.Env, path string) (string, error) {
	file, frag, hasFrag := strings.Cut(path, "#")
	file = filepath.Clean(file)
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", notFound("no native session at %s", path)
	case err != nil:
		return "", fieldError("path", fmt.Sprintf("cannot be read: %v", err))
	case fi.IsDir():
		return "", fieldError("path", fmt.Sprintf("%s is a directory, not a session file", file))
	case !fi.Mode().IsRegular():
		return "", fieldError("path", fmt.Sprintf("%s is not a regular file", file))
	}
	if hasFrag {
		return file + "#" + frag, nil
	}
	return file, nil
}

// readNative reads the native session p names.
func (s *Server) readNative(ctx context.Context, p SessionRefParams) (*native.Transcript, error) {
	env := s.nativeEnv()
	if p.Path != "" {
		path, err := s.checkStorePath(env, p.Path)
		if err != nil {
			return nil, err
		}
		tr, err := native.Read(ctx, env, path)
		switch {
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, native.ErrNotFound):
			return nil, notFound("no native session at %s", p.Path)
		case err != nil:
			return nil, fieldError("path", fmt.Sprintf("cannot be read as a Claude, Codex, Gemini, OpenCode or pi session: %v", err))
		}
		return tr, nil
	}
	tr, err := native.Read(ctx, env, p.SessionID)
	switch {
	case errors.Is(err, native.ErrNotFound):
		return nil, notFound("unknown native session %q: no Claude, Codex, Gemini, OpenCode or pi store here holds it", p.SessionID)
	case err != nil:
		return nil, fmt.Errorf("read native session %s: %w", p.SessionID, err)
	}
	return tr, nil
}

// linkedConversation is the conversation opened from (agent, id), if any.
func (s *Server) linkedConversation(agent, id string) (history.Conversation, bool, error) {
	convs, err := s.store.ListConversations()
	if err != nil {
		return history.Conversation{}, false, fmt.Errorf("list conversations: %w", err)
	}
	for _, cv := range convs {
		if cv.Native != nil && cv.Native.Agent == agent && cv.Native.SessionID == id {
			return cv, true, nil
		}
	}
	return history.Conversation{}, false, nil
}

// readSession handles ochat/sessions/read.
func (s *Server) readSession(ctx context.Context, p SessionRefParams) (any, error) {
	tr, err := s.readNative(ctx, p)
	if err != nil {
		return nil, err
	}
	if tr.Messages == nil {
		tr.Messages = []transcript.Message{}
	}
	res := SessionReadResult{Transcript: *tr}
	if cv, ok, err := s.linkedConversation(tr.Agent, tr.ID); err == nil && ok {
		res.ConversationID = cv.ID
	}
	return res, nil
}

// openSession handles ochat/sessions/open: it snapshots the native session
// into a new conversation linked to it, with the mark at the snapshot's last
// native message (or returns the one opened before, first importing what
// the native session gained since: syncNative).
// The messages get new sortable ids in transcript order; the native id is
// stored as the native agent's session id with the last snapshot message as
// cursor, so a prompt to that agent does session/load of the native session
// (when the agent supports it) and hands off nothing, while any other agent
// (or a failed load) starts a new session that receives the whole
// transcript as a handoff.
func (s *Server) openSession(ctx context.Context, p SessionRefParams) (any, error) {
	tr, err := s.readNative(ctx, p)
	if err != nil {
		return nil, err
	}
	if tr.ID == "" {
		return nil, fieldError("path", fmt.Sprintf("is not a %s session: it has no session id, and a conversation links to one", tr.Agent))
	}
	h := &s.native
	h.openMu.Lock()
	defer h.openMu.Unlock()
	cv, ok, err := s.linkedConversation(tr.Agent, tr.ID)
	if err != nil {
		return nil, err
	}
	if ok {
		s.forgetGone(cv.ID) // opened again: a session found gone is searched for
		sync := s.syncLinked(ctx, cv.ID, nil)
		conv, msgs, err := s.snapshot(cv.ID)
		if err != nil {
			return nil, err
		}
		return OpenSessionResult{ConversationID: conv.ID, Conversation: conv, Messages: msgs, Sync: &sync}, nil
	}
	// The mark's stamp: the file stat'ed after the read, kept only if its
	// size is the one the reader saw when it opened the file (else the
	// file grew meanwhile and the next sync reads it again).
	st, _ := nativeStamp(tr.Path)
	if st.size != tr.Size {
		st = fileStamp{}
	}
	now := nowMs()
	conv := history.Conversation{ID: s.newID(), Title: tr.Title, Agents: []string{}, CreatedAt: tr.CreatedAt, UpdatedAt: tr.UpdatedAt,
		Native: &history.NativeRef{Agent: tr.Agent, SessionID: tr.ID, Path: tr.Path}}
	if conv.CreatedAt == 0 {
		conv.CreatedAt = now
	}
	if conv.UpdatedAt < conv.CreatedAt {
		conv.UpdatedAt = conv.CreatedAt
	}
	nat := nativeMessages(tr) // interruptions and errors as turn statuses
	msgs := make([]transcript.Message, 0, len(nat))
	for _, m := range nat {
		msgs = append(msgs, importedMessage(m, tr.Agent, s.newID()))
	}
	lastMsg := ""
	if n := len(msgs); n > 0 {
		lastMsg = msgs[n-1].ID
	}
	mark := markAt(*conv.Native, nat, len(nat)-1, lastMsg, st)
	for i := max(0, len(nat)-maxNativeLinks); i < len(nat); i++ {
		mark = withLinks(mark, history.NativeLink{NativeID: nat[i].ID, MessageID: msgs[i].ID})
	}
	conv.Native = &mark
	err = s.store.Update(func(w *history.Writer) error {
		if err := w.CreateConversation(conv); err != nil {
			return err
		}
		for _, m := range msgs {
			at := m.Timestamp
			if at == 0 {
				at = conv.UpdatedAt
			}
			if err := w.PutMessage(conv.ID, m, at); err != nil {
				return err
			}
		}
		as := history.AgentSession{SessionID: tr.ID}
		if n := len(msgs); n > 0 {
			as.Cursor = msgs[n-1].ID
		}
		return w.PutAgentSession(conv.ID, tr.Agent, as)
	})
	if err != nil {
		return nil, fmt.Errorf("open native session %s: %w", tr.ID, err)
	}
	conv, msgs, err = s.snapshot(conv.ID)
	if err != nil {
		return nil, err
	}
	return OpenSessionResult{ConversationID: conv.ID, Conversation: conv, Messages: msgs, Created: true}, nil
}

// followSession handles ochat/sessions/follow: the reply (the session so
// far) is queued before any ochat/sessionAppended for it.
func (s *Server) followSession(ctx context.Context, c *client, p SessionRefParams, reply jsonrpc2.Replier) (any, error) {
	var path string
	if p.Path != "" {
		var err error
		if path, err = s.checkStorePath(s.nativeEnv(), p.Path); err != nil {
			return nil, err
		}
		if file, _, _ := strings.Cut(path, "#"); !fileExistsPath(file) {
			return nil, notFound("no native session at %s", p.Path)
		}
	} else {
		tr, err := s.readNative(ctx, p)
		if err != nil {
			return nil, err
		}
		path = tr.Path
	}
	w, err := s.watcher()
	if err != nil {
		return nil, fmt.Errorf("follow %s: native watcher unavailable: %w", path, err)
	}
	h := &s.native
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trackLocked(c)
	h.listeners[c] = struct{}{}
	f := h.follows[path]
	if f == nil {
		tr, err := w.Follow(path)
		if err != nil {
			return nil, fieldError("path", fmt.Sprintf("cannot be followed: %v", err))
		}
		f = &followed{path: path, subs: map[*client]*followSub{}}
		f.apply(&native.TailUpdate{Reset: true, Messages: tr.Messages, Markers: tr.Markers, Session: tr.Session})
		h.follows[path] = f
	}
	f.subs[c] = &followSub{}
	c.queueReply(reply, f.result(), nil)
	return nil, errReplied
}

// unfollowSession handles ochat/sessions/unfollow (unknown: a no-op).
func (s *Server) unfollowSession(ctx context.Context, c *client, p SessionRefParams) (any, error) {
	h := &s.native
	h.mu.Lock()
	defer h.mu.Unlock()
	for path, f := range h.follows {
		if (p.Path != "" && (path == filepath.Clean(p.Path) || path == p.Path)) || (p.SessionID != "" && f.session.ID == p.SessionID) {
			delete(f.subs, c)
			h.maybeUnfollowLocked(path, f)
		}
	}
	return struct{}{}, nil
}

func fileExistsPath(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// dispatchSessions runs the methods of this file and export.go.
func (c *client) dispatchSessions(ctx context.Context, method string, params []byte, reply jsonrpc2.Replier) (any, error) {
	s := c.s
	switch method {
	case MethodSessionsList:
		if err := decodeParams(params, &struct{}{}); err != nil {
			return nil, err
		}
		return s.listSessions(ctx, c)
	case MethodExport:
		var p ExportParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.export(ctx, p)
	case MethodImport:
		var p ImportParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.importConversation(p)
	}
	var p SessionRefParams
	if err := decodeParams(params, &p); err != nil {
		return nil, err
	}
	switch method {
	case MethodSessionsRead:
		return s.readSession(ctx, p)
	case MethodSessionsOpen:
		return s.openSession(ctx, p)
	case MethodSessionsFollow:
		return s.followSession(ctx, c, p, reply)
	case MethodSessionsUnfollow:
		return s.unfollowSession(ctx, c, p)
	}
	return nil, jsonrpc2.Errorf(jsonrpc2.MethodNotFound, "unknown method %q", method)
}

// minLevel drops records below min (the native watcher logs every file
// event at info).
type minLevel struct {
	min slog.Level
	h   slog.Handler
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}
func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }
func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler            { return minLevel{m.min, m.h.WithAttrs(a)} }
func (m minLevel) WithGroup(n string) slog.Handler                 { return minLevel{m.min, m.h.WithGroup(n)} }
