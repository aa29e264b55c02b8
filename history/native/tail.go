package native

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/ochat-dev/ochat/transcript"
)

// incReader is a reader that takes lines one at a time and can build the
// transcript of what it has seen so far (every line-based store).
type incReader interface {
	add(n int, line []byte)
	build() *Transcript
}

type codexInc struct {
	*codexReader
	names map[string]string
}

func (c codexInc) build() *Transcript { return c.codexReader.build(c.names) }

// newIncReader returns the line reader for a session file, or nil if the
// file is not line-based (legacy Gemini JSON, compressed Codex rollouts):
// those are re-read whole.
func newIncReader(agent, path string) incReader {
	if strings.HasSuffix(path, ".zst") || strings.HasSuffix(path, ".json") {
		return nil
	}
	switch agent {
	case AgentClaude:
		return newClaudeReader(path)
	case AgentCodex:
		names := map[string]string{}
		if home := codexHomeOf(path); home != "" {
			names = codexThreadNames(Env{CodexHome: home})
		}
		return codexInc{newCodexReader(path), names}
	case AgentGemini:
		return newGeminiReader(path)
	case AgentPi:
		return newPiReader(path)
	}
	return nil
}

// tail follows one session file: it reads from the offset after the last
// complete line, holds back a final line without a newline, detects
// truncation, replacement (new inode) and rewrites in place, and reports
// which messages are new or changed since the last call.
type tail struct {
	agent, path string
	rd          incReader
	off         int64
	lineNo      int
	ino         uint64
	guard       []byte // the bytes just before off, to notice a rewrite in place
	sent        map[string]uint64
	sentOrder   []string
	markers     int
}

func newTail(agent, path string) *tail {
	return &tail{agent: agent, path: path, sent: map[string]uint64{}}
}

// TailUpdate is what a followed session gained since the previous update.
type TailUpdate struct {
	// Reset is true when the file was truncated, replaced or rewritten (or is
	// not line-based): Messages then holds the whole transcript and the
	// receiver replaces what it had.
	Reset bool
	// Messages are new or changed messages, in transcript order; the
	// receiver upserts them by ID.
	Messages []transcript.Message
	Markers  []Marker // new markers (all of them on Reset)
	Session  Session  // metadata after the update
}

// poll reads what was appended. changed is false when nothing visible
// changed (e.g. only a partial line or bookkeeping lines arrived).
func (t *tail) poll() (u TailUpdate, changed bool, err error) {
	f, err := os.Open(t.path)
	if err != nil {
		return u, false, fmt.Errorf("tail %s: %w", t.path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return u, false, fmt.Errorf("tail %s: %w", t.path, err)
	}
	if fi.IsDir() {
		return u, false, fmt.Errorf("tail %s: is a directory", t.path)
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	reset := t.rd == nil || ino != t.ino || fi.Size() < t.off || !t.guardHolds(f)
	if reset {
		t.rd, t.off, t.lineNo, t.ino = newIncReader(t.agent, t.path), 0, 0, ino
		t.sent, t.sentOrder, t.markers = map[string]uint64{}, nil, 0
	}
	var tr *Transcript
	if t.rd == nil {
		// not line-based: read whole
		tr, err = ReadFile(context.Background(), t.path)
		if err != nil {
			return u, false, err
		}
		reset = true
		t.sent, t.sentOrder, t.markers = map[string]uint64{}, nil, 0
	} else {
		if fi.Size() == t.off && !reset {
			return u, false, nil
		}
		if _, err := f.Seek(t.off, io.SeekStart); err != nil {
			return u, false, fmt.Errorf("tail %s: %w", t.path, err)
		}
		lr := newLineReader(f, MaxLineBytes)
		lr.lineNo = t.lineNo
		for {
			line, complete, err := lr.next()
			if err == io.EOF || (err == nil && !complete) {
				break // a final line without '\n' is held back
			}
			if err == errLineTooLong {
				continue
			}
			if err != nil {
				return u, false, err
			}
			if len(bytes.TrimSpace(line)) > 0 {
				t.rd.add(lr.lineNo, line)
			}
		}
		t.off += lr.off
		t.lineNo = lr.lineNo
		if !lr.lastComplete {
			t.lineNo-- // the held-back line will be numbered again
		}
		t.readGuard(f)
		tr = t.rd.build()
		tr.Size = fi.Size()
	}
	return t.diff(tr, reset)
}

func (t *tail) guardHolds(f *os.File) bool {
	if len(t.guard) == 0 {
		return true
	}
	b := make([]byte, len(t.guard))
	if _, err := f.ReadAt(b, t.off-int64(len(b))); err != nil {
		return false
	}
	return bytes.Equal(b, t.guard)
}

func (t *tail) readGuard(f *os.File) {
	n := int64(64)
	if t.off < n {
		n = t.off
	}
	t.guard = make([]byte, n)
	if _, err := f.ReadAt(t.guard, t.off-n); err != nil {
		t.guard = nil
	}
}

func msgHash(m transcript.Message) uint64 {
	b, _ := json.Marshal(m)
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// diff compares tr with what was sent before.
func (t *tail) diff(tr *Transcript, reset bool) (TailUpdate, bool, error) {
	u := TailUpdate{Session: tr.Session}
	ids := make(map[string]bool, len(tr.Messages))
	for _, m := range tr.Messages {
		ids[m.ID] = true
	}
	for _, id := range t.sentOrder {
		if !ids[id] {
			reset = true // a message went away (rewind, rollback, $rewindTo)
			break
		}
	}
	if reset {
		t.sent, t.sentOrder, t.markers = map[string]uint64{}, nil, 0
		u.Reset = true
	}
	// Appends change only the last turns: messages before the window that
	// were already sent are not compared again (a removal still forces a
	// reset above). Gemini and OpenCode rewrite history, so all are compared.
	window := 4
	if t.agent == AgentGemini || t.agent == AgentOpenCode {
		window = len(tr.Messages)
	}
	for i, m := range tr.Messages {
		if _, ok := t.sent[m.ID]; ok && !reset && i < len(tr.Messages)-window {
			continue
		}
		h := msgHash(m)
		old, ok := t.sent[m.ID]
		if ok && old == h && !reset {
			continue
		}
		if !ok {
			t.sentOrder = append(t.sentOrder, m.ID)
		}
		t.sent[m.ID] = h
		u.Messages = append(u.Messages, m)
	}
	if len(tr.Markers) > t.markers {
		u.Markers = append(u.Markers, tr.Markers[t.markers:]...)
		t.markers = len(tr.Markers)
	}
	if u.Messages == nil && len(u.Markers) == 0 && !u.Reset {
		return u, false, nil
	}
	if u.Messages == nil {
		u.Messages = []transcript.Message{}
	}
	return u, true, nil
}
