package agents

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/sys/unix"
)

// Workspace trust (the direnv model): a workspace's .ochat/settings.json can
// name commands to run, so a freshly cloned repository must not be able to
// start anything. Its agent_servers entries stay inactive until the user
// trusts that exact file content (`ochatd trust`); a changed file asks again.
// User-level settings need no trust.

// TrustState says whether a workspace's settings file may be used.
type TrustState int

const (
	// TrustNone: the workspace was never trusted (or trust was revoked).
	TrustNone TrustState = iota
	// TrustChanged: the workspace was trusted, but the settings file's
	// content has changed since.
	TrustChanged
	// TrustOK: the file's current content is the one the user trusted.
	TrustOK
)

// String returns "untrusted", "changed" or "trusted".
func (s TrustState) String() string {
	switch s {
	case TrustOK:
		return "trusted"
	case TrustChanged:
		return "changed"
	}
	return "untrusted"
}

// TrustEntry is one trusted workspace as recorded in the trust file.
type TrustEntry struct {
	// Workspace is the absolute workspace root (the key).
	Workspace string `json:"workspace"`
	// Settings is the trusted file, <Workspace>/.ochat/settings.json.
	Settings string `json:"settings"`
	// SHA256 is the hex sha256 of the file content that was trusted.
	SHA256 string `json:"sha256"`
	// TrustedAt is when, in ms since the Unix epoch.
	TrustedAt int64 `json:"trustedAt"`
}

// trustFile is the JSON shape of the trust file (version 1).
type trustFile struct {
	Version    int          `json:"version"`
	Workspaces []TrustEntry `json:"workspaces"`
}

// TrustStore is the user's record of trusted workspace settings files: one
// JSON file (mode 0600, directory 0700), normally DefaultTrustPath. It holds
// paths and hashes only, never settings content or credentials. The zero
// value is not usable; create it with NewTrustStore.
type TrustStore struct {
	path string
	uid  int // expected owner of the file
}

// NewTrustStore returns the store kept in the file path (created on the
// first Trust). Tests pass a private path.
func NewTrustStore(path string) *TrustStore {
	return &TrustStore{path: path, uid: os.Getuid()}
}

// DefaultTrustPath returns $XDG_STATE_HOME/ochat/trust.json, else
// $HOME/.local/state/ochat/trust.json, reading the environment through
// getenv (os.Getenv in a program).
func DefaultTrustPath(getenv func(string) string) (string, error) {
	state := getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		home := getenv("HOME")
		if !filepath.IsAbs(home) {
			return "", errors.New("trust store: neither XDG_STATE_HOME nor HOME is an absolute path")
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "ochat", "trust.json"), nil
}

// Path returns the trust file's path.
func (t *TrustStore) Path() string { return t.path }

// WorkspaceSettingsPath returns <workspace>/.ochat/settings.json.
func WorkspaceSettingsPath(workspace string) string {
	return filepath.Join(workspace, ".ochat", "settings.json")
}

// SettingsHash returns the hex sha256 of a settings file's content.
func SettingsHash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// Check says whether the workspace's settings file, whose current content
// is content, is trusted. An unreadable trust file, or one that another user
// owns or others can write, is an error (and nothing is trusted).
func (t *TrustStore) Check(workspace string, content []byte) (TrustState, error) {
	f, err := t.read()
	if err != nil {
		return TrustNone, err
	}
	ws := filepath.Clean(workspace)
	for _, e := range f.Workspaces {
		if e.Workspace != ws {
			continue
		}
		if e.SHA256 == SettingsHash(content) {
			return TrustOK, nil
		}
		return TrustChanged, nil
	}
	return TrustNone, nil
}

// Entries returns the trusted workspaces in the order they were trusted.
func (t *TrustStore) Entries() ([]TrustEntry, error) {
	f, err := t.read()
	if err != nil {
		return nil, err
	}
	return f.Workspaces, nil
}

// Trust records that the user trusts the workspace's settings file with
// exactly this content (the bytes they reviewed), replacing an earlier
// entry for the workspace. The file is rewritten atomically under an
// exclusive lock.
func (t *TrustStore) Trust(workspace string, content []byte) (TrustEntry, error) {
	ws := filepath.Clean(workspace)
	if !filepath.IsAbs(ws) {
		return TrustEntry{}, fmt.Errorf("trust %s: workspace must be an absolute path", workspace)
	}
	e := TrustEntry{Workspace: ws, Settings: WorkspaceSettingsPath(ws), SHA256: SettingsHash(content), TrustedAt: time.Now().UnixMilli()}
	err := t.update(func(f *trustFile) {
		f.Workspaces = slices.DeleteFunc(f.Workspaces, func(o TrustEntry) bool { return o.Workspace == ws })
		f.Workspaces = append(f.Workspaces, e)
	})
	if err != nil {
		return TrustEntry{}, fmt.Errorf("trust %s: %w", ws, err)
	}
	return e, nil
}

// Revoke forgets the workspace; it reports whether it was trusted.
func (t *TrustStore) Revoke(workspace string) (bool, error) {
	ws := filepath.Clean(workspace)
	found := false
	err := t.update(func(f *trustFile) {
		n := len(f.Workspaces)
		f.Workspaces = slices.DeleteFunc(f.Workspaces, func(o TrustEntry) bool { return o.Workspace == ws })
		found = len(f.Workspaces) != n
	})
	if err != nil {
		return false, fmt.Errorf("revoke trust in %s: %w", ws, err)
	}
	return found, nil
}

// read loads the trust file; a missing file is an empty store.
func (t *TrustStore) read() (trustFile, error) {
	var f trustFile
	fh, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("trust store %s: %w", t.path, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return f, fmt.Errorf("trust store %s: %w", t.path, err)
	}
	if err := t.checkOwner(fi); err != nil {
		return f, err
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(fh); err != nil {
		return f, fmt.Errorf("trust store %s: %w", t.path, err)
	}
	if buf.Len() == 0 {
		return f, nil
	}
	if err := json.Unmarshal(buf.Bytes(), &f); err != nil {
		return trustFile{}, fmt.Errorf("trust store %s: %w (remove the file and trust your workspaces again)", t.path, err)
	}
	if f.Version > 1 {
		return trustFile{}, fmt.Errorf("trust store %s has version %d; this ochatd reads version 1", t.path, f.Version)
	}
	return f, nil
}

// checkOwner refuses a trust file that another user owns or that group or
// others can write: whoever can write it decides what runs.
func (t *TrustStore) checkOwner(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("trust store %s is not a regular file", t.path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != t.uid {
		return fmt.Errorf("trust store %s is owned by uid %d, not by you (uid %d): remove it", t.path, st.Uid, t.uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("trust store %s can be written by others (mode %v): run chmod 600 %s", t.path, fi.Mode().Perm(), t.path)
	}
	return nil
}

// update applies change to the trust file under an exclusive lock (flock on
// <path>.lock) and writes the result atomically (temp file + rename), 0600.
func (t *TrustStore) update(change func(*trustFile)) error {
	dir := filepath.Dir(t.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(t.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	f, err := t.read()
	if err != nil {
		return err
	}
	change(&f)
	f.Version = 1
	if f.Workspaces == nil {
		f.Workspaces = []TrustEntry{}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".trust-*.json")
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
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), t.path); err != nil {
		return err
	}
	ok = true
	return nil
}

// untrustedReason is the Status.Reason of an agent held back because the
// workspace settings file is not trusted (protocol.md, ochat/agents/list).
func untrustedReason(settings string, state TrustState, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("workspace settings %s are not trusted: %v", settings, err)
	case state == TrustChanged:
		return fmt.Sprintf("workspace settings %s changed since you trusted them: run `ochatd trust` (or review the file first)", settings)
	}
	return fmt.Sprintf("workspace settings %s are not trusted: run `ochatd trust` (or review the file first)", settings)
}

// redefinition says what an untrusted workspace entry e would change of
// the agent old (a built-in or user agent) once trusted, for the held-back
// agent's Status.Reason: "make ta1 run `/bin/echo hi` instead of
// `/opt/testagent`", then what else it sets. Env values are never named,
// only their keys; words with control characters are Go-quoted so the
// reason prints safely.
func redefinition(old Spec, e settingsEntry) string {
	var parts []string
	switch {
	case e.Command != nil:
		parts = append(parts, fmt.Sprintf("make %s run `%s` instead of `%s`", old.Name, commandLine(*e.Command, e.Args), commandLine(old.Command, old.Args)))
	case e.Args != nil:
		parts = append(parts, fmt.Sprintf("make %s run `%s` instead of `%s`", old.Name, commandLine(old.Command, e.Args), commandLine(old.Command, old.Args)))
	}
	if len(e.Env) > 0 {
		keys := slices.Sorted(maps.Keys(e.Env))
		for i, k := range keys {
			keys[i] = quoteWord(k)
		}
		parts = append(parts, fmt.Sprintf("set env %s for %s", strings.Join(keys, ", "), old.Name))
	}
	if e.FSCapabilities != nil {
		parts = append(parts, fmt.Sprintf("set fsCapabilities %v for %s", *e.FSCapabilities, old.Name))
	}
	if len(parts) == 0 {
		return "change nothing of " + old.Name + " (its entry is empty)"
	}
	return strings.Join(parts, " and ")
}

// commandLine renders a command and its arguments as one shell-like line,
// each word quoted by quoteWord.
func commandLine(cmd string, args []string) string {
	words := make([]string, 0, 1+len(args))
	words = append(words, quoteWord(cmd))
	for _, a := range args {
		words = append(words, quoteWord(a))
	}
	return strings.Join(words, " ")
}

// quoteWord is w shell-quoted when it needs it, or Go-quoted when it holds
// a control or other non-printing character.
func quoteWord(w string) string {
	if strings.IndexFunc(w, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(w)
	}
	return shellQuote(w)
}

// trustInstall is the Status.Install of an untrusted agent.
func trustInstall(workspace string) string {
	return "review " + WorkspaceSettingsPath(workspace) + ", then run: ochatd trust --workspace " + shellQuote(workspace)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ',' || r == ':' || r == '@' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
