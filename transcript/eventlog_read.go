package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Violation is one problem found in a session event log. Line is 1-based.
type Violation struct {
	Line    int    `json:"line"`
	Message string `json:"message"`
}

func (v Violation) String() string { return fmt.Sprintf("line %d: %s", v.Line, v.Message) }

var knownLogTypes = map[string]bool{
	LogSessionTitle: true, LogTurnStart: true, LogTurnEnd: true, LogUserMessage: true, LogAssistantMessage: true,
	LogToolCall: true, LogToolResult: true, LogStepStart: true, LogStepEnd: true,
}

// logLine is one non-empty line of a log, parsed.
type logLine struct {
	n   int // 1-based line number
	ev  LogEvent
	err string // why the line could not be used, if it cannot
}

// eachLogLine calls f for every line of data but a final empty one. Lines
// end with "\n" ("\r\n" accepted). A line that is not one JSON object, or has
// no positive seq or no type, gets err set.
func eachLogLine(data []byte, f func(l *logLine)) {
	n := 0
	for len(data) > 0 {
		n++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		l := logLine{n: n}
		switch {
		case len(bytes.TrimSpace(line)) == 0:
			l.err = "empty line"
		default:
			if err := json.Unmarshal(line, &l.ev); err != nil {
				l.err = fmt.Sprintf("broken JSON: %v", err)
			} else if l.ev.Seq <= 0 {
				l.err = "missing or non-positive seq"
			} else if l.ev.Type == "" {
				l.err = "missing type"
			}
		}
		f(&l)
	}
}

// openCall is a tool/call awaiting its tool/result.
type openCall struct {
	seq  int64
	line int
	done bool
}

// Validate checks a session event log and returns every violation, in line
// order (nil when the log is valid): broken JSON, missing seq or type, seq
// gaps, duplicates and reordering, unknown event types, events outside a
// turn, nested or unclosed turns and steps, tool/calls without a
// tool/result in their turn, duplicate calls, orphan or second results,
// and sourceEventSeqs that do not name the call.
func Validate(data []byte) []Violation {
	var out []Violation
	bad := func(line int, format string, a ...any) {
		out = append(out, Violation{Line: line, Message: fmt.Sprintf(format, a...)})
	}
	var (
		prev      int64 // highest seq seen
		seqLine   = map[int64]int{}
		turnLine  int // line of the open turn/start, 0 if none
		turnID    string
		stepLine  int
		calls     = map[string]*openCall{}
		callOrder []string
		lastLine  int
	)
	// Tool call ids are scoped to their turn (agents reuse them across
	// turns): closeCalls reports the open ones and forgets them all.
	closeCalls := func(why string) {
		for _, id := range callOrder {
			if c := calls[id]; !c.done {
				bad(c.line, "tool/call %q has no tool/result %s", id, why)
			}
		}
		clear(calls)
		callOrder = callOrder[:0]
	}
	eachLogLine(data, func(l *logLine) {
		lastLine = l.n
		if l.err != "" {
			bad(l.n, "%s", l.err)
			if l.err != "empty line" {
				prev++ // assume the broken line held the next seq: no gap reported after it
			}
			return
		}
		e := &l.ev
		switch first, dup := seqLine[e.Seq]; {
		case dup:
			bad(l.n, "duplicate seq %d (first on line %d)", e.Seq, first)
		case e.Seq < prev:
			bad(l.n, "seq %d out of order after %d", e.Seq, prev)
		case e.Seq > prev+1:
			bad(l.n, "seq gap: %d follows %d", e.Seq, prev)
		}
		if _, dup := seqLine[e.Seq]; !dup {
			seqLine[e.Seq] = l.n
		}
		prev = max(prev, e.Seq)
		if !knownLogTypes[e.Type] {
			bad(l.n, "unknown event type %q", e.Type)
			return
		}
		if e.Type != LogSessionTitle && e.Type != LogTurnStart && turnLine == 0 {
			bad(l.n, "%s outside a turn", e.Type)
		}
		if turnLine != 0 && e.TurnID != "" && turnID != "" && e.TurnID != turnID && e.Type != LogTurnStart {
			bad(l.n, "%s names turn %q inside turn %q", e.Type, e.TurnID, turnID)
		}
		switch e.Type {
		case LogTurnStart:
			if turnLine != 0 {
				bad(l.n, "turn/start while the turn of line %d is open", turnLine)
			}
			closeCalls("before the next turn/start")
			turnLine, turnID, stepLine = l.n, e.TurnID, 0
		case LogTurnEnd:
			if stepLine != 0 {
				bad(l.n, "turn/end while the step of line %d is open", stepLine)
			}
			closeCalls(fmt.Sprintf("before turn/end on line %d", l.n))
			turnLine, turnID, stepLine = 0, "", 0
		case LogStepStart:
			if stepLine != 0 {
				bad(l.n, "step/start while the step of line %d is open", stepLine)
			}
			stepLine = l.n
		case LogStepEnd:
			if stepLine == 0 {
				bad(l.n, "step/end without step/start")
			}
			stepLine = 0
		case LogToolCall:
			if e.ToolCallID == "" {
				bad(l.n, "tool/call without toolCallId")
				return
			}
			if c := calls[e.ToolCallID]; c != nil {
				bad(l.n, "duplicate tool/call %q (first on line %d)", e.ToolCallID, c.line)
				return
			}
			calls[e.ToolCallID] = &openCall{seq: e.Seq, line: l.n}
			callOrder = append(callOrder, e.ToolCallID)
		case LogToolResult:
			if e.ToolCallID == "" {
				bad(l.n, "tool/result without toolCallId")
				return
			}
			c := calls[e.ToolCallID]
			switch {
			case c == nil:
				bad(l.n, "orphan tool/result: no tool/call %q before it", e.ToolCallID)
				return
			case c.done:
				bad(l.n, "second tool/result for tool/call %q (line %d)", e.ToolCallID, c.line)
				return
			}
			c.done = true
			if !slices.Contains(e.SourceEventSeqs, c.seq) {
				bad(l.n, "tool/result sourceEventSeqs %v do not name tool/call %q (seq %d)", e.SourceEventSeqs, e.ToolCallID, c.seq)
			}
		}
	})
	if turnLine != 0 {
		bad(lastLine, "turn of line %d has no turn/end", turnLine)
	}
	closeCalls("before the end of the log")
	slices.SortStableFunc(out, func(a, b Violation) int { return a.Line - b.Line })
	return out
}

// ImportResult is what Import read from a session event log.
type ImportResult struct {
	Title    string      `json:"title,omitempty"`
	Messages []Message   `json:"messages"`
	Skipped  []Violation `json:"skipped,omitempty"`  // lines not imported, and why
	Repaired []Violation `json:"repaired,omitempty"` // lines imported although the log was not valid there
}

// Import reads a session event log back into canonical messages: user/message
// → user message; assistant/message text → content and reasoning →
// reasoning segments of the assistant message named by messageId;
// tool/call → tool segment (running); tool/result → upserted onto its tool
// by toolCallId (completed, or error when isError / status says so) — never
// a user message; turn/end → the message's status, stop reason, error and
// duration; session/title → Title. step events carry nothing to import.
// Broken or unknown lines and duplicate seqs are skipped and listed; an
// orphan tool/result is imported as a tool segment and listed as repaired.
// It never fails.
func Import(data []byte) ImportResult {
	var res ImportResult
	seen := map[int64]bool{}
	cur := -1 // index of the open assistant message in res.Messages
	open := func(e *LogEvent) *Message {
		if cur >= 0 && (e.MessageID == "" || e.MessageID == res.Messages[cur].ID) {
			return &res.Messages[cur]
		}
		id := e.MessageID
		if id == "" {
			id = fmt.Sprintf("seq-%d", e.Seq)
		}
		res.Messages = append(res.Messages, Message{ID: id, Timestamp: e.Timestamp, Role: RoleAssistant, Agent: e.Agent})
		cur = len(res.Messages) - 1
		return &res.Messages[cur]
	}
	eachLogLine(data, func(l *logLine) {
		skip := func(format string, a ...any) {
			res.Skipped = append(res.Skipped, Violation{Line: l.n, Message: fmt.Sprintf(format, a...)})
		}
		if l.err != "" {
			if l.err != "empty line" {
				skip("%s", l.err)
			}
			return
		}
		e := &l.ev
		if seen[e.Seq] {
			skip("duplicate seq %d", e.Seq)
			return
		}
		seen[e.Seq] = true
		switch e.Type {
		case LogSessionTitle:
			res.Title = e.Title
		case LogTurnStart:
			cur = -1
		case LogStepStart, LogStepEnd:
		case LogUserMessage:
			id := e.MessageID
			if id == "" {
				id = fmt.Sprintf("seq-%d", e.Seq)
			}
			res.Messages = append(res.Messages, Message{ID: id, Timestamp: e.Timestamp, Role: RoleUser, Content: e.Text, Hidden: e.Hidden})
			cur = -1
		case LogAssistantMessage:
			m := open(e) // even without text: it names the answer
			if m.Agent == "" {
				m.Agent = e.Agent
			}
			m.Segments = appendMerged(m.Segments, Segment{Type: SegReasoning, Content: e.Reasoning})
			m.Segments = appendMerged(m.Segments, Segment{Type: SegContent, Content: e.Text})
		case LogToolCall:
			if e.ToolCallID == "" {
				skip("tool/call without toolCallId")
				return
			}
			m := open(e)
			s := Segment{Type: SegTool, ID: e.ToolCallID, Name: e.Name, ProviderKind: e.Kind, Input: e.Input, Status: string(ToolRunning)}
			if i := findSegment(m.Segments, &s); i >= 0 {
				mergeSegment(&m.Segments[i], &s)
				return
			}
			m.Segments = append(m.Segments, s)
		case LogToolResult:
			if e.ToolCallID == "" {
				skip("tool/result without toolCallId")
				return
			}
			st := e.Status
			if st == "" {
				st = string(ToolCompleted)
				if e.IsError {
					st = string(ToolError)
				}
			}
			s := Segment{Type: SegTool, ID: e.ToolCallID, Status: st, Output: e.Output, Error: e.Error, DurationMs: e.DurationMs}
			// The owning message: search back through this import.
			for i := len(res.Messages) - 1; i >= 0; i-- {
				if j := findSegment(res.Messages[i].Segments, &s); j >= 0 {
					mergeSegment(&res.Messages[i].Segments[j], &s)
					return
				}
			}
			m := open(e)
			m.Segments = append(m.Segments, s)
			res.Repaired = append(res.Repaired, Violation{Line: l.n, Message: fmt.Sprintf("orphan tool/result %q imported as a tool segment", e.ToolCallID)})
		case LogTurnEnd:
			if e.MessageID == "" && cur < 0 {
				return // a turn without an answer
			}
			if cur < 0 || (e.MessageID != "" && e.MessageID != res.Messages[cur].ID) {
				// An answer with no segments: its message starts here.
				ts := e.Timestamp - e.DurationMs
				open(&LogEvent{Seq: e.Seq, MessageID: e.MessageID, Timestamp: ts, Agent: e.Agent})
			}
			m := &res.Messages[cur]
			if m.Agent == "" {
				m.Agent = e.Agent
			}
			m.Status = MessageStatus(e.Status)
			m.StopReason = e.StopReason
			m.Error = e.Error
			m.DurationMs = e.DurationMs
			cur = -1
		default:
			skip("unknown event type %q", e.Type)
		}
	})
	return res
}
