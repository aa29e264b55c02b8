package cli

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		pos   []string
		agent string
		yes   bool
		err   bool
	}{
		{args: []string{"--agent", "a", "hello"}, pos: []string{"hello"}, agent: "a"},
		{args: []string{"hello", "--yes"}, pos: []string{"hello"}, yes: true},
		{args: []string{"--", "--yes"}, pos: []string{"--yes"}},
		// A prompt that starts with "-" but holds whitespace is not a flag.
		{args: []string{"--agent", "a", "-v is a flag?"}, pos: []string{"-v is a flag?"}, agent: "a"},
		{args: []string{"-v is a flag?", "--yes"}, pos: []string{"-v is a flag?"}, yes: true},
		{args: []string{"- item one\n- item two"}, pos: []string{"- item one\n- item two"}},
		{args: []string{"-v"}, err: true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		agent := fs.String("agent", "", "")
		yes := fs.Bool("yes", false, "")
		pos, err := parse(fs, tc.args)
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v", tc.args, err)
			continue
		}
		if tc.err {
			continue
		}
		if !slices.Equal(pos, tc.pos) || *agent != tc.agent || *yes != tc.yes {
			t.Errorf("%q: pos %q agent %q yes %v", tc.args, pos, *agent, *yes)
		}
	}
}
