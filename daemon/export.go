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

// ImportParams are ochat/import's params. Events is the session event log,
// either as one string of JSON Lines or as an array of event objects; Title
// names the new conversation (default: the log's session/title, else
// "Imported conversation").
type ImportParams struct {
	Events json.RawMessage `json:"events"`
	Title  string          `json:"title,omitempty"`
}

func (p *ImportParams) validate() error {
	e := bytes.TrimSpace(p.Events)
	if len(e) == 0 || bytes.Equal(e, []byte("null")) {
		return fieldError("events", "is required")
	}
	if e[0] != '"' && e[0] != '[' {
		return fieldError("events", "must be a string (JSON Lines) or an array of events")
	}
	return nil
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
// how many messages it got, and the log lines that were skipped or imported
// although the log was not valid there (line numbers are 1-based).
type ImportConversationResult struct {
	ConversationID string                 `json:"conversationId"`
	Conversation   history.Conversation   `json:"conversation"`
	Messages       int                    `json:"messages"`
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

// importLog handles ochat/import: the log's messages get new sortable ids
// (in log order) in a new conversation.
func (s *Server) importLog(p ImportParams) (any, error) {
	data, err := p.logBytes()
	if err != nil {
		return nil, err
	}
	res := transcript.Import(data)
	title := p.Title
	if title == "" {
		title = res.Title
	}
	if title == "" {
		title = "Imported conversation"
	}
	now := nowMs()
	conv := history.Conversation{ID: s.newID(), Title: title, Agents: []string{}, CreatedAt: now, UpdatedAt: now}
	if n := len(res.Messages); n > 0 && res.Messages[0].Timestamp > 0 {
		conv.CreatedAt = res.Messages[0].Timestamp
	}
	err = s.store.Update(func(w *history.Writer) error {
		if err := w.CreateConversation(conv); err != nil {
			return err
		}
		for _, m := range res.Messages {
			m.ID = s.newID()
			if m.Role == transcript.RoleAssistant && (m.Status == transcript.StatusStreaming || m.Status == "") {
				m.Status = transcript.StatusInterrupted // the log ends inside this turn
			}
			if m.Timestamp == 0 {
				m.Timestamp = now
			}
			if err := w.PutMessage(conv.ID, m, m.Timestamp); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "import: %v", err)
	}
	conv, _, err = s.snapshot(conv.ID)
	if err != nil {
		return nil, err
	}
	out := ImportConversationResult{ConversationID: conv.ID, Conversation: conv, Messages: len(res.Messages),
		Skipped: res.Skipped, Repaired: res.Repaired}
	if out.Skipped == nil {
		out.Skipped = []transcript.Violation{}
	}
	if out.Repaired == nil {
		out.Repaired = []transcript.Violation{}
	}
	return out, nil
}
