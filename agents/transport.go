package agents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"

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
	dropped   uint64 // lines dropped
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
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLineBytes {
			tooLong = true
			line = line[:0]
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			f.drop("line longer than the 10 MB limit", nil)
		} else if werr := f.forward(line, w); werr != nil {
			w.CloseWithError(werr)
			return
		}
		tooLong = false
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
	_, err := w.Write(buf)
	return err
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
