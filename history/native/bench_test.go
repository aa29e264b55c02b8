package native

import (
	"context"
	"os"
	"testing"
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
		if tr.Title != s.Title || tr.MessageCount != s.MessageCount || tr.ToolCount != s.ToolCount || tr.Model != s.Model {
			bad++
			if bad < 5 {
				t.Errorf("%s: list %q %d msgs %d tools %s; read %q %d msgs %d tools %s", s.ID, s.Title, s.MessageCount, s.ToolCount, s.Model, tr.Title, tr.MessageCount, tr.ToolCount, tr.Model)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d sessions disagree", bad, len(ss))
	}
}
