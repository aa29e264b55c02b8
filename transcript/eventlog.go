package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// Session event log.
//
// A conversation exported as one JSON object per line (JSON Lines), the
// portable form of issue 3 §4 (seed 000, "Session Event Adapter"). Every
// line is a LogEvent with a continuous Seq from 1. The event types:
//
//	session/title      {title}                                   first line when the conversation has a title
//	turn/start         {turnId}                                  opens a turn (before its user message)
//	user/message       {messageId, text, hidden?, surfaceOp}     what the user typed
//	step/start         {turnId}                                  one model step: text, then tool calls
//	assistant/message  {messageId, agent, text | reasoning, surfaceOp}
//	tool/call          {messageId, toolCallId, name, kind?, input?}
//	tool/result        {messageId, toolCallId, status, output?, error?, isError?, sourceEventSeqs:[seq of the call]}
//	step/end           {turnId}
//	turn/end           {turnId, messageId?, agent?, status?, stopReason?, error?, durationMs?}
//
// Discipline (checked by Validate): seq continuous; turn/start … turn/end
// do not nest and hold every message, step and tool event; steps do not
// nest; every tool/call gets exactly one tool/result later in the same turn,
// whose sourceEventSeqs names the call. Export writes the results of a step
// after its calls, before step/end, as model APIs expect a resumed thread.
const (
	LogSessionTitle     = "session/title"
	LogTurnStart        = "turn/start"
	LogTurnEnd          = "turn/end"
	LogUserMessage      = "user/message"
	LogAssistantMessage = "assistant/message"
	LogToolCall         = "tool/call"
	LogToolResult       = "tool/result"
	LogStepStart        = "step/start"
	LogStepEnd          = "step/end"
)

// LogEvent is one line of the session event log. Which fields are set
// depends on Type (see the table above); times are Unix ms.
type LogEvent struct {
	Seq       int64  `json:"seq"`
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`
	TurnID    string `json:"turnId,omitempty"`
	MessageID string `json:"messageId,omitempty"`
	SurfaceOp string `json:"surfaceOp,omitempty"` // "append" on user/message and assistant/message
	Agent     string `json:"agent,omitempty"`
	Title     string `json:"title,omitempty"`
	Text      string `json:"text,omitempty"`      // user/message; assistant/message answer text
	Reasoning string `json:"reasoning,omitempty"` // assistant/message reasoning text
	Hidden    bool   `json:"hidden,omitempty"`

	ToolCallID      string          `json:"toolCallId,omitempty"`
	Name            string          `json:"name,omitempty"`
	Kind            string          `json:"kind,omitempty"` // ACP ToolKind
	Input           json.RawMessage `json:"input,omitempty"`
	Status          string          `json:"status,omitempty"` // tool/result: ToolStatus; turn/end: MessageStatus
	Output          string          `json:"output,omitempty"`
	Error           string          `json:"error,omitempty"`
	IsError         bool            `json:"isError,omitempty"`
	SourceEventSeqs []int64         `json:"sourceEventSeqs,omitempty"`

	StopReason string `json:"stopReason,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
}

// ConversationMeta is what Export needs of a conversation besides its
// messages.
type ConversationMeta struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
}

// Degradation is something of the transcript the event log cannot express
// and Export therefore left out or changed.
type Degradation struct {
	MessageID string `json:"messageId"`
	// Kind: "plan", "attachment", "fileChange", "workspace" (dropped) or
	// "unfinishedTool" (given a synthetic error result).
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// ExportResult reports an export.
type ExportResult struct {
	Events       int64         `json:"events"` // lines written
	Degradations []Degradation `json:"degradations,omitempty"`
}

// syntheticToolError is the error of the result Export invents for a tool
// call that never finished.
const syntheticToolError = "tool call did not finish (synthetic result added on export)"

// ExportEvents writes msgs as a session event log to w, one event per line.
// It writes each event as soon as it is built and holds at most one step's
// tool calls, so memory is proportional to one turn. Plans, attachments,
// file changes and workspace segments cannot be expressed and are reported
// as Degradations; a tool still pending or running gets a synthetic error
// result, also reported. The error is w's, wrapped.
func ExportEvents(w io.Writer, conv ConversationMeta, msgs []Message) (ExportResult, error) {
	x := exporter{w: w}
	if conv.Title != "" {
		ts := int64(0)
		if len(msgs) > 0 {
			ts = msgs[0].Timestamp
		}
		x.emit(&LogEvent{Type: LogSessionTitle, Timestamp: ts, Title: conv.Title})
	}
	turnOpen := false // a turn opened by a user message awaits its answer
	turnID := ""
	for i := range msgs {
		m := &msgs[i]
		if m.Role == RoleUser {
			if turnOpen {
				x.emit(&LogEvent{Type: LogTurnEnd, Timestamp: m.Timestamp, TurnID: turnID})
			}
			turnID, turnOpen = m.ID, true
			x.emit(&LogEvent{Type: LogTurnStart, Timestamp: m.Timestamp, TurnID: turnID})
			x.emit(&LogEvent{Type: LogUserMessage, Timestamp: m.Timestamp, TurnID: turnID, MessageID: m.ID,
				SurfaceOp: "append", Text: m.Content, Hidden: m.Hidden})
			for _, a := range m.Attachments {
				x.degrade(m.ID, "attachment", fmt.Sprintf("%s %s (sha256 %s, %d bytes) not in the log", a.Kind, firstNonEmpty(a.Path, a.Name), a.Hash, a.Size))
			}
			continue
		}
		if !turnOpen {
			turnID = m.ID
			x.emit(&LogEvent{Type: LogTurnStart, Timestamp: m.Timestamp, TurnID: turnID})
		}
		x.assistant(turnID, m)
		x.emit(&LogEvent{Type: LogTurnEnd, Timestamp: m.Timestamp + m.DurationMs, TurnID: turnID, MessageID: m.ID, Agent: m.Agent,
			Status: string(m.Status), StopReason: m.StopReason, Error: m.Error, DurationMs: m.DurationMs})
		turnOpen = false
	}
	if turnOpen {
		x.emit(&LogEvent{Type: LogTurnEnd, TurnID: turnID})
	}
	return ExportResult{Events: x.seq, Degradations: x.deg}, x.err
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

type exporter struct {
	w     io.Writer
	buf   []byte
	seq   int64
	err   error
	deg   []Degradation
	calls []pendingCall // tool calls of the open step, awaiting their results
}

type pendingCall struct {
	seq int64
	seg *Segment
}

func (x *exporter) degrade(msgID, kind, detail string) {
	x.deg = append(x.deg, Degradation{MessageID: msgID, Kind: kind, Detail: detail})
}

// emit numbers e and writes it as one line.
func (x *exporter) emit(e *LogEvent) {
	x.seq++
	e.Seq = x.seq
	if x.err != nil {
		return
	}
	x.buf = appendLogEvent(x.buf[:0], e)
	x.buf = append(x.buf, '\n')
	if _, err := x.w.Write(x.buf); err != nil {
		x.err = fmt.Errorf("export event log: write event %d: %w", e.Seq, err)
	}
}

// assistant emits the steps of one assistant message.
func (x *exporter) assistant(turnID string, m *Message) {
	inStep, sawTool := false, false
	ts := m.Timestamp
	for i := range m.Segments {
		s := &m.Segments[i]
		switch s.Type {
		case SegContent, SegReasoning, SegTool:
		case SegPlan:
			x.degrade(m.ID, "plan", fmt.Sprintf("plan with %d entries not in the log", len(s.Entries)))
			continue
		case SegFileChange:
			where := "no tool call"
			if s.ToolCallID != "" {
				where = "only its tool call " + s.ToolCallID + " is in the log"
			}
			x.degrade(m.ID, "fileChange", fmt.Sprintf("change to %s (+%d -%d) not in the log; %s", s.Path, deref(s.Additions), deref(s.Deletions), where))
			continue
		case SegWorkspace:
			x.degrade(m.ID, "workspace", fmt.Sprintf("workspace block (%d files, %d errors) not in the log", len(s.Files), len(s.Errors)))
			continue
		default:
			x.degrade(m.ID, string(s.Type), "segment of unknown type not in the log")
			continue
		}
		if s.Type != SegTool && sawTool {
			x.endStep(turnID, m, ts)
			inStep, sawTool = false, false
		}
		if !inStep {
			x.emit(&LogEvent{Type: LogStepStart, Timestamp: ts, TurnID: turnID})
			inStep = true
		}
		switch s.Type {
		case SegContent:
			x.emit(&LogEvent{Type: LogAssistantMessage, Timestamp: ts, TurnID: turnID, MessageID: m.ID, SurfaceOp: "append", Agent: m.Agent, Text: s.Content})
		case SegReasoning:
			x.emit(&LogEvent{Type: LogAssistantMessage, Timestamp: ts, TurnID: turnID, MessageID: m.ID, SurfaceOp: "append", Agent: m.Agent, Reasoning: s.Content})
		case SegTool:
			e := &LogEvent{Type: LogToolCall, Timestamp: ts, TurnID: turnID, MessageID: m.ID, ToolCallID: s.ID, Name: s.Name, Kind: s.ProviderKind}
			if len(s.Input) > 0 {
				e.Input = s.Input
			}
			x.emit(e)
			x.calls = append(x.calls, pendingCall{seq: e.Seq, seg: s})
			sawTool = true
		}
	}
	if inStep {
		x.endStep(turnID, m, ts)
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// endStep writes the results of the open step's calls and step/end.
func (x *exporter) endStep(turnID string, m *Message, ts int64) {
	for _, c := range x.calls {
		s := c.seg
		e := &LogEvent{Type: LogToolResult, Timestamp: ts + s.DurationMs, TurnID: turnID, MessageID: m.ID, ToolCallID: s.ID,
			Status: s.Status, Output: s.Output, Error: s.Error, SourceEventSeqs: []int64{c.seq}, DurationMs: s.DurationMs}
		switch ToolStatus(s.Status) {
		case ToolCompleted:
		case ToolError:
			e.IsError = true
		default:
			x.degrade(m.ID, "unfinishedTool", fmt.Sprintf("tool call %s (%s) was %q: synthetic error result added", s.ID, s.Name, firstNonEmpty(s.Status, "without status")))
			e.IsError = true
			e.Status = string(ToolError)
			if e.Error == "" {
				e.Error = syntheticToolError
			}
		}
		x.emit(e)
	}
	x.calls = x.calls[:0]
	x.emit(&LogEvent{Type: LogStepEnd, Timestamp: ts, TurnID: turnID})
}

// appendLogEvent appends the JSON of e (fields in LogEvent order, empty
// ones omitted, as encoding/json would write them) to buf. Hand-written
// because export is on a 10,000-turn budget.
func appendLogEvent(buf []byte, e *LogEvent) []byte {
	buf = append(buf, `{"seq":`...)
	buf = strconv.AppendInt(buf, e.Seq, 10)
	buf = appendStrField(buf, "type", e.Type)
	buf = appendIntField(buf, "timestamp", e.Timestamp)
	buf = appendStrField(buf, "turnId", e.TurnID)
	buf = appendStrField(buf, "messageId", e.MessageID)
	buf = appendStrField(buf, "surfaceOp", e.SurfaceOp)
	buf = appendStrField(buf, "agent", e.Agent)
	buf = appendStrField(buf, "title", e.Title)
	buf = appendStrField(buf, "text", e.Text)
	buf = appendStrField(buf, "reasoning", e.Reasoning)
	if e.Hidden {
		buf = append(buf, `,"hidden":true`...)
	}
	buf = appendStrField(buf, "toolCallId", e.ToolCallID)
	buf = appendStrField(buf, "name", e.Name)
	buf = appendStrField(buf, "kind", e.Kind)
	if len(e.Input) > 0 {
		buf = append(buf, `,"input":`...)
		if json.Valid(e.Input) {
			n := len(buf)
			buf = append(buf, e.Input...)
			// Keep the line a line: compact any raw newlines away.
			if bytes.IndexByte(buf[n:], '\n') >= 0 {
				var c bytes.Buffer
				_ = json.Compact(&c, e.Input) // valid, checked above
				buf = append(buf[:n], c.Bytes()...)
			}
		} else {
			buf = appendJSONString(buf, string(e.Input)) // not JSON: keep it as a string
		}
	}
	buf = appendStrField(buf, "status", e.Status)
	buf = appendStrField(buf, "output", e.Output)
	buf = appendStrField(buf, "error", e.Error)
	if e.IsError {
		buf = append(buf, `,"isError":true`...)
	}
	if len(e.SourceEventSeqs) > 0 {
		buf = append(buf, `,"sourceEventSeqs":[`...)
		for i, s := range e.SourceEventSeqs {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, s, 10)
		}
		buf = append(buf, ']')
	}
	buf = appendStrField(buf, "stopReason", e.StopReason)
	buf = appendIntField(buf, "durationMs", e.DurationMs)
	return append(buf, '}')
}

func appendStrField(buf []byte, name, v string) []byte {
	if v == "" {
		return buf
	}
	buf = append(buf, ',', '"')
	buf = append(buf, name...)
	buf = append(buf, '"', ':')
	return appendJSONString(buf, v)
}

func appendIntField(buf []byte, name string, v int64) []byte {
	if v == 0 {
		return buf
	}
	buf = append(buf, ',', '"')
	buf = append(buf, name...)
	buf = append(buf, '"', ':')
	return strconv.AppendInt(buf, v, 10)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and
// U+2029 escaped (as encoding/json does).
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
