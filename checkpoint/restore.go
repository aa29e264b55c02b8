package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// Conflict is a path whose current content is not what a restore expected.
type Conflict struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ConflictError is returned by Restore when paths changed since the
// expected checkpoint and Force was not set; nothing was written.
type ConflictError struct{ Conflicts []Conflict }

func (e *ConflictError) Error() string {
	var b strings.Builder
	for i, c := range e.Conflicts {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s", c.Path, c.Reason)
	}
	return b.String()
}

// RestoreOptions tune Restore.
type RestoreOptions struct {
	// Expect is the checkpoint the paths must match now (the state the
	// caller believes the disk is in); "" skips the check.
	Expect string
	// Force restores paths in conflict too, after a backup checkpoint of
	// the current content (RestoreResult.Backup).
	Force bool
	// Backup takes a backup checkpoint first even without conflicts (a
	// rewind does, so it can be undone).
	Backup bool
	// Label names the backup checkpoint.
	Label string
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	Restored  []string `json:"restored,omitempty"`
	Unchanged []string `json:"unchanged,omitempty"` // already held the target
	Backup    string   `json:"backup,omitempty"`    // the checkpoint taken first
	Forced    []string `json:"forced,omitempty"`    // restored over a conflict
}

// Restore makes paths (slash-separated, relative) hold exactly what they
// held in checkpoint to: bytes, executable bit or link target; a path
// absent there is removed. It writes through an os.Root of the workspace,
// so nothing outside it is touched and no symlink is followed out.
func (s *Store) Restore(ctx context.Context, to string, paths []string, o RestoreOptions) (RestoreResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var res RestoreResult
	tt, tc, err := s.tree(to)
	if err != nil {
		return res, err
	}
	type plan struct {
		path   string
		target File
	}
	var plans []plan
	var conflicts []Conflict
	for _, p := range paths {
		if err := checkRel(p); err != nil {
			return res, err
		}
		target, err := s.fileIn(tt, tc, p)
		if err != nil {
			return res, err
		}
		if target.Skipped {
			return res, fmt.Errorf("cannot restore %s: the checkpoint did not record it (%s)", p, target.Reason)
		}
		cur, err := s.current(p)
		if err != nil {
			return res, fmt.Errorf("cannot restore %s: %w", p, err)
		}
		if sameFile(cur, target) {
			res.Unchanged = append(res.Unchanged, p)
			continue
		}
		if o.Expect != "" {
			want, err := s.File(o.Expect, p)
			if err != nil {
				return res, err
			}
			if !sameFile(cur, want) {
				conflicts = append(conflicts, Conflict{Path: p, Reason: describeDrift(want, cur)})
			}
		}
		plans = append(plans, plan{p, target})
	}
	if len(conflicts) > 0 && !o.Force {
		return res, &ConflictError{Conflicts: conflicts}
	}
	if len(plans) == 0 {
		return res, nil
	}
	if len(conflicts) > 0 || o.Backup {
		label := o.Label
		if label == "" {
			label = "before restore to " + to[:12]
		}
		cp, err := s.takeLocked(ctx, label)
		if err != nil {
			return res, fmt.Errorf("backup before restore (nothing was restored): %w", err)
		}
		res.Backup = cp.ID
		for _, c := range conflicts {
			res.Forced = append(res.Forced, c.Path)
		}
	}
	root, err := os.OpenRoot(s.opts.Workspace)
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	defer root.Close()
	for _, pl := range plans {
		if err := writeFile(root, pl.path, pl.target); err != nil {
			return res, fmt.Errorf("restore %s: %w", pl.path, err)
		}
		res.Restored = append(res.Restored, pl.path)
	}
	return res, nil
}

// Current returns what path holds on disk now, as a File.
func (s *Store) Current(p string) (File, error) {
	if err := checkRel(p); err != nil {
		return File{}, err
	}
	return s.current(p)
}

func (s *Store) current(p string) (File, error) {
	abs := filepath.Join(s.opts.Workspace, filepath.FromSlash(p))
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) {
		return File{}, nil
	}
	if err != nil {
		return File{}, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(abs)
		if err != nil {
			return File{}, err
		}
		return File{Exists: true, Mode: filemode.Symlink, Data: []byte(t)}, nil
	case fi.Mode().IsRegular():
		if fi.Size() > s.opts.MaxFileBytes {
			return File{}, fmt.Errorf("%s is %s, over the cap of %s", p, humanBytes(fi.Size()), humanBytes(s.opts.MaxFileBytes))
		}
		b, st, err := readOnce(abs, s.opts.MaxFileBytes)
		if err != nil {
			return File{}, err
		}
		m := filemode.Regular
		if st.Mode().Perm()&0o111 != 0 {
			m = filemode.Executable
		}
		return File{Exists: true, Mode: m, Data: b}, nil
	case fi.IsDir():
		return File{}, fmt.Errorf("%s is a directory now", p)
	}
	return File{}, fmt.Errorf("%s is a special file now", p)
}

func sameFile(a, b File) bool {
	if !a.Exists || !b.Exists {
		return a.Exists == b.Exists
	}
	return a.Mode == b.Mode && bytes.Equal(a.Data, b.Data)
}

func describeDrift(want, cur File) string {
	switch {
	case !want.Exists && cur.Exists:
		return "was created since"
	case want.Exists && !cur.Exists:
		return "was deleted since"
	case want.Mode != cur.Mode && bytes.Equal(want.Data, cur.Data):
		return "had its mode changed since"
	}
	return "was changed since"
}

// checkRel refuses paths that are not clean, relative and inside.
func checkRel(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("path %q is not a clean path relative to the workspace", p)
	}
	if p == ".git" || strings.HasPrefix(p, ".git/") || strings.Contains(p, "/.git/") {
		return fmt.Errorf("path %q is inside a .git directory, which checkpoints never touch", p)
	}
	return nil
}

// writeFile makes p in root hold f (absent: removed).
func writeFile(root *os.Root, p string, f File) error {
	name := filepath.FromSlash(p)
	fi, err := root.Lstat(name)
	exists := err == nil
	if exists && fi.IsDir() {
		return fmt.Errorf("a directory is in the way")
	}
	if !f.Exists {
		if !exists {
			return nil
		}
		return root.Remove(name)
	}
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if f.Mode == filemode.Symlink {
		if exists {
			if err := root.Remove(name); err != nil {
				return err
			}
		}
		return root.Symlink(string(f.Data), name)
	}
	perm := fs.FileMode(0o644)
	if exists && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm() &^ 0o111
	}
	if f.Mode == filemode.Executable {
		perm |= (perm & 0o444) >> 2 // x wherever r
	}
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".ochat-restore")
	if err := root.WriteFile(tmp, f.Data, perm); err != nil {
		return err
	}
	if err := root.Chmod(tmp, perm); err != nil { // WriteFile's perm is masked by umask
		root.Remove(tmp)
		return err
	}
	if exists && fi.Mode()&fs.ModeSymlink != 0 {
		if err := root.Remove(name); err != nil {
			root.Remove(tmp)
			return err
		}
	}
	if err := root.Rename(tmp, name); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}

// RestoreAll makes the whole workspace match checkpoint to (files the
// ignore rules leave out stay as they are), after a backup checkpoint of
// the current state, whose id is RestoreResult.Backup: restoring that undoes
// this.
func (s *Store) RestoreAll(ctx context.Context, to, label string) (RestoreResult, error) {
	s.mu.Lock()
	if label == "" {
		label = "before restore to " + to[:min(12, len(to))]
	}
	backup, err := s.takeLocked(ctx, label)
	s.mu.Unlock()
	if err != nil {
		return RestoreResult{}, fmt.Errorf("backup before restore (nothing was restored): %w", err)
	}
	chs, err := s.Changes(ctx, backup.ID, to)
	if err != nil {
		return RestoreResult{Backup: backup.ID}, err
	}
	var paths []string
	for _, c := range chs {
		if c.Kind == Skipped {
			continue
		}
		paths = append(paths, c.Path)
		if c.OldPath != "" {
			paths = append(paths, c.OldPath)
		}
	}
	res, err := s.Restore(ctx, to, paths, RestoreOptions{Expect: backup.ID})
	res.Backup = backup.ID
	return res, err
}

// SameContent reports whether a and b hold the same thing: both absent, or
// the same mode and bytes.
func SameContent(a, b File) bool { return sameFile(a, b) }

// markPrefix names refs that keep a checkpoint whatever Prune decides (the
// backup of the last rewind of a conversation, for its undo).
const markPrefix = "refs/marks/"

// SetMark names checkpoint id under name (letters, digits, '-', '_').
func (s *Store) SetMark(name, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.commit(id)
	if err != nil {
		return err
	}
	return s.st.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(markPrefix+name), c.Hash))
}

// Mark returns the checkpoint named name, "" when none.
func (s *Store) Mark(name string) string {
	r, err := s.st.Reference(plumbing.ReferenceName(markPrefix + name))
	if err != nil {
		return ""
	}
	return r.Hash().String()
}
