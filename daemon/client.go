package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// Client is a small Go client of the editor protocol (used by the ochatd CLI
// and tests): it initializes the connection and queues every notification
// the daemon sends, in order, without bound (so reading them never blocks the
// connection).
type Client struct {
	conn jsonrpc2.Conn
	// Init is the daemon's initialize answer.
	Init InitializeResult

	mu     sync.Mutex
	queue  []Notification
	signal chan struct{}
}

// Notification is one notification from the daemon, params undecoded.
type Notification struct {
	Method string
	Params json.RawMessage
}

// NewClient runs the LSP handshake (initialize, initialized) over rwc with
// clientName/version as clientInfo.
func NewClient(ctx context.Context, rwc io.ReadWriteCloser, clientName, version string) (*Client, error) {
	c := &Client{conn: jsonrpc2.NewConn(jsonrpc2.NewStream(rwc)), signal: make(chan struct{}, 1)}
	c.conn.Go(context.Background(), c.handle)
	params := protocol.InitializeParams{ClientInfo: &protocol.ClientInfo{Name: clientName, Version: version}}
	if err := c.Call(ctx, protocol.MethodInitialize, params, &c.Init); err != nil {
		c.conn.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := c.conn.Notify(ctx, protocol.MethodInitialized, struct{}{}); err != nil {
		c.conn.Close()
		return nil, fmt.Errorf("initialized: %w", err)
	}
	return c, nil
}

func (c *Client) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	if _, ok := req.(*jsonrpc2.Call); ok {
		return reply(ctx, nil, jsonrpc2.Errorf(jsonrpc2.MethodNotFound, "client does not handle %q", req.Method()))
	}
	c.mu.Lock()
	c.queue = append(c.queue, Notification{Method: req.Method(), Params: append(json.RawMessage(nil), req.Params()...)})
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
	return nil
}

// Call sends a request and decodes its result into result (may be nil). A
// protocol error is a *jsonrpc2.Error carrying the code.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	if params == nil {
		params = struct{}{}
	}
	_, err := c.conn.Call(ctx, method, params, result)
	return err
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	return c.conn.Notify(ctx, method, params)
}

// Next returns the next notification, waiting until one arrives, the
// connection ends (io.EOF) or ctx ends.
func (c *Client) Next(ctx context.Context) (Notification, error) {
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			n := c.queue[0]
			c.queue[0] = Notification{}
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return n, nil
		}
		c.mu.Unlock()
		select {
		case <-c.signal:
		case <-c.conn.Done():
			c.mu.Lock()
			empty := len(c.queue) == 0
			c.mu.Unlock()
			if empty {
				return Notification{}, io.EOF
			}
		case <-ctx.Done():
			return Notification{}, ctx.Err()
		}
	}
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Close sends shutdown and exit (best effort) and closes the connection.
func (c *Client) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2e9)
	defer cancel()
	_ = c.Call(ctx, protocol.MethodShutdown, nil, nil)
	_ = c.conn.Notify(ctx, protocol.MethodExit, nil)
	return c.conn.Close()
}

// UnreachableError is Dial's error when the workspace's daemon record
// names a live daemon on another socket than this process's SocketPath
// and that socket cannot be used: the daemon was started with another
// XDG_RUNTIME_DIR or TMPDIR and its socket is gone, not ours, or not
// answering.
type UnreachableError struct {
	Workspace string
	// PID and Socket are the recorded daemon's.
	PID    int
	Socket string
	// Differ names the socket variables set differently here, as
	// `XDG_RUNTIME_DIR (here unset, the daemon's /tmp/a)`.
	Differ []string
	// Env is the daemon's values of those variables.
	Env map[string]string
	Err error
}

func (e *UnreachableError) Error() string {
	msg := fmt.Sprintf("the daemon of %s (pid %d) listens on %s, which this shell cannot use: %v", e.Workspace, e.PID, e.Socket, e.Err)
	if len(e.Differ) > 0 {
		msg += fmt.Sprintf("; this shell sets %s: run ochatd with the daemon's environment, or stop it with `kill %d`", strings.Join(e.Differ, ", "), e.PID)
	} else {
		msg += fmt.Sprintf("; stop it with `kill %d`", e.PID)
	}
	return msg
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// discover looks for the workspace's daemon through its record when path
// (this process's socket path) did not answer. found is false when there is
// no record naming a live daemon on another socket; otherwise the answer is
// a connection to the recorded socket or an *UnreachableError.
func discover(ctx context.Context, workspace, path string) (c net.Conn, found bool, err error) {
	rp, err := RecordPath(workspace)
	if err != nil {
		return nil, false, nil
	}
	r, err := ReadRecord(rp)
	if err != nil || r.Socket == path || !processAlive(r.PID) || !servesLike(r.PID) {
		return nil, false, nil
	}
	unreachable := func(err error) error {
		ue := &UnreachableError{Workspace: workspace, PID: r.PID, Socket: r.Socket, Env: r.Env, Err: err}
		for _, k := range socketEnv() {
			here, there := os.Getenv(k), r.Env[k]
			if here != there {
				ue.Differ = append(ue.Differ, fmt.Sprintf("%s differently (here %s, the daemon's %s)", k, orUnset(here), orUnset(there)))
			}
		}
		return ue
	}
	if err := checkOwnSocket(r.Socket); err != nil {
		return nil, true, unreachable(err)
	}
	var d net.Dialer
	c, err = d.DialContext(ctx, "unix", r.Socket)
	if err != nil {
		return nil, true, unreachable(err)
	}
	return c, true, nil
}

func orUnset(v string) string {
	if v == "" {
		return "unset"
	}
	return v
}
