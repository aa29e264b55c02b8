package daemon

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkEventLatency measures the daemon's overhead per live event: from
// the agent handler's Event call (in-process fake agent, 10,000 events/s
// sustained, in 1 ms bursts of 10) to the notification decoded by a client on
// the unix socket; every event must arrive once, in order. Reports p50/p99
// in µs.
func BenchmarkEventLatency(b *testing.B) {
	e := newEnv(b, nil)
	c := e.dial("bench")
	n := max(b.N, 2000)
	b.ResetTimer()
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
	b.StopTimer()
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
