package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkSessionAppendLatency measures, through a real daemon and client,
// the time from appending one line to a followed Claude session file to the
// client holding the ochat/sessionAppended notification (fsnotify, the
// watcher's debounce, the incremental tail, the daemon's fan-out, the
// socket). Reports p50 and p99 in ms.
func BenchmarkSessionAppendLatency(b *testing.B) {
	e, nh := newSessionsEnv(b)
	c := e.dial("bench")
	call[FollowResult](b, c, MethodSessionsFollow, SessionRefParams{Path: nh.claudeFile})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		line := claudeUserLine(e.ws, fmt.Sprintf("line %d", i), time.Now())
		start := time.Now()
		appendLine(b, nh.claudeFile, line)
		for {
			n := nextNote(b, c, NotifySessionAppended)
			var p SessionAppendedParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				b.Fatal(err)
			}
			if len(p.Messages) > 0 && p.Messages[len(p.Messages)-1].Content == fmt.Sprintf("line %d", i) {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}

// genClaudeStore writes n copies of the Claude fixture (each its own
// session id) into nh's project folder.
func genClaudeStore(b *testing.B, nh *nativeHome, ws string, n int) int64 {
	src, err := os.ReadFile("testdata/native/claude/" + fixtureClaudeID + ".jsonl")
	if err != nil {
		b.Fatal(err)
	}
	text := strings.ReplaceAll(string(src), fixtureCwd, ws)
	var total int64
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
		p := filepath.Join(filepath.Dir(nh.claudeFile), id+".jsonl")
		data := strings.ReplaceAll(text, fixtureClaudeID, id)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(len(data))
	}
	return total
}

// BenchmarkSessionsList measures ochat/sessions/list through a real daemon
// on a generated store of 1,000 Claude sessions: "cold" with an empty
// metadata cache (every file parsed and its entry written to bbolt), "warm"
// with every file cached (nothing parsed).
func BenchmarkSessionsList(b *testing.B) {
	const n = 1000
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			e, nh := newSessionsEnv(b)
			size := genClaudeStore(b, nh, e.ws, n)
			c := e.dial("bench")
			b.SetBytes(size)
			b.StartTimer()
			res := call[SessionsListResult](b, c, MethodSessionsList, nil)
			b.StopTimer()
			if len(res.Sessions) < n {
				b.Fatalf("listed %d sessions", len(res.Sessions))
			}
			e.stop()
		}
	})
	b.Run("warm", func(b *testing.B) {
		e, nh := newSessionsEnv(b)
		genClaudeStore(b, nh, e.ws, n)
		c := e.dial("bench")
		call[SessionsListResult](b, c, MethodSessionsList, nil)
		parsed := e.srv.native.parsed.Load()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			call[SessionsListResult](b, c, MethodSessionsList, nil)
		}
		b.StopTimer()
		if p := e.srv.native.parsed.Load(); p != parsed {
			b.Fatalf("warm listings parsed %d files", p-parsed)
		}
	})
}
