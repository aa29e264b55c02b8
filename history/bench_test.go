package history

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ochat-dev/ochat/transcript"
)

// Figures from these benchmarks are recorded in docs/perf-history.md.

// benchAnswer is an assistant message of about size bytes of JSON.
func benchAnswer(id string, size int) transcript.Message {
	m := assistant(id, "claude", transcript.StatusStreaming, "")
	m.Segments = []transcript.Segment{
		{Type: transcript.SegReasoning, Content: strings.Repeat("r", size/10)},
		{Type: transcript.SegTool, ID: "t1", Name: "Read", Status: "completed", Output: strings.Repeat("o", size/5)},
		{Type: transcript.SegContent, Content: strings.Repeat("c", size-size/10-size/5-300)},
	}
	return m
}

// fill stores n conversations of msgs messages each without fsync (setup
// only), alternating short user messages and answers of answerSize bytes.
func fill(b *testing.B, s *Store, convs, msgs, answerSize int) {
	b.Helper()
	s.db.NoSync = true
	defer func() { s.db.NoSync = false }()
	for c := range convs {
		id := fmt.Sprintf("conv%05d", c)
		if err := s.CreateConversation(Conversation{ID: id, Title: id, CreatedAt: int64(c), UpdatedAt: int64(c)}); err != nil {
			b.Fatal(err)
		}
		for i := range msgs {
			m := user(fmt.Sprintf("m%06d", i), strings.Repeat("u", 200))
			if i%2 == 1 {
				m = benchAnswer(fmt.Sprintf("m%06d", i), answerSize)
				m.Status = transcript.StatusCompleted
			}
			if err := s.PutMessage(id, m, int64(c)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPutMessage20KB checkpoints one streaming 20 KB assistant message
// again and again (what the daemon does a few times a second per running
// turn) in a conversation that already holds 1,000 messages. "durable" is
// the real thing (fsync per commit); "nosync" only shows how much of that is
// the disk. file-bytes is the database size afterwards (freed pages are
// reused, so it stays flat).
func BenchmarkPutMessage20KB(b *testing.B) {
	for _, mode := range []struct {
		name   string
		noSync bool
	}{{"durable", false}, {"nosync", true}} {
		b.Run(mode.name, func(b *testing.B) {
			s := openTemp(b)
			fill(b, s, 1, 1000, 4000)
			s.db.NoSync = mode.noSync
			m := benchAnswer("zz-answer", 20<<10)
			b.SetBytes(20 << 10)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := s.PutMessage("conv00000", m, int64(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if fi, err := os.Stat(s.Path()); err == nil {
				b.ReportMetric(float64(fi.Size()), "file-bytes")
			}
		})
	}
}

// BenchmarkPutMessageSmall stores a new 200-byte user message per iteration.
func BenchmarkPutMessageSmall(b *testing.B) {
	s := openTemp(b)
	fill(b, s, 1, 0, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := s.PutMessage("conv00000", user(fmt.Sprintf("u%09d", i), strings.Repeat("u", 200)), int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListConversations1000 lists a store of 1,000 conversations of 10
// messages each.
func BenchmarkListConversations1000(b *testing.B) {
	s := openTemp(b)
	fill(b, s, 1000, 10, 2000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		cs, err := s.ListConversations()
		if err != nil || len(cs) != 1000 {
			b.Fatalf("%d, %v", len(cs), err)
		}
	}
}

// BenchmarkMessages1000 reads a conversation of 1,000 messages (500 user
// messages of 200 bytes, 500 answers of 4 KB: about 2.2 MB of JSON).
func BenchmarkMessages1000(b *testing.B) {
	s := openTemp(b)
	fill(b, s, 1, 1000, 4000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ms, err := s.Messages("conv00000")
		if err != nil || len(ms) != 1000 {
			b.Fatalf("%d, %v", len(ms), err)
		}
	}
}

// BenchmarkMarkInterruptedStartup is the start-up cost with 1,000
// conversations of 20 messages and one turn left streaming: the streaming
// index keeps it independent of the number of messages.
func BenchmarkMarkInterruptedStartup(b *testing.B) {
	s := openTemp(b)
	fill(b, s, 1000, 20, 2000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if err := s.PutMessage("conv00500", benchAnswer("zz", 20<<10), int64(i)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if n, err := s.MarkInterrupted(int64(i)); err != nil || n != 1 {
			b.Fatalf("%d, %v", n, err)
		}
	}
}
