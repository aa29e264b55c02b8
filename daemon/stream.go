package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"go.lsp.dev/jsonrpc2"
)

// MaxFrameBytes is the largest JSON-RPC frame body (Content-Length) the daemon
// accepts, in bytes. A larger frame ends the connection: its body cannot be
// skipped safely without reading it.
const MaxFrameBytes = 64 << 20

// lspStream is a jsonrpc2.Stream with LSP base-protocol framing
// (`Content-Length: N\r\n\r\n` + N bytes) that, unlike jsonrpc2.NewStream,
// survives a well-framed body that is not a valid JSON-RPC message: it answers
// it with a -32700 (parse error) or -32600 (invalid request) response with a
// null id and reads on. Only framing errors (bad header, short body, EOF) end
// the stream, because after one the byte stream cannot be resynchronised.
type lspStream struct {
	conn io.ReadWriteCloser
	in   *bufio.Reader
	mu   sync.Mutex // serialises writes: Read writes error responses too
}

// newLSPStream wraps conn; see lspStream.
func newLSPStream(conn io.ReadWriteCloser) *lspStream {
	return &lspStream{conn: conn, in: bufio.NewReaderSize(conn, 64<<10)}
}

// Read implements jsonrpc2.Stream.
func (s *lspStream) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		data, n, err := s.readFrame()
		if err != nil {
			return nil, n, err
		}
		msg, derr := decodeMessage(data)
		if derr == nil {
			return msg, n, nil
		}
		if werr := s.writeRaw(derr.body()); werr != nil {
			return nil, n, werr
		}
	}
}

// frameError is a well-framed body that is not a JSON-RPC request or response.
type frameError struct {
	code jsonrpc2.Code
	msg  string
}

func (e *frameError) body() []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc2.Error  `json:"error"`
	}{"2.0", json.RawMessage("null"), jsonrpc2.Error{Code: e.code, Message: e.msg}})
	return b
}

// decodeMessage checks the body with encoding/json first, so that malformed
// JSON gets -32700 and a JSON value that is not a request gets -32600, then
// lets jsonrpc2 decode it.
func decodeMessage(data []byte) (jsonrpc2.Message, *frameError) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || !json.Valid(data) {
			return nil, &frameError{jsonrpc2.ParseError, fmt.Sprintf("parse error: %v", err)}
		}
		return nil, &frameError{jsonrpc2.InvalidRequest, "invalid request: a message must be a JSON object (batches are not supported)"}
	}
	if v, ok := probe["jsonrpc"]; !ok || string(v) != `"2.0"` {
		return nil, &frameError{jsonrpc2.InvalidRequest, `invalid request: "jsonrpc" must be "2.0"`}
	}
	if m, ok := probe["method"]; ok {
		var name string
		if json.Unmarshal(m, &name) != nil || name == "" {
			return nil, &frameError{jsonrpc2.InvalidRequest, `invalid request: "method" must be a non-empty string`}
		}
	}
	if id, ok := probe["id"]; ok {
		var n int32
		var s string
		if json.Unmarshal(id, &n) != nil && json.Unmarshal(id, &s) != nil {
			return nil, &frameError{jsonrpc2.InvalidRequest, `invalid request: "id" must be a string or a 32-bit integer`}
		}
	}
	msg, err := jsonrpc2.DecodeMessage(data)
	if err != nil {
		return nil, &frameError{jsonrpc2.InvalidRequest, fmt.Sprintf("invalid request: %v", err)}
	}
	return msg, nil
}

// readFrame reads one frame's headers and body.
func (s *lspStream) readFrame() ([]byte, int64, error) {
	var total int64
	length := int64(-1)
	headers := 0
	for {
		line, err := s.in.ReadString('\n')
		total += int64(len(line))
		if err != nil {
			return nil, total, fmt.Errorf("read header: %w", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			if headers == 0 {
				// Tolerate stray blank lines between frames.
				continue
			}
			if length < 0 {
				return nil, total, errors.New("read header: missing Content-Length")
			}
			break
		}
		headers++
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, total, fmt.Errorf("read header: invalid header line %q", line)
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil || n <= 0 {
				return nil, total, fmt.Errorf("read header: invalid Content-Length %q", value)
			}
			if n > MaxFrameBytes {
				return nil, total, fmt.Errorf("read header: Content-Length %d exceeds %d bytes", n, MaxFrameBytes)
			}
			length = n
		}
	}
	data := make([]byte, length)
	n, err := io.ReadFull(s.in, data)
	total += int64(n)
	if err != nil {
		return nil, total, fmt.Errorf("read body: %w", err)
	}
	return data, total, nil
}

// Write implements jsonrpc2.Stream.
func (s *lspStream) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return 0, fmt.Errorf("marshal message: %w", err)
	}
	return int64(len(data)), s.writeRaw(data)
}

func (s *lspStream) writeRaw(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := make([]byte, 0, len(data)+32)
	buf = append(buf, "Content-Length: "...)
	buf = strconv.AppendInt(buf, int64(len(data)), 10)
	buf = append(buf, "\r\n\r\n"...)
	buf = append(buf, data...)
	if _, err := s.conn.Write(buf); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// writeFramed writes bytes that are already whole frames.
func (s *lspStream) writeFramed(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.conn.Write(b); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// Close implements jsonrpc2.Stream.
func (s *lspStream) Close() error { return s.conn.Close() }
