// Package transcript owns ochat's canonical, agent-neutral model of a
// conversation: messages, segments, live events, history records and the
// session event log, plus pure functions over them.
//
// It never does I/O, never starts goroutines and never reads a clock: time
// comes in as Unix milliseconds. Everything above agents/ and history/
// (the daemon, both editor plugins, export/import) speaks these types.
//
// JSON is camelCase; times are Unix ms (int64); optional fields are omitted
// when empty. docs/protocol.md shows every shape on the wire.
package transcript

import "encoding/json"

// Role is who wrote a message.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// MessageStatus is the lifecycle state of an assistant message.
type MessageStatus string

// Message statuses. A user message has no status.
const (
	StatusStreaming   MessageStatus = "streaming"   // turn in flight
	StatusCompleted   MessageStatus = "completed"   // turn ended with a stop reason
	StatusFailed      MessageStatus = "failed"      // turn.failed: agent error or exit
	StatusCancelled   MessageStatus = "cancelled"   // stop reason "cancelled"
	StatusInterrupted MessageStatus = "interrupted" // daemon died mid-turn; found on restart
)

// SegmentType names the kind of an assistant segment.
type SegmentType string

// Segment types (DESIGN.md "The canonical transcript").
const (
	SegReasoning  SegmentType = "reasoning"
	SegContent    SegmentType = "content"
	SegTool       SegmentType = "tool"
	SegPlan       SegmentType = "plan"
	SegFileChange SegmentType = "fileChange"
	SegWorkspace  SegmentType = "workspace"
)

// ToolStatus is the canonical state of a tool call. ACP's pending,
// in_progress, completed and failed map onto pending, running, completed and
// error.
type ToolStatus string

// Tool statuses.
const (
	ToolPending   ToolStatus = "pending"
	ToolRunning   ToolStatus = "running"
	ToolCompleted ToolStatus = "completed"
	ToolError     ToolStatus = "error"
)

// Message is one user message or one assistant turn.
//
// A user message carries Content (and optionally Attachments, Hidden); an
// assistant message carries Segments, the Agent that answered, Status and,
// once finished, DurationMs and StopReason or Error.
type Message struct {
	ID        string `json:"id"`
	Timestamp int64  `json:"timestamp"` // Unix ms
	Role      Role   `json:"role"`

	// User side.
	Content     string       `json:"content,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// Hidden marks scaffolding that is kept but not shown (for example a
	// handoff-only prompt).
	Hidden bool `json:"hidden,omitempty"`

	// Assistant side.
	Agent      string        `json:"agent,omitempty"`
	Segments   []Segment     `json:"segments,omitempty"`
	Status     MessageStatus `json:"status,omitempty"`
	DurationMs int64         `json:"durationMs,omitempty"`
	StopReason string        `json:"stopReason,omitempty"` // ACP stop reason, verbatim
	Error      string        `json:"error,omitempty"`      // turn.failed message
	// Checkpoints are the code checkpoints taken before and after the turn
	// (nil: none, e.g. a turn imported from a terminal session).
	Checkpoints *TurnCheckpoints `json:"checkpoints,omitempty"`
}

// TurnCheckpoints names a turn's code checkpoints (ids in the workspace's
// shadow repository). Note says why one is missing.
type TurnCheckpoints struct {
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Attachment is a file or image referenced by a user message. Content is
// never inline: Hash addresses a blob kept by the store (sha256 hex).
type Attachment struct {
	Kind     string `json:"kind"` // "file" | "image"
	Name     string `json:"name,omitempty"`
	Path     string `json:"path,omitempty"` // workspace file, if any
	MimeType string `json:"mimeType,omitempty"`
	Hash     string `json:"hash,omitempty"` // sha256 hex of the blob
	Size     int64  `json:"size,omitempty"` // bytes
}

// Segment is one piece of an assistant turn. It is a tagged union on Type;
// only the fields of that type are set:
//
//	reasoning, content: Content
//	tool:               ID, Name, Status, ProviderKind, Input, Output, Error, DurationMs
//	plan:               Entries
//	fileChange:         Path, Additions, Deletions, Status, Diff, OldText, NewText, ToolCallID
//	workspace:          Files, Errors
type Segment struct {
	Type SegmentType `json:"type"`

	Content string `json:"content,omitempty"`

	// tool
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Status       string          `json:"status,omitempty"`       // ToolStatus for tools; applied|reverted|proposed|rejected (the write did not happen: tool error, permission rejected or cancelled) for fileChange
	ProviderKind string          `json:"providerKind,omitempty"` // ACP ToolKind verbatim (read, edit, execute, …)
	Input        json.RawMessage `json:"input,omitempty"`        // raw tool input as the agent sent it
	Output       string          `json:"output,omitempty"`
	Error        string          `json:"error,omitempty"`
	DurationMs   int64           `json:"durationMs,omitempty"`

	// plan
	Entries []PlanEntry `json:"entries,omitempty"`

	// fileChange
	Path       string  `json:"path,omitempty"`
	Additions  *int    `json:"additions,omitempty"`
	Deletions  *int    `json:"deletions,omitempty"`
	Diff       string  `json:"diff,omitempty"`    // unified diff, if known
	OldText    *string `json:"oldText,omitempty"` // nil: file did not exist / unknown
	NewText    *string `json:"newText,omitempty"`
	ToolCallID string  `json:"toolCallId,omitempty"`
	// From the turn's checkpoints (docs/checkpoints.md): Change is added |
	// modified | deleted | renamed | skipped; OldPath the path before a
	// rename; Origin who made it: "agent" (a tool reported it), "shell" (an
	// execute tool ran; ToolCallID set when exactly one did), "user"
	// (nothing of the agent's could have); Binary, ModeChange ("100644 →
	// 100755") and Note (why a path was not recorded) as seen on disk.
	Change     string `json:"change,omitempty"`
	OldPath    string `json:"oldPath,omitempty"`
	Origin     string `json:"origin,omitempty"`
	Binary     bool   `json:"binary,omitempty"`
	ModeChange string `json:"modeChange,omitempty"`
	Note       string `json:"note,omitempty"`

	// workspace
	Files  []string `json:"files,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

// PlanEntry is one line of an agent's plan (ACP PlanEntry).
type PlanEntry struct {
	Content  string `json:"content"`
	Status   string `json:"status"`             // pending | in_progress | completed
	Priority string `json:"priority,omitempty"` // high | medium | low
}

// EventType names a live event.
type EventType string

// Live event types (daemon → editor, ordered, numbered per turn).
const (
	EvContentDelta   EventType = "content.delta"
	EvReasoningDelta EventType = "reasoning.delta"
	EvActivityUpsert EventType = "activity.upsert"
	EvPlanUpdated    EventType = "plan.updated"
	EvTurnCompleted  EventType = "turn.completed"
	EvTurnFailed     EventType = "turn.failed"
)

// Event is one live event of a prompt turn.
//
//	content.delta, reasoning.delta: Delta
//	activity.upsert:                Segment (a whole tool or fileChange segment; upserted by id / path)
//	plan.updated:                   Entries (the whole plan; replaces the previous one)
//	turn.completed:                 StopReason
//	turn.failed:                    Message
//
// Seq numbers events within one turn from 1; the daemon assigns it.
type Event struct {
	Type       EventType   `json:"type"`
	Seq        int64       `json:"seq,omitempty"`
	Timestamp  int64       `json:"timestamp,omitempty"` // Unix ms
	Delta      string      `json:"delta,omitempty"`
	Segment    *Segment    `json:"segment,omitempty"`
	Entries    []PlanEntry `json:"entries,omitempty"`
	StopReason string      `json:"stopReason,omitempty"`
	Message    string      `json:"message,omitempty"`
}

// Terminal reports whether the event ends its turn.
func (e Event) Terminal() bool {
	return e.Type == EvTurnCompleted || e.Type == EvTurnFailed
}
