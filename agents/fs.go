package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
		content, err = readRegular(path)
		if errors.Is(err, errNotFound) {
			return nil, notFound(p.Path)
		}
		if err != nil {
			return nil, invalidParams(err.Error())
		}
	}
	return acp.ReadTextFileResponse{Content: window(content, p.Line, p.Limit)}, nil
}

func readRegular(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errNotFound
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxReadBytes {
		return "", fmt.Errorf("%s is %d bytes; at most %d can be read", path, fi.Size(), maxReadBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return "", err
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
	if err := writeAtomic(path, p.Content); err != nil {
		return nil, invalidParams(err.Error())
	}
	return acp.WriteTextFileResponse{}, nil
}

// writeAtomic replaces (or creates) the regular file path with content,
// keeping an existing file's permission bits (new files: 0644).
func writeAtomic(path, content string) error {
	mode := fs.FileMode(0o644)
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case err == nil:
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".ochat-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
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
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	ok = true
	return nil
}
