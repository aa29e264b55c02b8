package agents

import (
	"context"
	"encoding/json"

	acp "github.com/coder/acp-go-sdk"

	"github.com/ochat-dev/ochat/transcript"
)

// Handler receives what an agent sends. Calls for one session arrive in
// order; Event and State are called from the connection's reader and must not
// block for long (a slow handler slows the agent down through its stdout
// pipe, nothing is dropped) and must not call Prompt. Calls may name a session
// before NewSession has returned it (agents send updates before answering
// session/new; SessionInfo.State includes them) or a session this Conn never
// opened (routed by the agent's session id, never by "busy").
type Handler interface {
	// Event delivers one live event of the prompt turn running in sessionID:
	// content.delta, reasoning.delta, activity.upsert (whole merged tool /
	// fileChange segment), plan.updated. Never turn.completed/failed.
	Event(sessionID string, ev transcript.Event)
	// State delivers agent state (commands, modes, config options, usage,
	// title); nil fields are unchanged.
	State(sessionID string, st State)
	// RequestPermission blocks until the user answers or ctx ends (then
	// return Cancelled: true).
	RequestPermission(ctx context.Context, sessionID string, req PermissionRequest) (PermissionOutcome, error)
}

// State is agent state of one session, as the agent advertised it: ACP
// available_commands_update, modes (session/new result and
// current_mode_update), the legacy models object, configOptions (result and
// config_option_update), usage_update and session_info_update. In a State
// passed to Handler.State, nil (empty) fields mean "unchanged".
type State struct {
	Commands      []acp.AvailableCommand    `json:"commands,omitempty"`
	Modes         *acp.SessionModeState     `json:"modes,omitempty"`
	Models        json.RawMessage           `json:"models,omitempty"` // legacy/unstable models state, verbatim
	ConfigOptions []acp.SessionConfigOption `json:"configOptions,omitempty"`
	Usage         *Usage                    `json:"usage,omitempty"`
	Title         string                    `json:"title,omitempty"`
}

// Merge overlays the fields set in o (non-nil, non-empty) onto s: how
// partial state updates accumulate.
func (s *State) Merge(o State) {
	if o.Commands != nil {
		s.Commands = o.Commands
	}
	if o.Modes != nil {
		s.Modes = o.Modes
	}
	if o.Models != nil {
		s.Models = o.Models
	}
	if o.ConfigOptions != nil {
		s.ConfigOptions = o.ConfigOptions
	}
	if o.Usage != nil {
		s.Usage = o.Usage
	}
	if o.Title != "" {
		s.Title = o.Title
	}
}

// Usage is the context window use of a session (ACP usage_update): Used and
// Size in tokens, Cost in the currency the agent reported (USD for every
// agent seen so far), nil when not reported.
type Usage struct {
	Used int64    `json:"used"`
	Size int64    `json:"size"`
	Cost *float64 `json:"cost,omitempty"`
}

// PermissionRequest is one session/request_permission, ready for the user.
type PermissionRequest struct {
	ToolCall    transcript.Segment   `json:"toolCall"`    // tool segment merged with what is known of that toolCallId
	FileChanges []transcript.Segment `json:"fileChanges"` // one fileChange per diff in the request
	Options     []PermissionOption   `json:"options"`     // all of the agent's options, verbatim
}

// PermissionOption is one of the agent's answers to a permission request
// (ACP PermissionOption), verbatim.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once | allow_always | reject_once | reject_always (verbatim)
}

// PermissionOutcome is the user's answer: the chosen OptionID, or Cancelled.
type PermissionOutcome struct {
	OptionID  string
	Cancelled bool
}

// nopHandler drops events and cancels permission requests; used when
// Options.Handler is nil.
type nopHandler struct{}

func (nopHandler) Event(string, transcript.Event) {}
func (nopHandler) State(string, State)            {}
func (nopHandler) RequestPermission(context.Context, string, PermissionRequest) (PermissionOutcome, error) {
	return PermissionOutcome{Cancelled: true}, nil
}
