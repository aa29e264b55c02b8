package native

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// seeds adds every file matching the globs (capped in size) to f's corpus.
func seeds(f *testing.F, globs ...string) {
	for _, g := range globs {
		files, _ := filepath.Glob(g)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil || len(b) > 64<<10 {
				continue
			}
			f.Add(b)
		}
	}
}

func readLines(data []byte, add lineFunc, d *Diagnostics) {
	_ = eachLine(bytes.NewReader(data), d, add)
}

func FuzzClaude(f *testing.F) {
	seeds(f, "testdata/claude/*/*.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newClaudeReader("/x/s.jsonl")
		readLines(data, r.add, &r.t.Diagnostics)
		checkInvariants(t, r.build())
		// the listing skim never panics either
		if _, _, err := claudeMeta("/x/s.jsonl", bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzCodex(f *testing.F) {
	seeds(f, "testdata/codex/*/*.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newCodexReader("/x/rollout.jsonl")
		readLines(data, r.add, &r.t.Diagnostics)
		checkInvariants(t, r.build(nil))
		parseApplyPatch(string(data), "/w")
		if _, _, err := codexMeta("/x/rollout.jsonl", bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzGemini(f *testing.F) {
	seeds(f, "testdata/gemini/*/*.jsonl", "testdata/gemini/*/*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newGeminiReader("/x/chats/session-1.jsonl")
		readLines(data, r.add, &r.t.Diagnostics)
		checkInvariants(t, r.build())
		l := newGeminiReader("/x/chats/session-1.json")
		l.legacy(data)
		checkInvariants(t, l.build())
	})
}

func FuzzPi(f *testing.F) {
	seeds(f, "testdata/pi/traps/*.jsonl", "testdata/pi/public/agent-sessions__stage0__small.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newPiReader("/x/s.jsonl")
		readLines(data, r.add, &r.t.Diagnostics)
		checkInvariants(t, r.build())
	})
}

// FuzzOpenCode feeds one message row and one part row (data JSON).
func FuzzOpenCode(f *testing.F) {
	files, _ := filepath.Glob("testdata/opencode/storage_v2/part/*/*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add([]byte(`{"role":"assistant","parentID":"u"}`), b)
		f.Add([]byte(`{"role":"user"}`), b)
	}
	f.Fuzz(func(t *testing.T, msg, part []byte) {
		msgs := []ocMessage{
			{ID: "m1", Created: 1, Data: msg, Parts: []ocPart{{ID: "p1", Data: part}}},
			{ID: "m2", Created: 2, Data: json.RawMessage(`{"role":"assistant"}`), Parts: []ocPart{{ID: "p2", Data: part}}},
		}
		checkInvariants(t, buildOpenCode(ocSession{ID: "ses"}, msgs))
	})
}

// FuzzSkim checks the listing skimmer against encoding/json: every valid
// JSON object must be accepted, with the same top-level keys.
func FuzzSkim(f *testing.F) {
	seeds(f, "testdata/claude/traps/*.jsonl")
	f.Add([]byte(`{"a":"b\"c","d":[1,{"e":"}"}],"f":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, line := range bytes.Split(data, []byte("\n")) {
			var m map[string]json.RawMessage
			valid := json.Unmarshal(line, &m) == nil && m != nil && bytes.IndexByte(line, 0) < 0
			n := 0
			ok := objectFields(line, func(k, v []byte) bool {
				n++
				if valid && !json.Valid(v) {
					t.Errorf("value %q of key %q is not valid JSON in %q", v, k, line)
				}
				return true
			})
			if valid && !ok {
				t.Errorf("skim rejected a valid object: %q", line)
			}
			if valid && ok && n < len(m) {
				t.Errorf("skim saw %d keys, json %d: %q", n, len(m), line)
			}
		}
	})
}

// FuzzClaudeListing checks that the Claude listing (claudeMeta, the reader
// in skim mode) shows what the full reader gives, for every input whose
// lines are either valid compact JSON or structurally broken (truncated,
// glued, NUL runs, control characters): what the stores write and how
// their files break. Lines that are balanced but lexically invalid in
// another way (a bad escape or literal, a tab between tokens) are outside
// the contract and skip the input.
func FuzzClaudeListing(f *testing.F) {
	seeds(f, "testdata/claude/*/*.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		if !inListingContract(data) {
			t.Skip("a balanced line that is lexically invalid JSON, or valid JSON with a raw control byte")
		}
		if d := listingDiff(t, AgentClaude, data); len(d) > 0 {
			t.Errorf("listing differs from read: %v", d)
		}
	})
}

// FuzzCodexListing is FuzzClaudeListing for Codex rollouts.
func FuzzCodexListing(f *testing.F) {
	seeds(f, "testdata/codex/*/*.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		if !inListingContract(data) {
			t.Skip("a balanced line that is lexically invalid JSON, or valid JSON with a raw control byte")
		}
		if d := listingDiff(t, AgentCodex, data); len(d) > 0 {
			t.Errorf("listing differs from read: %v", d)
		}
	})
}

// inListingContract reports whether every line of data is valid JSON
// without raw control bytes, or not a balanced object at all, or holds a
// NUL or control byte (both readers skip those).
func inListingContract(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if json.Valid(line) == hasControl(line) && bytes.IndexByte(line, 0) < 0 && objectFields(line, func(_, _ []byte) bool { return true }) {
			return false
		}
	}
	return true
}

// listingDiff runs the full reader and the listing of agent (Claude or
// Codex, the stores with a skim) on one file's bytes and returns where
// they disagree.
func listingDiff(t *testing.T, agent string, data []byte) []string {
	t.Helper()
	var tr *Transcript
	var s Session
	var ok bool
	var err error
	switch agent {
	case AgentClaude:
		r := newClaudeReader("/x/s.jsonl")
		readLines(data, r.add, &r.t.Diagnostics)
		tr = r.build()
		s, ok, err = claudeMeta("/x/s.jsonl", bytes.NewReader(data), int64(len(data)))
	case AgentCodex:
		r := newCodexReader("/x/rollout-x.jsonl")
		readLines(data, r.add, &r.t.Diagnostics)
		tr = r.build(nil)
		s, ok, err = codexMeta("/x/rollout-x.jsonl", bytes.NewReader(data), int64(len(data)), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return parityDiff(agent, s, ok, tr)
}

// TestListingMatchesReadMutated is FuzzClaudeListing / FuzzCodexListing
// over a fixed, seeded set of mutations of every small Claude and Codex
// fixture (a byte replaced by any byte or by JSON punctuation, a byte
// deleted, a line repeated), so the contract is checked on every run, not
// only while fuzzing.
func TestListingMatchesReadMutated(t *testing.T) {
	for _, agent := range []string{AgentClaude, AgentCodex} {
		files, _ := filepath.Glob("testdata/" + agent + "/*/*.jsonl")
		rng := rand.New(rand.NewSource(7))
		tried := 0
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil || len(data) == 0 || len(data) > 64<<10 {
				continue
			}
			for k := 0; k < 150; k++ {
				d := bytes.Clone(data)
				for j := 0; j < 1+rng.Intn(3); j++ {
					switch rng.Intn(4) {
					case 0:
						d[rng.Intn(len(d))] = byte(rng.Intn(256))
					case 1:
						d[rng.Intn(len(d))] = "{}[]\",:\n"[rng.Intn(8)]
					case 2:
						i := rng.Intn(len(d))
						d = append(d[:i:i], d[i+1:]...)
					case 3:
						lines := bytes.SplitAfter(d, []byte("\n"))
						d = append(d, lines[rng.Intn(len(lines))]...)
					}
				}
				if !inListingContract(d) {
					continue
				}
				tried++
				if diff := listingDiff(t, agent, d); len(diff) > 0 {
					t.Fatalf("%s: mutation %d of %s: %v\n%s", agent, k, f, diff, d)
				}
			}
		}
		if tried < 500 {
			t.Errorf("%s: only %d mutations inside the contract", agent, tried)
		}
	}
}
