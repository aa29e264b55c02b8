package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/oklog/ulid/v2"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/history/native"
	"github.com/ochat-dev/ochat/procguard"
)

// Defaults of Options.
const (
	DefaultBufferCap          = 50_000
	DefaultClientQueue        = 16_384
	DefaultCheckpointInterval = 250 * time.Millisecond
	DefaultCancelGrace        = 10 * time.Second
	DefaultSessionTimeout     = 60 * time.Second
)

// AgentConn is what the daemon needs of one running agent process;
// *agents.Conn implements it. Tests and benchmarks may substitute their own
// through Options.StartAgent.
type AgentConn interface {
	Capabilities() acp.AgentCapabilities
	NewSession(ctx context.Context) (agents.SessionInfo, error)
	LoadSession(ctx context.Context, id string) (agents.SessionInfo, error)
	Prompt(ctx context.Context, sessionID string, prompt []acp.ContentBlock) (stopReason string, err error)
	Cancel(ctx context.Context, sessionID string) error
	Done() <-chan struct{}
	Err() error
	Close() error
}

// StartAgentFunc starts one agent process (normally agents.Start).
type StartAgentFunc func(ctx context.Context, spec agents.Spec, opts agents.Options) (AgentConn, error)

// Options configure a Server.
type Options struct {
	// Workspace is the absolute workspace root (agent cwd, fs confinement).
	Workspace string
	// Store is the open workspace store; the caller closes it after Serve.
	Store *history.Store
	// UserConfigDir is passed to agents.LoadRegistry; "" means
	// os.UserConfigDir().
	UserConfigDir string
	// Logger receives the daemon's logs; nil means slog.Default().
	Logger *slog.Logger
	// Version is reported in initialize's serverInfo.
	Version string
	// IdleTimeout ends Serve after this long with no client connected and no
	// turn running; 0 never.
	IdleTimeout time.Duration
	// BufferCap is the most events a turn's replay buffer keeps (default
	// DefaultBufferCap); beyond it the buffer is marked truncated.
	BufferCap int
	// ClientQueue is the most notifications queued for one client (default
	// DefaultClientQueue); a client further behind is dropped from live
	// delivery and sent ochat/resync.
	ClientQueue int
	// CheckpointInterval is the least time between two checkpoints of a
	// streaming assistant message (default DefaultCheckpointInterval).
	CheckpointInterval time.Duration
	// CancelGrace is how long a cancelled turn may take to answer before its
	// prompt is abandoned (default DefaultCancelGrace).
	CancelGrace time.Duration
	// SessionTimeout bounds session/new and session/load (default
	// DefaultSessionTimeout); an agent that does not answer in time fails the
	// turn and its process is stopped.
	SessionTimeout time.Duration
	// TurnIdleTimeout cancels a turn (then, after CancelGrace, stops its
	// agent) when the agent has sent nothing for this long while no
	// permission question is pending; 0 never.
	TurnIdleTimeout time.Duration
	// AgentInitTimeout is agents.Options.InitTimeout (spawn + initialize);
	// 0 means the agents default (60 s).
	AgentInitTimeout time.Duration
	// AgentIdleTimeout stops an agent process (session/close, then its
	// process group) that has served no turn for this long; 0 means
	// DefaultAgentIdleTimeout, negative never.
	AgentIdleTimeout time.Duration
	// MaxAgents caps the live agent processes: starting one more stops the
	// least recently used idle one. 0 means DefaultMaxAgents, negative no cap.
	MaxAgents int
	// PermissionTimeout answers a pending permission request "cancelled"
	// (and so ends its turn) once no client has been connected to the daemon
	// for this long; a client that connects in time still sees it. 0 means
	// DefaultPermissionTimeout, negative never.
	PermissionTimeout time.Duration
	// StartAgent starts agents; nil means agents.Start.
	StartAgent StartAgentFunc
	// AgentShim and ProcLedger are passed to every agent started
	// (agents.Options.Shim and Ledger): no agent outlives the daemon.
	AgentShim  string
	ProcLedger *procguard.Ledger
	// LoadRegistry returns the agent registry, called on every send and
	// agents/list; nil means agents.LoadRegistry(UserConfigDir, Workspace).
	LoadRegistry func() (AgentRegistry, error)
	// NativeEnv says where the native CLI session stores are (HOME,
	// CLAUDE_CONFIG_DIR, CODEX_HOME, XDG_DATA_HOME, …); nil means the
	// process environment. Tests point it at private directories.
	NativeEnv *native.Env
	// CheckpointDir is the shadow repository of code checkpoints; "" means
	// "checkpoints" beside the store. NoCheckpoints turns them off.
	// CheckpointMaxFileBytes is the per-file cap (0: the checkpoint default).
	CheckpointDir          string
	NoCheckpoints          bool
	CheckpointMaxFileBytes int64
}

// AgentRegistry is what the daemon needs of the agent registry;
// *agents.Registry implements it.
type AgentRegistry interface {
	List() []agents.Status
	Lookup(name string) (agents.Spec, error)
	Default() string
}

// Server is one workspace's daemon: it serves any number of client
// connections over one store and one run registry. Create it with New, then
// call Serve (listener) or ServeConn (one stream).
type Server struct {
	opts  Options
	log   *slog.Logger
	store *history.Store

	baseCtx  context.Context // lifetime of turns and agent processes
	stopBase context.CancelFunc

	startedAt time.Time

	idMu    sync.Mutex
	entropy *ulid.MonotonicEntropy

	mu       sync.Mutex
	clients  map[*client]struct{}
	topics   map[string]*topic
	perms    map[string]*pendingPerm
	slots    map[slotKey]*agentSlot
	running  int
	idle     *time.Timer
	idleStop context.CancelFunc // ends the current Serve
	permIdle *time.Timer        // PermissionTimeout with no client (perms.go)
	turns    sync.WaitGroup
	closed   bool

	native sessionsHub // terminal-started sessions (sessions.go)

	// The message queue (queue.go): queues is guarded by mu; qmu serialises
	// a queue change with its store write and is taken before mu.
	qmu        sync.Mutex
	queues     map[string][]history.QueuedMessage
	queuesOnce sync.Once
	ckpts      codeCheckpoints // code checkpoints (checkpoints.go)
}

// New returns a Server; it does not touch the store until a client asks.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BufferCap <= 0 {
		opts.BufferCap = DefaultBufferCap
	}
	if opts.ClientQueue <= 0 {
		opts.ClientQueue = DefaultClientQueue
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = DefaultCancelGrace
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.AgentIdleTimeout == 0 {
		opts.AgentIdleTimeout = DefaultAgentIdleTimeout
	}
	if opts.PermissionTimeout == 0 {
		opts.PermissionTimeout = DefaultPermissionTimeout
	}
	if opts.MaxAgents == 0 {
		opts.MaxAgents = DefaultMaxAgents
	}
	if opts.StartAgent == nil {
		opts.StartAgent = func(ctx context.Context, spec agents.Spec, o agents.Options) (AgentConn, error) {
			c, err := agents.Start(ctx, spec, o)
			if err != nil {
				return nil, err
			}
			return c, nil
		}
	}
	if opts.Version == "" {
		opts.Version = "devel"
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		store:     opts.Store,
		baseCtx:   ctx,
		startedAt: time.Now(),
		stopBase:  cancel,
		entropy:   ulid.Monotonic(rand.Reader, 0),
		clients:   make(map[*client]struct{}),
		topics:    make(map[string]*topic),
		perms:     make(map[string]*pendingPerm),
		slots:     make(map[slotKey]*agentSlot),
		queues:    make(map[string][]history.QueuedMessage),
	}
	if opts.AgentIdleTimeout > 0 {
		go s.reapAgents()
	}
	return s
}

// newID returns a new monotonic ULID string.
func (s *Server) newID() string {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	return ulid.MustNew(ulid.Now(), s.entropy).String()
}

// Serve accepts connections on ln until ctx ends, the idle timeout fires or
// Close is called; it refuses peers of another uid (SO_PEERCRED). It closes
// ln. It returns nil on a clean stop (including idle exit).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.closed {
		// Stopped (a signal, ochat/daemon/stop) before serving began: the
		// stop found no Serve to end, so do not start one.
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.idleStop = cancel
	s.armIdleLocked()
	s.mu.Unlock()
	s.queuesOnce.Do(func() { // before the first client; a stored queue resumes
		s.loadQueues()
		s.resumeQueues()
	})
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	uid := os.Getuid()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		if peer, err := PeerUID(nc); err != nil || peer != uid {
			s.log.Warn("refusing connection", "peerUid", peer, "err", err)
			nc.Close()
			continue
		}
		go s.ServeConn(ctx, nc)
	}
}

// ServeConn serves one client on rwc until it disconnects, sends exit, or ctx
// ends. Its subscriptions end with it; its turns keep running.
func (s *Server) ServeConn(ctx context.Context, rwc io.ReadWriteCloser) {
	s.queuesOnce.Do(s.loadQueues)
	c := newClient(s, rwc)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		rwc.Close()
		return
	}
	s.clients[c] = struct{}{}
	s.armIdleLocked()
	s.armPermTimeoutLocked()
	s.mu.Unlock()
	c.run(ctx)
	s.mu.Lock()
	delete(s.clients, c)
	for id := range c.subs {
		if t := s.topics[id]; t != nil {
			delete(t.subs, c)
			s.dropTopicLocked(t)
		}
	}
	c.subs = nil
	s.armIdleLocked()
	s.armPermTimeoutLocked()
	s.mu.Unlock()
}

// armIdleLocked starts the idle timer when no client is connected and no turn
// runs, and stops it otherwise. s.mu is held.
func (s *Server) armIdleLocked() {
	idle := s.opts.IdleTimeout > 0 && len(s.clients) == 0 && s.running == 0 && s.idleStop != nil
	if !idle {
		if s.idle != nil {
			s.idle.Stop()
			s.idle = nil
		}
		return
	}
	if s.idle != nil {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(s.opts.IdleTimeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.idle != t {
			return
		}
		s.idle = nil
		if len(s.clients) == 0 && s.running == 0 && s.idleStop != nil {
			s.log.Info("idle timeout: no clients and no running turn", "idle", s.opts.IdleTimeout)
			s.idleStop()
		}
	})
	s.idle = t
}

// Close ends every turn (recording it as failed: "daemon stopped"), closes
// every client and agent process, and waits for the turns to be written, at
// most until ctx ends. The store stays open.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	if s.permIdle != nil {
		s.permIdle.Stop()
		s.permIdle = nil
	}
	var runs []*run
	for _, t := range s.topics {
		if t.run != nil {
			runs = append(runs, t.run)
		}
	}
	clients := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.abort("daemon stopped")
	}
	done := make(chan struct{})
	go func() { s.turns.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("close daemon: turns still running: %w", ctx.Err())
	}
	s.stopBase()
	// The aborted turns' turn.failed events are queued: let the writers put
	// them on the wire first, so an editor learns how its turn ended.
	s.drainClients(2 * time.Second)
	for _, c := range clients {
		c.close()
	}
	s.mu.Lock()
	slots := s.slots
	s.slots = make(map[slotKey]*agentSlot)
	s.mu.Unlock()
	for _, sl := range slots {
		if sl.conn != nil {
			sl.conn.Close()
		}
	}
	if st, cerr := s.checkpoints(); cerr == nil {
		st.Close() // the stat cache is saved
	}
	return err
}

// topicLocked returns the topic of a conversation, creating it. s.mu is held.
func (s *Server) topicLocked(convID string) *topic {
	t := s.topics[convID]
	if t == nil {
		t = &topic{id: convID, subs: make(map[*client]struct{})}
		s.topics[convID] = t
	}
	return t
}

// dropTopicLocked forgets a topic with no subscriber and no run.
func (s *Server) dropTopicLocked(t *topic) {
	if len(t.subs) == 0 && t.run == nil {
		delete(s.topics, t.id)
	}
}

// topic is one conversation's live side: its subscribers and running turn.
type topic struct {
	id   string
	subs map[*client]struct{}
	run  *run
}

// broadcastLocked queues one notification to every subscriber of t. s.mu is
// held; params are marshalled once.
func (s *Server) broadcastLocked(t *topic, method string, params any) {
	if len(t.subs) == 0 {
		return
	}
	raw, err := marshalParams(params)
	if err != nil {
		s.log.Error("marshal notification", "method", method, "err", err)
		return
	}
	frame := frameNotification(method, raw)
	for c := range t.subs {
		c.notifyLocked(t, frame)
	}
}
