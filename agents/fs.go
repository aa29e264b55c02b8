package agents

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	acp "github.com/coder/acp-go-sdk"
)

// Limits of the client fs methods.
const (
	maxWriteBytes = 10 << 20 // fs/write_text_file content
	maxReadBytes  = 10 << 20 // fs/read_text_file file size
)

// codeResourceNotFound is ACP's "Resource not found" JSON-RPC error code.
const codeResourceNotFound = -32002

// errNotFound marks a path that does not exist.
var errNotFound = errors.New("no such file")

// resolvePath confines p (absolute, or relative to the workspace) to the
// workspace: after cleaning, it must lie inside root (as given) or realRoot
// (symlinks resolved), and once the symlinks of its longest existing prefix
// are resolved, inside realRoot. It returns the resolved absolute path; the
// part of it that does not exist yet is returned as is. Refusals name the
// path and the workspace.
func resolvePath(root, realRoot, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(root, abs)
	}
	abs = filepath.Clean(abs)
	var rest string
	switch {
	case within(realRoot, abs):
		rest, _ = filepath.Rel(realRoot, abs)
	case within(root, abs):
		rest, _ = filepath.Rel(root, abs)
	default:
		return "", fmt.Errorf("%s is outside the workspace %s", p, root)
	}
	// Resolve symlinks of the longest existing prefix below realRoot.
	parts := strings.Split(rest, string(filepath.Separator))
	if rest == "." {
		parts = nil
	}
	cur := realRoot
	for i, part := range parts {
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			out := filepath.Join(append([]string{cur}, parts[i:]...)...)
			return out, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			resolved, err := filepath.EvalSymlinks(next)
			if errors.Is(err, fs.ErrNotExist) {
				// A dangling link: where would it point?
				target, lerr := os.Readlink(next)
				if lerr != nil {
					return "", lerr
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(cur, target)
				}
				target = filepath.Clean(target)
				if !within(realRoot, target) {
					return "", fmt.Errorf("%s leads outside the workspace %s (symlink %s)", p, root, next)
				}
				return filepath.Join(append([]string{target}, parts[i+1:]...)...), nil
			}
			if err != nil {
				return "", err
			}
			if !within(realRoot, resolved) {
				return "", fmt.Errorf("%s leads outside the workspace %s (symlink %s)", p, root, next)
			}
			cur = resolved
			continue
		}
		cur = next
	}
	return cur, nil
}

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	if p == root {
		return true
	}
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func invalidParams(msg string) *acp.RequestError {
	return &acp.RequestError{Code: -32602, Message: "Invalid params: " + msg, Data: map[string]any{"error": msg}}
}

func notFound(path string) *acp.RequestError {
	return &acp.RequestError{Code: codeResourceNotFound, Message: "Resource not found: " + path, Data: map[string]any{"path": path, "error": "file does not exist"}}
}

func internalErr(msg string) *acp.RequestError {
	return &acp.RequestError{Code: -32603, Message: "Internal error: " + msg, Data: map[string]any{"error": msg}}
}

type readParams struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Line      *int   `json:"line"`
	Limit     *int   `json:"limit"`
}

// onReadFile serves fs/read_text_file: a regular file inside the workspace,
// from line (1-based) for limit lines when given. A missing file is ACP's
// resource-not-found error (-32002).
func (c *Conn) onReadFile(ctx context.Context, params json.RawMessage) (any, *acp.RequestError) {
	var p readParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidParams(err.Error())
	}
	path, err := resolvePath(c.root, c.realRoot, p.Path)
	if err != nil {
		c.log.Info("fs/read_text_file refused", "path", p.Path, "err", err)
		return nil, invalidParams(err.Error())
	}
	var content string
	handled := false
	if c.opts.ReadFile != nil {
		content, handled, err = c.opts.ReadFile(ctx, p.SessionID, path)
		if err != nil {
			return nil, internalErr(err.Error())
		}
	}
	if !handled {
		content, err = readRegular(c.realRoot, path)
		if errors.Is(err, errNotFound) {
			return nil, notFound(p.Path)
		}
		if err != nil {
			return nil, invalidParams(err.Error())
		}
	}
	return acp.ReadTextFileResponse{Content: window(content, p.Line, p.Limit)}, nil
}

// openIn opens realRoot as an os.Root and returns path (already resolved by
// resolvePath) relative to it. Every later step goes through the Root, so a
// directory swapped for a symlink out of the workspace after resolvePath
// looked is refused by the kernel-side walk (openat per component) rather
// than followed.
func openIn(realRoot, path string) (*os.Root, string, error) {
	rel, err := filepath.Rel(realRoot, path)
	if err != nil || !within(realRoot, path) {
		return nil, "", fmt.Errorf("%s is outside the workspace %s", path, realRoot)
	}
	root, err := os.OpenRoot(realRoot)
	if err != nil {
		return nil, "", fmt.Errorf("open workspace %s: %w", realRoot, err)
	}
	return root, rel, nil
}

// confineErr rewords os.Root's escape error.
func confineErr(path, realRoot string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%s leads outside the workspace %s", path, realRoot)
	}
	return err
}

// FileKind names a non-regular file mode for error messages ("a directory",
// "a named pipe (FIFO)", …; "not a regular file" when none fits).
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a regular file"
}

// readRegular reads the regular file path (resolved, inside realRoot) of at
// most maxReadBytes. Directories, FIFOs, sockets and devices are refused
// before they are opened (opening a FIFO would block, opening a device can
// have effects); the open itself is non-blocking and is checked again to be
// the same regular file.
func readRegular(realRoot, path string) (string, error) {
	root, rel, err := openIn(realRoot, path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errNotFound
	}
	if err != nil {
		return "", confineErr(path, realRoot, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s)", path, FileKind(fi.Mode()))
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errNotFound
	}
	if err != nil {
		return "", confineErr(path, realRoot, err)
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return "", fmt.Errorf("%s changed while it was being opened", path)
	}
	if ofi.Size() > maxReadBytes {
		return "", fmt.Errorf("%s is %d bytes; at most %d can be read", path, ofi.Size(), maxReadBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxReadBytes {
		return "", fmt.Errorf("%s grew past %d bytes while being read", path, maxReadBytes)
	}
	return string(b), nil
}

// window returns limit lines of s starting at line (1-based); nil means from
// the start / to the end.
func window(s string, line, limit *int) string {
	if line == nil && limit == nil {
		return s
	}
	start := 0
	if line != nil && *line > 1 {
		for n := 1; n < *line; n++ {
			i := strings.IndexByte(s[start:], '\n')
			if i < 0 {
				return ""
			}
			start += i + 1
		}
	}
	s = s[start:]
	if limit != nil {
		if *limit <= 0 {
			return ""
		}
		end := 0
		for n := 0; n < *limit; n++ {
			i := strings.IndexByte(s[end:], '\n')
			if i < 0 {
				return s
			}
			end += i + 1
		}
		s = s[:end]
	}
	return s
}

type writeParams struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}

// onWriteFile serves fs/write_text_file: through Options.WriteFile if it
// handles it, else an atomic write (temp file in the same directory +
// rename) of at most 10 MB to a regular file inside the workspace, creating
// missing parent directories.
func (c *Conn) onWriteFile(ctx context.Context, params json.RawMessage) (any, *acp.RequestError) {
	var p writeParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidParams(err.Error())
	}
	if len(p.Content) > maxWriteBytes {
		return nil, invalidParams(fmt.Sprintf("content is %d bytes; at most %d can be written", len(p.Content), maxWriteBytes))
	}
	path, err := resolvePath(c.root, c.realRoot, p.Path)
	if err != nil {
		c.log.Info("fs/write_text_file refused", "path", p.Path, "err", err)
		return nil, invalidParams(err.Error())
	}
	if c.opts.WriteFile != nil {
		handled, err := c.opts.WriteFile(ctx, p.SessionID, path, p.Content)
		if err != nil {
			return nil, internalErr(err.Error())
		}
		if handled {
			return acp.WriteTextFileResponse{}, nil
		}
	}
	if err := writeAtomic(c.realRoot, path, p.Content); err != nil {
		return nil, invalidParams(err.Error())
	}
	return acp.WriteTextFileResponse{}, nil
}

// writeAtomic replaces (or creates) the regular file path (resolved, inside
// realRoot) with content: a temp file in the same directory, written,
// synced and renamed over the target, then the directory synced, so a
// reader sees the old or the new content and never a part. An existing
// file keeps its permission bits (new files: 0644); missing parent
// directories are created (0755). Directories, FIFOs, sockets and devices
// are refused. Every step goes through an os.Root of realRoot.
func writeAtomic(realRoot, path, content string) error {
	root, rel, err := openIn(realRoot, path)
	if err != nil {
		return err
	}
	defer root.Close()
	mode := fs.FileMode(0o644)
	fi, err := root.Lstat(rel)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s)", path, FileKind(fi.Mode()))
	case err == nil:
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return confineErr(path, realRoot, err)
	}
	dir := filepath.Dir(rel)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return confineErr(path, realRoot, err)
	}
	var tmp *os.File
	var tmpRel string
	for range 10 {
		tmpRel = filepath.Join(dir, "."+filepath.Base(rel)+".ochat-"+rand.Text()[:10])
		tmp, err = root.OpenFile(tmpRel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return confineErr(path, realRoot, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			root.Remove(tmpRel)
		}
	}()
	if _, err := tmp.WriteString(content); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := root.Rename(tmpRel, rel); err != nil {
		return confineErr(path, realRoot, err)
	}
	ok = true
	if d, err := root.Open(dir); err == nil {
		d.Sync() // the rename's durability; best effort
		d.Close()
	}
	return nil
}
