package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServe runs `ochatd serve` for e's workspace and waits for its socket.
func startServe(b *testing.B, e *cliEnv) *exec.Cmd {
	serve := exec.Command(ochatdBin, "serve", "--workspace", e.ws, "--idle", "0", "--log-level", "warn")
	serve.Env = e.env
	if err := serve.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	sock := filepath.Join(e.root, "run", "ochat", "*.sock")
	for i := 0; i < 100; i++ {
		if m, _ := filepath.Glob(sock); len(m) > 0 {
			return serve
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("daemon did not start")
	return nil
}

// connectInitialize spawns `ochatd connect`, sends initialize and waits for
// its answer; it returns the time from spawn to answer.
func connectInitialize(b testing.TB, e *cliEnv) time.Duration {
	start := time.Now()
	cmd := exec.Command(ochatdBin, "connect", "--workspace", e.ws)
	cmd.Env = e.env
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":1,"clientInfo":{"name":"bench"}}}`
	fmt.Fprintf(in, "Content-Length: %d\r\n\r\n%s", len(body), body)
	r := bufio.NewReader(out)
	n := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil || !strings.Contains(string(buf), `"serverInfo"`) {
		b.Fatalf("initialize answer %q: %v", buf, err)
	}
	el := time.Since(start)
	in.Close()
	cmd.Wait()
	return el
}

// BenchmarkConnectInitialize: spawning `ochatd connect` against a running
// daemon until the first initialize is answered (ms/op).
func BenchmarkConnectInitialize(b *testing.B) {
	e := newCLIEnv(b)
	startServe(b, e)
	connectInitialize(b, e) // warm the page cache
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		total += connectInitialize(b, e)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/initialize")
}

// BenchmarkIdleRSS: resident memory of a daemon that served one client and
// is idle (MB, from /proc/PID/status VmRSS).
func BenchmarkIdleRSS(b *testing.B) {
	e := newCLIEnv(b)
	serve := startServe(b, e)
	for i := 0; i < b.N; i++ {
		connectInitialize(b, e)
	}
	time.Sleep(2 * time.Second)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", serve.Process.Pid))
	if err != nil {
		b.Skip("no /proc")
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			b.ReportMetric(float64(kb)/1024, "MB-rss")
		}
	}
}
