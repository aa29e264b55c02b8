package native

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// mapCache is a Cache that counts hits and stores.
type mapCache struct {
	mu         sync.Mutex
	m          map[string][]byte
	hits, puts int
}

func (c *mapCache) Get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	if ok {
		c.hits++
	}
	return v, ok
}

func (c *mapCache) Put(k string, v []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	c.m[k] = v
	c.puts++
}

func claudeSessionLines(id, cwd, prompt, ts string) []byte {
	var b bytes.Buffer
	for _, r := range []map[string]any{
		{"type": "user", "uuid": id + "-u", "parentUuid": nil, "cwd": cwd, "sessionId": id, "timestamp": ts,
			"message": map[string]any{"role": "user", "content": prompt}},
		{"type": "assistant", "uuid": id + "-a", "parentUuid": id + "-u", "cwd": cwd, "sessionId": id, "timestamp": ts,
			"message": map[string]any{"id": "msg_" + id, "role": "assistant", "model": "claude-x",
				"content": []any{map[string]any{"type": "text", "text": "ok"}}}},
	} {
		j, _ := json.Marshal(r)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestListClaude(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(t.TempDir(), "my_app")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	ws = cleanAbs(ws)
	enc, _ := ClaudeProjectDirName(ws)
	proj := filepath.Join(home, ".claude", "projects", enc)
	writeFile(t, filepath.Join(proj, "s-old.jsonl"), claudeSessionLines("s-old", ws, "older", "2026-01-01T00:00:00Z"))
	writeFile(t, filepath.Join(proj, "s-new.jsonl"), claudeSessionLines("s-new", ws, "newer", "2026-01-02T00:00:00Z"))
	// same encoded folder, different real cwd (my-app vs my_app): excluded
	writeFile(t, filepath.Join(proj, "s-other.jsonl"), claudeSessionLines("s-other", strings.Replace(ws, "my_app", "my-app", 1), "other", "2026-01-03T00:00:00Z"))
	orphan, _ := os.ReadFile("testdata/claude/traps/orphan.jsonl")
	writeFile(t, filepath.Join(proj, "s-orphan.jsonl"), orphan)
	writeFile(t, filepath.Join(proj, "s-empty.jsonl"), nil)
	// a session file replaced by a directory, and a symlink loop
	if err := os.Mkdir(filepath.Join(proj, "s-dir.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(proj, "s-loop.jsonl"), filepath.Join(proj, "s-loop.jsonl")); err != nil {
		t.Fatal(err)
	}
	// a 50 MB single line before a good conversation
	big := bytes.Repeat([]byte("x"), 50<<20)
	data := append(append([]byte(`{"type":"user","message":{"role":"user","content":"`), big...), "\"}}\n"...)
	data = append(data, claudeSessionLines("s-big", ws, "after the big line", "2026-01-01T12:00:00Z")...)
	writeFile(t, filepath.Join(proj, "s-big.jsonl"), data)

	env := Env{Home: home}
	cache := &mapCache{}
	ss, diags := ListWithCache(context.Background(), env, ws, cache)
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	if got := strings.Join(ids, ","); got != "s-new,s-big,s-old" {
		t.Errorf("ids = %s", got)
	}
	var msgs []string
	for _, d := range diags {
		if d.Level == "warning" {
			msgs = append(msgs, filepath.Base(d.Path)+": "+d.Message)
		}
	}
	if got := strings.Join(msgs, "\n"); !strings.Contains(got, "s-dir.jsonl: session file is a directory") || !strings.Contains(got, "s-loop.jsonl: symlink loop") {
		t.Errorf("diagnostics:\n%s", got)
	}
	for _, s := range ss {
		if s.ID == "s-big" && (s.Diagnostics.SkippedLines != 1 || s.Title != "after the big line") {
			t.Errorf("big = %+v", s)
		}
		if s.ID == "s-new" && (s.Title != "newer" || s.MessageCount != 2 || s.Model != "claude-x" || s.Resume[2] != "s-new") {
			t.Errorf("s-new = %+v", s)
		}
	}
	// warm: nothing is parsed again
	puts := cache.puts
	ss2, _ := ListWithCache(context.Background(), env, ws, cache)
	if cache.puts != puts || len(ss2) != len(ss) {
		t.Errorf("warm listing parsed %d files again (%d sessions)", cache.puts-puts, len(ss2))
	}
	// a missing store is an info diagnostic
	_, diags = List(context.Background(), Env{Home: t.TempDir()}, ws)
	if len(diags) == 0 || diags[0].Level != "info" {
		t.Errorf("missing store diags = %+v", diags)
	}
}

func TestListClaudeLongPath(t *testing.T) {
	home := t.TempDir()
	ws := "/" + strings.Repeat("deep/", 45) + "ws"
	prefix, long := ClaudeProjectDirName(ws)
	if !long {
		t.Fatal("expected a long path")
	}
	// the hash suffix differs between CLI builds: any suffix after the prefix matches
	writeFile(t, filepath.Join(home, ".claude", "projects", prefix+"-1abc2", "a.jsonl"), claudeSessionLines("a", ws, "mine", "2026-01-01T00:00:00Z"))
	writeFile(t, filepath.Join(home, ".claude", "projects", prefix+"-zz9", "b.jsonl"), claudeSessionLines("b", ws+"x", "collides", "2026-01-01T00:00:00Z"))
	ss, _ := List(context.Background(), Env{Home: home, ClaudeConfigDir: ""}, ws)
	if len(ss) != 1 || ss[0].ID != "a" {
		t.Errorf("sessions = %+v", ss)
	}
}

// TestListDedupesCopiedSession: copies of a session inside the store carry
// its sessionId, so they list under its id; the listing keeps one entry
// per id, the one Read by that id returns, and names the others.
func TestListDedupesCopiedSession(t *testing.T) {
	home := t.TempDir()
	ws := cleanAbs(t.TempDir())
	enc, _ := ClaudeProjectDirName(ws)
	proj := filepath.Join(home, ".claude", "projects", enc)
	const id = "24cb974b-077a-4ab3-bdf4-622ee8278cca"
	for name, src := range map[string]string{
		id + ".jsonl":    "testdata/claude/recorded/" + id + ".jsonl",
		"fu-copy.jsonl":  "testdata/claude/recorded/" + id + ".jsonl",
		"repeated.jsonl": "testdata/claude/traps/repeated_uuids.jsonl",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(proj, name), bytes.ReplaceAll(b, []byte("/home/dev/project"), []byte(ws)))
	}
	env := Env{Home: home}
	check := func(wantFile string, others int) {
		t.Helper()
		ss, _ := List(context.Background(), env, ws)
		if len(ss) != 1 || ss[0].ID != id || filepath.Base(ss[0].Path) != wantFile {
			t.Fatalf("listing = %+v", ss)
		}
		n := 0
		for _, p := range ss[0].Diagnostics.Problems {
			if strings.Contains(p, "same session id is also in") {
				n++
			}
		}
		if n != others {
			t.Errorf("problems %q: want %d other files named", ss[0].Diagnostics.Problems, others)
		}
		tr, err := Read(context.Background(), env, id)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Path != ss[0].Path {
			t.Errorf("read by id gives %s, the listing %s", tr.Path, ss[0].Path)
		}
	}
	check(id+".jsonl", 2)
	// without the original, the copies tie on messages: the first path
	if err := os.Remove(filepath.Join(proj, id+".jsonl")); err != nil {
		t.Fatal(err)
	}
	check("fu-copy.jsonl", 1)
}

// metaMapCache is a mapCache that also keeps entries decoded (MetaCache).
type metaMapCache struct {
	mapCache
	meta    map[string]Session
	listed  map[string]bool
	metaHit int
}

func (c *metaMapCache) GetMeta(k string) (Session, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.meta[k]
	if ok {
		c.metaHit++
	}
	return s, c.listed[k], ok
}

func (c *metaMapCache) PutMeta(k string, s Session, listed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.meta == nil {
		c.meta, c.listed = map[string]Session{}, map[string]bool{}
	}
	c.meta[k], c.listed[k] = s, listed
}

// TestListMetaCache: a MetaCache serves a warm listing decoded (no JSON
// entry is read), a cache filled only with encoded entries (a restart)
// is decoded once, and all three listings agree.
func TestListMetaCache(t *testing.T) {
	home := t.TempDir()
	ws := cleanAbs(t.TempDir())
	enc, _ := ClaudeProjectDirName(ws)
	proj := filepath.Join(home, ".claude", "projects", enc)
	writeFile(t, filepath.Join(proj, "s-a.jsonl"), claudeSessionLines("s-a", ws, "first", "2026-01-01T00:00:00Z"))
	writeFile(t, filepath.Join(proj, "s-b.jsonl"), claudeSessionLines("s-b", ws, "second", "2026-01-02T00:00:00Z"))
	orphan, _ := os.ReadFile("testdata/claude/traps/orphan.jsonl")
	writeFile(t, filepath.Join(proj, "s-orphan.jsonl"), orphan) // cached as not listed
	env := Env{Home: home}
	cold, _ := ListWithCache(context.Background(), env, ws, &mapCache{})

	c := &metaMapCache{}
	first, _ := ListWithCache(context.Background(), env, ws, c)
	if c.puts != 3 || len(c.meta) != 3 {
		t.Fatalf("cold listing: puts=%d decoded=%d, want 3 and 3", c.puts, len(c.meta))
	}
	hits := c.hits
	warm, _ := ListWithCache(context.Background(), env, ws, c)
	if c.hits != hits || c.metaHit != 3 || c.puts != 3 {
		t.Errorf("warm listing: json hits=%d meta hits=%d puts=%d, want 0, 3, 3", c.hits-hits, c.metaHit, c.puts)
	}
	// restart: only the encoded entries survive
	c2 := &metaMapCache{mapCache: mapCache{m: c.m}}
	restarted, _ := ListWithCache(context.Background(), env, ws, c2)
	if c2.hits != 3 || c2.puts != 0 || len(c2.meta) != 3 {
		t.Errorf("after restart: json hits=%d puts=%d decoded=%d, want 3, 0, 3", c2.hits, c2.puts, len(c2.meta))
	}
	for _, got := range [][]Session{first, warm, restarted} {
		if !reflect.DeepEqual(got, cold) {
			t.Errorf("listing differs from a cold one:\n got %+v\nwant %+v", got, cold)
		}
	}
}
