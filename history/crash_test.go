package history

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/transcript"
)

var long = flag.Bool("ochat.long", false, "run the long versions of the crash tests (also OCHAT_LONG=1)")

// Environment of the crash child (see TestCrashChild).
const (
	envCrashDB  = "OCHAT_HISTORY_CRASH_DB"
	envCrashRun = "OCHAT_HISTORY_CRASH_RUN"
)

// crashMessage is the deterministic content of message id at version v of a
// crash-test conversation. User messages have one version. An assistant
// message of turn n streams versions 1..crashVersions(n) (growing content and
// a running tool), then version crashVersions(n)+1 is the completed message.
func crashMessage(conv, id string, turn, v int) transcript.Message {
	if strings.HasSuffix(id, "-u") {
		return transcript.Message{ID: id, Timestamp: int64(turn) * 1000, Role: transcript.RoleUser,
			Content: fmt.Sprintf("prompt %d of %s", turn, conv)}
	}
	final := v > crashVersions(turn)
	k := min(v, crashVersions(turn))
	var text strings.Builder
	for i := range k {
		fmt.Fprintf(&text, "[%s turn %d chunk %d] %s\n", conv, turn, i, strings.Repeat("lorem ipsum ", 100))
	}
	m := transcript.Message{
		ID: id, Timestamp: int64(turn)*1000 + 1, Role: transcript.RoleAssistant, Agent: "claude",
		Status: transcript.StatusStreaming,
		Segments: []transcript.Segment{
			{Type: transcript.SegReasoning, Content: "thinking about turn " + strconv.Itoa(turn)},
			{Type: transcript.SegTool, ID: "tool-" + id, Name: "Read", Status: string(transcript.ToolRunning),
				Output: strings.Repeat("x", 100*k)},
			{Type: transcript.SegContent, Content: text.String()},
		},
	}
	if final {
		m.Status = transcript.StatusCompleted
		m.StopReason = "end_turn"
		m.DurationMs = int64(k) * 10
		m.Segments[1].Status = string(transcript.ToolCompleted)
	}
	return m
}

// crashVersions is how many streaming checkpoints the answer of turn n has
// (1..16, up to ~20 KB of content).
func crashVersions(turn int) int { return 1 + (turn*7)%16 }

// TestCrashChild is not a test on its own: TestKillDurability re-executes the
// test binary with envCrashDB set, and this function then writes turns into
// the store forever, reporting on stdout each message version once PutMessage
// has returned ("C conv id turn version"), until it is killed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(envCrashDB)
	if path == "" {
		t.Skip("helper process for TestKillDurability")
	}
	fail := func(err error) {
		fmt.Printf("E %v\n", err)
		os.Exit(3)
	}
	s, err := Open(path)
	if err != nil {
		fail(err)
	}
	conv := "run" + os.Getenv(envCrashRun)
	if err := s.CreateConversation(Conversation{ID: conv, Title: conv}); err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	report := func(id string, turn, v int) {
		fmt.Fprintf(out, "C %s %s %d %d\n", conv, id, turn, v)
		out.Flush()
	}
	report("-", 0, 0) // the conversation exists
	for turn := 1; ; turn++ {
		uid := fmt.Sprintf("t%05d-u", turn)
		if err := s.PutMessage(conv, crashMessage(conv, uid, turn, 1), int64(turn)*1000); err != nil {
			fail(err)
		}
		report(uid, turn, 1)
		aid := fmt.Sprintf("t%05d-v", turn)
		for v := 1; v <= crashVersions(turn)+1; v++ {
			if err := s.PutMessage(conv, crashMessage(conv, aid, turn, v), int64(turn)*1000+int64(v)); err != nil {
				fail(err)
			}
			report(aid, turn, v)
		}
	}
}

// reported is the last version of one message the child said was committed.
type reported struct {
	conv, id string
	turn, v  int
}

// TestKillDurability SIGKILLs a process writing streaming turns at random
// moments, then checks that the store opens, passes Check, holds every
// message version reported as committed (or the one write after it), marks
// the turn in flight interrupted and accepts the next turn. 10 kills; 60
// with -ochat.long or OCHAT_LONG=1. Every run appends to the same file, so
// later runs also re-verify what earlier runs committed.
func TestKillDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := 10
	if *long || os.Getenv("OCHAT_LONG") == "1" {
		kills = 60
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("OCHAT_CRASH_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (set OCHAT_CRASH_SEED to replay)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(t.TempDir(), "ochat.db")
	all := map[string]reported{} // conv/id → last committed version
	var convs []string
	totalInterrupted := 0

	for run := range kills {
		conv := fmt.Sprintf("run%03d", run)
		lines := runAndKill(t, path, run, 1+rng.IntN(80), time.Duration(rng.IntN(3000))*time.Microsecond, func(r reported) {
			all[r.conv+"/"+r.id] = r
		})
		t.Logf("run %d: killed after %d reports", run, lines)
		if lines > 0 {
			convs = append(convs, conv)
		}

		s, err := Open(path)
		if err != nil {
			t.Fatalf("run %d: open after kill: %v", run, err)
		}
		if err := s.Check(); err != nil {
			t.Fatalf("run %d: check after kill: %v", run, err)
		}
		streamingBefore := verifyCommitted(t, s, all)
		n, err := s.MarkInterrupted(time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		if n != streamingBefore {
			t.Fatalf("run %d: MarkInterrupted marked %d, %d were streaming", run, n, streamingBefore)
		}
		totalInterrupted += n
		// Nothing is left streaming, and the interrupted turn kept its segments.
		for _, c := range convs {
			ms, err := s.Messages(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if m.Status == transcript.StatusStreaming {
					t.Fatalf("%s/%s still streaming after MarkInterrupted", c, m.ID)
				}
				if m.Status == transcript.StatusInterrupted && len(m.Segments) != 3 {
					t.Fatalf("%s/%s interrupted without its segments", c, m.ID)
				}
			}
		}
		// The conversation continues.
		if lines > 0 {
			next := transcript.Message{ID: "z-after-kill", Role: transcript.RoleUser, Content: "go on"}
			if err := s.PutMessage(conv, next, time.Now().UnixMilli()); err != nil {
				t.Fatalf("run %d: continue conversation: %v", run, err)
			}
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills, %d messages verified at their last committed version, %d turns marked interrupted", kills, len(all), totalInterrupted)
}

// runAndKill starts the crash child on path, SIGKILLs it once it has
// reported after lines commits plus delay, and returns how many reports it
// read (each also passed to seen).
func runAndKill(t *testing.T, path string, run, lines int, delay time.Duration, seen func(reported)) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDB+"="+path, envCrashRun+"="+fmt.Sprintf("%03d", run))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(stdout)
	var childErr string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "E" {
			childErr = sc.Text()
			break
		}
		if len(f) != 5 || f[0] != "C" {
			continue // test framework output
		}
		turn, _ := strconv.Atoi(f[3])
		v, _ := strconv.Atoi(f[4])
		if f[2] != "-" {
			seen(reported{conv: f[1], id: f[2], turn: turn, v: v})
		}
		n++
		if n == lines {
			time.Sleep(delay)
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	// Keep draining so the child never blocks on a full pipe before the
	// signal lands; reports that arrive now were committed too.
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 5 && f[0] == "C" && f[2] != "-" {
			turn, _ := strconv.Atoi(f[3])
			v, _ := strconv.Atoi(f[4])
			seen(reported{conv: f[1], id: f[2], turn: turn, v: v})
		}
	}
	cmd.Wait()
	if childErr != "" {
		t.Fatalf("crash child failed: %s", childErr)
	}
	return n
}

// verifyCommitted checks every reported message against the store and
// returns how many stored messages are still streaming.
func verifyCommitted(t *testing.T, s *Store, all map[string]reported) int {
	t.Helper()
	for _, r := range all {
		got, err := s.Message(r.conv, r.id)
		if err != nil {
			t.Fatalf("committed message %s/%s version %d: %v", r.conv, r.id, r.v, err)
		}
		if got.Status == transcript.StatusInterrupted {
			// Marked by an earlier round: it was the last version streamed.
			want := crashMessage(r.conv, r.id, r.turn, r.v)
			if got.Segments[2].Content != want.Segments[2].Content && got.Segments[2].Content != crashMessage(r.conv, r.id, r.turn, r.v+1).Segments[2].Content {
				t.Fatalf("interrupted %s/%s lost content", r.conv, r.id)
			}
			continue
		}
		// The child may have committed one more version before the kill.
		if !reflect.DeepEqual(got, crashMessage(r.conv, r.id, r.turn, r.v)) &&
			!(r.v <= crashVersions(r.turn) && reflect.DeepEqual(got, crashMessage(r.conv, r.id, r.turn, r.v+1))) {
			t.Fatalf("%s/%s: stored message is neither version %d nor %d", r.conv, r.id, r.v, r.v+1)
		}
	}
	streaming := 0
	convs, err := s.ListConversations()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range convs {
		ms, err := s.Messages(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if isStreaming(m) {
				streaming++
			}
		}
	}
	return streaming
}
