package native

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchKind names a watcher event.
type WatchKind string

// Watcher event kinds.
const (
	// WatchChanged: a session file of the workspace was created or changed
	// (notice only; List again, served from the cache for unchanged files).
	WatchChanged WatchKind = "changed"
	// WatchRemoved: a session file went away (deleted, archived, renamed,
	// replaced by its compressed form).
	WatchRemoved WatchKind = "removed"
	// WatchUpdate: a followed session gained messages; Update holds them.
	WatchUpdate WatchKind = "update"
	// WatchProblem: a store-level problem (a watched store was deleted, a
	// followed file cannot be read); Message says what.
	WatchProblem WatchKind = "problem"
)

// WatchEvent is one event of a Watcher.
type WatchEvent struct {
	Kind    WatchKind   `json:"kind"`
	Agent   string      `json:"agent,omitempty"`
	Path    string      `json:"path"`              // session file (OpenCode: "<db>#<id>" for updates, the db for notices)
	Update  *TailUpdate `json:"update,omitempty"`  // WatchUpdate only
	Message string      `json:"message,omitempty"` // WatchProblem only
	// SeenAt is when the first file-system event behind this event arrived
	// (Unix ms), for latency measurement.
	SeenAt int64 `json:"seenAt"`
}

// WatchOptions configure a Watcher.
type WatchOptions struct {
	Env       Env
	Workspace string
	// Debounce merges the events of one file that arrive within this window
	// (default 25 ms): a burst of appends gives one event, and an event
	// waits at most this long.
	Debounce time.Duration
	// Recheck is how often the watcher re-verifies its folder watches
	// (default 5 s; negative: never): every watched folder must still be
	// the folder that was watched (same device and inode), and store
	// folders made since are watched. A folder deleted and made again
	// between two inotify reads can otherwise leave a watch on the dead
	// folder, and the events that would tell are not always delivered.
	// Costs one stat per watched folder and one store resolve (a few
	// stats, the Claude projects listing, the Codex date-folder globs).
	Recheck time.Duration
	Logger  *slog.Logger
}

// DefaultRecheck is the default WatchOptions.Recheck.
const DefaultRecheck = 5 * time.Second

// Watcher watches the native stores of one workspace with fsnotify (not
// recursive: it adds watches for new date and project folders as they
// appear) and tails followed sessions incrementally.
type Watcher struct {
	opts   WatchOptions
	ws     string
	fw     *fsnotify.Watcher
	events chan WatchEvent
	done   chan struct{}

	mu      sync.Mutex
	follows map[string]*follow // by path (OpenCode: "<db>#<id>")
	// watched holds every folder with a watch, and what it was (stat before
	// the watch was added) to tell a folder made again under the same path.
	watched map[string]os.FileInfo
	failing map[string]bool  // folders whose watch failed (reported once)
	pending map[string]int64 // path → first SeenAt
	codex   map[string]bool  // Codex rollout path → belongs to the workspace
	err     error
}

type follow struct {
	t   *tail
	ref string // OpenCode db#id
}

// NewWatcher starts watching. Events arrive on Events() until ctx ends or
// Close is called; then the channel is closed.
func NewWatcher(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	w, err := newWatcher(opts)
	if err != nil {
		return nil, err
	}
	go w.loop(ctx)
	return w, nil
}

// newWatcher adds the watches; events are read once loop runs.
func newWatcher(opts WatchOptions) (*Watcher, error) {
	if opts.Debounce <= 0 {
		opts.Debounce = 25 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Recheck == 0 {
		opts.Recheck = DefaultRecheck
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("start native store watcher: %w", err)
	}
	w := &Watcher{
		opts: opts, ws: cleanAbs(opts.Workspace), fw: fw, events: make(chan WatchEvent, 256), done: make(chan struct{}),
		follows: map[string]*follow{}, watched: map[string]os.FileInfo{}, failing: map[string]bool{}, pending: map[string]int64{}, codex: map[string]bool{},
	}
	w.resolve()
	return w, nil
}

// Events returns the event channel. It is closed when the watcher stops.
func (w *Watcher) Events() <-chan WatchEvent { return w.events }

// Close stops the watcher.
func (w *Watcher) Close() error {
	w.mu.Lock()
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.mu.Unlock()
	return nil
}

// Follow starts tailing a session (a path as in Session.Path). It returns
// the whole transcript so far; later appends arrive as WatchUpdate events
// whose Update holds only new or changed messages (or, on Reset, the whole
// transcript again).
func (w *Watcher) Follow(ref string) (*Transcript, error) {
	if db, id, ok := strings.Cut(ref, "#"); ok && strings.HasSuffix(db, ".db") {
		tr, err := ReadOpenCode(context.Background(), db, id)
		if err != nil {
			return nil, err
		}
		t := newTail(AgentOpenCode, ref)
		t.diff(tr, true)
		w.mu.Lock()
		w.follows[ref] = &follow{t: t, ref: ref}
		w.mu.Unlock()
		return tr, nil
	}
	path := filepath.Clean(ref)
	agent := detectAgent(path)
	if agent == "" {
		return nil, fmt.Errorf("follow %s: unknown store format", path)
	}
	t := newTail(agent, path)
	u, _, err := t.poll()
	if err != nil {
		return nil, err
	}
	tr := &Transcript{Session: u.Session, Messages: u.Messages, Markers: u.Markers}
	if agent == AgentClaude {
		attachClaudeSubagents(tr)
	}
	w.mu.Lock()
	w.follows[path] = &follow{t: t}
	w.mu.Unlock()
	if err := w.watchDir(filepath.Dir(path)); err != nil {
		return tr, nil // still listed by the store watches, if any
	}
	return tr, nil
}

// Unfollow stops tailing ref.
func (w *Watcher) Unfollow(ref string) {
	w.mu.Lock()
	delete(w.follows, filepath.Clean(ref))
	delete(w.follows, ref)
	w.mu.Unlock()
}

// watchDirs is every directory the workspace's sessions can appear in, and
// for a missing one its nearest existing parent (to see it created).
func (w *Watcher) watchDirs() []string {
	env, ws := w.opts.Env, w.ws
	var dirs []string
	name, long := ClaudeProjectDirName(ws)
	for _, pd := range claudeProjectsDirs(env) {
		dirs = append(dirs, pd)
		if entries, err := os.ReadDir(pd); err == nil {
			for _, e := range entries {
				if e.IsDir() && (e.Name() == name || (long && strings.HasPrefix(e.Name(), name+"-"))) {
					dirs = append(dirs, filepath.Join(pd, e.Name()))
				}
			}
		}
	}
	if home := codexHome(env); home != "" {
		for _, sub := range []string{"sessions", "archived_sessions"} {
			root := filepath.Join(home, sub)
			dirs = append(dirs, root)
			// date folders: YYYY/MM/DD
			ys, _ := filepath.Glob(filepath.Join(root, "[0-9][0-9][0-9][0-9]"))
			ms, _ := filepath.Glob(filepath.Join(root, "[0-9][0-9][0-9][0-9]", "[0-9][0-9]"))
			ds, _ := filepath.Glob(filepath.Join(root, "[0-9][0-9][0-9][0-9]", "[0-9][0-9]", "[0-9][0-9]"))
			dirs = append(append(append(dirs, ys...), ms...), ds...)
		}
	}
	if root := geminiRoot(env); root != "" {
		dirs = append(dirs, filepath.Join(root, "tmp"))
		gd, _ := geminiProjectDirs(env, ws)
		for d := range gd {
			dirs = append(dirs, d, filepath.Join(d, "chats"))
		}
	}
	if d := openCodeDir(env); d != "" {
		dirs = append(dirs, d)
	}
	if root := piSessionsDir(env); root != "" {
		dirs = append(dirs, root, filepath.Join(root, PiDirName(ws)))
	}
	return dirs
}

// resolve adds watches for every existing store dir and the folder of
// every followed file (or the nearest existing parent of a missing one,
// not above Home). A watched folder that was replaced by another one under
// the same path loses its dead watch first. It returns the folders it
// watched anew.
func (w *Watcher) resolve() (added []string) {
	dirs := w.watchDirs()
	w.mu.Lock()
	for ref := range w.follows {
		if !strings.Contains(ref, "#") {
			dirs = append(dirs, filepath.Dir(ref))
		}
	}
	w.mu.Unlock()
	for _, d := range dirs {
		for {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				w.mu.Lock()
				old, had := w.watched[d]
				w.mu.Unlock()
				if had && old != nil && !os.SameFile(old, fi) {
					w.unwatch(d)
					w.emit(WatchEvent{Kind: WatchProblem, Path: d, Message: "watched store directory was replaced", SeenAt: time.Now().UnixMilli()})
					had = false
				}
				err := w.watchDir(d)
				if !had && err == nil {
					// (a folder that cannot be watched is not "added":
					// rescan would resolve again for ever)
					added = append(added, d)
				}
				w.mu.Lock()
				report := err != nil && !w.failing[d]
				if err != nil {
					w.failing[d] = true
				} else {
					delete(w.failing, d)
				}
				w.mu.Unlock()
				if report {
					w.emit(WatchEvent{Kind: WatchProblem, Path: d, Message: err.Error(), SeenAt: time.Now().UnixMilli()})
				}
				break
			}
			parent := filepath.Dir(d)
			if parent == d || (w.opts.Env.Home != "" && !strings.HasPrefix(parent, w.opts.Env.Home)) || parent == "/" {
				break
			}
			d = parent
		}
	}
	return added
}

// rescan resolves the watched folders again until nothing new is added (a
// subfolder made between a glob and its parent's watch has no event of its
// own) and queues the files already in every newly watched folder (each
// becomes a WatchChanged, or WatchUpdate for a followed one, when the
// debounce timer fires). It reports whether it queued anything.
func (w *Watcher) rescan(now int64) bool {
	queued := false
	for added := w.resolve(); len(added) > 0; added = w.resolve() {
		for _, d := range added {
			if w.queueDir(d, now) {
				queued = true
			}
		}
	}
	return queued
}

// queueDir queues every file in d; it reports whether there was any.
func (w *Watcher) queueDir(d string, now int64) bool {
	entries, _ := os.ReadDir(d)
	w.mu.Lock()
	defer w.mu.Unlock()
	queued := false
	for _, e := range entries {
		if p := filepath.Join(d, e.Name()); !e.IsDir() {
			if _, ok := w.pending[p]; !ok {
				w.pending[p] = now
			}
			queued = true
		}
	}
	return queued
}

// reverify drops the watch of every watched folder that is gone or is no
// longer the folder that was watched (another device and inode; a folder
// made again at once often gets the freed inode number back, which this
// cannot see: the events handled in loop can), with a WatchProblem for
// each, and reports whether it dropped any.
func (w *Watcher) reverify(now int64) bool {
	w.mu.Lock()
	var dead []string
	for d, old := range w.watched {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || (old != nil && !os.SameFile(old, fi)) {
			dead = append(dead, d)
		}
	}
	w.mu.Unlock()
	for _, d := range dead {
		w.unwatch(d)
		w.emit(WatchEvent{Kind: WatchProblem, Path: d, Message: "watched store directory removed", SeenAt: now})
	}
	return len(dead) > 0
}

// watchedBelow returns the watched folders that are p or below p.
func (w *Watcher) watchedBelow(p string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ds []string
	for d := range w.watched {
		if d == p || strings.HasPrefix(d, p+string(filepath.Separator)) {
			ds = append(ds, d)
		}
	}
	return ds
}

// watchDir adds a watch for d unless it has one. The folder's identity is
// taken before the watch is added: if d is replaced in between, the next
// check sees a stale identity and watches it again (never the reverse).
func (w *Watcher) watchDir(d string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watched[d]; ok {
		return nil
	}
	fi, _ := os.Stat(d)
	if err := w.fw.Add(d); err != nil {
		return fmt.Errorf("watch %s: %w", d, err)
	}
	w.watched[d] = fi
	return nil
}

// unwatch forgets d and drops fsnotify's record of its watch now: if the
// folder is made again before fsnotify reads the old watch's
// IN_DELETE_SELF, that late event would otherwise remove the new watch
// (same path) and its events would be lost. The error of a watch the
// kernel already removed is of no interest.
func (w *Watcher) unwatch(d string) {
	w.mu.Lock()
	delete(w.watched, d)
	w.mu.Unlock()
	_ = w.fw.Remove(d)
}

func (w *Watcher) emit(ev WatchEvent) {
	select {
	case w.events <- ev:
	case <-w.done:
	}
}

func (w *Watcher) loop(ctx context.Context) {
	defer close(w.events)
	defer w.fw.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	arm := func() {
		if !armed {
			timer.Reset(w.opts.Debounce)
			armed = true
		}
	}
	var recheck <-chan time.Time
	if w.opts.Recheck > 0 {
		t := time.NewTicker(w.opts.Recheck)
		defer t.Stop()
		recheck = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.done:
			return
		case <-recheck:
			// The backstop for a folder replaced without an event that
			// tells (see WatchOptions.Recheck).
			now := time.Now().UnixMilli()
			dropped := w.reverify(now)
			if w.rescan(now) || dropped {
				arm()
			}
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			now := time.Now().UnixMilli()
			w.emit(WatchEvent{Kind: WatchProblem, Message: fmt.Sprintf("file watcher: %v", err), SeenAt: now})
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// events were lost: look at every file of every watched folder
				w.mu.Lock()
				dirs := make([]string, 0, len(w.watched))
				for d := range w.watched {
					dirs = append(dirs, d)
				}
				w.mu.Unlock()
				for _, d := range dirs {
					entries, _ := os.ReadDir(d)
					w.mu.Lock()
					for _, e := range entries {
						if p := filepath.Join(d, e.Name()); !e.IsDir() {
							if _, ok := w.pending[p]; !ok {
								w.pending[p] = now
							}
						}
					}
					w.mu.Unlock()
				}
				w.reverify(now)
				w.rescan(now)
				arm()
			}
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			now := time.Now().UnixMilli()
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					// A new project or date folder: watch it, and pick up
					// files written into it before the watch existed. A
					// watch held for this path or below it is on a folder
					// that was deleted (its deletion may never have been
					// reported: fsnotify drops a watched folder's
					// IN_DELETE_SELF when its parent path is watched, and
					// the parent may already be a new folder by then), so
					// it goes first. The event may also be a late one for
					// a folder already watched again: it is then watched
					// once more, and its files are reported again.
					for _, d := range w.watchedBelow(ev.Name) {
						w.unwatch(d)
					}
					w.rescan(now)
				}
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				if gone := w.watchedBelow(ev.Name); len(gone) > 0 {
					// A watched folder, or a parent of one, was deleted or
					// moved: every watch at or below it is on a folder that
					// is gone from that path. They are dropped, even when
					// the event is a late one and the path is a new folder
					// watched again (a deleted folder's inode number is
					// often given to the next new one, so that cannot be
					// told apart), and the stores are resolved again: they
					// may already be back, with files in them, which are
					// reported.
					for _, d := range gone {
						w.unwatch(d)
						w.emit(WatchEvent{Kind: WatchProblem, Path: d, Message: "watched store directory removed", SeenAt: now})
					}
					w.rescan(now)
					arm()
					continue
				}
			}
			key := ev.Name
			if strings.HasSuffix(key, ".db-wal") || strings.HasSuffix(key, ".db") {
				key = strings.TrimSuffix(key, "-wal")
			}
			w.mu.Lock()
			if _, ok := w.pending[key]; !ok {
				w.pending[key] = now
			}
			w.mu.Unlock()
			arm()
		case <-timer.C:
			armed = false
			w.mu.Lock()
			pend := w.pending
			w.pending = map[string]int64{}
			w.mu.Unlock()
			for p, seen := range pend {
				w.handle(p, seen)
			}
		}
	}
}

// handle processes the merged events of one path.
func (w *Watcher) handle(path string, seen int64) {
	if strings.HasSuffix(path, ".db") {
		w.handleDB(path, seen)
		return
	}
	agent, ok := w.sessionFile(path)
	if !ok {
		return
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil && os.IsNotExist(err):
		w.emit(WatchEvent{Kind: WatchRemoved, Agent: agent, Path: path, SeenAt: seen})
		w.mu.Lock()
		f := w.follows[path]
		delete(w.follows, path)
		w.mu.Unlock()
		// Codex compresses a finished rollout: keep following the .zst
		if f != nil && fileExists(path+".zst") {
			w.mu.Lock()
			w.follows[path+".zst"] = &follow{t: newTail(agent, path+".zst")}
			w.mu.Unlock()
			w.handle(path+".zst", seen)
		}
		return
	case err != nil:
		w.emit(WatchEvent{Kind: WatchProblem, Agent: agent, Path: path, Message: err.Error(), SeenAt: seen})
		return
	case fi.IsDir():
		w.emit(WatchEvent{Kind: WatchProblem, Agent: agent, Path: path, Message: "session file is a directory", SeenAt: seen})
		return
	}
	w.mu.Lock()
	f := w.follows[path]
	w.mu.Unlock()
	if f != nil {
		u, changed, err := f.t.poll()
		if err != nil {
			w.emit(WatchEvent{Kind: WatchProblem, Agent: agent, Path: path, Message: err.Error(), SeenAt: seen})
		} else if changed {
			w.emit(WatchEvent{Kind: WatchUpdate, Agent: agent, Path: path, Update: &u, SeenAt: seen})
		}
	}
	w.emit(WatchEvent{Kind: WatchChanged, Agent: agent, Path: path, SeenAt: seen})
}

func (w *Watcher) handleDB(db string, seen int64) {
	if !fileExists(db) {
		w.emit(WatchEvent{Kind: WatchRemoved, Agent: AgentOpenCode, Path: db, SeenAt: seen})
		return
	}
	w.emit(WatchEvent{Kind: WatchChanged, Agent: AgentOpenCode, Path: db, SeenAt: seen})
	w.mu.Lock()
	var fs []*follow
	for ref, f := range w.follows {
		if strings.HasPrefix(ref, db+"#") {
			fs = append(fs, f)
		}
	}
	w.mu.Unlock()
	for _, f := range fs {
		_, id, _ := strings.Cut(f.ref, "#")
		tr, err := ReadOpenCode(context.Background(), db, id)
		if err != nil {
			w.emit(WatchEvent{Kind: WatchProblem, Agent: AgentOpenCode, Path: f.ref, Message: err.Error(), SeenAt: seen})
			continue
		}
		if u, changed, _ := f.t.diff(tr, false); changed {
			w.emit(WatchEvent{Kind: WatchUpdate, Agent: AgentOpenCode, Path: f.ref, Update: &u, SeenAt: seen})
		}
	}
}

// sessionFile tells whether path is a session file of this workspace.
func (w *Watcher) sessionFile(path string) (string, bool) {
	base := filepath.Base(path)
	dir := filepath.Dir(path)
	w.mu.Lock()
	_, followed := w.follows[path]
	w.mu.Unlock()
	switch {
	case strings.HasPrefix(base, "rollout-") && (strings.HasSuffix(base, ".jsonl") || strings.HasSuffix(base, ".jsonl.zst")):
		if followed {
			return AgentCodex, true
		}
		w.mu.Lock()
		mine, known := w.codex[path]
		w.mu.Unlock()
		if !known {
			head := fileHead(path, 64<<10)
			cwd := codexHeadCwd([]byte(head))
			if cwd == "" {
				return AgentCodex, !fileExists(path) // removal of an unknown file: notify
			}
			mine = sameDir(cwd, w.ws)
			w.mu.Lock()
			w.codex[path] = mine
			w.mu.Unlock()
		}
		return AgentCodex, mine
	case strings.HasPrefix(base, "session-") && filepath.Base(dir) == "chats" && (strings.HasSuffix(base, ".jsonl") || strings.HasSuffix(base, ".json")):
		return AgentGemini, true
	case strings.HasSuffix(base, ".jsonl") && !strings.HasPrefix(base, "agent-"):
		if followed {
			return detectAgentOr(path), true
		}
		for _, pd := range claudeProjectsDirs(w.opts.Env) {
			if filepath.Dir(dir) == pd {
				return AgentClaude, true
			}
		}
		if root := piSessionsDir(w.opts.Env); root != "" && dir == filepath.Join(root, PiDirName(w.ws)) {
			return AgentPi, true
		}
	}
	return "", false
}

func detectAgentOr(path string) string {
	if a := detectAgent(path); a != "" {
		return a
	}
	return AgentClaude
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}
