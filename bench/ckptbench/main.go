// Command ckptbench measures code checkpoints (docs/checkpoints.md) on a
// generated workspace: -gen makes it (FILES files, MB megabytes in total,
// mostly source-like text with some incompressible binaries), -mode first
// takes the first checkpoint into a fresh shadow repository, -mode later
// changes CHANGED files and takes the next one (a new process, so its RSS is
// the later checkpoint's alone). It prints one JSON line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/ochat-dev/ochat/checkpoint"
)

func main() {
	ws := flag.String("ws", "/tmp/ckpt-ws", "workspace")
	dir := flag.String("dir", "/tmp/ckpt-state/checkpoints", "shadow repository")
	gen := flag.Bool("gen", false, "generate the workspace")
	files := flag.Int("files", 20000, "files to generate")
	mb := flag.Int("mb", 500, "total megabytes to generate")
	mode := flag.String("mode", "first", "first | later")
	changed := flag.Int("changed", 100, "files changed before a later checkpoint")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the checkpoint here")
	flag.Parse()
	if *gen {
		if err := generate(*ws, *files, int64(*mb)<<20); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *mode == "first" {
		os.RemoveAll(*dir)
	}
	if *mode == "later" {
		if err := touch(*ws, *changed); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	t0 := time.Now()
	st, err := checkpoint.Open(checkpoint.Options{Workspace: *ws, Dir: *dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer st.Close()
	openMs := time.Since(t0).Milliseconds()
	t0 = time.Now()
	cp, err := st.Take(context.Background(), *mode)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wall := time.Since(t0)
	// The daemon keeps the store open between turns: a second checkpoint in
	// this process is the steady state.
	var againMs int64
	if *mode == "later" {
		if err := touch(*ws, *changed); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		t1 := time.Now()
		if _, err := st.Take(context.Background(), "again"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		againMs = time.Since(t1).Milliseconds()
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"mode": *mode, "openMs": openMs, "wallMs": wall.Milliseconds(), "againMs": againMs, "files": cp.Files, "hashed": cp.Hashed, "bytes": cp.Bytes,
		"skipped": len(cp.Skipped), "repoBytes": du(*dir),
	})
}

var words = strings.Fields("func return if else for range var const type struct interface package import err nil true false string int byte map chan go defer select case switch default break continue")

// generate writes files files of about total bytes under ws: 200 dirs, 95 %
// text (source-like lines), 5 % random bytes.
func generate(ws string, files int, total int64) error {
	r := rand.New(rand.NewPCG(1, 2))
	avg := total / int64(files)
	for i := 0; i < files; i++ {
		dir := filepath.Join(ws, fmt.Sprintf("pkg%03d", i%200), fmt.Sprintf("sub%d", i%7))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		size := avg/2 + r.Int64N(avg)
		var b []byte
		if i%20 == 0 {
			b = make([]byte, size)
			for j := range b {
				b[j] = byte(r.Uint32())
			}
		} else {
			var sb strings.Builder
			for int64(sb.Len()) < size {
				n := 3 + r.IntN(8)
				for k := 0; k < n; k++ {
					sb.WriteString(words[r.IntN(len(words))])
					sb.WriteByte(' ')
				}
				fmt.Fprintf(&sb, "%d\n", r.IntN(100000))
			}
			b = []byte(sb.String())
		}
		name := fmt.Sprintf("f%05d.go", i)
		if i%20 == 0 {
			name = fmt.Sprintf("f%05d.bin", i)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// touch appends a line to n text files spread over the workspace.
func touch(ws string, n int) error {
	var paths []string
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
			paths = append(paths, p)
		}
		return nil
	})
	if len(paths) == 0 {
		return fmt.Errorf("no files in %s: run with -gen first", ws)
	}
	step := max(1, len(paths)/n)
	stamp := time.Now().UnixNano()
	for i := 0; i < n && i*step < len(paths); i++ {
		f, err := os.OpenFile(paths[i*step], os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "// changed %d\n", stamp)
		f.Close()
	}
	return nil
}

func du(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
