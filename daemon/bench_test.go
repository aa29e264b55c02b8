package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/transcript"
)

// BenchmarkEventLatency measures the daemon's overhead per live event: from
// the agent handler's Event call (in-process fake agent, 10,000 events/s
// sustained, evenly spaced) to the notification decoded by a client on
// the unix socket; every event must arrive once, in order. Reports p50/p99
// in µs.
func BenchmarkEventLatency(b *testing.B) {
	e := newEnv(b, nil)
	c := e.dial("bench")
	n := max(b.N, 2000)
	b.ResetTimer()
	start := time.Now()
	res := call[SendResult](b, c, MethodChatSend, SendParams{Text: fmt.Sprintf("TIMED %d %d", n, 10_000)})
	lat := make([]time.Duration, 0, n)
	var seq int64
	for {
		note, err := c.Next(ctxT(b))
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		if note.Method != NotifyEvent {
			continue
		}
		var p EventParams
		if err := json.Unmarshal(note.Params, &p); err != nil {
			b.Fatal(err)
		}
		if p.TurnID != res.TurnID {
			continue
		}
		if seq++; p.Event.Seq != seq {
			b.Fatalf("seq %d, want %d", p.Event.Seq, seq)
		}
		if p.Event.Terminal() {
			break
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(p.Event.Delta), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, now.Sub(time.Unix(0, ns)))
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/el.Seconds(), "events/s")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkThroughput floods one turn as fast as the in-process agent can
// emit and checks every event arrives once, in order (the client queue is
// sized so that the client is never dropped). Reports events/s received by
// one client.
func BenchmarkThroughput(b *testing.B) {
	e := newEnv(b, func(o *Options) { o.ClientQueue = max(b.N, 10000) + 10 })
	c := e.dial("bench")
	n := max(b.N, 10000)
	b.ResetTimer()
	start := time.Now()
	res := call[SendResult](b, c, MethodChatSend, SendParams{Text: fmt.Sprintf("STREAM %d", n)})
	log := collect(b, c, res.TurnID, nil)
	el := time.Since(start)
	b.StopTimer()
	checkSeq(b, log.events, 1)
	if len(log.events) != n+1 {
		b.Fatalf("got %d events, want %d", len(log.events), n+1)
	}
	b.ReportMetric(float64(n)/el.Seconds(), "events/s")
}

// BenchmarkSubscribeReplay10k measures ochat/subscribe to a running turn that
// has already emitted 10,000 events: snapshot + replay answered, in ms.
func BenchmarkSubscribeReplay10k(b *testing.B) {
	e := newEnv(b, nil)
	a := e.dial("a")
	res := call[SendResult](b, a, MethodChatSend, SendParams{Text: "HOLD 10000"})
	for {
		note, err := a.Next(ctxT(b))
		if err != nil {
			b.Fatal(err)
		}
		var p EventParams
		json.Unmarshal(note.Params, &p)
		if p.Event.Seq == 10000 {
			break
		}
	}
	cl := e.dial("b")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub := call[SubscribeResult](b, cl, MethodSubscribe, ConversationParams{ConversationID: res.ConversationID})
		if sub.Running == nil || len(sub.Running.Events) != 10000 {
			b.Fatal("replay incomplete")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/subscribe")
	call[CancelResult](b, a, MethodChatCancel, ConversationParams{ConversationID: res.ConversationID})
}

// BenchmarkEventLatencyRaw is BenchmarkEventLatency with a minimal client:
// it reads frames off the socket and only scans each for its delta and seq,
// so the figure is the daemon's overhead (Event call → reduce → buffer →
// marshal → queue → socket write → read) without a JSON-RPC client's
// decoding. Reports p50/p99 in µs.
func BenchmarkEventLatencyRaw(b *testing.B) {
	e := newEnv(b, nil)
	nc, err := net.Dial("unix", e.sock)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	n := max(b.N, 2000)
	send := func(s string) { fmt.Fprintf(nc, "Content-Length: %d\r\n\r\n%s", len(s), s) }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"ochat/chat/send","params":{"text":"TIMED %d 10000"}}`, n))
	r := bufio.NewReaderSize(nc, 1<<20)
	lat := make([]time.Duration, 0, n)
	var seq int64
	b.ResetTimer()
	for {
		length := 0
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if len(line) <= 2 {
				break
			}
			if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			}
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(r, body); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		if !bytes.Contains(body, []byte(`"method":"ochat/event"`)) {
			continue
		}
		seq++
		if !bytes.Contains(body, []byte(`"seq":`+strconv.FormatInt(seq, 10)+`,`)) {
			b.Fatalf("event %d out of order: %s", seq, body)
		}
		i := bytes.Index(body, []byte(`"delta":"`))
		if i < 0 {
			break // turn.completed
		}
		rest := body[i+len(`"delta":"`):]
		ns, err := strconv.ParseInt(string(rest[:bytes.IndexByte(rest, ' ')]), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, now.Sub(time.Unix(0, ns)))
	}
	b.StopTimer()
	if len(lat) != n {
		b.Fatalf("%d events, want %d", len(lat), n)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkEmit is the daemon's CPU cost per live event without any I/O:
// numbering, reduction into the assistant message, replay buffer, marshal +
// framing, and queueing to subscribers (1 and 3 clients). ns/op and
// allocs/op are per event.
func BenchmarkEmit(b *testing.B) {
	for _, clients := range []int{1, 3} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s := New(Options{ClientQueue: 1 << 30, BufferCap: 1 << 30})
			t := s.topicLocked("c")
			var cs []*client
			for i := 0; i < clients; i++ {
				c := newClient(s, nil)
				t.subs[c] = struct{}{}
				cs = append(cs, c)
			}
			r := &run{s: s, convID: "c", turnID: "t", agent: "a", kick: make(chan struct{}, 1), urgent: make(chan struct{}, 1),
				red: transcript.NewReducer(transcript.Message{ID: "t", Role: transcript.RoleAssistant})}
			t.run = r
			ev := transcript.Event{Type: transcript.EvContentDelta, Delta: "some streamed words "}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.mu.Lock()
				s.emitLocked(r, ev)
				s.mu.Unlock()
				if i%4096 == 0 {
					for _, c := range cs {
						c.mu.Lock()
						c.queue, c.notes = c.queue[:0], 0
						c.mu.Unlock()
					}
					s.mu.Lock()
					r.events = r.events[:0]
					s.mu.Unlock()
				}
			}
		})
	}
}
