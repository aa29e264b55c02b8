// Package fakemodel is a scripted stand-in for the model APIs that real
// coding-agent adapters call, so that claude-agent-acp, codex-acp, OpenCode
// and Gemini CLI can run real prompt turns with real tool calls fully
// offline (recipe: research/real-agents/README.md).
//
// It owns one HTTP server on 127.0.0.1 speaking four dialects: Anthropic
// Messages (POST /v1/messages, SSE), OpenAI Responses (POST /v1/responses,
// SSE), OpenAI chat completions (POST /v1/chat/completions, SSE) and Gemini
// (POST /v1beta/models/M:streamGenerateContent?alt=sse and :generateContent),
// plus HEAD / for Claude Code's connectivity preflight. It records every
// request so tests can assert what an agent sent, and picks its answer from
// the last user text (see DefaultReply) unless a test installs a Responder.
//
// It never listens on anything but loopback, never calls out, and knows
// nothing about ACP, the daemon or the transcript.
package fakemodel

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Options configures a Server. The zero value is ready to use.
type Options struct {
	// Logger receives one debug line per request; nil discards.
	Logger *slog.Logger
	// StallTimeout bounds how long a Stall reply waits for the client to
	// go away before finishing its stream; default 60 s.
	StallTimeout time.Duration
	// Responder, if set, overrides replies (see Server.SetResponder).
	Responder Responder
}

// maxBody bounds a request body (bytes); agents send a few hundred KB.
const maxBody = 64 << 20

// Server is a running fake model server. Its methods are safe for
// concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	ln      net.Listener
	srv     *http.Server
	closing chan struct{}
	once    sync.Once

	mu        sync.Mutex
	reqs      []Request
	changed   chan struct{} // closed and replaced whenever reqs grows
	responder Responder
	toolSeq   int
}

// Start listens on 127.0.0.1 on a free port and serves until Close or ctx
// ends.
func Start(ctx context.Context, opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakemodel: listen on 127.0.0.1: %w", err)
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = 60 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:      opts,
		log:       log,
		ln:        ln,
		closing:   make(chan struct{}),
		changed:   make(chan struct{}),
		responder: opts.Responder,
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("fakemodel: serve", "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.closing:
		}
	}()
	return s, nil
}

// URL is the server's base URL, "http://127.0.0.1:PORT" (no trailing
// slash). Anthropic and Gemini clients take it as is; OpenAI-style clients
// want URL()+"/v1".
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server: stalled streams end and open connections close.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closing)
		err = s.srv.Close()
	})
	return err
}

// SetResponder installs f to override replies from now on (nil restores
// the default scenarios).
func (s *Server) SetResponder(f Responder) {
	s.mu.Lock()
	s.responder = f
	s.mu.Unlock()
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// ModelRequests returns the requests in one of the model dialects (no
// preflights or unknown paths), in arrival order.
func (s *Server) ModelRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.API != APIOther {
			out = append(out, r)
		}
	}
	return out
}

// WaitFor blocks until a request matching match has been received (already
// or later) and returns the first such request; it fails when ctx ends.
func (s *Server) WaitFor(ctx context.Context, match func(Request) bool) (Request, error) {
	for {
		s.mu.Lock()
		for _, r := range s.reqs {
			if match(r) {
				s.mu.Unlock()
				return r, nil
			}
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Request{}, fmt.Errorf("fakemodel: wait for request: %w", ctx.Err())
		}
	}
}

// ServeHTTP records the request, chooses a reply and writes it in the
// request's dialect.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	req, err := readRequest(hr)
	if err != nil {
		s.log.Warn("fakemodel: bad request", "path", hr.URL.Path, "err", err)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}

	s.mu.Lock()
	if req.API != APIOther {
		s.toolSeq++
		def := DefaultReply(req, s.toolSeq)
		if s.responder != nil {
			def = s.responder(req, def)
		}
		req.Reply = def
	}
	req.Seq = len(s.reqs) + 1
	s.reqs = append(s.reqs, *req)
	close(s.changed)
	s.changed = make(chan struct{})
	seq := s.toolSeq
	s.mu.Unlock()

	s.log.Debug("fakemodel: request", "seq", req.Seq, "method", req.Method, "path", req.Path, "api", req.API,
		"scenario", req.Reply.Scenario, "tools", len(req.Tools))

	switch {
	case req.API == APIOther && (req.Method == http.MethodHead || req.Method == http.MethodGet) && req.Path == "/":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if req.Method == http.MethodGet {
			io.WriteString(w, "fake model server\n")
		}
	case req.API == APIOther:
		writeError(w, http.StatusNotFound, fmt.Sprintf("fakemodel: no endpoint %s %s", req.Method, req.Path))
	case req.Reply.Status != 0 && req.Reply.Status != http.StatusOK:
		writeError(w, req.Reply.Status, req.Reply.Text)
	default:
		s.reply(hr.Context(), w, req, seq)
	}
}

// readRequest reads and classifies one HTTP request.
func readRequest(hr *http.Request) (*Request, error) {
	raw, err := io.ReadAll(io.LimitReader(hr.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(raw) > maxBody {
		return nil, fmt.Errorf("body over %d bytes", maxBody)
	}
	if hr.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("gunzip body: %w", err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, maxBody)); err != nil {
			return nil, fmt.Errorf("gunzip body: %w", err)
		}
	}
	r := &Request{
		Time:    time.Now(),
		Method:  hr.Method,
		Path:    hr.URL.Path,
		Query:   hr.URL.RawQuery,
		Header:  hr.Header.Clone(),
		RawBody: raw,
		Body:    decodeBody(raw),
	}
	r.classify()
	r.parseConversation()
	return r, nil
}

// writeError answers with an error object both Anthropic and OpenAI
// clients understand ({"type":"error","error":{"type","message"}}), plus
// Gemini's code/status.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type": "error",
		"error": map[string]any{
			"type":    "api_error",
			"message": msg,
			"code":    status,
			"status":  http.StatusText(status),
		},
	})
}

// stall waits until the client goes away (false), or the server closes or
// the stall timeout passes (true: finish the stream).
func (s *Server) stall(ctx context.Context) bool {
	t := time.NewTimer(s.opts.StallTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	case <-t.C:
		return true
	}
}
