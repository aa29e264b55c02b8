package cli

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/ochat-dev/ochat/daemon"
)

// fakeDaemon answers initialize, then "exit-now" by closing the connection
// without an answer, and never answers "hang".
func fakeDaemon(t *testing.T) *daemon.Client {
	t.Helper()
	a, b := net.Pipe()
	conn := jsonrpc2.NewConn(jsonrpc2.NewStream(b))
	conn.Go(context.Background(), func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
		switch req.Method() {
		case protocol.MethodInitialize:
			return reply(ctx, daemon.InitializeResult{}, nil)
		case "exit-now":
			return conn.Close()
		}
		return nil // notifications, and "hang": no answer
	})
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := daemon.NewClient(ctx, a, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestCallOutlivedDaemon: a request the daemon never answers ends when the
// connection closes (errDaemonGone) or at its deadline, never hangs.
func TestCallOutlivedDaemon(t *testing.T) {
	tests := []struct {
		method  string
		timeout time.Duration
		check   func(error) bool
	}{
		{"exit-now", time.Hour, func(err error) bool { return errors.Is(err, errDaemonGone) }},
		{"hang", time.Millisecond, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "hang: no answer from the daemon within 1ms")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			cl := fakeDaemon(t)
			done := make(chan error, 1)
			go func() { done <- call(context.Background(), cl, tt.timeout, tt.method, nil, nil) }()
			select {
			case err := <-done:
				if !tt.check(err) {
					t.Errorf("err = %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("call still blocked")
			}
		})
	}
}
