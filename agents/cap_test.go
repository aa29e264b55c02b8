package agents

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ochat-dev/ochat/transcript"
)

var cutRE = regexp.MustCompile(`\n… \[ochat: (\d+) bytes cut\] …\n`)

// checkCut verifies that got is orig with one middle part replaced by the
// cut marker naming its length, at most limit bytes, valid UTF-8.
func checkCut(t *testing.T, orig, got string, limit int) {
	t.Helper()
	if len(orig) <= limit {
		if got != orig {
			t.Fatalf("text of %d bytes (limit %d) changed", len(orig), limit)
		}
		return
	}
	if len(got) > limit {
		t.Fatalf("capped to %d bytes, limit %d", len(got), limit)
	}
	if !utf8.ValidString(got) {
		t.Fatalf("capped text is not valid UTF-8")
	}
	loc := cutRE.FindStringSubmatchIndex(got)
	if loc == nil {
		t.Fatalf("no cut marker in %q", got[:min(len(got), 100)])
	}
	var n int
	fmt.Sscan(got[loc[2]:loc[3]], &n)
	head, tail := got[:loc[0]], got[loc[1]:]
	if !strings.HasPrefix(orig, head) || !strings.HasSuffix(orig, tail) || len(head)+n+len(tail) != len(orig) {
		t.Fatalf("head %d + cut %d + tail %d bytes do not make the original %d bytes", len(head), n, len(tail), len(orig))
	}
	if len(head) < limit/3 || len(tail) < limit/3 {
		t.Fatalf("head %d, tail %d bytes of a %d limit: both should be kept", len(head), len(tail), limit)
	}
}

func TestCapText(t *testing.T) {
	tests := []struct {
		name  string
		s     string
		limit int
	}{
		{"short", "abc", 1024},
		{"exactly the limit", strings.Repeat("a", 1024), 1024},
		{"one over", strings.Repeat("a", 1025), 1024},
		{"ascii 1 MB", strings.Repeat("0123456789", 100_000), 256 << 10},
		{"multibyte", strings.Repeat("é€😀", 50_000), 256 << 10},
		{"multibyte odd limit", strings.Repeat("€", 1000), 1001},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCut(t, tt.s, capText(tt.s, tt.limit), tt.limit)
		})
	}
}

func TestCapInput(t *testing.T) {
	big := strings.Repeat("line of a file\n", 100_000) // 1.5 MB
	manySmall := make([]string, 100_000)
	for i := range manySmall {
		manySmall[i] = fmt.Sprint(i)
	}
	manyJSON, _ := json.Marshal(manySmall)
	tests := []struct {
		name  string
		raw   string
		shape string // "same", "object" (keys kept, long strings cut), "string" (whole input as a cut string)
	}{
		{"small object", `{"command":"ls <a>"}`, "same"},
		{"write tool with a huge content", `{"file_path":"/w/a.txt","content":` + quote(big) + `}`, "object"},
		{"two huge fields", `{"old_string":` + quote(big) + `,"new_string":` + quote(big) + `,"n":1.50}`, "object"},
		{"huge array of short strings", string(manyJSON), "string"},
		{"invalid JSON", `{"x":"` + big, "string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := capInput(json.RawMessage(tt.raw), maxToolTextBytes)
			if len(got) > maxToolTextBytes+64 {
				t.Fatalf("capped input is %d bytes", len(got))
			}
			if !json.Valid(got) {
				t.Fatalf("capped input is not valid JSON: %.200s", got)
			}
			switch tt.shape {
			case "same":
				if string(got) != tt.raw {
					t.Fatalf("got %s, want unchanged", got)
				}
			case "object":
				var orig, capped map[string]json.RawMessage
				json.Unmarshal([]byte(tt.raw), &orig)
				if err := json.Unmarshal(got, &capped); err != nil {
					t.Fatalf("capped input is not an object: %v", err)
				}
				for k, v := range orig {
					var os, cs string
					if json.Unmarshal(v, &os) != nil {
						if string(capped[k]) != string(v) {
							t.Errorf("%s: %s, want %s", k, capped[k], v)
						}
						continue
					}
					if err := json.Unmarshal(capped[k], &cs); err != nil {
						t.Fatalf("%s: %v", k, err)
					}
					checkCut(t, os, cs, max(len(cs), 1<<10))
					if len(os) > maxToolTextBytes && !cutRE.MatchString(cs) {
						t.Errorf("%s: %d bytes kept whole", k, len(os))
					}
				}
			case "string":
				var s string
				if err := json.Unmarshal(got, &s); err != nil {
					t.Fatalf("capped input is not a string: %.100s", got)
				}
				checkCut(t, strings.ToValidUTF8(tt.raw, "\uFFFD"), s, maxToolTextBytes)
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestToolCaps runs big tool updates through the mapper: the emitted tool
// segment holds capped Output and Input; fileChange texts stay whole up to
// maxFileTextBytes and are cut, marked, above it.
func TestToolCaps(t *testing.T) {
	out9 := strings.Repeat("y", 9<<20)
	in1 := strings.Repeat("z", 1<<20)
	m := newMapper(fakeClock(), "/w")
	m.apply(mustUpdate(t, `{"sessionUpdate":"tool_call","toolCallId":"t","title":"Run","status":"in_progress","rawInput":{"command":`+quote(in1)+`}}`), true)
	res := m.apply(mustUpdate(t, `{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"failed","content":[{"type":"content","content":{"type":"text","text":`+quote(out9)+`}}]}`), true)
	if len(res.events) != 1 || res.events[0].Segment == nil {
		t.Fatalf("events %+v", res.events)
	}
	seg := res.events[0].Segment
	checkCut(t, out9, seg.Output, maxToolTextBytes)
	checkCut(t, out9, seg.Error, maxToolTextBytes)
	if len(seg.Input) > maxToolTextBytes {
		t.Fatalf("input %d bytes", len(seg.Input))
	}
	var in struct{ Command string }
	if err := json.Unmarshal(seg.Input, &in); err != nil || !cutRE.MatchString(in.Command) {
		t.Fatalf("input not cut with a marker: %v %.100s", err, seg.Input)
	}

	res = m.apply(mustUpdate(t, `{"sessionUpdate":"tool_call_update","toolCallId":"t","rawOutput":{"stdout":`+quote(out9)+`}}`), true)
	checkCut(t, out9, res.events[0].Segment.Output, maxToolTextBytes)

	whole := strings.Repeat("o", 8<<20) // kept whole (one line: a quick diff)
	over := strings.Repeat("n", 12<<20) // cut at 10 MB
	res = m.apply(mustUpdate(t, `{"sessionUpdate":"tool_call","toolCallId":"e","kind":"edit","status":"completed","content":[`+
		`{"type":"diff","path":"/w/a","oldText":`+quote(whole)+`,"newText":`+quote(over)+`}]}`), true)
	var fc *transcript.Segment
	for _, ev := range res.events {
		if ev.Segment.Type == transcript.SegFileChange {
			fc = ev.Segment
		}
	}
	if fc == nil || fc.OldText == nil || fc.NewText == nil {
		t.Fatalf("no fileChange in %+v", res.events)
	}
	if *fc.OldText != whole {
		t.Fatalf("old text of %d bytes changed (%d bytes)", len(whole), len(*fc.OldText))
	}
	checkCut(t, over, *fc.NewText, maxFileTextBytes)
}
