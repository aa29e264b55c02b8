package transcript

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkReducerContentDeltas measures one content.delta (8 bytes) applied
// through a Reducer; deltas/s is reported. One turn is 100,000 deltas.
func BenchmarkReducerContentDeltas(b *testing.B) {
	ev := Event{Type: EvContentDelta, Delta: "token · "}
	b.ReportAllocs()
	r := NewReducer(Message{ID: "A", Role: RoleAssistant, Status: StatusStreaming})
	n := 0
	for b.Loop() {
		if n == 100_000 {
			r = NewReducer(Message{ID: "A", Role: RoleAssistant, Status: StatusStreaming})
			n = 0
		}
		r.Apply(ev)
		n++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
}

// BenchmarkApplyContentDeltas is the same through the plain Apply function
// (re-allocates the string: fine for short turns, quadratic for long ones),
// with turns of 1,000 deltas.
func BenchmarkApplyContentDeltas(b *testing.B) {
	ev := Event{Type: EvContentDelta, Delta: "token · "}
	b.ReportAllocs()
	m := Message{ID: "A", Role: RoleAssistant, Status: StatusStreaming}
	n := 0
	for b.Loop() {
		if n == 1000 {
			m = Message{ID: "A", Role: RoleAssistant, Status: StatusStreaming}
			n = 0
		}
		Apply(&m, ev)
		n++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
}

// BenchmarkFlattenRegroup10k flattens and regroups a 10,000-turn
// conversation (20,000 messages, random segments).
func BenchmarkFlattenRegroup10k(b *testing.B) {
	msgs := genConversation(rand.New(rand.NewPCG(7, 8)), 10_000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Regroup(Flatten(msgs))
	}
}
