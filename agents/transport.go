package agents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// Transport limits.
const (
	// maxLineBytes is the longest agent stdout line (newline included)
	// passed to the JSON-RPC layer; longer lines are dropped whole, because
	// the SDK's scanner fails the whole connection on a line of 10 MB.
	maxLineBytes = 10<<20 - 4<<10
	// maxUnprocessed is how many session/update notifications may wait in the
	// SDK's queue (capacity 1024, overflow closes the connection) before the
	// reader stops reading the agent's stdout.
	maxUnprocessed = 256
	// stderrTailBytes is how much of the agent's stderr is kept for errors.
	stderrTailBytes = 8 << 10
	// dropHeadBytes is how much of the start of an over-long line is kept
	// to learn whom it was for (its sessionId and toolCallId).
	dropHeadBytes = 4 << 10
)

// envelope mirrors the SDK's JSON-RPC message struct, so a line this filter
// accepts is a line the SDK decodes.
type envelope struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      *json.RawMessage  `json:"id,omitempty"`
	Method  string            `json:"method,omitempty"`
	Params  json.RawMessage   `json:"params,omitempty"`
	Result  json.RawMessage   `json:"result,omitempty"`
	Error   *acp.RequestError `json:"error,omitempty"`
}

// lineFilter copies an agent's stdout to the SDK connection line by line:
// it drops blank, non-JSON and over-long lines (logged, counted), counts the
// session/update notifications it forwards and holds back while too many of
// them wait unprocessed (backpressure instead of the SDK's queue overflow).
type lineFilter struct {
	log    *slog.Logger
	redact func(string) string // hides the agent's env values in logged lines; nil: none

	mu        sync.Mutex
	cond      *sync.Cond
	seen      uint64 // session/update notifications forwarded
	processed uint64 // session/update notifications handled
	closed    bool
	dropped   uint64    // lines dropped
	tooLong   uint64    // lines dropped for being longer than maxLineBytes
	forwarded uint64    // lines passed to the SDK
	junk      []byte    // the start of the first non-JSON output (at most junkBytes)
	junkAt    time.Time // when it came

	// onDrop, if set, is called from run for every line dropped for its
	// length, after the lines before it were forwarded: n counts those lines
	// from 1, head is the line's first dropHeadBytes (at most), size its
	// length in bytes. Lines after it wait until it returns.
	onDrop func(n uint64, head []byte, size int64)
}

func newLineFilter(log *slog.Logger, redact func(string) string) *lineFilter {
	f := &lineFilter{log: log, redact: redact}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// run copies r to w until r ends, then closes w.
func (f *lineFilter) run(r io.Reader, w *io.PipeWriter) {
	defer func() {
		f.mu.Lock()
		f.closed = true
		f.cond.Broadcast()
		f.mu.Unlock()
	}()
	br := bufio.NewReaderSize(r, 64<<10)
	var line, head []byte
	var size int64 // bytes of the current line so far
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		size += int64(len(chunk))
		if !tooLong && len(line)+len(chunk) > maxLineBytes {
			tooLong = true
			head = append(head[:0], line[:min(len(line), dropHeadBytes)]...)
			if n := dropHeadBytes - len(head); n > 0 {
				head = append(head, chunk[:min(len(chunk), n)]...)
			}
			line = line[:0]
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			f.drop("line longer than the 10 MB limit", head)
			f.mu.Lock()
			f.tooLong++
			n := f.tooLong
			f.mu.Unlock()
			if f.onDrop != nil {
				f.onDrop(n, head, size)
			}
		} else if werr := f.forward(line, w); werr != nil {
			w.CloseWithError(werr)
			return
		}
		tooLong = false
		size = 0
		if cap(line) > 1<<20 {
			line = nil
		} else {
			line = line[:0]
		}
		if err != nil {
			break
		}
	}
	w.Close()
}

func (f *lineFilter) drop(why string, line []byte) {
	f.mu.Lock()
	f.dropped++
	f.mu.Unlock()
	if len(line) > 200 {
		line = append(line[:200:200], "…"...)
	}
	l := string(line)
	if f.redact != nil {
		l = f.redact(l)
	}
	f.log.Debug("agent stdout line skipped", "why", why, "line", l)
}

func (f *lineFilter) forward(line []byte, w io.Writer) error {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return nil
	}
	if t[0] != '{' {
		f.noteJunk(t)
		f.drop("not JSON", t)
		return nil
	}
	var env envelope
	if err := json.Unmarshal(t, &env); err != nil {
		f.drop("bad JSON: "+err.Error(), t)
		return nil
	}
	if env.ID == nil && env.Method == "" {
		f.drop("neither id nor method", t)
		return nil
	}
	if env.ID == nil && env.Method == acp.ClientMethodSessionUpdate {
		f.mu.Lock()
		for f.seen-f.processed >= maxUnprocessed && !f.closed {
			f.cond.Wait()
		}
		f.seen++
		f.mu.Unlock()
	}
	buf := make([]byte, 0, len(t)+1)
	buf = append(append(buf, t...), '\n')
	f.mu.Lock()
	f.forwarded++
	f.mu.Unlock()
	_, err := w.Write(buf)
	return err
}

// junkBytes is how much of an agent's first non-ACP output is kept to quote.
const junkBytes = 200

// noteJunk remembers the first non-JSON line the agent printed.
func (f *lineFilter) noteJunk(line []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.junk != nil {
		return
	}
	f.junk = append([]byte(nil), line[:min(len(line), junkBytes)]...)
	f.junkAt = time.Now()
}

// stalled returns the agent's first non-ACP output when it came at least
// after ago and no JSON-RPC line followed (the agent is not speaking ACP).
func (f *lineFilter) stalled(after time.Duration) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.junk == nil || f.forwarded > 0 || time.Since(f.junkAt) < after {
		return "", false
	}
	s := string(f.junk)
	if f.redact != nil {
		s = f.redact(s)
	}
	return s, true
}

// abort stops holding lines back (the agent is gone; nothing may wait on a
// handler any more).
func (f *lineFilter) abort() {
	f.mu.Lock()
	f.closed = true
	f.cond.Broadcast()
	f.mu.Unlock()
}

// done records that one session/update was handled.
func (f *lineFilter) done() {
	f.mu.Lock()
	f.processed++
	f.cond.Broadcast()
	f.mu.Unlock()
}

// mark returns the number of session/update notifications forwarded so far.
func (f *lineFilter) mark() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

// waitProcessed blocks until every notification up to mark has been
// handled, the stream has ended, or stop is closed.
func (f *lineFilter) waitProcessed(mark uint64, stop <-chan struct{}) {
	wake := make(chan struct{})
	defer close(wake)
	go func() {
		select {
		case <-stop:
		case <-wake:
			return
		}
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	}()
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.processed < mark && !f.closed {
		select {
		case <-stop:
			return
		default:
		}
		f.cond.Wait()
	}
}

// tailBuffer keeps the last n bytes written to it.
type tailBuffer struct {
	mu     sync.Mutex
	n      int
	buf    []byte
	redact func(string) string // hides the agent's env values (Spec.Redact); nil: none
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

// String returns the kept tail, trimmed, starting at a line boundary when
// it was cut.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if len(t.buf) >= t.n {
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if t.redact != nil {
		s = t.redact(s)
	}
	return s
}

// copyStderr reads an agent's stderr into tail and logs each line at debug.
func copyStderr(r io.Reader, tail *tailBuffer, log *slog.Logger) {
	br := bufio.NewReaderSize(r, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			tail.Write(line)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			l := strings.TrimRight(string(line), "\r\n")
			if tail.redact != nil {
				l = tail.redact(l)
			}
			log.Debug("agent stderr", "line", l)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// DroppedToolName is the Name of the tool segment that stands for an agent
// line dropped for its length when the line named no tool call.
const DroppedToolName = "dropped agent message"

// droppedLineError is the tool Error that says a line was dropped.
func droppedLineError(size int64) string {
	mb := strings.TrimSuffix(fmt.Sprintf("%.1f", float64(size)/(1<<20)), ".0")
	return fmt.Sprintf("agent sent a %s MB line; it was dropped (limit 10 MB)", mb)
}

// onDroppedLine makes a line dropped for its length (lineFilter.onDrop)
// visible in the prompt turn it belongs to: the turn of the session its
// head names ("sessionId"), else of the one session with a running turn.
// The transcript has no segment kind for "something was lost", and a text
// or reasoning delta would become part of the answer, so the marker is a
// tool segment with status error, which every client already shows: when
// the head names a "toolCallId" that tool is upserted with the error (the
// line was one of its updates), else a tool "ochat-dropped-<n>" named
// DroppedToolName. Without a running turn the drop is only logged.
func (c *Conn) onDroppedLine(n uint64, head []byte, size int64) {
	sid, toolID := headString(head, "sessionId"), headString(head, "toolCallId")
	msg := droppedLineError(size)
	// Deliver after every update forwarded before the line.
	c.filter.waitProcessed(c.filter.mark(), c.done)
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.mu.Lock()
	s := c.sessions[sid]
	if s == nil || s.turn == nil {
		s = nil
		for _, o := range c.sessions {
			if o.turn == nil {
				continue
			}
			if s != nil { // two running turns: whose line it was is unknown
				s = nil
				break
			}
			s = o
		}
	}
	if s == nil {
		c.mu.Unlock()
		c.log.Warn("agent line dropped for its length; no prompt turn to show it in", "bytes", size, "sessionId", sid)
		return
	}
	evs := s.m.droppedLine(fmt.Sprintf("ochat-dropped-%d", n), toolID, msg)
	id := s.id
	c.mu.Unlock()
	c.log.Warn("agent line dropped for its length", "bytes", size, "sessionId", id, "toolCallId", toolID)
	for _, ev := range evs {
		c.h.Event(id, ev)
	}
}

// headString returns the string value of the first "name" key in the head
// of a JSON line, or "" when it is absent, not a string or cut off by the
// end of head. A key inside a JSON string never matches: its quotes are
// escaped there.
func headString(head []byte, name string) string {
	key := []byte(`"` + name + `"`)
	i := bytes.Index(head, key)
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(head[i+len(key):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return ""
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return ""
	}
	for j := 1; j < len(rest); j++ {
		switch rest[j] {
		case '\\':
			j++
		case '"':
			var v string
			if json.Unmarshal(rest[:j+1], &v) != nil {
				return ""
			}
			return v
		}
	}
	return ""
}
