package daemon

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// rwc is an in-memory connection: reads from r, writes to w.
type rwc struct {
	io.Reader
	w bytes.Buffer
}

func (c *rwc) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *rwc) Close() error                { return nil }

func TestStreamRead(t *testing.T) {
	frame := func(s string) string { return "Content-Length: " + strconv.Itoa(len(s)) + "\r\n\r\n" + s }
	in := "\r\n" + frame(`{oops`) + frame(`{"jsonrpc":"2.0","id":"a","method":"m","params":{"x":1}}`) +
		"content-length: 2\r\nContent-Type: x\r\n\r\n{}" + frame(`{"jsonrpc":"2.0","method":"n"}`)
	c := &rwc{Reader: strings.NewReader(in)}
	s := newLSPStream(c)
	ctx := context.Background()
	msg, _, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if call, ok := msg.(*jsonrpc2.Call); !ok || call.Method() != "m" {
		t.Fatalf("first message %#v", msg)
	}
	msg, _, err = s.Read(ctx) // {} is answered -32600, then the notification
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := msg.(*jsonrpc2.Notification); !ok || n.Method() != "n" {
		t.Fatalf("second message %#v", msg)
	}
	out := c.w.String()
	if !strings.Contains(out, `"code":-32700`) || !strings.Contains(out, `"code":-32600`) || strings.Count(out, `"id":null`) != 2 {
		t.Fatalf("error answers %q", out)
	}
	if _, _, err := s.Read(ctx); err == nil {
		t.Fatal("read past EOF succeeded")
	}
}

// FuzzStream: no input makes the framing stream panic or loop.
func FuzzStream(f *testing.F) {
	f.Add([]byte("Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("Content-Length: 40\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}   "))
	f.Add([]byte("\r\n\r\nContent-Length: -1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newLSPStream(&rwc{Reader: bytes.NewReader(data)})
		for i := 0; i < 1000; i++ {
			if _, _, err := s.Read(context.Background()); err != nil {
				return
			}
		}
	})
}
