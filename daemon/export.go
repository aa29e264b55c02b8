package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// Export and import (issue 3 §4–5): a conversation or a native session as a
// session event log (transcript.ExportEvents), Markdown
// (transcript.RenderMarkdown) or canonical JSON; an event log read back
// (transcript.Import) into a new conversation. docs/protocol.md "Export and
// import" is the wire contract.

// Method names of docs/protocol.md "Export and import".
const (
	MethodExport = "ochat/export"
	MethodImport = "ochat/import"
)

// Export formats of ExportParams.Format.
const (
	FormatEvents   = "events"   // session event log, JSON Lines
	FormatMarkdown = "markdown" // for people
	FormatJSON     = "json"     // {"id","title","messages":[canonical messages]}
)

// ExportParams are ochat/export's params: exactly one of ConversationID,
// SessionID (native id) or Path (native session file); Format defaults to
// "events".
type ExportParams struct {
	ConversationID string `json:"conversationId,omitempty"`
	SessionID      string `json:"sessionId,omitempty"`
	Path           string `json:"path,omitempty"`
	Format         string `json:"format,omitempty"`
}

func (p *ExportParams) validate() error {
	n := 0
	for _, v := range []string{p.ConversationID, p.SessionID, p.Path} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "invalid params: exactly one of conversationId, sessionId or path is required")
	}
	switch p.Format {
	case "", FormatEvents, FormatMarkdown, FormatJSON:
	default:
		return fieldError("format", fmt.Sprintf(`must be "events", "markdown" or "json", not %q`, p.Format))
	}
	if p.ConversationID == "" {
		ref := SessionRefParams{SessionID: p.SessionID, Path: p.Path}
		return ref.validate()
	}
	return nil
}

// ExportConversationResult answers ochat/export. Content is the whole
// export (JSON Lines for "events"); Events is the number of lines of an
// event log; Degradations list what the event log could not express (plans,
// attachments, file changes, workspace segments, unfinished tools), never
// dropped silently.
type ExportConversationResult struct {
	Format       string                   `json:"format"`
	Title        string                   `json:"title"`
	Content      string                   `json:"content"`
	Events       int64                    `json:"events,omitempty"`
	Degradations []transcript.Degradation `json:"degradations"`
}

// ExportJSON is the "json" export format.
type ExportJSON struct {
	ID       string               `json:"id"`
	Title    string               `json:"title"`
	Agent    string               `json:"agent,omitempty"` // native sessions: the CLI
	Messages []transcript.Message `json:"messages"`
}

// ImportParams are ochat/import's params: exactly one of Events and
// Messages. Events is a session event log, either as one string of JSON
// Lines or as an array of event objects (transcript.Import reads it);
// Messages are canonical messages as `ochat/export` format "json" gives
// them, imported as they are (segments, attachments' metadata, hidden
// flags, agent, status, stop reason, durations), checked by
// validateImportMessages. Title names the new conversation (default: the
// log's session/title, else "Imported conversation").
type ImportParams struct {
	Events   json.RawMessage      `json:"events,omitempty"`
	Messages []transcript.Message `json:"messages,omitempty"`
	Title    string               `json:"title,omitempty"`
}

// Limits of ochat/import's messages (docs/protocol.md "ochat/import").
const (
	// MaxImportMessages is how many messages one import may carry.
	MaxImportMessages = 100_000
	// MaxImportMessageBytes bounds the text of one imported message (its
	// content, segment texts, tool inputs and outputs, diffs), in bytes.
	MaxImportMessageBytes = 32 << 20
)

func (p *ImportParams) validate() error {
	e := bytes.TrimSpace(p.Events)
	hasEvents := len(e) > 0 && !bytes.Equal(e, []byte("null"))
	switch {
	case hasEvents && p.Messages != nil:
		return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "invalid params: give events or messages, not both")
	case p.Messages != nil:
		return validateImportMessages(p.Messages)
	case !hasEvents:
		return fieldError("events", "is required (or messages: canonical messages)")
	}
	if e[0] != '"' && e[0] != '[' {
		return fieldError("events", "must be a string (JSON Lines) or an array of events")
	}
	return nil
}

// Known values an imported message may hold.
var (
	importSegTypes = map[transcript.SegmentType]bool{
		transcript.SegReasoning: true, transcript.SegContent: true, transcript.SegTool: true,
		transcript.SegPlan: true, transcript.SegFileChange: true, transcript.SegWorkspace: true,
	}
	importStatuses = map[transcript.MessageStatus]bool{
		"": true, transcript.StatusStreaming: true, transcript.StatusCompleted: true, transcript.StatusFailed: true,
		transcript.StatusCancelled: true, transcript.StatusInterrupted: true,
	}
	importChangeStatuses = map[string]bool{"": true, "applied": true, "reverted": true, "proposed": true, "rejected": true}
)

// validateImportMessages checks canonical messages for ochat/import: at
// most MaxImportMessages; roles user or assistant; segments only on
// assistant messages, each of a known type (a fileChange with a path and a
// known status); a known message status; attachments of kind file or
// image, at most MaxAttachments a message, with a sha256 hex hash (or none)
// and a size ≥ 0; no negative time; at most MaxImportMessageBytes of text a
// message. The error (-32602) names the first bad field, as
// messages[I].segments[J].type.
func validateImportMessages(msgs []transcript.Message) error {
	if len(msgs) > MaxImportMessages {
		return fieldError("messages", fmt.Sprintf("holds %d messages; at most %d can be imported at once", len(msgs), MaxImportMessages))
	}
	for i, m := range msgs {
		f := func(field string) string { return fmt.Sprintf("messages[%d].%s", i, field) }
		if m.Role != transcript.RoleUser && m.Role != transcript.RoleAssistant {
			return fieldError(f("role"), fmt.Sprintf(`must be "user" or "assistant", not %q`, m.Role))
		}
		if !importStatuses[m.Status] {
			return fieldError(f("status"), fmt.Sprintf("is not a message status: %q", m.Status))
		}
		if m.Timestamp < 0 || m.DurationMs < 0 {
			return fieldError(f("timestamp"), "and durationMs must not be negative")
		}
		if m.Role == transcript.RoleUser && len(m.Segments) > 0 {
			return fieldError(f("segments"), "belong to assistant messages only")
		}
		if len(m.Attachments) > MaxAttachments {
			return fieldError(f("attachments"), fmt.Sprintf("holds %d attachments; at most %d", len(m.Attachments), MaxAttachments))
		}
		n := len(m.Content) + len(m.Error) + len(m.StopReason)
		for j, a := range m.Attachments {
			af := f(fmt.Sprintf("attachments[%d]", j))
			if a.Kind != "file" && a.Kind != "image" {
				return fieldError(af+".kind", fmt.Sprintf(`must be "file" or "image", not %q`, a.Kind))
			}
			if a.Hash != "" && !isSHA256Hex(a.Hash) {
				return fieldError(af+".hash", "must be a sha256 in lower-case hex")
			}
			if a.Size < 0 {
				return fieldError(af+".size", "must not be negative")
			}
			n += len(a.Name) + len(a.Path) + len(a.MimeType)
		}
		for j, sg := range m.Segments {
			sf := f(fmt.Sprintf("segments[%d]", j))
			if !importSegTypes[sg.Type] {
				return fieldError(sf+".type", fmt.Sprintf("is not a segment type: %q", sg.Type))
			}
			if sg.Type == transcript.SegFileChange {
				if sg.Path == "" {
					return fieldError(sf+".path", "is required for a fileChange")
				}
				if !importChangeStatuses[sg.Status] {
					return fieldError(sf+".status", fmt.Sprintf(`must be "applied", "reverted", "proposed" or "rejected", not %q`, sg.Status))
				}
			}
			if sg.DurationMs < 0 {
				return fieldError(sf+".durationMs", "must not be negative")
			}
			n += len(sg.Content) + len(sg.Input) + len(sg.Output) + len(sg.Error) + len(sg.Diff) + len(sg.Path)
			if sg.OldText != nil {
				n += len(*sg.OldText)
			}
			if sg.NewText != nil {
				n += len(*sg.NewText)
			}
			for _, e := range sg.Entries {
				n += len(e.Content)
			}
			for _, s := range sg.Files {
				n += len(s)
			}
			for _, s := range sg.Errors {
				n += len(s)
			}
		}
		if n > MaxImportMessageBytes {
			return fieldError(fmt.Sprintf("messages[%d]", i), fmt.Sprintf("holds %d bytes of text; at most %d", n, MaxImportMessageBytes))
		}
	}
	return nil
}

// isSHA256Hex reports whether h is 64 lower-case hex digits.
func isSHA256Hex(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// logBytes returns the event log as JSON Lines.
func (p *ImportParams) logBytes() ([]byte, error) {
	e := bytes.TrimSpace(p.Events)
	if e[0] == '"' {
		var s string
		if err := json.Unmarshal(e, &s); err != nil {
			return nil, fieldError("events", fmt.Sprintf("is not a valid string: %v", err))
		}
		return []byte(s), nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(e, &items); err != nil {
		return nil, fieldError("events", fmt.Sprintf("is not a valid array: %v", err))
	}
	var b bytes.Buffer
	for _, it := range items {
		var c bytes.Buffer
		if err := json.Compact(&c, it); err != nil {
			c.Reset()
			c.Write(bytes.ReplaceAll(it, []byte("\n"), []byte(" ")))
		}
		b.Write(c.Bytes())
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ImportConversationResult answers ochat/import: the new conversation,
// how many messages it got (Hidden of them are hidden scaffolding, counted
// in Messages), and the log lines that were skipped or imported although
// the log was not valid there (line numbers are 1-based; always empty for
// messages).
type ImportConversationResult struct {
	ConversationID string                 `json:"conversationId"`
	Conversation   history.Conversation   `json:"conversation"`
	Messages       int                    `json:"messages"`
	Hidden         int                    `json:"hidden,omitempty"`
	Skipped        []transcript.Violation `json:"skipped"`
	Repaired       []transcript.Violation `json:"repaired"`
}

// export handles ochat/export.
func (s *Server) export(ctx context.Context, p ExportParams) (any, error) {
	var id, title, agent string
	var msgs []transcript.Message
	if p.ConversationID != "" {
		res, err := s.getConversation(p.ConversationID)
		if err != nil {
			return nil, err
		}
		g := res.(GetConversationResult)
		id, title, msgs = g.Conversation.ID, g.Conversation.Title, g.Messages
	} else {
		tr, err := s.readNative(ctx, SessionRefParams{SessionID: p.SessionID, Path: p.Path})
		if err != nil {
			return nil, err
		}
		id, title, agent, msgs = tr.ID, tr.Title, tr.Agent, tr.Messages
	}
	if msgs == nil {
		msgs = []transcript.Message{}
	}
	out := ExportConversationResult{Format: p.Format, Title: title, Degradations: []transcript.Degradation{}}
	if out.Format == "" {
		out.Format = FormatEvents
	}
	switch out.Format {
	case FormatEvents:
		var b strings.Builder
		r, err := transcript.ExportEvents(&b, transcript.ConversationMeta{ID: id, Title: title}, msgs)
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", id, err)
		}
		out.Content, out.Events = b.String(), r.Events
		if r.Degradations != nil {
			out.Degradations = r.Degradations
		}
	case FormatMarkdown:
		out.Content = transcript.RenderMarkdown(title, msgs)
	case FormatJSON:
		b, err := json.MarshalIndent(ExportJSON{ID: id, Title: title, Agent: agent, Messages: msgs}, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", id, err)
		}
		out.Content = string(b) + "\n"
	}
	return out, nil
}

// importConversation handles ochat/import: the log's (or the params')
// messages get new sortable ids, in order, in a new conversation.
func (s *Server) importConversation(p ImportParams) (any, error) {
	if p.Messages != nil {
		return s.storeImport(p.Title, "", p.Messages, false)
	}
	data, err := p.logBytes()
	if err != nil {
		return nil, err
	}
	res := transcript.Import(data)
	out, err := s.storeImport(p.Title, res.Title, res.Messages, true)
	if err != nil {
		return nil, err
	}
	out.Skipped, out.Repaired = res.Skipped, res.Repaired
	if out.Skipped == nil {
		out.Skipped = []transcript.Violation{}
	}
	if out.Repaired == nil {
		out.Repaired = []transcript.Violation{}
	}
	return out, nil
}

// storeImport creates a conversation titled title (else fallback, else
// "Imported conversation") holding msgs with new ids. An assistant message
// still streaming becomes interrupted (no turn runs it), as does one with
// no status when openTurns (a log that ends inside the turn). Everything
// else is kept as is; an attachment keeps its metadata whether or not the
// store holds its blob.
func (s *Server) storeImport(title, fallback string, msgs []transcript.Message, openTurns bool) (ImportConversationResult, error) {
	if title == "" {
		title = fallback
	}
	if title == "" {
		title = "Imported conversation"
	}
	now := nowMs()
	conv := history.Conversation{ID: s.newID(), Title: title, Agents: []string{}, CreatedAt: now, UpdatedAt: now}
	if n := len(msgs); n > 0 && msgs[0].Timestamp > 0 {
		conv.CreatedAt = msgs[0].Timestamp
	}
	hidden := 0
	err := s.store.Update(func(w *history.Writer) error {
		if err := w.CreateConversation(conv); err != nil {
			return err
		}
		for _, m := range msgs {
			m.ID = s.newID()
			if m.Role == transcript.RoleAssistant && (m.Status == transcript.StatusStreaming || (openTurns && m.Status == "")) {
				m.Status = transcript.StatusInterrupted
			}
			if m.Timestamp == 0 {
				m.Timestamp = now
			}
			if m.Hidden {
				hidden++
			}
			if err := w.PutMessage(conv.ID, m, m.Timestamp); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ImportConversationResult{}, jsonrpc2.Errorf(jsonrpc2.InternalError, "import: %v", err)
	}
	conv, _, err = s.snapshot(conv.ID)
	if err != nil {
		return ImportConversationResult{}, err
	}
	return ImportConversationResult{ConversationID: conv.ID, Conversation: conv, Messages: len(msgs), Hidden: hidden,
		Skipped: []transcript.Violation{}, Repaired: []transcript.Violation{}}, nil
}
