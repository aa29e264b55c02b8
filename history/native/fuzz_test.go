package native

import (
	"bytes"
	"encoding/json"
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
