package fakemodel

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Scenario names what the default responder does for a request.
type Scenario string

// Scenarios, chosen from the last non-empty line of the last user text
// block (research/real-agents/README.md, "Fake server").
const (
	ScenarioPlain Scenario = "plain" // anything else: "PONG from fake LLM: <marker>"
	ScenarioWrite Scenario = "write" // "WRITE_FILE <abs path>": a tool call creating the file, then "Done: created <path>"
	ScenarioSlow  Scenario = "slow"  // "SLOW…": one chunk, then a stall until the client goes away
	ScenarioJSON  Scenario = "json"  // a structured-output side request (Gemini's router classifier)
)

// PlainPrefix starts every plain answer of the default responder.
const PlainPrefix = "PONG from fake LLM"

// FileContent is what the default WRITE_FILE tool call writes.
const FileContent = "hello from fake llm\n"

// ClassifierJSON answers Gemini CLI's router classifier (a generateContent
// request with responseMimeType application/json).
const ClassifierJSON = `{"complexity_reasoning":"fake","complexity_score":1}`

// Reply is what the server streams back for one model request: Text (in a
// few chunks), then ToolCall if set. With Stall the stream sends its first
// text chunk and then waits until the client disconnects, the server
// closes or Options.StallTimeout passes, before finishing normally.
type Reply struct {
	Scenario Scenario  `json:"scenario,omitempty"`
	Text     string    `json:"text,omitempty"`
	ToolCall *ToolCall `json:"toolCall,omitempty"`
	Stall    bool      `json:"stall,omitempty"`
	// Status, if not 0 or 200, makes the server answer with this HTTP
	// status and Text as the error message instead of a stream.
	Status int `json:"status,omitempty"`
}

// ToolCall is one tool call the model makes.
type ToolCall struct {
	Name string `json:"name"`
	// Input is the tool input: a JSON object for function tools; for a
	// Responses API custom tool (Custom true) it is a JSON string, the
	// free-form input (an apply_patch patch).
	Input  json.RawMessage `json:"input"`
	Custom bool            `json:"custom,omitempty"`
}

// Responder replaces the default reply: it gets the request and the reply
// the default scenario logic chose, and returns the reply to send. It runs
// on the request's goroutine and must be safe for concurrent use.
type Responder func(r *Request, def Reply) Reply

// ParseScenario reads the scenario from a user text: the last non-empty
// line decides. It returns the scenario, the path for ScenarioWrite, and
// a marker (that line, at most 40 bytes) to echo in plain answers.
func ParseScenario(text string) (sc Scenario, path, marker string) {
	line := ""
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(lines[i]); t != "" {
			line = t
			break
		}
	}
	marker = line
	if len(marker) > 40 {
		marker = marker[:40]
	}
	switch {
	case strings.HasPrefix(line, "WRITE_FILE "):
		f := strings.Fields(strings.TrimPrefix(line, "WRITE_FILE "))
		if len(f) > 0 {
			return ScenarioWrite, f[0], marker
		}
	case strings.HasPrefix(line, "SLOW"):
		return ScenarioSlow, "", marker
	}
	return ScenarioPlain, "", marker
}

// DefaultReply is the reply the server sends when no Responder overrides
// it. A tool call is only made when the request offers the agent's write
// tool (claude Write, codex apply_patch or exec_command, opencode write,
// gemini write_file); side requests get plain text or, for structured
// output, ClassifierJSON. seq numbers tool call ids.
func DefaultReply(r *Request, seq int) Reply {
	if r.API == APIGemini {
		if gc, _ := r.Body["generationConfig"].(map[string]any); str(gc["responseMimeType"]) == "application/json" {
			return Reply{Scenario: ScenarioJSON, Text: ClassifierJSON}
		}
	}
	sc, path, marker := ParseScenario(r.LastUserText())
	plain := Reply{Scenario: ScenarioPlain, Text: PlainPrefix + ": " + marker}
	switch sc {
	case ScenarioSlow:
		return Reply{Scenario: ScenarioSlow, Text: "Thinking slowly about it... and more to come.", Stall: true}
	case ScenarioWrite:
		if r.ToolResultAfter {
			return Reply{Scenario: ScenarioWrite, Text: "Done: created " + path}
		}
		if tc := writeCall(r, path, seq); tc != nil {
			return Reply{Scenario: ScenarioWrite, Text: "I'll create the file.", ToolCall: tc}
		}
	}
	return plain
}

// writeCall returns the tool call that creates path with FileContent using
// the tool the request offers, or nil if it offers none.
func writeCall(r *Request, path string, seq int) *ToolCall {
	obj := func(v any) json.RawMessage {
		b, _ := json.Marshal(v)
		return b
	}
	patch := fmt.Sprintf("*** Begin Patch\n*** Add File: %s\n+%s*** End Patch", path, FileContent)
	switch r.API {
	case APIAnthropic:
		if r.Offers("Write", "") {
			return &ToolCall{Name: "Write", Input: obj(map[string]string{"file_path": path, "content": FileContent})}
		}
	case APIResponses:
		switch {
		case r.Offers("apply_patch", "custom"):
			return &ToolCall{Name: "apply_patch", Input: obj(patch), Custom: true}
		case r.Offers("apply_patch", "function"):
			return &ToolCall{Name: "apply_patch", Input: obj(map[string]string{"input": patch})}
		case r.Offers("exec_command", "function"):
			cmd := "apply_patch <<'EOF'\n" + patch + "\nEOF\n"
			return &ToolCall{Name: "exec_command", Input: obj(map[string]string{"cmd": cmd})}
		}
	case APIChat:
		if r.Offers("write", "") {
			key := "filePath" // OpenCode
			if r.OffersParam("write", "path") && !r.OffersParam("write", "filePath") {
				key = "path" // pi, Oh My Pi
			}
			return &ToolCall{Name: "write", Input: obj(map[string]string{key: path, "content": FileContent})}
		}
	case APIGemini:
		if r.Offers("write_file", "") {
			return &ToolCall{Name: "write_file", Input: obj(map[string]string{"file_path": path, "content": FileContent})}
		}
	}
	return nil
}

// chunks splits text into a few stream chunks at spaces (about 12 bytes
// each); "" yields no chunk.
func chunks(text string) []string {
	var out []string
	for len(text) > 12 {
		i := strings.IndexByte(text[12:], ' ')
		if i < 0 {
			break
		}
		out = append(out, text[:12+i+1])
		text = text[12+i+1:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}
