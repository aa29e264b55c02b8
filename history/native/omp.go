package native

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Oh My Pi (omp, @oh-my-pi/pi-coding-agent 18.x, a fork of pi) keeps pi's
// session format (v3 JSONL, tree of entries) under
//
//	~/.omp/agent/sessions/<cwd folder>/<ISO ts>_<id>.jsonl
//
// but names the per-cwd folder its own way (home-relative "-…", temp-dir and
// legacy "--…--" forms; session/session-paths.ts), so the listing globs
// every folder whose name holds the workspace's last path element and keeps
// the files whose header cwd is the workspace.

func ompSessionsDir(env Env) string {
	if env.Home == "" {
		return ""
	}
	return filepath.Join(env.Home, ".omp", "agent", "sessions")
}

func listOmp(ctx context.Context, env Env, ws string, cache Cache) ([]Session, []Diagnostic) {
	root := ompSessionsDir(env)
	if root == "" {
		return nil, nil
	}
	if _, err := os.Stat(root); err != nil {
		return nil, []Diagnostic{storeDiag(AgentOmp, root, err)}
	}
	tail := strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(filepath.Base(ws))
	dirs, _ := os.ReadDir(root)
	var files []string
	for _, d := range dirs {
		if d.IsDir() && strings.Contains(d.Name(), tail) {
			m, _ := filepath.Glob(filepath.Join(root, d.Name(), "*.jsonl"))
			files = append(files, m...)
		}
	}
	return listFiles(ctx, AgentOmp, ws, files, cache, ompMeta, func(s Session) bool { return sameDir(s.Cwd, ws) })
}

// ompMeta is piMeta for an omp file.
func ompMeta(path string, r io.Reader, size int64) (Session, bool, error) {
	s, ok, err := piMeta(path, r, size)
	s.Agent = AgentOmp
	return s, ok, err
}

// isOmpPath reports whether a pi-format file lives in omp's store.
func isOmpPath(path string) bool {
	return strings.Contains(filepath.ToSlash(path), "/.omp/agent/sessions/")
}

// ReadOmp reads an Oh My Pi session file (pi's format).
func ReadOmp(path string) (*Transcript, error) {
	t, err := ReadPi(path)
	if t != nil {
		t.Agent = AgentOmp
	}
	return t, err
}

func findOmpByID(env Env, id string) string {
	root := ompSessionsDir(env)
	if root == "" || id == "" {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(root, "*", "*_"+id+".jsonl"))
	if len(m) == 0 {
		return ""
	}
	return m[0]
}
