package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// ProtocolVersion is the ochat editor-protocol version reported by
// initialize (docs/protocol.md).
const ProtocolVersion = 1

// Method names of docs/protocol.md.
const (
	MethodConversationsList   = "ochat/conversations/list"
	MethodConversationsCreate = "ochat/conversations/create"
	MethodConversationsGet    = "ochat/conversations/get"
	MethodConversationsRename = "ochat/conversations/rename"
	MethodConversationsDelete = "ochat/conversations/delete"
	MethodHistory             = "ochat/history"
	MethodChatSend            = "ochat/chat/send"
	MethodChatCancel          = "ochat/chat/cancel"
	MethodDaemonStop          = "ochat/daemon/stop"
	MethodSubscribe           = "ochat/subscribe"
	MethodUnsubscribe         = "ochat/unsubscribe"
	MethodPermissionRespond   = "ochat/permission/respond"
	MethodAgentsList          = "ochat/agents/list"
	MethodChatEdit            = "ochat/chat/edit"
	MethodChatRetry           = "ochat/chat/retry"
	MethodAgentSetConfig      = "ochat/agent/setConfig"
	MethodFileChangeApply     = "ochat/fileChange/apply"
	MethodFileChangeRevert    = "ochat/fileChange/revert"

	NotifyEvent              = "ochat/event"
	NotifyPermission         = "ochat/permission"
	NotifyPermissionResolved = "ochat/permissionResolved"
	NotifyAgentState         = "ochat/agentState"
	NotifyAgentProgress      = "ochat/agentProgress"
	NotifyResync             = "ochat/resync"
	NotifyFileChangeStatus   = "ochat/fileChangeStatus"
)

// Error codes of docs/protocol.md ("Errors") beyond the JSON-RPC ones.
const (
	CodeNotFound         jsonrpc2.Code = -32001
	CodeNotInitialized   jsonrpc2.Code = -32002
	CodeConflict         jsonrpc2.Code = -32003
	CodeAgentUnavailable jsonrpc2.Code = -32004
)

// InitializeResult is the initialize answer: the LSP fields plus the
// workspace root and ochat protocol version.
type InitializeResult struct {
	protocol.InitializeResult
	Workspace       string `json:"workspace"`       // absolute workspace root
	ProtocolVersion int    `json:"protocolVersion"` // ProtocolVersion
	// Daemon says which process answers and the environment it resolved.
	Daemon DaemonInfo `json:"daemon"`
}

// DaemonInfo describes the running daemon process (initialize's daemon).
type DaemonInfo struct {
	PID       int   `json:"pid"`
	StartedAt int64 `json:"startedAt"` // Unix ms
	// StoreEnv is the environment the native session stores were resolved
	// from (HOME, CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME,
	// XDG_DATA_HOME, OPENCODE_DATA_DIR, PI_CODING_AGENT_SESSION_DIR,
	// PI_CODING_AGENT_DIR); unset variables are left out. It stays what the
	// daemon started with: `ochatd stop` then any command picks up a change.
	StoreEnv map[string]string `json:"storeEnv"`
}

// ConversationInfo is a stored conversation plus whether a turn is running.
type ConversationInfo struct {
	history.Conversation
	Running bool `json:"running"`
}

// ListConversationsResult answers ochat/conversations/list (newest first).
type ListConversationsResult struct {
	Conversations []ConversationInfo `json:"conversations"`
}

// CreateConversationParams are ochat/conversations/create's params.
type CreateConversationParams struct {
	Title string `json:"title,omitempty"`
}

// ConversationResult answers ochat/conversations/create.
type ConversationResult struct {
	Conversation history.Conversation `json:"conversation"`
}

// ConversationParams name one conversation (get, delete, history, cancel,
// unsubscribe).
type ConversationParams struct {
	ConversationID string `json:"conversationId"`
}

func (p *ConversationParams) validate() error { return required("conversationId", p.ConversationID) }

// RenameParams are ochat/conversations/rename's params.
type RenameParams struct {
	ConversationID string  `json:"conversationId"`
	Title          *string `json:"title"`
}

func (p *RenameParams) validate() error {
	if err := required("conversationId", p.ConversationID); err != nil {
		return err
	}
	if p.Title == nil {
		return fieldError("title", "is required")
	}
	if strings.TrimSpace(*p.Title) == "" {
		return fieldError("title", "is blank: give the conversation a title")
	}
	return nil
}

// GetConversationResult answers ochat/conversations/get. Sync, for a
// conversation linked to a native session, says what syncing it first did
// when that imported or replaced messages, found the session rewound, or
// has a note (docs/protocol.md "Linked conversations"); else it is nil.
type GetConversationResult struct {
	Conversation history.Conversation `json:"conversation"`
	Messages     []transcript.Message `json:"messages"`
	// Queue is the conversation's queued messages, oldest first.
	Queue []history.QueuedMessage `json:"queue"`
	Sync  *NativeSync             `json:"sync,omitempty"`
}

// HistoryResult answers ochat/history with the flat record form.
type HistoryResult struct {
	Records []transcript.Record `json:"records"`
}

// SendParams are ochat/chat/send's params. ConversationID empty creates a
// conversation; Agent empty means the conversation's last agent, else the
// registry's default. Each attachment needs Kind ("file" or "image") and
// Path (absolute, or relative to the workspace); the daemon reads the file,
// stores its content as a blob and fills Name, Path (workspace-relative),
// MimeType, Hash and Size itself (docs/protocol.md "Attachments"; limits
// MaxImageBytes, MaxFileBytes, MaxAttachmentBytes, MaxAttachments). A Hash
// or Size the client sends is ignored.
type SendParams struct {
	ConversationID string                  `json:"conversationId,omitempty"`
	Agent          string                  `json:"agent,omitempty"`
	Text           string                  `json:"text"`
	Attachments    []transcript.Attachment `json:"attachments,omitempty"`
}

func (p *SendParams) validate() error {
	if strings.TrimSpace(p.Text) == "" {
		return fieldError("text", "is required and must not be blank")
	}
	for i, a := range p.Attachments {
		if a.Kind != "file" && a.Kind != "image" {
			return fieldError(fmt.Sprintf("attachments[%d].kind", i), `must be "file" or "image"`)
		}
		if a.Path == "" {
			return fieldError(fmt.Sprintf("attachments[%d].path", i), "is required")
		}
	}
	return nil
}

// SendResult answers ochat/chat/send at once; TurnID equals
// AssistantMessageID. A message sent while a turn runs is queued instead
// (Queued, QueueID; the message ids are then empty until ochat/queue says
// which turn it became).
type SendResult struct {
	ConversationID     string `json:"conversationId"`
	UserMessageID      string `json:"userMessageId,omitempty"`
	AssistantMessageID string `json:"assistantMessageId,omitempty"`
	TurnID             string `json:"turnId,omitempty"`
	Queued             bool   `json:"queued,omitempty"`
	QueueID            string `json:"queueId,omitempty"`
}

// CancelResult answers ochat/chat/cancel.
type CancelResult struct {
	Cancelled bool `json:"cancelled"`
}

// RunningTurn is the running turn in a subscribe answer: every event it has
// emitted so far (unless Truncated), in seq order.
type RunningTurn struct {
	TurnID             string             `json:"turnId"`
	AssistantMessageID string             `json:"assistantMessageId"`
	Agent              string             `json:"agent"`
	Events             []transcript.Event `json:"events"`
	// Truncated is set when the turn emitted more events than the replay
	// buffer holds; Events is then empty, Message holds the partial assistant
	// message as of LastSeq, and live events continue from LastSeq+1.
	Truncated bool                `json:"truncated,omitempty"`
	Message   *transcript.Message `json:"message,omitempty"`
	LastSeq   int64               `json:"lastSeq"`
}

// SubscribeResult answers ochat/subscribe.
type SubscribeResult struct {
	Conversation history.Conversation `json:"conversation"`
	Messages     []transcript.Message `json:"messages"`
	Running      *RunningTurn         `json:"running,omitempty"`
	Permissions  []PermissionParams   `json:"permissions"`
	// AgentStates is the last known state of each agent process live for
	// this conversation (what ochat/agentState reported so far, merged),
	// sorted by agent name.
	AgentStates []AgentStateParams `json:"agentStates"`
	// Queue is the conversation's queued messages, oldest first; later
	// changes come as ochat/queue.
	Queue []history.QueuedMessage `json:"queue"`
}

// EventParams are an ochat/event notification's params.
type EventParams struct {
	ConversationID string           `json:"conversationId"`
	TurnID         string           `json:"turnId"`
	MessageID      string           `json:"messageId"`
	Agent          string           `json:"agent"`
	Event          transcript.Event `json:"event"`
}

// PermissionParams are an ochat/permission notification's params (and the
// entries of SubscribeResult.Permissions).
type PermissionParams struct {
	PermissionID   string                    `json:"permissionId"`
	ConversationID string                    `json:"conversationId"`
	TurnID         string                    `json:"turnId"`
	Agent          string                    `json:"agent"`
	ToolCall       transcript.Segment        `json:"toolCall"`
	FileChanges    []transcript.Segment      `json:"fileChanges"`
	Options        []agents.PermissionOption `json:"options"`
}

// RespondParams are ochat/permission/respond's params: exactly one of
// OptionID or Cancelled.
type RespondParams struct {
	PermissionID string `json:"permissionId"`
	OptionID     string `json:"optionId,omitempty"`
	Cancelled    bool   `json:"cancelled,omitempty"`
}

func (p *RespondParams) validate() error {
	if err := required("permissionId", p.PermissionID); err != nil {
		return err
	}
	if p.OptionID == "" && !p.Cancelled {
		return fieldError("optionId", `is required unless "cancelled" is true`)
	}
	if p.OptionID != "" && p.Cancelled {
		return fieldError("optionId", `must be empty when "cancelled" is true`)
	}
	return nil
}

// PermissionResolvedParams are an ochat/permissionResolved notification's
// params. Outcome is "selected" (OptionID set) or "cancelled".
type PermissionResolvedParams struct {
	PermissionID   string `json:"permissionId"`
	ConversationID string `json:"conversationId"`
	OptionID       string `json:"optionId,omitempty"`
	Outcome        string `json:"outcome"`
}

// AgentsListParams are ochat/agents/list's params; with ConversationID the
// answer also has States.
type AgentsListParams struct {
	ConversationID string `json:"conversationId,omitempty"`
}

// AgentsListResult answers ochat/agents/list.
type AgentsListResult struct {
	Agents []agents.Status `json:"agents"`
	// States (only when the params name a conversation) has one entry per
	// agent that has a session or remembered config in that conversation,
	// sorted by agent.
	States []ConversationAgentState `json:"states,omitempty"`
	// Problems lists settings files (or entries) that were left out because
	// they are broken; the other agents are listed and work.
	Problems []agents.Problem `json:"problems,omitempty"`
}

// ConversationAgentState is one agent's standing in a conversation: whether
// a session is live in the daemon (then State is its merged agent state, as
// ochat/agentState reported it), and the config values accepted through
// ochat/agent/setConfig (configId → value), replayed into new sessions.
type ConversationAgentState struct {
	Agent  string            `json:"agent"`
	Live   bool              `json:"live"`
	Config map[string]string `json:"config,omitempty"`
	agents.State
}

// EditParams are ochat/chat/edit's params: MessageID names a user message,
// Text replaces it; Agent empty means the agent that answered it, else the
// conversation's last.
type EditParams struct {
	ConversationID string `json:"conversationId"`
	MessageID      string `json:"messageId"`
	Text           string `json:"text"`
	Agent          string `json:"agent,omitempty"`
	// RestoreCode also puts the workspace's files back to before the edited
	// turn (its code checkpoint), after a backup (ochat/rewind/undo).
	RestoreCode bool `json:"restoreCode,omitempty"`
}

func (p *EditParams) validate() error {
	if err := required("conversationId", p.ConversationID); err != nil {
		return err
	}
	if err := required("messageId", p.MessageID); err != nil {
		return err
	}
	if strings.TrimSpace(p.Text) == "" {
		return fieldError("text", "is required and must not be blank")
	}
	return nil
}

// RetryParams are ochat/chat/retry's params: MessageID names an assistant
// message or the user message it answers; Agent empty means the agent that
// answered, else the conversation's last.
type RetryParams struct {
	ConversationID string `json:"conversationId"`
	MessageID      string `json:"messageId"`
	Agent          string `json:"agent,omitempty"`
	// RestoreCode: as for EditParams.
	RestoreCode bool `json:"restoreCode,omitempty"`
}

func (p *RetryParams) validate() error {
	if err := required("conversationId", p.ConversationID); err != nil {
		return err
	}
	return required("messageId", p.MessageID)
}

// SetConfigParams are ochat/agent/setConfig's params. Value is the option's
// value id (ACP SessionConfigValueId, a mode id or a model id) as a string,
// or a boolean (sent as "true"/"false") for a boolean option.
type SetConfigParams struct {
	ConversationID string          `json:"conversationId"`
	Agent          string          `json:"agent"`
	ConfigID       string          `json:"configId"`
	Value          json.RawMessage `json:"value"`

	value string // Value decoded by validate
}

func (p *SetConfigParams) validate() error {
	if p.ConversationID == "" {
		return fieldError("conversationId", "is required: config values are kept per conversation (create it first with ochat/conversations/create)")
	}
	for _, f := range [][2]string{{"agent", p.Agent}, {"configId", p.ConfigID}} {
		if err := required(f[0], f[1]); err != nil {
			return err
		}
	}
	var b bool
	raw := bytes.TrimSpace(p.Value)
	switch {
	case len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &p.value) == nil && p.value != "":
	case len(raw) > 0 && (raw[0] == 't' || raw[0] == 'f') && json.Unmarshal(raw, &b) == nil:
		p.value = strconv.FormatBool(b)
	default:
		p.value = ""
		return fieldError("value", "is required and must be a non-empty string or a boolean")
	}
	return nil
}

// SetConfigResult answers ochat/agent/setConfig. Applied is true when a
// live session accepted the value (State is then that session's merged
// state); false when no session is live and the value waits for the next
// one. Config is every value remembered for (conversation, agent).
type SetConfigResult struct {
	Applied bool              `json:"applied"`
	State   agents.State      `json:"state"`
	Config  map[string]string `json:"config"`
}

// AgentStateParams are an ochat/agentState notification's params.
type AgentStateParams struct {
	ConversationID string `json:"conversationId"`
	Agent          string `json:"agent"`
	agents.State
}

// Stages of an ochat/agentProgress notification.
const (
	ProgressStarting = "starting" // the agent process is being spawned and initialized
	ProgressSession  = "session"  // session/load, session/resume or session/new is running
	ProgressReady    = "ready"    // the session is open; the prompt goes out next
	ProgressFailed   = "failed"   // the start failed (the turn fails with the reason)
)

// AgentProgressParams are an ochat/agentProgress notification's params: what
// the daemon is doing to get an agent ready for a turn, sent as it happens
// (Message is one line for a status bar).
type AgentProgressParams struct {
	ConversationID string `json:"conversationId"`
	Agent          string `json:"agent"`
	Stage          string `json:"stage"`
	Message        string `json:"message"`
}

// ResyncParams are an ochat/resync notification's params: the client fell
// behind on ConversationID, was dropped from its live events, and must call
// ochat/subscribe again (and replace what it shows) to continue.
type ResyncParams struct {
	ConversationID string `json:"conversationId"`
	Reason         string `json:"reason"`
}

// validator is implemented by params with required fields.
type validator interface{ validate() error }

// decodeParams decodes raw into v strictly: params must be a JSON object
// (absent or null counts as {}), field types must match, and v.validate()
// must pass. Unknown fields are ignored so that newer clients keep working.
// The error is a -32602 *jsonrpc2.Error naming the field.
func decodeParams(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "invalid params: params must be an object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "invalid params: %s must be %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "invalid params: %v", err)
	}
	if vv, ok := v.(validator); ok {
		if err := vv.validate(); err != nil {
			return err
		}
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "int", "int32", "int64", "uint", "uint32", "uint64", "float64", "float32":
		return "a number"
	}
	return goKind
}

func fieldError(field, why string) error {
	return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "invalid params: %s %s", field, why)
}

func required(field, v string) error {
	if v == "" {
		return fieldError(field, "is required")
	}
	return nil
}

func notFound(format string, args ...any) error {
	return jsonrpc2.Errorf(CodeNotFound, format, args...)
}
