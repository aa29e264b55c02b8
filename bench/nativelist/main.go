// Command nativelist measures history/native listing on a store: it lists a
// workspace's native sessions cold (no metadata cache), then again warm
// (every file served by the cache), optionally reads every session in full,
// and prints one JSON object with sessions, bytes, wall times and MB/s.
// Run it under /usr/bin/time -v for RSS (bench/native-list.sh does).
//
//	nativelist -home STORE_HOME -workspace /home/dev/project [-read]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/internal/gcpolicy"
)

type memCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (c *memCache) Get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *memCache) Put(k string, v []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = v
}

func main() {
	home := flag.String("home", "", "store home (contains .claude, .codex, …)")
	ws := flag.String("workspace", "/home/dev/project", "workspace whose sessions to list")
	read := flag.Bool("read", false, "also Read every session in full (transcripts), one at a time")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the cold listing to this file")
	flag.Parse()
	gcpolicy.Apply(os.Getenv) // as ochatd serve runs the listing
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	env := native.Env{Home: *home}
	ctx := context.Background()
	cache := &memCache{m: map[string][]byte{}}

	t0 := time.Now()
	ss, diags := native.ListWithCache(ctx, env, *ws, cache)
	cold := time.Since(t0)
	if *prof != "" {
		pprof.StopCPUProfile()
	}
	var bytes int64
	for _, s := range ss {
		bytes += s.Size
	}
	t1 := time.Now()
	ss2, _ := native.ListWithCache(ctx, env, *ws, cache)
	warm := time.Since(t1)

	out := map[string]any{
		"gomaxprocs": runtime.GOMAXPROCS(0), "sessions": len(ss), "warmSessions": len(ss2), "bytes": bytes,
		"coldSeconds": cold.Seconds(), "coldMBps": float64(bytes) / 1e6 / cold.Seconds(),
		"warmMs": float64(warm.Microseconds()) / 1000, "storeDiagnostics": len(diags),
	}
	if *read {
		t2 := time.Now()
		msgs := 0
		for _, s := range ss {
			tr, err := native.Read(ctx, env, s.Path)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				continue
			}
			msgs += len(tr.Messages)
		}
		rd := time.Since(t2)
		out["readSeconds"] = rd.Seconds()
		out["readMBps"] = float64(bytes) / 1e6 / rd.Seconds()
		out["readMessages"] = msgs
	}
	b, _ := json.MarshalIndent(out, "", " ")
	fmt.Println(string(b))
}
