package fakemodel

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"
)

// API names the wire dialect of one request.
type API string

// The dialects the server speaks.
const (
	APIAnthropic API = "anthropic" // POST /v1/messages (Anthropic Messages, SSE when "stream":true)
	APIResponses API = "responses" // POST /v1/responses (OpenAI Responses, SSE)
	APIChat      API = "chat"      // POST /v1/chat/completions (OpenAI chat completions, SSE when "stream":true)
	APIGemini    API = "gemini"    // POST /v1beta/models/M:streamGenerateContent?alt=sse or :generateContent
	APIOther     API = "other"     // anything else (HEAD / preflight, unknown paths)
)

// Tool is one tool a request offers to the model.
type Tool struct {
	Name string `json:"name"`
	// Kind is the declaration's kind as the dialect names it: "function"
	// and "custom" for the Responses API, "function" for chat completions
	// and Gemini, the Anthropic tool type or "" for Anthropic.
	Kind string `json:"kind,omitempty"`
	// Params are the parameter names its schema declares (chat
	// completions only): pi's write takes "path", OpenCode's "filePath".
	Params []string `json:"params,omitempty"`
}

// Request is one HTTP request the server received, with what it answered.
// Requests are numbered from 1 in arrival order.
type Request struct {
	Seq    int         `json:"seq"`
	Time   time.Time   `json:"time"`
	Method string      `json:"method"`
	Path   string      `json:"path"`            // URL path, e.g. /v1/messages
	Query  string      `json:"query,omitempty"` // raw query, e.g. beta=true
	Header http.Header `json:"-"`
	API    API         `json:"api"`
	// Body is the decoded JSON body (nil when the body is empty or not
	// JSON); RawBody is the body as received, after content decoding.
	Body    map[string]any `json:"body,omitempty"`
	RawBody []byte         `json:"-"`

	// UserTexts lists every user-authored text block of the conversation
	// the request carries, in order (tool results excluded).
	UserTexts []string `json:"userTexts,omitempty"`
	// ToolResultAfter reports whether a tool result follows the last user
	// text block (the model is being asked to continue after a tool call).
	ToolResultAfter bool `json:"toolResultAfter,omitempty"`
	// Tools lists the tools offered to the model.
	Tools []Tool `json:"tools,omitempty"`
	// Stream reports whether the client asked for a streamed answer.
	Stream bool `json:"stream,omitempty"`
	// Model is the model the client asked for (from the body or, for
	// Gemini, the path).
	Model string `json:"model,omitempty"`

	// Reply is what the server answered (after any Responder).
	Reply Reply `json:"reply"`
}

// scaffoldPrefixes start text blocks that agents add around the user's own
// words (Claude Code reminders and local-command echoes, Codex environment
// and abort notes, Gemini session context). They never carry a scenario.
var scaffoldPrefixes = []string{
	"<system-reminder>",
	"<local-command-",
	"<command-name>",
	"<command-message>",
	"<environment_context>",
	"<turn_aborted>",
	"<session_context>",
	"<permissions instructions>",
	"<user_instructions>",
	"# AGENTS.md instructions",
	"[Request interrupted by user",
}

// isScaffold reports whether a user text block is agent scaffolding.
func isScaffold(text string) bool {
	t := strings.TrimSpace(text)
	for _, p := range scaffoldPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// LastUserText returns the last user text block that is not agent
// scaffolding (reminders, environment context, interruption notes), or the
// last block of any kind if all are scaffolding; "" if there is none.
func (r *Request) LastUserText() string {
	for i := len(r.UserTexts) - 1; i >= 0; i-- {
		if !isScaffold(r.UserTexts[i]) {
			return r.UserTexts[i]
		}
	}
	if n := len(r.UserTexts); n > 0 {
		return r.UserTexts[n-1]
	}
	return ""
}

// Offers reports whether the request offers a tool with this name (and,
// if kind is not "", this kind).
func (r *Request) Offers(name, kind string) bool {
	for _, t := range r.Tools {
		if t.Name == name && (kind == "" || t.Kind == kind) {
			return true
		}
	}
	return false
}

// OffersParam reports whether the tool named name declares parameter param.
func (r *Request) OffersParam(name, param string) bool {
	for _, t := range r.Tools {
		if t.Name == name {
			for _, p := range t.Params {
				if p == param {
					return true
				}
			}
		}
	}
	return false
}

// SawText reports whether any user text block of the request contains s.
// Tests use it to prove which turns an agent sent to the model.
func (r *Request) SawText(s string) bool {
	for _, t := range r.UserTexts {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// classify sets API, Model and Stream from the path and body.
func (r *Request) classify() {
	p := r.Path
	switch {
	case r.Method != http.MethodPost:
		r.API = APIOther
	case strings.HasSuffix(p, "/messages") && !strings.HasSuffix(p, "/count_tokens"):
		r.API = APIAnthropic
	case strings.HasSuffix(p, "/responses"):
		r.API = APIResponses
	case strings.HasSuffix(p, "/chat/completions"):
		r.API = APIChat
	case strings.Contains(p, "/models/") && (strings.HasSuffix(p, ":streamGenerateContent") || strings.HasSuffix(p, ":generateContent")):
		r.API = APIGemini
	default:
		r.API = APIOther
	}
	if m, ok := r.Body["model"].(string); ok {
		r.Model = m
	}
	if b, ok := r.Body["stream"].(bool); ok {
		r.Stream = b
	}
	if r.API == APIGemini {
		name := p[strings.LastIndex(p, "/models/")+len("/models/"):]
		name, method, _ := strings.Cut(name, ":")
		r.Model = name
		r.Stream = method == "streamGenerateContent"
	}
}

// parseConversation fills UserTexts, ToolResultAfter and Tools from Body,
// according to the dialect.
func (r *Request) parseConversation() {
	var c convScan
	switch r.API {
	case APIAnthropic:
		for _, m := range list(r.Body["messages"]) {
			if str(m["role"]) != "user" {
				continue
			}
			if s, ok := m["content"].(string); ok {
				c.text(s)
				continue
			}
			for _, b := range list(m["content"]) {
				switch str(b["type"]) {
				case "text":
					c.text(str(b["text"]))
				case "tool_result":
					c.toolResult()
				}
			}
		}
		for _, t := range list(r.Body["tools"]) {
			r.Tools = append(r.Tools, Tool{Name: str(t["name"]), Kind: str(t["type"])})
		}
	case APIResponses:
		if s, ok := r.Body["input"].(string); ok {
			c.text(s)
		}
		for _, it := range list(r.Body["input"]) {
			typ := str(it["type"])
			switch {
			case (typ == "message" || typ == "") && str(it["role"]) == "user":
				if s, ok := it["content"].(string); ok {
					c.text(s)
					continue
				}
				for _, b := range list(it["content"]) {
					if t := str(b["type"]); t == "input_text" || t == "text" {
						c.text(str(b["text"]))
					}
				}
			case strings.HasSuffix(typ, "_call_output"):
				c.toolResult()
			}
		}
		for _, t := range list(r.Body["tools"]) {
			if n := str(t["name"]); n != "" {
				r.Tools = append(r.Tools, Tool{Name: n, Kind: str(t["type"])})
			}
		}
	case APIChat:
		for _, m := range list(r.Body["messages"]) {
			switch str(m["role"]) {
			case "user":
				if s, ok := m["content"].(string); ok {
					c.text(s)
					continue
				}
				for _, b := range list(m["content"]) {
					if str(b["type"]) == "text" {
						c.text(str(b["text"]))
					}
				}
			case "tool", "function":
				c.toolResult()
			}
		}
		for _, t := range list(r.Body["tools"]) {
			fn, _ := t["function"].(map[string]any)
			if n := str(fn["name"]); n != "" {
				var params []string
				if ps, ok := fn["parameters"].(map[string]any); ok {
					if props, ok := ps["properties"].(map[string]any); ok {
						for k := range props {
							params = append(params, k)
						}
						sort.Strings(params)
					}
				}
				r.Tools = append(r.Tools, Tool{Name: n, Kind: str(t["type"]), Params: params})
			}
		}
	case APIGemini:
		for _, m := range list(r.Body["contents"]) {
			if role := str(m["role"]); role != "" && role != "user" {
				continue
			}
			for _, p := range list(m["parts"]) {
				if _, ok := p["functionResponse"]; ok {
					c.toolResult()
				} else if s, ok := p["text"].(string); ok {
					c.text(s)
				}
			}
		}
		for _, t := range list(r.Body["tools"]) {
			for _, f := range list(t["functionDeclarations"]) {
				r.Tools = append(r.Tools, Tool{Name: str(f["name"]), Kind: "function"})
			}
		}
	}
	r.UserTexts = c.texts
	r.ToolResultAfter = c.resultAfter
}

// convScan accumulates user texts and whether a tool result follows the
// last non-scaffolding one.
type convScan struct {
	texts       []string
	resultAfter bool
}

func (c *convScan) text(s string) {
	c.texts = append(c.texts, s)
	if !isScaffold(s) {
		c.resultAfter = false
	}
}

func (c *convScan) toolResult() {
	if len(c.texts) > 0 {
		c.resultAfter = true
	}
}

// list returns v as a list of JSON objects, skipping non-objects.
func list(v any) []map[string]any {
	a, _ := v.([]any)
	out := make([]map[string]any, 0, len(a))
	for _, e := range a {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// str returns v if it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}

// decodeBody decodes a JSON object body; a non-object body yields nil.
func decodeBody(b []byte) map[string]any {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
