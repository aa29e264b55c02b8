package checkpoint

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Defaults of Options.
const (
	DefaultMaxFileBytes  = 10 << 20
	DefaultMaxTotalBytes = 2 << 30
	DefaultKeepCount     = 1000
	DefaultKeepAge       = 30 * 24 * time.Hour
)

// DefaultIgnore is ignored in every workspace on top of its .gitignore files
// (gitignore syntax): dependency and build trees that are rebuilt, not
// edited. The user's .git is never read, whatever these say.
var DefaultIgnore = []string{"node_modules/", ".venv/", "__pycache__/", ".direnv/", ".DS_Store"}

// refPrefix names the shadow repository's refs, one per checkpoint; a
// checkpoint without a ref is garbage for Prune.
const refPrefix = "refs/checkpoints/"

// racyWindow: a file modified this close to (or after) the moment it was
// read may change again within the same mtime tick (Linux stamps files with
// a coarse clock), so its cached hash is not trusted next time.
const racyWindow = time.Second

// Options configure a Store.
type Options struct {
	// Workspace is the absolute root whose files are recorded.
	Workspace string
	// Dir is the shadow repository (created bare when missing).
	Dir string
	// MaxFileBytes: larger files are skipped (reported); 0 means
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxTotalBytes caps the bytes one checkpoint reads; files beyond it are
	// skipped (reported). 0 means DefaultMaxTotalBytes.
	MaxTotalBytes int64
	// KeepCount and KeepAge bound what Prune keeps: the newest KeepCount
	// checkpoints younger than KeepAge. 0 means the defaults; negative
	// disables that bound.
	KeepCount int
	KeepAge   time.Duration
	// Ignore are gitignore patterns applied at the workspace root; nil means
	// DefaultIgnore.
	Ignore []string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Store is one workspace's shadow repository. Its methods are safe for
// concurrent use; checkpoints and restores are serialized.
type Store struct {
	opts  Options
	repo  *git.Repository
	st    storer.Storer
	log   *slog.Logger
	mu    sync.Mutex
	cache map[string]cacheEntry  // guarded by mu
	trees map[plumbing.Hash]bool // tree objects known to be stored; guarded by mu

	saveMu sync.Mutex // one stat cache save at a time
	saveWG sync.WaitGroup
}

// Close waits for the stat cache to be saved.
func (s *Store) Close() error {
	s.saveWG.Wait()
	return nil
}

// cacheEntry is what the stat cache knows of one path.
type cacheEntry struct {
	Size, MTime, CTime int64
	Mode               uint32
	Ino                uint64
	ReadAt             int64 // when the content was hashed (Unix ns)
	Hash               plumbing.Hash
}

// Skip is a path a checkpoint left out, and why. Size and MTime identify
// the version left out, so a skipped file that changed is still reported.
type Skip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Size   int64  `json:"size,omitempty"`
	MTime  int64  `json:"mtime,omitempty"`
}

// Checkpoint describes one recorded state.
type Checkpoint struct {
	ID    string    `json:"id"`
	Label string    `json:"label,omitempty"`
	Time  time.Time `json:"time"`
	// Files is the number of files and links recorded; Hashed how many of
	// them were read (the rest came from the stat cache); Bytes their total
	// size.
	Files   int    `json:"files"`
	Hashed  int    `json:"hashed"`
	Bytes   int64  `json:"bytes"`
	Skipped []Skip `json:"skipped,omitempty"`
	// Ignored counts the paths the ignore rules left out; IgnoredDirs names
	// the first few ignored directories.
	Ignored     int      `json:"ignored,omitempty"`
	IgnoredDirs []string `json:"ignoredDirs,omitempty"`
}

// meta is what a checkpoint commit's message holds (JSON).
type meta struct {
	Label       string   `json:"label,omitempty"`
	Files       int      `json:"files"`
	Hashed      int      `json:"hashed"`
	Bytes       int64    `json:"bytes"`
	Skipped     []Skip   `json:"skipped,omitempty"`
	Ignored     int      `json:"ignored,omitempty"`
	IgnoredDirs []string `json:"ignoredDirs,omitempty"`
}

// ErrNotFound is returned for an unknown checkpoint id.
var ErrNotFound = errors.New("no such checkpoint")

// DefaultDir is where a workspace's shadow repository lives: "checkpoints"
// beside the store file storePath.
func DefaultDir(storePath string) string {
	return filepath.Join(filepath.Dir(storePath), "checkpoints")
}

// Open opens (creating when missing) the shadow repository opts.Dir.
func Open(opts Options) (*Store, error) {
	if opts.MaxFileBytes == 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.MaxTotalBytes == 0 {
		opts.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if opts.KeepCount == 0 {
		opts.KeepCount = DefaultKeepCount
	}
	if opts.KeepAge == 0 {
		opts.KeepAge = DefaultKeepAge
	}
	if opts.Ignore == nil {
		opts.Ignore = DefaultIgnore
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if !filepath.IsAbs(opts.Workspace) || !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("open checkpoints: workspace %q and dir %q must be absolute", opts.Workspace, opts.Dir)
	}
	opts.Workspace = filepath.Clean(opts.Workspace)
	if err := os.MkdirAll(filepath.Dir(opts.Dir), 0o700); err != nil {
		return nil, fmt.Errorf("open checkpoints %s: %w", opts.Dir, err)
	}
	repo, err := git.PlainOpen(opts.Dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainInit(opts.Dir, true)
	}
	if err != nil {
		return nil, fmt.Errorf("open checkpoints %s: %w", opts.Dir, err)
	}
	s := &Store{opts: opts, repo: repo, st: repo.Storer, log: log, trees: map[plumbing.Hash]bool{}}
	s.cache = s.loadCache()
	return s, nil
}

// Dir is the shadow repository's directory.
func (s *Store) Dir() string { return s.opts.Dir }

func (s *Store) cachePath() string { return filepath.Join(s.opts.Dir, "ochat-statcache") }

// loadCache reads the stat cache; a missing or unreadable one is empty (the
// next checkpoint reads every file).
func (s *Store) loadCache() map[string]cacheEntry {
	m := map[string]cacheEntry{}
	f, err := os.Open(s.cachePath())
	if err != nil {
		return m
	}
	defer f.Close()
	if err := gob.NewDecoder(f).Decode(&m); err != nil {
		s.log.Info("checkpoint stat cache unreadable; rebuilding it", "path", s.cachePath(), "err", err)
		return map[string]cacheEntry{}
	}
	return m
}

func (s *Store) saveCache(m map[string]cacheEntry) error {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(m); err != nil {
		return err
	}
	return writeAtomic(s.cachePath(), buf.Bytes(), 0o600)
}

// ---- taking a checkpoint ----

// entry is one recorded path.
type entry struct {
	path string
	mode filemode.FileMode
	hash plumbing.Hash
}

// scan is the state of one walk.
type scan struct {
	s        *Store
	ctx      context.Context
	start    time.Time
	patterns []gitignore.Pattern
	old, now map[string]cacheEntry
	entries  []entry
	jobs     []job
	cands    []cand
	cp       Checkpoint
	read     int64
}

// Take records the workspace's files now. Files it cannot record are in
// the result's Skipped; an error means no checkpoint was made (the shadow
// repository could not be written, or ctx ended).
func (s *Store) Take(ctx context.Context, label string) (Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(ctx, label)
}

func (s *Store) takeLocked(ctx context.Context, label string) (Checkpoint, error) {
	sc := &scan{s: s, ctx: ctx, start: s.opts.Now(), old: s.cache, now: make(map[string]cacheEntry, len(s.cache))}
	sc.cp.Label = label
	for _, p := range s.opts.Ignore {
		sc.patterns = append(sc.patterns, gitignore.ParsePattern(p, nil))
	}
	if b, err := os.ReadFile(filepath.Join(s.opts.Workspace, ".git", "info", "exclude")); err == nil {
		sc.patterns = append(sc.patterns, parseIgnore(b, nil)...)
	}
	if err := sc.walk("", nil); err != nil {
		return Checkpoint{}, err
	}
	sc.statAll()
	sc.hashJobs()
	tree, err := s.writeTree(sc.entries)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: store tree: %w", err)
	}
	m := meta{Label: label, Files: sc.cp.Files, Hashed: sc.cp.Hashed, Bytes: sc.cp.Bytes, Skipped: sc.cp.Skipped, Ignored: sc.cp.Ignored, IgnoredDirs: sc.cp.IgnoredDirs}
	msg, _ := json.Marshal(m)
	sig := object.Signature{Name: "ochat", Email: "ochat@localhost", When: sc.start}
	c := &object.Commit{Author: sig, Committer: sig, Message: string(msg), TreeHash: tree}
	obj := s.st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: encode commit: %w", err)
	}
	h, err := s.st.SetEncodedObject(obj)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: store commit: %w", err)
	}
	if err := s.st.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(refPrefix+h.String()), h)); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: store ref: %w", err)
	}
	s.cache = sc.now
	// Saved in the background (one at a time, in order): the cache only
	// spares the next process re-reading files, and a lost save costs that.
	s.saveWG.Add(1)
	go func(m map[string]cacheEntry) {
		defer s.saveWG.Done()
		s.saveMu.Lock()
		defer s.saveMu.Unlock()
		if err := s.saveCache(m); err != nil {
			s.log.Info("checkpoint stat cache not saved; the next daemon start reads every file", "err", err)
		}
	}(sc.now)
	sc.cp.ID = h.String()
	sc.cp.Time = sc.start
	return sc.cp, nil
}

func parseIgnore(b []byte, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}

// ignored reports whether path (components) matches the rules, the last
// matching pattern winning as in git.
func (sc *scan) ignored(path []string, isDir bool) bool {
	for i := len(sc.patterns) - 1; i >= 0; i-- {
		switch sc.patterns[i].Match(path, isDir) {
		case gitignore.Exclude:
			return true
		case gitignore.Include:
			return false
		}
	}
	return false
}

func (sc *scan) skip(rel, reason string, fi fs.FileInfo) {
	sk := Skip{Path: rel, Reason: reason}
	if fi != nil {
		sk.Size, sk.MTime = fi.Size(), fi.ModTime().UnixNano()
	}
	sc.cp.Skipped = append(sc.cp.Skipped, sk)
}

// walk records directory rel (slash-separated, "" for the root), whose
// components are comps. Entries come out sorted by path.
func (sc *scan) walk(rel string, comps []string) error {
	if err := sc.ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	dir := filepath.Join(sc.s.opts.Workspace, filepath.FromSlash(rel))
	des, err := os.ReadDir(dir)
	if err != nil && len(des) == 0 {
		if rel == "" {
			return fmt.Errorf("checkpoint: read workspace %s: %w", dir, err)
		}
		sc.skip(rel+"/", "unreadable directory: "+errText(err), nil)
		return nil
	}
	npat := len(sc.patterns)
	defer func() { sc.patterns = sc.patterns[:npat] }()
	for _, de := range des {
		if de.Name() == ".gitignore" && de.Type().IsRegular() {
			if b, err := os.ReadFile(filepath.Join(dir, ".gitignore")); err == nil {
				sc.patterns = append(sc.patterns, parseIgnore(b, comps)...)
			}
		}
	}
	for _, de := range des {
		name := de.Name()
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		if name == ".git" {
			continue // the user's repository (or a submodule's) is theirs alone
		}
		pc := append(comps[:len(comps):len(comps)], name)
		isDir := de.IsDir()
		if sc.ignored(pc, isDir) {
			sc.cp.Ignored++
			if isDir && len(sc.cp.IgnoredDirs) < 20 {
				sc.cp.IgnoredDirs = append(sc.cp.IgnoredDirs, p+"/")
			}
			continue
		}
		if isDir {
			// The store's own directory (the database and this repository),
			// when the state dir lies inside the workspace.
			if abs := filepath.Join(dir, name); abs == sc.s.opts.Dir || abs == filepath.Dir(sc.s.opts.Dir) {
				continue
			}
			if err := sc.walk(p, pc); err != nil {
				return err
			}
			continue
		}
		sc.cands = append(sc.cands, cand{abs: filepath.Join(dir, name), rel: p})
	}
	return nil
}

// cand is a non-directory entry found by the walk, stat'ed after it.
type cand struct {
	abs, rel string
	fi       fs.FileInfo
	err      error
}

// statAll lstats the candidates on every core: on a large workspace the
// stats are most of a checkpoint whose files did not change.
func (sc *scan) statAll() {
	n := min(runtime.GOMAXPROCS(0), 4)
	var wg sync.WaitGroup
	chunk := (len(sc.cands) + n - 1) / max(n, 1)
	for w := 0; w < n && w*chunk < len(sc.cands); w++ {
		part := sc.cands[w*chunk : min((w+1)*chunk, len(sc.cands))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range part {
				part[i].fi, part[i].err = os.Lstat(part[i].abs)
			}
		}()
	}
	wg.Wait()
	for i := range sc.cands {
		sc.file(&sc.cands[i])
	}
}

// file records one non-directory entry.
func (sc *scan) file(c *cand) {
	abs, rel, fi, err := c.abs, c.rel, c.fi, c.err
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			sc.skip(rel, "unreadable: "+errText(err), nil)
		}
		return
	}
	var mode filemode.FileMode
	switch t := fi.Mode(); {
	case t&fs.ModeSymlink != 0:
		mode = filemode.Symlink
	case t.IsRegular():
		mode = filemode.Regular
		if t.Perm()&0o111 != 0 {
			mode = filemode.Executable
		}
	case t&fs.ModeNamedPipe != 0:
		sc.skip(rel, "a FIFO (named pipe): not recorded", fi)
		return
	case t&fs.ModeSocket != 0:
		sc.skip(rel, "a socket: not recorded", fi)
		return
	default:
		sc.skip(rel, "a device or other special file: not recorded", fi)
		return
	}
	ino, ctime := sysStat(fi)
	ce := cacheEntry{Size: fi.Size(), MTime: fi.ModTime().UnixNano(), CTime: ctime, Mode: uint32(fi.Mode()), Ino: ino}
	if old, ok := sc.old[rel]; ok && old.Size == ce.Size && old.MTime == ce.MTime && old.CTime == ce.CTime && old.Mode == ce.Mode && old.Ino == ce.Ino &&
		old.ReadAt-old.MTime > int64(racyWindow) {
		sc.now[rel] = old
		sc.add(rel, mode, old.Hash, fi.Size())
		return
	}
	if mode != filemode.Symlink {
		if fi.Size() > sc.s.opts.MaxFileBytes {
			sc.skip(rel, fmt.Sprintf("%s, over the per-file cap of %s", humanBytes(fi.Size()), humanBytes(sc.s.opts.MaxFileBytes)), fi)
			return
		}
		if sc.read+fi.Size() > sc.s.opts.MaxTotalBytes {
			sc.skip(rel, fmt.Sprintf("over the per-checkpoint cap of %s read", humanBytes(sc.s.opts.MaxTotalBytes)), fi)
			return
		}
	}
	if mode != filemode.Symlink {
		sc.read += fi.Size()
	}
	// Read, hashed and stored after the walk, in parallel (hashJobs).
	sc.jobs = append(sc.jobs, job{idx: len(sc.entries), abs: abs, rel: rel, mode: mode, fi: fi})
	sc.entries = append(sc.entries, entry{path: rel, mode: mode})
}

// job is one file to read, hash and store.
type job struct {
	idx  int
	abs  string
	rel  string
	mode filemode.FileMode
	fi   fs.FileInfo
	// results
	ce     cacheEntry
	size   int64
	reason string // skipped
}

// run reads, hashes and stores j's file.
func (j *job) run(s *Store) {
	var data []byte
	fi := j.fi
	if j.mode == filemode.Symlink {
		target, err := os.Readlink(j.abs) // the link itself, never what it points to
		if err != nil {
			j.reason = "unreadable link: " + errText(err)
			return
		}
		data = []byte(target)
	} else {
		var err error
		data, fi, err = readStable(j.abs, fi, s.opts.MaxFileBytes)
		if err != nil {
			j.fi, j.reason = fi, errText(err)
			return
		}
	}
	h, err := s.putBlob(data)
	if err != nil {
		j.reason = "could not be stored: " + errText(err)
		return
	}
	ino, ctime := sysStat(fi)
	j.ce = cacheEntry{Size: fi.Size(), MTime: fi.ModTime().UnixNano(), CTime: ctime, Mode: uint32(fi.Mode()), Ino: ino,
		ReadAt: s.opts.Now().UnixNano(), Hash: h}
	j.size = int64(len(data))
}

// hashJobs runs the walk's jobs on every core and folds the results into
// the scan, dropping the entries of files that could not be recorded.
func (sc *scan) hashJobs() {
	n := min(runtime.GOMAXPROCS(0), 4)
	ch := make(chan *job)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				j.run(sc.s)
			}
		}()
	}
	for i := range sc.jobs {
		ch <- &sc.jobs[i]
	}
	close(ch)
	wg.Wait()
	drop := map[int]bool{}
	for i := range sc.jobs {
		j := &sc.jobs[i]
		if j.reason != "" {
			sc.skip(j.rel, j.reason, j.fi)
			drop[j.idx] = true
			continue
		}
		sc.entries[j.idx].hash = j.ce.Hash
		sc.now[j.rel] = j.ce
		sc.cp.Hashed++
		sc.cp.Files++
		sc.cp.Bytes += j.size
	}
	if len(drop) > 0 {
		kept := sc.entries[:0]
		for i, e := range sc.entries {
			if !drop[i] {
				kept = append(kept, e)
			}
		}
		sc.entries = kept
	}
	sort.Slice(sc.cp.Skipped, func(a, b int) bool { return sc.cp.Skipped[a].Path < sc.cp.Skipped[b].Path })
}

func (sc *scan) add(rel string, mode filemode.FileMode, h plumbing.Hash, size int64) {
	sc.entries = append(sc.entries, entry{path: rel, mode: mode, hash: h})
	sc.cp.Files++
	sc.cp.Bytes += size
}

// errChanged: the file kept changing while it was read.
var errChanged = errors.New("changed while being read (not recorded this time)")

// readStable reads the regular file abs, at most limit bytes, and checks
// that its stat did not change meanwhile (one retry). It opens without
// following a final symlink and without blocking on a FIFO swapped in.
func readStable(abs string, fi fs.FileInfo, limit int64) ([]byte, fs.FileInfo, error) {
	for try := 0; ; try++ {
		b, after, err := readOnce(abs, limit)
		if err != nil {
			return nil, fi, err
		}
		if after.Size() == int64(len(b)) && after.ModTime().Equal(fi.ModTime()) && after.Size() == fi.Size() {
			return b, after, nil
		}
		if try == 1 {
			return nil, after, errChanged
		}
		fi = after
	}
}

func readOnce(abs string, limit int64) ([]byte, fs.FileInfo, error) {
	f, err := openNoFollow(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("unreadable: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("unreadable: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, st, errChanged
	}
	// One buffer of the stat'ed size (+1 to see growth), not ReadAll's
	// doublings.
	b := make([]byte, min(st.Size(), limit)+1)
	n, err := io.ReadFull(f, b)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		b, err = b[:n], nil
	case err == nil && int64(n) <= limit: // it grew: read on up to the limit
		var rest []byte
		rest, err = io.ReadAll(io.LimitReader(f, limit+1-int64(n)))
		b = append(b, rest...)
	}
	if err != nil {
		return nil, st, fmt.Errorf("unreadable: %w", err)
	}
	after, err := f.Stat()
	if err != nil {
		return nil, st, fmt.Errorf("unreadable: %w", err)
	}
	return b, after, nil
}

// zlibPool reuses compressors: each holds about a megabyte of tables.
var zlibPool sync.Pool

// putBlob stores data as a loose blob unless the repository has it. It
// writes the object itself (the loose format: zlib of "blob <size>\x00" and
// the data, at objects/xx/yyyy…) at zlib's fastest level: go-git's writer
// compresses at the default level, several times slower, and a first
// checkpoint compresses the whole workspace. go-git reads it like any other.
func (s *Store) putBlob(data []byte) (plumbing.Hash, error) {
	return s.putLoose(plumbing.BlobObject, data)
}

// putLoose stores one object of type typ as a loose object (see putBlob).
func (s *Store) putLoose(typ plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(typ, data)
	hex := h.String()
	dir := filepath.Join(s.opts.Dir, "objects", hex[:2])
	path := filepath.Join(dir, hex[2:])
	if _, err := os.Stat(path); err == nil {
		return h, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return h, err
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return h, err
	}
	zw, _ := zlibPool.Get().(*zlib.Writer)
	if zw == nil {
		zw, _ = zlib.NewWriterLevel(tmp, zlib.BestSpeed)
	} else {
		zw.Reset(tmp)
	}
	defer zlibPool.Put(zw)
	_, err = fmt.Fprintf(zw, "%s %d\x00", typ, len(data))
	if err == nil {
		_, err = zw.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return h, err
	}
	return h, nil
}

// writeTree stores the trees of entries (sorted by path) and returns the
// root tree's hash. Subtrees the repository has are not written again.
func (s *Store) writeTree(entries []entry) (plumbing.Hash, error) {
	h, _, err := s.buildTree(entries, "")
	return h, err
}

// buildTree builds the tree of the entries under prefix (all of which start
// with it) and returns its hash and how many entries it consumed.
func (s *Store) buildTree(entries []entry, prefix string) (plumbing.Hash, int, error) {
	var t object.Tree
	i := 0
	for i < len(entries) {
		rest := strings.TrimPrefix(entries[i].path, prefix)
		if slash := strings.IndexByte(rest, '/'); slash >= 0 {
			name := rest[:slash]
			sub := prefix + name + "/"
			j := i
			for j < len(entries) && strings.HasPrefix(entries[j].path, sub) {
				j++
			}
			h, _, err := s.buildTree(entries[i:j], sub)
			if err != nil {
				return h, 0, err
			}
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
			i = j
			continue
		}
		t.Entries = append(t.Entries, object.TreeEntry{Name: rest, Mode: entries[i].mode, Hash: entries[i].hash})
		i++
	}
	// git orders a tree's entries by name, a directory's name as if it
	// ended in "/".
	sort.Slice(t.Entries, func(a, b int) bool { return gitName(t.Entries[a]) < gitName(t.Entries[b]) })
	obj := &plumbing.MemoryObject{}
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, 0, err
	}
	h := obj.Hash()
	if s.trees[h] {
		return h, i, nil
	}
	r, _ := obj.Reader()
	data, _ := io.ReadAll(r)
	if _, err := s.putLoose(plumbing.TreeObject, data); err != nil {
		return h, i, err
	}
	s.trees[h] = true
	return h, i, nil
}

func gitName(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// ---- reading checkpoints ----

// Get returns checkpoint id's description.
func (s *Store) Get(id string) (Checkpoint, error) {
	c, err := s.commit(id)
	if err != nil {
		return Checkpoint{}, err
	}
	return describe(c), nil
}

func describe(c *object.Commit) Checkpoint {
	var m meta
	_ = json.Unmarshal([]byte(c.Message), &m)
	return Checkpoint{ID: c.Hash.String(), Label: m.Label, Time: c.Committer.When, Files: m.Files, Hashed: m.Hashed, Bytes: m.Bytes,
		Skipped: m.Skipped, Ignored: m.Ignored, IgnoredDirs: m.IgnoredDirs}
}

func (s *Store) commit(id string) (*object.Commit, error) {
	if len(id) != 40 {
		return nil, fmt.Errorf("checkpoint %q: %w", id, ErrNotFound)
	}
	c, err := object.GetCommit(s.st, plumbing.NewHash(id))
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, fmt.Errorf("checkpoint %s: %w (pruned?)", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	return c, nil
}

func (s *Store) tree(id string) (*object.Tree, *object.Commit, error) {
	c, err := s.commit(id)
	if err != nil {
		return nil, nil, err
	}
	t, err := c.Tree()
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: tree: %w", id, err)
	}
	return t, c, nil
}

// File is one path's content in a checkpoint.
type File struct {
	Exists bool
	// Skipped is set when the checkpoint left the path out (Reason says
	// why): its content is unknown.
	Skipped bool
	Reason  string
	Mode    filemode.FileMode
	Data    []byte
	Hash    plumbing.Hash
}

// Symlink reports whether f is a symbolic link (Data is its target).
func (f File) Symlink() bool { return f.Mode == filemode.Symlink }

// File returns what path (slash-separated, relative to the workspace) held
// in checkpoint id.
func (s *Store) File(id, path string) (File, error) {
	t, c, err := s.tree(id)
	if err != nil {
		return File{}, err
	}
	return s.fileIn(t, c, path)
}

func (s *Store) fileIn(t *object.Tree, c *object.Commit, path string) (File, error) {
	e, err := t.FindEntry(path)
	if err != nil {
		for _, sk := range describe(c).Skipped {
			if sk.Path == path {
				return File{Skipped: true, Reason: sk.Reason}, nil
			}
		}
		return File{}, nil
	}
	if e.Mode == filemode.Dir || e.Mode == filemode.Submodule {
		return File{}, nil
	}
	data, err := s.blob(e.Hash)
	if err != nil {
		return File{}, fmt.Errorf("checkpoint %s: %s: %w", c.Hash, path, err)
	}
	return File{Exists: true, Mode: e.Mode, Data: data, Hash: e.Hash}, nil
}

func (s *Store) blob(h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(s.st, h)
	if err != nil {
		return nil, err
	}
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// ---- pruning ----

// Prune drops the checkpoints beyond the keep bounds (the newest KeepCount
// younger than KeepAge stay) and the objects only they used. keep names
// checkpoints that stay whatever their age.
func (s *Store) Prune(ctx context.Context, keep map[string]bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs, err := s.st.IterReferences()
	if err != nil {
		return 0, fmt.Errorf("prune checkpoints: %w", err)
	}
	type rc struct {
		name plumbing.ReferenceName
		when time.Time
		id   string
	}
	var all []rc
	_ = refs.ForEach(func(r *plumbing.Reference) error {
		if !strings.HasPrefix(r.Name().String(), refPrefix) {
			return nil
		}
		c, err := object.GetCommit(s.st, r.Hash())
		when := time.Time{}
		if err == nil {
			when = c.Committer.When
		}
		all = append(all, rc{r.Name(), when, r.Hash().String()})
		return nil
	})
	sort.Slice(all, func(a, b int) bool { return all[a].when.After(all[b].when) })
	cutoff := s.opts.Now().Add(-s.opts.KeepAge)
	dropped := 0
	for i, r := range all {
		old := s.opts.KeepAge > 0 && r.when.Before(cutoff)
		many := s.opts.KeepCount > 0 && i >= s.opts.KeepCount
		if (old || many) && !keep[r.id] {
			if err := s.st.RemoveReference(r.name); err != nil {
				return dropped, fmt.Errorf("prune checkpoints: %w", err)
			}
			dropped++
		}
	}
	if dropped == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return dropped, err
	}
	if err := s.repo.Prune(git.PruneOptions{Handler: s.repo.DeleteObject}); err != nil {
		return dropped, fmt.Errorf("prune checkpoint objects: %w", err)
	}
	return dropped, nil
}

// ---- helpers ----

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// writeAtomic writes path through a temp file in its directory.
func writeAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		tmp.Close()
		os.Remove(name)
	}
	return err
}
