package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkTake: a checkpoint of a 2,000-file workspace after 10 files
// changed (the stat cache spares the rest). bench/checkpoint.sh measures the
// 20,000-file, 500 MB case.
func BenchmarkTake(b *testing.B) {
	ws := b.TempDir()
	old := time.Now().Add(-time.Hour)
	body := strings.Repeat("func f() { return nil }\n", 200)
	for i := 0; i < 2000; i++ {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.go", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
		os.Chtimes(p, old, old) // not "racy": the cache trusts them
	}
	s, err := Open(Options{Workspace: ws, Dir: filepath.Join(b.TempDir(), "checkpoints")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Take(ctx, "first"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		for i := 0; i < 10; i++ {
			p := filepath.Join(ws, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.go", i*200))
			os.WriteFile(p, []byte(fmt.Sprintf("%s// %d\n", body, n)), 0o644)
		}
		b.StartTimer()
		cp, err := s.Take(ctx, "later")
		// The 10 changed now, and those changed in the last second (racy).
		if err != nil || cp.Hashed < 10 || cp.Hashed > 20 {
			b.Fatalf("hashed %d, %v", cp.Hashed, err)
		}
	}
}
