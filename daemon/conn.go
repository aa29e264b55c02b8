package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"sync"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// client is one connected editor or CLI: its JSON-RPC connection, LSP
// lifecycle state, subscriptions and outbound queue.
//
// Everything the daemon sends to a client (replies and notifications) goes
// through one ordered queue drained by one writer goroutine, so a reply queued
// before an event is written before it (subscribe's "no gap, no duplicate"
// depends on it) and the agent never waits for a slow client. Notifications
// are bounded by Options.ClientQueue; a client that falls further behind is
// unsubscribed from that conversation and sent ochat/resync.
type client struct {
	s      *Server
	rwc    io.ReadWriteCloser
	stream *lspStream
	conn   jsonrpc2.Conn

	// lifecycle; touched only by the read loop (jsonrpc2 calls the handler
	// from one goroutine).
	state    int // stateNew, stateReady, stateShutdown
	name     string
	applyOK  bool // capabilities.workspace.applyEdit; guarded by mu
	readDone chan struct{}

	mu      sync.Mutex
	queue   []outItem
	notes   int  // notifications in queue
	writing bool // the writer holds items taken from queue, not yet written
	signal  chan struct{}
	stopped bool
	stopCh  chan struct{}
	closeMu sync.Once

	subs map[string]struct{} // conversation ids; guarded by s.mu
}

const (
	stateNew = iota
	stateReady
	stateShutdown
)

// outItem is a queued reply (reply != nil) or a notification already framed
// (shared by every client it goes to; never modified).
type outItem struct {
	reply  jsonrpc2.Replier
	result any
	err    error

	frame []byte
}

// frameNotification returns the LSP-framed bytes of a notification.
func frameNotification(method string, params json.RawMessage) []byte {
	m, _ := json.Marshal(method)
	n := len(`{"jsonrpc":"2.0","method":,"params":}`) + len(m) + len(params)
	b := make([]byte, 0, n+24)
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b = append(b, m...)
	b = append(b, `,"params":`...)
	b = append(b, params...)
	b = append(b, '}')
	return b
}

func newClient(s *Server, rwc io.ReadWriteCloser) *client {
	return &client{
		s:        s,
		rwc:      rwc,
		signal:   make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		readDone: make(chan struct{}),
		subs:     make(map[string]struct{}),
	}
}

// run serves the connection until it ends.
func (c *client) run(ctx context.Context) {
	c.stream = newLSPStream(c.rwc)
	c.conn = jsonrpc2.NewConn(c.stream)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writer(ctx)
	}()
	c.conn.Go(ctx, c.handle)
	select {
	case <-c.conn.Done():
	case <-ctx.Done():
	case <-c.stopCh:
	}
	c.close()
	<-c.conn.Done()
	<-writerDone
	if err := c.conn.Err(); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		c.s.log.Debug("client connection ended", "client", c.name, "err", err)
	}
}

// close ends the connection (idempotent).
func (c *client) close() {
	c.closeMu.Do(func() {
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		close(c.stopCh)
		c.rwc.Close()
	})
}

// writer drains the queue in order; consecutive notifications go out in one
// write (up to writeBatch bytes).
func (c *client) writer(ctx context.Context) {
	const writeBatch = 256 << 10
	var buf []byte
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := c.stream.writeFramed(buf)
		buf = buf[:0]
		return err
	}
	for {
		select {
		case <-c.signal:
		case <-c.stopCh:
			return
		}
		for {
			c.mu.Lock()
			items := c.queue
			c.queue = nil
			c.notes = 0
			c.writing = len(items) > 0
			c.mu.Unlock()
			if len(items) == 0 {
				break
			}
			for i := range items {
				it := &items[i]
				var err error
				if it.reply != nil {
					if err = flush(); err == nil {
						err = it.reply(ctx, it.result, it.err)
					}
				} else {
					buf = append(buf, it.frame...)
					if len(buf) >= writeBatch {
						err = flush()
					}
				}
				if err != nil {
					c.s.log.Debug("write to client failed", "client", c.name, "err", err)
					c.close()
					return
				}
				*it = outItem{}
			}
			if err := flush(); err != nil {
				c.s.log.Debug("write to client failed", "client", c.name, "err", err)
				c.close()
				return
			}
		}
	}
}

// drained reports whether everything queued so far has been written (or
// the connection is gone).
func (c *client) drained() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped || (len(c.queue) == 0 && !c.writing)
}

func (c *client) push(it outItem, note bool) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, it)
	if note {
		c.notes++
	}
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// queueReply queues the answer to a call.
func (c *client) queueReply(reply jsonrpc2.Replier, result any, err error) {
	c.push(outItem{reply: reply, result: result, err: err}, false)
}

// notifyLocked queues a framed notification for topic t, or drops the client
// from t (and queues ochat/resync) when it is too far behind. s.mu is held.
func (c *client) notifyLocked(t *topic, frame []byte) {
	c.mu.Lock()
	behind := c.notes >= c.s.opts.ClientQueue
	c.mu.Unlock()
	if behind {
		delete(t.subs, c)
		delete(c.subs, t.id)
		raw, _ := marshalParams(ResyncParams{ConversationID: t.id, Reason: fmt.Sprintf("client fell more than %d notifications behind", c.s.opts.ClientQueue)})
		c.push(outItem{frame: frameNotification(NotifyResync, raw)}, false)
		c.s.log.Warn("client fell behind; dropped from live events", "client", c.name, "conversation", t.id)
		return
	}
	c.push(outItem{frame: frame}, true)
}

// errReplied is returned by a method handler that queued its reply itself
// (to order it with notifications under s.mu).
var errReplied = errors.New("replied")

// handle is the jsonrpc2.Handler of one client. It never returns an error
// (that would close the connection) and never lets a panic escape.
func (c *client) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) (ret error) {
	call, isCall := req.(*jsonrpc2.Call)
	replied := false
	rep := func(result any, err error) {
		if !replied && isCall {
			replied = true
			c.queueReply(reply, result, err)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("panic in handler", "method", req.Method(), "panic", p, "stack", string(debug.Stack()))
			rep(nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "internal error in %s: %v", req.Method(), p))
		}
		ret = nil
	}()
	method := req.Method()
	if !isCall {
		switch method {
		case protocol.MethodExit:
			c.close()
		case protocol.MethodInitialized, "$/cancelRequest", "$/setTrace":
		default:
			c.s.log.Debug("ignoring notification", "method", method)
		}
		return nil
	}
	_ = call
	switch {
	case method == protocol.MethodInitialize:
		if c.state != stateNew {
			rep(nil, jsonrpc2.Errorf(jsonrpc2.InvalidRequest, "initialize was already called"))
			return nil
		}
	case c.state == stateNew:
		rep(nil, jsonrpc2.Errorf(CodeNotInitialized, "server not initialized: send initialize first"))
		return nil
	case c.state == stateShutdown:
		rep(nil, jsonrpc2.Errorf(jsonrpc2.InvalidRequest, "shutdown was requested: only exit is accepted"))
		return nil
	}
	result, err := c.dispatch(ctx, method, req.Params(), reply)
	if errors.Is(err, errReplied) {
		replied = true
		return nil
	}
	if err != nil {
		var je *jsonrpc2.Error
		if !errors.As(err, &je) {
			c.s.log.Error("request failed", "method", method, "err", err)
			err = jsonrpc2.Errorf(jsonrpc2.InternalError, "%s: %v", method, err)
		}
	}
	rep(result, err)
	return nil
}

// dispatch runs one method. Results are plain structs of wire.go.
func (c *client) dispatch(ctx context.Context, method string, params json.RawMessage, reply jsonrpc2.Replier) (any, error) {
	s := c.s
	switch method {
	case protocol.MethodInitialize:
		var p protocol.InitializeParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		if p.ClientInfo != nil {
			c.name = p.ClientInfo.Name
		}
		c.mu.Lock()
		c.applyOK = p.Capabilities.Workspace != nil && p.Capabilities.Workspace.ApplyEdit
		c.mu.Unlock()
		c.state = stateReady
		return s.initializeResult(), nil
	case protocol.MethodShutdown:
		c.state = stateShutdown
		return nil, nil
	case MethodConversationsList:
		return s.listConversations()
	case MethodConversationsCreate:
		var p CreateConversationParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.createConversation(p)
	case MethodConversationsGet:
		var p ConversationParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.getConversation(p.ConversationID)
	case MethodConversationsRename:
		var p RenameParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.renameConversation(p)
	case MethodConversationsDelete:
		var p ConversationParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.deleteConversation(p.ConversationID)
	case MethodHistory:
		var p ConversationParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.historyRecords(p.ConversationID)
	case MethodChatSend:
		var p SendParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.send(c, p, reply)
	case MethodChatCancel:
		var p ConversationParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.cancel(p.ConversationID)
	case MethodDaemonStop:
		s.stopDaemon()
		return struct{}{}, nil
	case MethodSubscribe:
		var p ConversationParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.subscribe(c, p.ConversationID, reply)
	case MethodUnsubscribe:
		var p ConversationParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		s.unsubscribe(c, p.ConversationID)
		return struct{}{}, nil
	case MethodPermissionRespond:
		var p RespondParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.respondPermission(p)
	case MethodSessionsList, MethodSessionsRead, MethodSessionsOpen, MethodSessionsFollow, MethodSessionsUnfollow, MethodExport, MethodImport:
		return c.dispatchSessions(ctx, method, params, reply)
	case MethodAgentsList:
		var p AgentsListParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.agentsList(p)
	case MethodChatEdit:
		var p EditParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.edit(c, p, reply)
	case MethodChatRetry:
		var p RetryParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.retry(c, p, reply)
	case MethodAgentSetConfig:
		var p SetConfigParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		return s.setConfig(c, p, reply)
	case MethodFileChangeApply, MethodFileChangeRevert:
		return s.fileChange(c, params, method == MethodFileChangeRevert, reply)
	case MethodQueueUpdate, MethodQueueRemove, MethodQueueSendNow:
		var p QueueItemParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		switch method {
		case MethodQueueUpdate:
			return s.queueUpdate(p)
		case MethodQueueRemove:
			return s.queueRemove(p)
		}
		return s.queueSendNow(p)
	case MethodChanges, MethodRewind, MethodRewindUndo, MethodCheckpointRestore:
		return s.checkpointMethod(c, method, params, reply) // rewind.go
	}
	return nil, jsonrpc2.Errorf(jsonrpc2.MethodNotFound, "unknown method %q", method)
}

// marshalParams marshals notification params once for every subscriber.
func marshalParams(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal params: %w", err)
	}
	return b, nil
}
