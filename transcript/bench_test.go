package transcript

import (
	"bytes"
	"io"
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
	start := cpuTime()
	for b.Loop() {
		_ = Regroup(Flatten(msgs))
	}
	reportCPU(b, start)
}

// BenchmarkFlatten10k and BenchmarkRegroup10k split the figure above.
func BenchmarkFlatten10k(b *testing.B) {
	msgs := genConversation(rand.New(rand.NewPCG(7, 8)), 10_000)
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		_ = Flatten(msgs)
	}
	reportCPU(b, start)
}

func BenchmarkRegroup10k(b *testing.B) {
	recs := Flatten(genConversation(rand.New(rand.NewPCG(7, 8)), 10_000))
	b.ReportMetric(float64(len(recs)), "records")
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		_ = Regroup(recs)
	}
	reportCPU(b, start)
}

// BenchmarkExportEvents10k exports a 10,000-turn conversation to the event
// log (io.Discard); B/op shows the export's own memory, which is bounded by
// one turn (one line buffer, one step's calls, the degradation list).
func BenchmarkExportEvents10k(b *testing.B) {
	msgs := genConversation(rand.New(rand.NewPCG(7, 8)), 10_000)
	var events int64
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		res, err := ExportEvents(io.Discard, ConversationMeta{ID: "C", Title: "bench"}, msgs)
		if err != nil {
			b.Fatal(err)
		}
		events = res.Events
	}
	reportCPU(b, start)
	b.ReportMetric(float64(events), "events")
}

// BenchmarkValidateImport10k validates and imports the exported log of a
// 10,000-turn conversation.
func BenchmarkValidateImport10k(b *testing.B) {
	var log bytes.Buffer
	if _, err := ExportEvents(&log, ConversationMeta{}, genConversation(rand.New(rand.NewPCG(7, 8)), 10_000)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(log.Len()))
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if v := Validate(log.Bytes()); v != nil {
			b.Fatal(v[0])
		}
		_ = Import(log.Bytes())
	}
	reportCPU(b, start)
}
