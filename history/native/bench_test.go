package native

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// The benchmarks read a generated Claude store named by NATIVE_BENCH_HOME
// (make one with /work/shared/tools/gen-claude-store.py HOME /home/dev/project 200 400;
// bench/native-list.sh does it); they are skipped without it.

func benchHome(b *testing.B) string {
	h := os.Getenv("NATIVE_BENCH_HOME")
	if h == "" {
		b.Skip("NATIVE_BENCH_HOME not set")
	}
	return h
}

func storeBytes(ss []Session) int64 {
	var n int64
	for _, s := range ss {
		n += s.Size
	}
	return n
}

// BenchmarkListColdClaude lists with an empty cache every time.
func BenchmarkListColdClaude(b *testing.B) {
	env := Env{Home: benchHome(b)}
	ss, _ := List(context.Background(), env, "/home/dev/project")
	b.SetBytes(storeBytes(ss))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		List(context.Background(), env, "/home/dev/project")
	}
}

// BenchmarkListWarmClaude lists with every file already cached.
func BenchmarkListWarmClaude(b *testing.B) {
	env := Env{Home: benchHome(b)}
	c := &mapCache{}
	ListWithCache(context.Background(), env, "/home/dev/project", c)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ListWithCache(context.Background(), env, "/home/dev/project", c)
	}
}

// BenchmarkReadClaude reads every session in full (transcripts).
func BenchmarkReadClaude(b *testing.B) {
	env := Env{Home: benchHome(b)}
	ss, _ := List(context.Background(), env, "/home/dev/project")
	b.SetBytes(storeBytes(ss))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range ss {
			if _, err := ReadClaude(s.Path); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkReadLargestClaude reads the largest session of the store (52 MB
// in the 1 GB store): what opening it costs in the reader.
func BenchmarkReadLargestClaude(b *testing.B) {
	env := Env{Home: benchHome(b)}
	ss, _ := List(context.Background(), env, "/home/dev/project")
	if len(ss) == 0 {
		b.Skip("no sessions")
	}
	big := ss[0]
	for _, s := range ss {
		if s.Size > big.Size {
			big = s
		}
	}
	b.SetBytes(big.Size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ReadClaude(big.Path); err != nil {
			b.Fatal(err)
		}
	}
}

// TestListAgreesWithRead checks, on the generated store, that the listing
// skim and the full reader agree on titles and counts.
func TestListAgreesWithRead(t *testing.T) {
	h := os.Getenv("NATIVE_BENCH_HOME")
	if h == "" {
		t.Skip("NATIVE_BENCH_HOME not set")
	}
	ss, _ := List(context.Background(), Env{Home: h}, "/home/dev/project")
	bad := 0
	for _, s := range ss {
		tr, err := ReadClaude(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, tr)
		if d := parityDiff(AgentClaude, s, true, tr); len(d) > 0 {
			bad++
			if bad < 5 {
				t.Errorf("%s: %v", s.ID, d)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d sessions disagree", bad, len(ss))
	}
}

// BenchmarkWatchAppendLatency measures append → WatchUpdate latency for a
// followed Claude session: each iteration appends one user line and one
// assistant line and waits for the update. It reports p50/p99 in ms. The
// session starts as a copy of the largest generated session when
// NATIVE_BENCH_HOME is set (the worst case: every update re-maps the whole
// session), else as a small one.
func BenchmarkWatchAppendLatency(b *testing.B) {
	home := b.TempDir()
	ws := "/home/dev/project"
	enc, _ := ClaudeProjectDirName(ws)
	path := filepath.Join(home, ".claude", "projects", enc, "s.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	seed := claudeSessionLines("s", ws, "start", "2026-01-01T00:00:00Z")
	if h := os.Getenv("NATIVE_BENCH_HOME"); h != "" {
		ss, _ := List(context.Background(), Env{Home: h}, ws)
		var big Session
		for _, s := range ss {
			if s.Size > big.Size {
				big = s
			}
		}
		if data, err := os.ReadFile(big.Path); err == nil {
			seed = data
		}
	}
	if err := os.WriteFile(path, seed, 0o644); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := NewWatcher(ctx, WatchOptions{Env: Env{Home: home}, Workspace: ws})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Follow(path); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	lat := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("b%d", i)
		line := claudeSessionLines(id, ws, "prompt "+id, "2026-01-02T00:00:00Z")
		start := time.Now()
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		for {
			ev := <-w.Events()
			if ev.Kind == WatchUpdate {
				break
			}
		}
		lat = append(lat, float64(time.Since(start).Microseconds())/1000)
	}
	b.StopTimer()
	sort.Float64s(lat)
	b.ReportMetric(lat[len(lat)/2], "p50-ms")
	b.ReportMetric(lat[(len(lat)*99)/100], "p99-ms")
	b.ReportMetric(float64(len(seed))/1e6, "session-MB")
}
