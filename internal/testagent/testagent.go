// Package testagent is a scripted ACP agent for deterministic tests of the
// ACP client (agents/) and the daemon. It is built on the agent side of
// github.com/coder/acp-go-sdk (acp.NewAgentSideConnection) and speaks real
// ACP over stdio; internal/testagent/cmd/testagent is the binary.
//
// It owns nothing but its own sessions: it never calls a model, and it
// touches the disk only where a scenario says so (WRITE writes one file
// relative to the session cwd; state is kept in $TESTAGENT_STATE).
//
// # Protocol support
//
// initialize (loadSession true, sessionCapabilities resume and close),
// session/new
// (sends available_commands_update before its answer; answers modes,
// configOptions mode and model), session/load (replays the session's earlier
// turns as user_message_chunk / agent_message_chunk plus one never-finished
// tool_call, before the answer or, with TESTAGENT_REPLAY=after, after it
// followed by an available_commands_update), session/resume (no replay),
// session/prompt, session/cancel, session/close, session/set_config_option,
// session/set_mode and session/set_model. Every turn ends with a usage_update (used = 10 per
// turn, size 1000, cost 0.01 USD per turn); the first turn of a session also
// sends session_info_update with the prompt as title.
//
// # Scenarios
//
// The scenario is the first word of the prompt's last text block
// (case-sensitive), so a handoff block sent before the user's text does not
// change it. The whole prompt (every text block and resource link, one per
// line) is what a session's history keeps and what ECHOALL answers.
//
//	PLAIN <text>           <text> (default "ok") as three agent_message_chunks
//	THINK [text]           two agent_thought_chunks, then the text (default "Answer.")
//	WRITE <relpath> <text> tool_call (edit, pending) → session/request_permission with
//	                       allow_once "allow", allow_always "always", reject_once "reject";
//	                       allowed: writes <text> ("\n" escapes honoured) to <relpath>
//	                       under the session cwd with os.WriteFile, tool_call_update
//	                       completed with diff content; rejected: tool_call_update failed;
//	                       cancelled: stop reason cancelled, the tool left open
//	ASK <relpath> <text>   like WRITE but no tool_call first: the permission request is
//	                       the first sight of the tool (gemini-cli does this)
//	SHELL <command>        tool_call (execute) "Run <command>", runs sh -c <command> in the
//	                       session cwd, tool_call_update completed with its output; it
//	                       reports no diff (the daemon must see the change on disk)
//	PLAN                   three plan updates (entries progressing), then text
//	SLOW <n>               n chunks "c<i> " 50 ms apart; on session/cancel stops with
//	                       stop reason cancelled
//	FAIL                   the prompt answers a JSON-RPC error (-32603, "scripted failure")
//	CRASH                  one chunk, a line on stderr, then exit status 3
//	FLOOD <n>              n chunks "<i> " as fast as possible (default 1000)
//	NOISE                  chunk "a", then non-JSON lines, broken JSON, an update of
//	                       unknown kind shaped like a message chunk, a vendor
//	                       notification, an image chunk, a 9 MB chunk of "x" (valid),
//	                       an 11 MB line (too long), an update for another session
//	                       id and a user_message_chunk, then chunk "b"
//	TOOLS                  tool_call_update before tool_call, tool_call twice, then
//	                       completed with content text "file contents"
//	OPEN                   a tool_call in_progress that never finishes, then end_turn
//	FSREAD <path> [l] [n]  fs/read_text_file (line l, limit n) and answers the content,
//	                       or "error <code>: <message>"
//	FSWRITE <path> <text>  fs/write_text_file and answers "written" or the error
//	UUIDPERM               a session/request_permission with a UUID string id, written
//	                       raw; answers the client's raw response line
//	CAPS                   answers the client capabilities of initialize as JSON
//	ECHOALL                the whole prompt, every block, one per line
//	BLOCKS                 one line per prompt block: "text <bytes>",
//	                       "image <mimeType> <uri> <bytes> <sha256 of the data>",
//	                       "resource <mimeType> <uri> <bytes> <sha256 of the text>",
//	                       "blob <mimeType> <uri> <bytes> <sha256>", "link <name> <uri>"
//	                       or "audio <mimeType> <bytes>" (bytes decoded; "-" for none)
//	CONFIG                 "mode=<mode> model=<model>": the session's current config
//	HANG                   one chunk, then never answers, not even to session/cancel
//	anything else          "echo: <last text block>"
//
// # Environment (read by internal/testagent/cmd/testagent)
//
//	TESTAGENT_STATE          directory for sessions.json, so a new process can load
//	TESTAGENT_INIT_DELAY_MS  sleep before answering initialize
//	TESTAGENT_REPLAY=after   replay history after the session/load answer (gemini style)
//	TESTAGENT_NO_CONFIG=1    advertise modes and legacy models but no configOptions,
//	                         and answer session/set_config_option "method not found"
//	TESTAGENT_IGNORE_TERM=1  ignore SIGTERM
//	TESTAGENT_IGNORE_EOF=1   keep running after stdin ends
//	TESTAGENT_CHILD_PIDFILE  start a child ("sleep 600", sharing stdout) and write its pid
//	                         there, like an adapter whose child can outlive it
//	TESTAGENT_CANCEL_SHIFT=1 behave like claude-agent-acp 0.23 after a cancel: the next
//	                         prompt is answered end_turn at once with no update (the
//	                         cancelled turn's stale idle), and from then on each prompt
//	                         is answered with the previous prompt's turn, until the
//	                         session is closed, resumed or loaded (a fresh stream)
//	TESTAGENT_PROMPT_CAPS    the promptCapabilities initialize advertises: a comma list
//	                         of image, audio, embeddedContext, or "none"; unset means
//	                         embeddedContext only
package testagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// Options configure Run.
type Options struct {
	StateDir        string        // where sessions.json lives; "" keeps sessions in memory only
	InitDelay       time.Duration // before answering initialize
	ReplayAfterLoad bool          // replay history after the session/load answer
	NoConfig        bool          // no configOptions (modes + legacy models only)
	IgnoreTerm      bool          // ignore SIGTERM (only SIGKILL ends it)
	IgnoreEOF       bool          // keep running after stdin ends
	ChildPIDFile    string        // start a "sleep 600" child and write its pid here
	CancelShift     bool          // answer one prompt behind after a cancel (claude-agent-acp 0.23)
	// PromptCaps is what initialize advertises as promptCapabilities; nil
	// means embeddedContext only.
	PromptCaps *acp.PromptCapabilities
	Stderr     io.Writer // nil: io.Discard
	Exit       func(code int)
}

// OptionsFromEnv reads the TESTAGENT_* environment variables.
func OptionsFromEnv() Options {
	o := Options{StateDir: os.Getenv("TESTAGENT_STATE"), Stderr: os.Stderr, Exit: os.Exit}
	if ms, err := strconv.Atoi(os.Getenv("TESTAGENT_INIT_DELAY_MS")); err == nil && ms > 0 {
		o.InitDelay = time.Duration(ms) * time.Millisecond
	}
	o.ReplayAfterLoad = os.Getenv("TESTAGENT_REPLAY") == "after"
	o.NoConfig = os.Getenv("TESTAGENT_NO_CONFIG") == "1"
	o.IgnoreTerm = os.Getenv("TESTAGENT_IGNORE_TERM") == "1"
	o.IgnoreEOF = os.Getenv("TESTAGENT_IGNORE_EOF") == "1"
	o.ChildPIDFile = os.Getenv("TESTAGENT_CHILD_PIDFILE")
	o.CancelShift = os.Getenv("TESTAGENT_CANCEL_SHIFT") == "1"
	if v, ok := os.LookupEnv("TESTAGENT_PROMPT_CAPS"); ok {
		o.PromptCaps = ParsePromptCaps(v)
	}
	return o
}

// ParsePromptCaps reads a TESTAGENT_PROMPT_CAPS value: a comma list of
// "image", "audio" and "embeddedContext" (other words, and "none", set
// nothing).
func ParsePromptCaps(v string) *acp.PromptCapabilities {
	pc := &acp.PromptCapabilities{}
	for _, w := range strings.Split(v, ",") {
		switch strings.TrimSpace(w) {
		case "image":
			pc.Image = true
		case "audio":
			pc.Audio = true
		case "embeddedContext":
			pc.EmbeddedContext = true
		}
	}
	return pc
}

// Run serves ACP on in/out until in ends.
func Run(in io.Reader, out io.Writer, opt Options) error {
	if opt.IgnoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if opt.ChildPIDFile != "" {
		// A child that outlives us unless our process group is killed; it
		// inherits stdout, as claude-agent-acp's claude child does.
		cmd := exec.Command("sleep", "600")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		if err := os.WriteFile(opt.ChildPIDFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			return err
		}
	}
	if opt.Stderr == nil {
		opt.Stderr = io.Discard
	}
	if opt.Exit == nil {
		opt.Exit = os.Exit
	}
	a := &agent{opt: opt, out: &lockedWriter{w: out}, sessions: map[string]*session{}, tap: make(chan string, 1)}
	if err := a.loadState(); err != nil {
		return err
	}
	// Lines answering our raw request (UUIDPERM) are taken off the stream
	// before the SDK sees them; everything else passes through.
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				if bytes.Contains(line, []byte(`"id":"`+rawPermID+`"`)) && !bytes.Contains(line, []byte(`"method"`)) {
					select {
					case a.tap <- string(bytes.TrimSpace(line)):
					default:
					}
				} else if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	a.conn = acp.NewAgentSideConnection(a, a.out, pr)
	<-a.conn.Done()
	if opt.IgnoreEOF {
		for { // like claude-agent-acp and codex-acp: stdin EOF is not the end
			time.Sleep(time.Hour)
		}
	}
	return nil
}

// rawPermID is the string request id of the UUIDPERM permission request.
const rawPermID = "0b6b7a7e-5e1d-4c7a-9f3e-uuid-perm"

// lockedWriter makes every Write one atomic line on the shared stdout.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type turn struct {
	User  string `json:"user"`
	Agent string `json:"agent"`
}

type session struct {
	ID     string            `json:"id"`
	Cwd    string            `json:"cwd"`
	Turns  []turn            `json:"turns"`
	Config map[string]string `json:"config"`
}

type agent struct {
	opt  Options
	out  *lockedWriter
	conn *acp.AgentSideConnection

	mu         sync.Mutex
	sessions   map[string]*session
	tap        chan string // answers to the UUIDPERM raw request
	clientCaps acp.ClientCapabilities
	toolSeq    int
	// CancelShift: sessions whose cancelled turn left a stale answer, and
	// the prompt each shifted session still owes an answer to.
	stale   map[string]bool
	backlog map[string]acp.PromptRequest
}

// freshStream forgets the cancel shift of a session (close, load, resume).
func (a *agent) freshStream(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.stale, id)
	delete(a.backlog, id)
}

// shift applies CancelShift to prompt p: stale reports that p is answered
// at once; otherwise p is replaced by the prompt still owed an answer.
func (a *agent) shift(p acp.PromptRequest) (acp.PromptRequest, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stale == nil {
		a.stale, a.backlog = map[string]bool{}, map[string]acp.PromptRequest{}
	}
	id := string(p.SessionId)
	if a.stale[id] {
		delete(a.stale, id)
		a.backlog[id] = p
		return p, true
	}
	if prev, ok := a.backlog[id]; ok {
		a.backlog[id] = p
		return prev, false
	}
	return p, false
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

func (a *agent) statePath() string {
	if a.opt.StateDir == "" {
		return ""
	}
	return filepath.Join(a.opt.StateDir, "sessions.json")
}

func (a *agent) loadState() error {
	p := a.statePath()
	if p == "" {
		return nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, &a.sessions)
}

// saveLocked writes sessions.json; a.mu must be held.
func (a *agent) saveLocked() {
	p := a.statePath()
	if p == "" {
		return
	}
	b, _ := json.Marshal(a.sessions)
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	tmp := p + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		_ = os.Rename(tmp, p)
	}
}

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	if a.opt.InitDelay > 0 {
		time.Sleep(a.opt.InitDelay)
	}
	a.mu.Lock()
	a.clientCaps = p.ClientCapabilities
	a.mu.Unlock()
	promptCaps := acp.PromptCapabilities{EmbeddedContext: true}
	if a.opt.PromptCaps != nil {
		promptCaps = *a.opt.PromptCaps
	}
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:         true,
			PromptCapabilities:  promptCaps,
			SessionCapabilities: acp.SessionCapabilities{Resume: &acp.SessionResumeCapabilities{}, Close: &acp.SessionCloseCapabilities{}},
		},
		AgentInfo:   &acp.Implementation{Name: "testagent", Version: "1.0.0"},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessions[string(p.SessionId)] == nil {
		return acp.CloseSessionResponse{}, &acp.RequestError{Code: -32002, Message: "Resource not found: session " + string(p.SessionId)}
	}
	delete(a.stale, string(p.SessionId))
	delete(a.backlog, string(p.SessionId))
	if a.opt.CancelShift {
		// Like claude-agent-acp: close ends the stream, the transcript stays
		// and can be resumed.
		return acp.CloseSessionResponse{}, nil
	}
	delete(a.sessions, string(p.SessionId))
	a.saveLocked()
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error { return nil }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ts-" + hex.EncodeToString(b[:])
}

func (a *agent) commands() acp.SessionUpdate {
	return acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{
		AvailableCommands: []acp.AvailableCommand{
			{Name: "plan", Description: "Make a plan"},
			{Name: "echo", Description: "Echo the input"},
		},
	}}
}

func ptr[T any](v T) *T { return &v }

// modes returns the mode state of s.
func modes(s *session) *acp.SessionModeState {
	return &acp.SessionModeState{
		CurrentModeId: acp.SessionModeId(s.Config["mode"]),
		AvailableModes: []acp.SessionMode{
			{Id: "default", Name: "Default"},
			{Id: "plan", Name: "Plan"},
		},
	}
}

func configOptions(s *session) []acp.SessionConfigOption {
	mode := acp.NewSessionConfigOptionSelect(acp.SessionConfigValueId(s.Config["mode"]), acp.SessionConfigSelectOptions{
		Ungrouped: &acp.SessionConfigSelectOptionsUngrouped{
			{Value: "default", Name: "Default"},
			{Value: "plan", Name: "Plan"},
		},
	})
	mode.Select.Id = "mode"
	mode.Select.Name = "Mode"
	mode.Select.Category = ptr(acp.SessionConfigOptionCategoryMode)
	model := acp.NewSessionConfigOptionSelect(acp.SessionConfigValueId(s.Config["model"]), acp.SessionConfigSelectOptions{
		Ungrouped: &acp.SessionConfigSelectOptionsUngrouped{
			{Value: "fast", Name: "Fast"},
			{Value: "smart", Name: "Smart"},
		},
	})
	model.Select.Id = "model"
	model.Select.Name = "Model"
	model.Select.Category = ptr(acp.SessionConfigOptionCategoryModel)
	return []acp.SessionConfigOption{mode, model}
}

func legacyModels(s *session) *acp.SessionModelState {
	return &acp.SessionModelState{
		CurrentModelId: acp.ModelId(s.Config["model"]),
		AvailableModels: []acp.ModelInfo{
			{ModelId: "fast", Name: "Fast"},
			{ModelId: "smart", Name: "Smart"},
		},
	}
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	s := &session{ID: newID(), Cwd: p.Cwd, Config: map[string]string{"mode": "default", "model": "fast"}}
	a.mu.Lock()
	a.sessions[s.ID] = s
	a.saveLocked()
	a.mu.Unlock()
	// Sent before the answer, as claude-agent-acp may.
	_ = a.send(ctx, s.ID, a.commands())
	resp := acp.NewSessionResponse{SessionId: acp.SessionId(s.ID), Modes: modes(s)}
	if a.opt.NoConfig {
		resp.Models = legacyModels(s)
	} else {
		resp.ConfigOptions = configOptions(s)
	}
	return resp, nil
}

func (a *agent) find(id string) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[id]
	if s == nil {
		return nil, &acp.RequestError{Code: -32002, Message: "Resource not found: session " + id}
	}
	return s, nil
}

func (a *agent) replay(ctx context.Context, s *session) {
	a.mu.Lock()
	turns := append([]turn(nil), s.Turns...)
	a.mu.Unlock()
	for i, t := range turns {
		_ = a.send(ctx, s.ID, acp.UpdateUserMessageText(t.User))
		_ = a.send(ctx, s.ID, acp.UpdateAgentMessageText(t.Agent))
		if i == 0 {
			_ = a.send(ctx, s.ID, acp.StartToolCall("replayed-tool", "Replayed tool",
				acp.WithStartStatus(acp.ToolCallStatusInProgress)))
		}
	}
}

func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	s, err := a.find(string(p.SessionId))
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	a.freshStream(s.ID)
	if a.opt.ReplayAfterLoad {
		go func() {
			time.Sleep(20 * time.Millisecond)
			a.replay(context.Background(), s)
			_ = a.send(context.Background(), s.ID, a.commands())
		}()
	} else {
		a.replay(ctx, s)
	}
	resp := acp.LoadSessionResponse{Modes: modes(s)}
	if a.opt.NoConfig {
		resp.Models = legacyModels(s)
	} else {
		resp.ConfigOptions = configOptions(s)
	}
	return resp, nil
}

func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	s, err := a.find(string(p.SessionId))
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	a.freshStream(s.ID)
	resp := acp.ResumeSessionResponse{Modes: modes(s)}
	if a.opt.NoConfig {
		resp.Models = legacyModels(s)
	} else {
		resp.ConfigOptions = configOptions(s)
	}
	return resp, nil
}

func (a *agent) setConfig(s *session, key, value string) {
	a.mu.Lock()
	s.Config[key] = value
	a.saveLocked()
	a.mu.Unlock()
}

func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if a.opt.NoConfig {
		return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
	}
	if p.ValueId == nil {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": "only select options"})
	}
	s, err := a.find(string(p.ValueId.SessionId))
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	key, val := string(p.ValueId.ConfigId), string(p.ValueId.Value)
	ok := map[string][]string{"mode": {"default", "plan"}, "model": {"fast", "smart"}}[key]
	found := false
	for _, v := range ok {
		found = found || v == val
	}
	if !found {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("unknown value %q for %q", val, key)})
	}
	a.setConfig(s, key, val)
	if key == "mode" {
		_ = a.send(ctx, s.ID, acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: acp.SessionModeId(val)}})
	}
	return acp.SetSessionConfigOptionResponse{ConfigOptions: configOptions(s)}, nil
}

func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	s, err := a.find(string(p.SessionId))
	if err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	a.setConfig(s, "mode", string(p.ModeId))
	_ = a.send(ctx, s.ID, acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: p.ModeId}})
	return acp.SetSessionModeResponse{}, nil
}

// UnstableSetSessionModel serves session/set_model.
func (a *agent) UnstableSetSessionModel(ctx context.Context, p acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	s, err := a.find(string(p.SessionId))
	if err != nil {
		return acp.UnstableSetSessionModelResponse{}, err
	}
	a.setConfig(s, "model", string(p.ModelId))
	return acp.UnstableSetSessionModelResponse{}, nil
}

// send sends one session/update.
func (a *agent) send(ctx context.Context, sid string, u acp.SessionUpdate) error {
	return a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: acp.SessionId(sid), Update: u})
}

// raw writes one line to stdout as is.
func (a *agent) raw(line string) {
	_, _ = a.out.Write([]byte(line + "\n"))
}

// rawUpdate writes a session/update whose update object is given verbatim.
func (a *agent) rawUpdate(sid, update string) {
	a.raw(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + strconv.Quote(sid) + `,"update":` + update + `}}`)
}

// lastText is the text of the last text block: the user's own text when
// the client puts a handoff block before it.
func lastText(blocks []acp.ContentBlock) string {
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].Text != nil {
			return blocks[i].Text.Text
		}
	}
	return ""
}

// promptText joins every text block of a prompt, one per line; resource
// links are written as "[name](uri)".
func promptText(blocks []acp.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.ResourceLink != nil:
			parts = append(parts, "["+b.ResourceLink.Name+"]("+b.ResourceLink.Uri+")")
		}
	}
	return strings.Join(parts, "\n")
}

func (a *agent) nextToolID(prefix string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.toolSeq++
	return fmt.Sprintf("%s-%d", prefix, a.toolSeq)
}

// turnOut collects what the agent says in a turn, for history replay.
type turnOut struct {
	a   *agent
	ctx context.Context
	sid string
	sb  strings.Builder
}

func (t *turnOut) say(text string) {
	t.sb.WriteString(text)
	_ = t.a.send(t.ctx, t.sid, acp.UpdateAgentMessageText(text))
}

func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s, err := a.find(string(p.SessionId))
	if err != nil {
		return acp.PromptResponse{}, err
	}
	if a.opt.CancelShift {
		var stale bool
		if p, stale = a.shift(p); stale {
			return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
		}
	}
	text := promptText(p.Prompt)
	last := lastText(p.Prompt)
	word, rest, _ := strings.Cut(strings.TrimSpace(last), " ")
	rest = strings.TrimSpace(rest)
	out := &turnOut{a: a, ctx: ctx, sid: s.ID}
	stop, err := a.scenario(ctx, s, out, word, rest, last, text, p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	if a.opt.CancelShift && stop == acp.StopReasonCancelled {
		a.mu.Lock()
		a.stale[s.ID] = true
		a.mu.Unlock()
	}
	a.mu.Lock()
	s.Turns = append(s.Turns, turn{User: text, Agent: out.sb.String()})
	n := len(s.Turns)
	a.saveLocked()
	a.mu.Unlock()
	bg := context.Background()
	if n == 1 {
		_ = a.send(bg, s.ID, acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{Title: ptr(text)}})
	}
	_ = a.send(bg, s.ID, acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{
		Used: 10 * n, Size: 1000, Cost: &acp.Cost{Amount: 0.01 * float64(n), Currency: "USD"},
	}})
	return acp.PromptResponse{StopReason: stop}, nil
}

func splitN(s string, n int) []string {
	r := []rune(s)
	if len(r) < n {
		return []string{s}
	}
	var out []string
	size := (len(r) + n - 1) / n
	for i := 0; i < len(r); i += size {
		j := min(i+size, len(r))
		out = append(out, string(r[i:j]))
	}
	return out
}

func (a *agent) scenario(ctx context.Context, s *session, out *turnOut, word, rest, last, all string, blocks []acp.ContentBlock) (acp.StopReason, error) {
	switch word {
	case "PLAIN":
		if rest == "" {
			rest = "ok"
		}
		for _, part := range splitN(rest, 3) {
			out.say(part)
		}
	case "THINK":
		_ = a.send(ctx, s.ID, acp.UpdateAgentThoughtText("Thinking"))
		_ = a.send(ctx, s.ID, acp.UpdateAgentThoughtText(" about it."))
		if rest == "" {
			rest = "Answer."
		}
		out.say(rest)
	case "WRITE", "ASK":
		return a.write(ctx, s, out, word == "ASK", rest)
	case "PLAN":
		entries := func(st ...acp.PlanEntryStatus) acp.SessionUpdate {
			names := []string{"Read the code", "Change it", "Run the tests"}
			var es []acp.PlanEntry
			for i, n := range names {
				es = append(es, acp.PlanEntry{Content: n, Status: st[i], Priority: acp.PlanEntryPriorityMedium})
			}
			return acp.UpdatePlan(es...)
		}
		_ = a.send(ctx, s.ID, entries(acp.PlanEntryStatusPending, acp.PlanEntryStatusPending, acp.PlanEntryStatusPending))
		_ = a.send(ctx, s.ID, entries(acp.PlanEntryStatusCompleted, acp.PlanEntryStatusInProgress, acp.PlanEntryStatusPending))
		_ = a.send(ctx, s.ID, entries(acp.PlanEntryStatusCompleted, acp.PlanEntryStatusCompleted, acp.PlanEntryStatusCompleted))
		out.say("Plan done.")
	case "SLOW":
		n, _ := strconv.Atoi(rest)
		if n <= 0 {
			n = 10
		}
		for i := 0; i < n; i++ {
			if ctx.Err() != nil {
				return acp.StopReasonCancelled, nil
			}
			out.say(fmt.Sprintf("c%d ", i))
			select {
			case <-ctx.Done():
				return acp.StopReasonCancelled, nil
			case <-time.After(50 * time.Millisecond):
			}
		}
	case "FAIL":
		return "", &acp.RequestError{Code: -32603, Message: "scripted failure", Data: map[string]any{"scenario": "FAIL"}}
	case "CRASH":
		out.say("about to crash")
		fmt.Fprintln(a.opt.Stderr, "testagent: crashing on purpose (CRASH scenario)")
		a.opt.Exit(3)
		return "", errors.New("exit did not exit")
	case "FLOOD":
		n, _ := strconv.Atoi(rest)
		if n <= 0 {
			n = 1000
		}
		for i := 0; i < n; i++ {
			out.say(strconv.Itoa(i) + " ")
		}
	case "NOISE":
		a.noise(ctx, s, out)
	case "TOOLS":
		id := a.nextToolID("tools")
		_ = a.send(ctx, s.ID, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusInProgress)))
		_ = a.send(ctx, s.ID, acp.StartToolCall(acp.ToolCallId(id), "Read file",
			acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusPending),
			acp.WithStartRawInput(map[string]any{"path": "README.md"})))
		_ = a.send(ctx, s.ID, acp.StartToolCall(acp.ToolCallId(id), "Read file again",
			acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusInProgress)))
		_ = a.send(ctx, s.ID, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("file contents"))})))
		out.say("Read it.")
	case "SHELL":
		id := a.nextToolID("shell")
		_ = a.send(ctx, s.ID, acp.StartToolCall(acp.ToolCallId(id), "Run "+rest,
			acp.WithStartKind(acp.ToolKindExecute), acp.WithStartStatus(acp.ToolCallStatusInProgress),
			acp.WithStartRawInput(map[string]any{"command": rest})))
		cmd := exec.CommandContext(ctx, "sh", "-c", rest)
		cmd.Dir = s.Cwd
		outB, err := cmd.CombinedOutput()
		st := acp.ToolCallStatusCompleted
		if err != nil {
			st = acp.ToolCallStatusFailed
		}
		_ = a.send(ctx, s.ID, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(st),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(string(outB)))})))
		out.say("Ran it.")
	case "OPEN":
		id := a.nextToolID("open")
		_ = a.send(ctx, s.ID, acp.StartToolCall(acp.ToolCallId(id), "Run forever",
			acp.WithStartKind(acp.ToolKindExecute), acp.WithStartStatus(acp.ToolCallStatusInProgress)))
		out.say("Leaving it running.")
	case "FSREAD":
		f := strings.Fields(rest)
		if len(f) == 0 {
			out.say("error: FSREAD needs a path")
			break
		}
		req := acp.ReadTextFileRequest{SessionId: acp.SessionId(s.ID), Path: f[0]}
		if len(f) > 1 {
			n, _ := strconv.Atoi(f[1])
			req.Line = &n
		}
		if len(f) > 2 {
			n, _ := strconv.Atoi(f[2])
			req.Limit = &n
		}
		resp, err := a.conn.ReadTextFile(ctx, req)
		if err != nil {
			out.say(errText(err))
		} else {
			out.say(resp.Content)
		}
	case "FSWRITE":
		path, content, _ := strings.Cut(rest, " ")
		_, err := a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: acp.SessionId(s.ID), Path: path, Content: unescape(content)})
		if err != nil {
			out.say(errText(err))
		} else {
			out.say("written")
		}
	case "UUIDPERM":
		a.raw(`{"jsonrpc":"2.0","id":"` + rawPermID + `","method":"session/request_permission","params":{"sessionId":` + strconv.Quote(s.ID) +
			`,"toolCall":{"toolCallId":"uuid-tool","title":"Edit x","kind":"edit","status":"pending"},"options":[{"optionId":"approved","name":"Yes","kind":"allow_once"},{"optionId":"abort","name":"No","kind":"reject_once"}]}}`)
		select {
		case line := <-a.tap:
			out.say(line)
		case <-ctx.Done():
			return acp.StopReasonCancelled, nil
		case <-time.After(10 * time.Second):
			out.say("no answer")
		}
	case "CAPS":
		a.mu.Lock()
		b, _ := json.Marshal(a.clientCaps)
		a.mu.Unlock()
		out.say(string(b))
	case "ECHOALL":
		out.say(all)
	case "BLOCKS":
		out.say(blockSummary(blocks))
	case "CONFIG":
		a.mu.Lock()
		cfg := fmt.Sprintf("mode=%s model=%s", s.Config["mode"], s.Config["model"])
		a.mu.Unlock()
		out.say(cfg)
	case "HANG":
		// Stops answering: ignores session/cancel; only a kill ends it.
		out.say("hanging")
		for {
			time.Sleep(time.Hour)
		}
	default:
		out.say("echo: " + last)
	}
	return acp.StopReasonEndTurn, nil
}

// blockSummary describes every prompt block on its own line (the BLOCKS
// scenario): type, MIME type, URI, decoded size and sha256 of the content.
func blockSummary(blocks []acp.ContentBlock) string {
	digest := func(b []byte) string {
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	decoded := func(s string) string {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "- bad-base64"
		}
		return strconv.Itoa(len(b)) + " " + digest(b)
	}
	opt := func(p *string) string {
		if p == nil || *p == "" {
			return "-"
		}
		return *p
	}
	var lines []string
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			lines = append(lines, fmt.Sprintf("text %d", len(b.Text.Text)))
		case b.Image != nil:
			lines = append(lines, fmt.Sprintf("image %s %s %s", b.Image.MimeType, opt(b.Image.Uri), decoded(b.Image.Data)))
		case b.Audio != nil:
			lines = append(lines, fmt.Sprintf("audio %s %s", b.Audio.MimeType, decoded(b.Audio.Data)))
		case b.ResourceLink != nil:
			lines = append(lines, fmt.Sprintf("link %s %s", b.ResourceLink.Name, b.ResourceLink.Uri))
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			lines = append(lines, fmt.Sprintf("resource %s %s %d %s", opt(r.MimeType), r.Uri, len(r.Text), digest([]byte(r.Text))))
		case b.Resource != nil && b.Resource.Resource.BlobResourceContents != nil:
			r := b.Resource.Resource.BlobResourceContents
			lines = append(lines, fmt.Sprintf("blob %s %s %s", opt(r.MimeType), r.Uri, decoded(r.Blob)))
		default:
			lines = append(lines, "unknown")
		}
	}
	return strings.Join(lines, "\n")
}

func errText(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return fmt.Sprintf("error %d: %s", re.Code, re.Message)
	}
	return "error: " + err.Error()
}

func unescape(s string) string { return strings.ReplaceAll(s, `\n`, "\n") }

func (a *agent) noise(ctx context.Context, s *session, out *turnOut) {
	out.say("a")
	a.raw("this is not json")
	a.raw("")
	a.raw(`{"broken": `)
	a.raw(`[1,2,3]`)
	a.rawUpdate(s.ID, `{"sessionUpdate":"future_update_kind","content":{"type":"text","text":"MUST NOT APPEAR"}}`)
	a.raw(`{"jsonrpc":"2.0","method":"_vendor/ping","params":{"n":1}}`)
	a.rawUpdate(s.ID, `{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AAAA","mimeType":"image/png"}}`)
	big := strings.Repeat("x", 11<<20)
	a.rawUpdate(s.ID, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+big[:9<<20]+`"}}`)
	a.rawUpdate(s.ID, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+big+`"}}`)
	a.rawUpdate("other-session", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"for another session"}}`)
	_ = a.send(ctx, s.ID, acp.UpdateUserMessageText("user text echoed live"))
	a.raw("\x00\xff not utf-8")
	out.say("b")
}

// write runs the WRITE and ASK scenarios.
func (a *agent) write(ctx context.Context, s *session, out *turnOut, askOnly bool, rest string) (acp.StopReason, error) {
	rel, content, _ := strings.Cut(rest, " ")
	if rel == "" {
		out.say("error: WRITE needs a path")
		return acp.StopReasonEndTurn, nil
	}
	content = unescape(content)
	abs := filepath.Join(s.Cwd, rel)
	id := a.nextToolID("write")
	var oldText *string
	if b, err := os.ReadFile(abs); err == nil {
		oldText = ptr(string(b))
	}
	diff := acp.ToolCallContent{Diff: &acp.ToolCallContentDiff{Path: abs, OldText: oldText, NewText: content, Type: "diff"}}
	if askOnly && oldText == nil {
		diff.Diff.OldText = ptr("")
	}
	title := "Write " + rel
	if !askOnly {
		_ = a.send(ctx, s.ID, acp.StartToolCall(acp.ToolCallId(id), title,
			acp.WithStartKind(acp.ToolKindEdit), acp.WithStartStatus(acp.ToolCallStatusPending),
			acp.WithStartRawInput(map[string]any{"path": rel, "content": content})))
	}
	// Wait for the client's answer even after a cancel: the client must
	// answer "cancelled" itself.
	resp, err := a.conn.RequestPermission(context.Background(), acp.RequestPermissionRequest{
		SessionId: acp.SessionId(s.ID),
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: acp.ToolCallId(id),
			Title:      ptr(title),
			Kind:       ptr(acp.ToolKindEdit),
			Status:     ptr(acp.ToolCallStatusPending),
			Content:    []acp.ToolCallContent{diff},
		},
		Options: []acp.PermissionOption{
			{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "always", Name: "Always allow", Kind: acp.PermissionOptionKindAllowAlways},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	if err != nil {
		return "", err
	}
	if resp.Outcome.Cancelled != nil || ctx.Err() != nil {
		return acp.StopReasonCancelled, nil
	}
	switch resp.Outcome.Selected.OptionId {
	case "allow", "always":
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err == nil {
			err = os.WriteFile(abs, []byte(content), 0o644)
		}
		if err != nil {
			_ = a.send(ctx, s.ID, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusFailed),
				acp.WithUpdateRawOutput(err.Error())))
			out.say("Write failed.")
			return acp.StopReasonEndTurn, nil
		}
		_ = a.send(ctx, s.ID, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
			acp.WithUpdateContent([]acp.ToolCallContent{diff}),
			acp.WithUpdateRawOutput(fmt.Sprintf("wrote %d bytes", len(content)))))
		out.say("Wrote " + rel + ".")
	default:
		_ = a.send(ctx, s.ID, acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusFailed),
			acp.WithUpdateRawOutput("rejected by the user")))
		out.say("Not written.")
	}
	return acp.StopReasonEndTurn, nil
}
