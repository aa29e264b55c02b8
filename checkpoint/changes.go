package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/merkletrie"

	"github.com/ochat-dev/ochat/transcript"
)

// Kind says how a path changed between two checkpoints.
type Kind string

// Change kinds.
const (
	Added    Kind = "added"
	Modified Kind = "modified"
	Deleted  Kind = "deleted"
	Renamed  Kind = "renamed"
	// Skipped: one side left the path out (over a cap, unreadable, …) and
	// it is not known to be unchanged; Reason says why.
	Skipped Kind = "skipped"
)

// maxDiffBytes is the largest side of a change given a text diff.
const maxDiffBytes = 1 << 20

// renameLimit bounds rename detection (deleted × added pairs compared).
const renameLimit = 200

// Change is one path's difference between two checkpoints. Old and New are
// the texts of a text file (nil: absent, binary or over maxDiffBytes).
type Change struct {
	Path    string `json:"path"`
	OldPath string `json:"oldPath,omitempty"` // Renamed
	Kind    Kind   `json:"kind"`
	// OldMode and NewMode are git modes ("100644", "100755", "120000"),
	// "" for an absent side; ModeChanged is set when both exist and differ.
	OldMode     string `json:"oldMode,omitempty"`
	NewMode     string `json:"newMode,omitempty"`
	ModeChanged bool   `json:"modeChanged,omitempty"`
	Binary      bool   `json:"binary,omitempty"`
	Symlink     bool   `json:"symlink,omitempty"`
	OldHash     string `json:"oldHash,omitempty"`
	NewHash     string `json:"newHash,omitempty"`
	Additions   int    `json:"additions"`
	Deletions   int    `json:"deletions"`
	Diff        string `json:"diff,omitempty"`
	Reason      string `json:"reason,omitempty"`

	Old *string `json:"-"`
	New *string `json:"-"`
}

// Changes lists what differs from checkpoint from to checkpoint to, sorted
// by path: content, mode, renames (exact and similar content), and paths
// either side skipped unless both skipped the same version.
func (s *Store) Changes(ctx context.Context, from, to string) ([]Change, error) {
	ta, ca, err := s.tree(from)
	if err != nil {
		return nil, err
	}
	tb, cb, err := s.tree(to)
	if err != nil {
		return nil, err
	}
	opts := *object.DefaultDiffTreeOptions
	opts.RenameLimit = renameLimit
	diffs, err := object.DiffTreeWithOptions(ctx, ta, tb, &opts)
	if err != nil {
		return nil, fmt.Errorf("changes %s..%s: %w", from, to, err)
	}
	skA, skB := skipMap(describe(ca).Skipped), skipMap(describe(cb).Skipped)
	var out []Change
	seen := map[string]bool{}
	for _, d := range diffs {
		act, err := d.Action()
		if err != nil {
			return nil, err
		}
		c := Change{Path: d.To.Name}
		switch act {
		case merkletrie.Insert:
			c.Kind = Added
		case merkletrie.Delete:
			c.Kind, c.Path = Deleted, d.From.Name
		default:
			c.Kind = Modified
			if d.From.Name != d.To.Name {
				c.Kind, c.OldPath = Renamed, d.From.Name
			}
		}
		seen[c.Path], seen[c.OldPath] = true, true
		// A path one side skipped is not added or deleted: it is unknown.
		if sk, ok := skB[c.Path]; ok && c.Kind == Deleted {
			c.Kind, c.Reason = Skipped, "not recorded after: "+sk.Reason
		}
		if sk, ok := skA[c.Path]; ok && c.Kind == Added {
			c.Kind, c.Reason = Skipped, "not recorded before: "+sk.Reason
		}
		if d.From.Name != "" {
			c.OldMode, c.OldHash = d.From.TreeEntry.Mode.String(), d.From.TreeEntry.Hash.String()
		}
		if d.To.Name != "" {
			c.NewMode, c.NewHash = d.To.TreeEntry.Mode.String(), d.To.TreeEntry.Hash.String()
		}
		c.ModeChanged = c.OldMode != "" && c.NewMode != "" && c.OldMode != c.NewMode
		c.Symlink = d.From.TreeEntry.Mode == filemode.Symlink || d.To.TreeEntry.Mode == filemode.Symlink
		if err := s.fillDiff(&c, d); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	// Skipped on one side or both, with different versions.
	for p, b := range skB {
		if seen[p] {
			continue
		}
		if a, ok := skA[p]; ok && a.Size == b.Size && a.MTime == b.MTime {
			continue
		}
		out = append(out, Change{Path: p, Kind: Skipped, Reason: "not recorded: " + b.Reason})
	}
	for p, a := range skA {
		if seen[p] || skB[p].Path != "" {
			continue
		}
		if _, err := tb.FindEntry(p); err == nil {
			out = append(out, Change{Path: p, Kind: Skipped, Reason: "not recorded before: " + a.Reason})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func skipMap(sks []Skip) map[string]Skip {
	m := make(map[string]Skip, len(sks))
	for _, s := range sks {
		m[s.Path] = s
	}
	return m
}

// fillDiff reads both sides of d and sets c's texts, counts and diff.
func (s *Store) fillDiff(c *Change, d *object.Change) error {
	read := func(e object.ChangeEntry) ([]byte, bool, error) {
		if e.Name == "" {
			return nil, false, nil
		}
		b, err := s.blob(e.TreeEntry.Hash)
		return b, true, err
	}
	a, hasA, err := read(d.From)
	if err != nil {
		return fmt.Errorf("changes: %s: %w", d.From.Name, err)
	}
	b, hasB, err := read(d.To)
	if err != nil {
		return fmt.Errorf("changes: %s: %w", d.To.Name, err)
	}
	if isBinary(a) || isBinary(b) {
		c.Binary = true
		return nil
	}
	if len(a) > maxDiffBytes || len(b) > maxDiffBytes {
		c.Reason = "too large for a text diff"
		return nil
	}
	var oldT, newT *string
	if hasA {
		t := string(a)
		oldT = &t
	}
	if hasB {
		t := string(b)
		newT = &t
	}
	c.Old, c.New = oldT, newT
	if bytes.Equal(a, b) && hasA == hasB {
		return nil // a mode change or an exact rename
	}
	c.Additions, c.Deletions = transcript.CountLines(oldT, newT)
	c.Diff = transcript.UnifiedDiff(c.Path, oldT, newT)
	return nil
}

// isBinary: a NUL in the first 8000 bytes (git's rule) or invalid UTF-8.
func isBinary(b []byte) bool {
	head := b
	if len(head) > 8000 {
		head = head[:8000]
	}
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(b)
}
