package fakemodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// dialect writes one reply in one wire format. The driver calls start,
// text for each chunk, flush before a stall, tool for a tool call, then
// finish; body writes the whole reply as one JSON document instead when
// the client did not ask for a stream.
type dialect interface {
	start()
	text(delta string)
	flush()
	tool(tc *ToolCall, id string)
	finish()
	body(r Reply, id string) any
}

// sse writes server-sent events.
type sse struct {
	w   http.ResponseWriter
	f   http.Flusher
	seq int
}

// event writes one event; name "" omits the event: line.
func (s *sse) event(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{}`)
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.seq++
}

func (s *sse) done() { fmt.Fprint(s.w, "data: [DONE]\n\n") }

func (s *sse) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

// reply streams (or writes) r.Reply in r's dialect.
func (s *Server) reply(ctx context.Context, w http.ResponseWriter, r *Request, seq int) {
	out := &sse{w: w}
	out.f, _ = w.(http.Flusher)
	id := fmt.Sprintf("%d", seq)
	now := time.Now().Unix()
	var d dialect
	switch r.API {
	case APIAnthropic:
		d = &anthropic{sse: out, model: r.Model}
	case APIResponses:
		d = &responses{sse: out, model: r.Model, created: now}
	case APIChat:
		usage, _ := r.Body["stream_options"].(map[string]any)
		inc, _ := usage["include_usage"].(bool)
		d = &chat{sse: out, model: r.Model, created: now, usage: inc}
	case APIGemini:
		d = &gemini{sse: out, model: r.Model}
	}
	rep := r.Reply
	// Responses API clients (codex) always stream; the others stream only
	// when asked.
	if !r.Stream && r.API != APIResponses {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(d.body(rep, id))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	d.start()
	cs := chunks(rep.Text)
	if rep.Stall && len(cs) == 0 {
		cs = []string{"..."}
	}
	for i, c := range cs {
		d.text(c)
		if i == 0 && rep.Stall {
			d.flush()
			out.flush()
			if !s.stall(ctx) {
				return
			}
		}
	}
	if rep.ToolCall != nil {
		d.tool(rep.ToolCall, id)
	}
	d.finish()
	out.flush()
}

// inputString returns a tool input as text: the JSON string's value for a
// custom tool, else the JSON object itself.
func inputString(tc *ToolCall) string {
	if tc.Custom {
		var s string
		if json.Unmarshal(tc.Input, &s) == nil {
			return s
		}
	}
	return string(tc.Input)
}

// inputObject returns a tool input as a JSON value ({} if empty).
func inputObject(tc *ToolCall) json.RawMessage {
	if len(tc.Input) == 0 {
		return json.RawMessage(`{}`)
	}
	return tc.Input
}

// anthropic writes Anthropic Messages streaming events
// (docs.anthropic.com "Streaming Messages": message_start,
// content_block_start/delta/stop, message_delta, message_stop).
type anthropic struct {
	*sse
	model    string
	index    int
	textOpen bool
	stop     string
}

func (a *anthropic) start() {
	a.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": a.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	a.event("ping", map[string]any{"type": "ping"})
	a.stop = "end_turn"
}

func (a *anthropic) text(delta string) {
	if !a.textOpen {
		a.event("content_block_start", map[string]any{"type": "content_block_start", "index": a.index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		a.textOpen = true
	}
	a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": a.index,
		"delta": map[string]any{"type": "text_delta", "text": delta}})
}

func (a *anthropic) flush() {}

func (a *anthropic) closeText() {
	if a.textOpen {
		a.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": a.index})
		a.textOpen = false
		a.index++
	}
}

func (a *anthropic) tool(tc *ToolCall, id string) {
	a.closeText()
	a.event("content_block_start", map[string]any{"type": "content_block_start", "index": a.index,
		"content_block": map[string]any{"type": "tool_use", "id": "toolu_fake_" + id, "name": tc.Name, "input": map[string]any{}}})
	in := string(inputObject(tc))
	half := len(in) / 2
	for _, part := range []string{in[:half], in[half:]} {
		a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": a.index,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
	}
	a.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": a.index})
	a.index++
	a.stop = "tool_use"
}

func (a *anthropic) finish() {
	a.closeText()
	a.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": a.stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	a.event("message_stop", map[string]any{"type": "message_stop"})
}

func (a *anthropic) body(r Reply, id string) any {
	content := []any{}
	stop := "end_turn"
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	if r.ToolCall != nil {
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_fake_" + id,
			"name": r.ToolCall.Name, "input": inputObject(r.ToolCall)})
		stop = "tool_use"
	}
	return map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": a.model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}
}

// responses writes OpenAI Responses API streaming events
// (platform.openai.com "Streaming API responses": response.created,
// response.output_item.added/done, response.output_text.delta,
// response.completed with usage).
type responses struct {
	*sse
	model   string
	created int64
	output  []any
	buf     string // text of the open message item
	open    bool
}

func (o *responses) resp(status string) map[string]any {
	m := map[string]any{"id": "resp_fake", "object": "response", "created_at": o.created, "status": status,
		"model": o.model, "output": o.output}
	if status == "completed" {
		m["usage"] = map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}
	}
	return m
}

func (o *responses) ev(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = o.seq
	o.event(typ, fields)
}

func (o *responses) start() {
	o.output = []any{}
	o.ev("response.created", map[string]any{"response": o.resp("in_progress")})
	o.ev("response.in_progress", map[string]any{"response": o.resp("in_progress")})
}

func (o *responses) text(delta string) {
	idx := len(o.output)
	if !o.open {
		o.ev("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
			"id": "msg_fake", "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
		o.ev("response.content_part.added", map[string]any{"item_id": "msg_fake", "output_index": idx,
			"content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		o.open = true
	}
	o.buf += delta
	o.ev("response.output_text.delta", map[string]any{"item_id": "msg_fake", "output_index": idx,
		"content_index": 0, "delta": delta})
}

func (o *responses) flush() {}

func (o *responses) closeText() {
	if !o.open {
		return
	}
	idx := len(o.output)
	part := map[string]any{"type": "output_text", "text": o.buf, "annotations": []any{}}
	o.ev("response.output_text.done", map[string]any{"item_id": "msg_fake", "output_index": idx,
		"content_index": 0, "text": o.buf})
	o.ev("response.content_part.done", map[string]any{"item_id": "msg_fake", "output_index": idx,
		"content_index": 0, "part": part})
	item := map[string]any{"id": "msg_fake", "type": "message", "status": "completed", "role": "assistant",
		"content": []any{part}}
	o.ev("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	o.output = append(o.output, item)
	o.open = false
	o.buf = ""
}

func (o *responses) tool(tc *ToolCall, id string) {
	o.closeText()
	o.output = append(o.output, o.toolItems(tc, id, o.emitTool)...)
}

// emitTool streams one tool call item: added, then done.
func (o *responses) emitTool(added, done map[string]any) {
	idx := len(o.output)
	o.ev("response.output_item.added", map[string]any{"output_index": idx, "item": added})
	o.ev("response.output_item.done", map[string]any{"output_index": idx, "item": done})
}

// toolItems builds the finished output item of a tool call (custom or
// function) and, if emit is not nil, streams it.
func (o *responses) toolItems(tc *ToolCall, id string, emit func(added, done map[string]any)) []any {
	var added, done map[string]any
	if tc.Custom {
		added = map[string]any{"id": "ctc_fake_" + id, "type": "custom_tool_call", "status": "in_progress",
			"call_id": "call_fake_" + id, "name": tc.Name, "input": ""}
		done = map[string]any{"id": "ctc_fake_" + id, "type": "custom_tool_call", "status": "completed",
			"call_id": "call_fake_" + id, "name": tc.Name, "input": inputString(tc)}
	} else {
		added = map[string]any{"id": "fc_fake_" + id, "type": "function_call", "status": "in_progress",
			"call_id": "call_fake_" + id, "name": tc.Name, "arguments": ""}
		done = map[string]any{"id": "fc_fake_" + id, "type": "function_call", "status": "completed",
			"call_id": "call_fake_" + id, "name": tc.Name, "arguments": string(inputObject(tc))}
	}
	if emit != nil {
		emit(added, done)
	}
	return []any{done}
}

func (o *responses) finish() {
	o.closeText()
	o.ev("response.completed", map[string]any{"response": o.resp("completed")})
}

func (o *responses) body(r Reply, id string) any {
	o.output = []any{}
	if r.Text != "" {
		o.output = append(o.output, map[string]any{"id": "msg_fake", "type": "message", "status": "completed",
			"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": r.Text, "annotations": []any{}}}})
	}
	if r.ToolCall != nil {
		o.output = append(o.output, o.toolItems(r.ToolCall, id, nil)...)
	}
	return o.resp("completed")
}

// chat writes OpenAI chat completion chunks (platform.openai.com "The chat
// completion chunk object"), ending with finish_reason, an optional usage
// chunk and "data: [DONE]".
type chat struct {
	*sse
	model   string
	created int64
	usage   bool
	role    bool
	stop    string
}

func (c *chat) chunk(delta map[string]any, finish any) {
	c.event("", map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": c.created,
		"model": c.model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
}

func (c *chat) start() { c.stop = "stop" }

func (c *chat) text(delta string) {
	d := map[string]any{"content": delta}
	if !c.role {
		d["role"] = "assistant"
		c.role = true
	}
	c.chunk(d, nil)
}

func (c *chat) flush() {}

func (c *chat) tool(tc *ToolCall, id string) {
	first := map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_fake_" + id, "type": "function",
		"function": map[string]any{"name": tc.Name, "arguments": ""}}}}
	if !c.role {
		first["role"] = "assistant"
		c.role = true
	}
	c.chunk(first, nil)
	c.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
		"function": map[string]any{"arguments": string(inputObject(tc))}}}}, nil)
	c.stop = "tool_calls"
}

func (c *chat) finish() {
	c.chunk(map[string]any{}, c.stop)
	if c.usage {
		c.event("", map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": c.created,
			"model": c.model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	}
	c.done()
}

func (c *chat) body(r Reply, id string) any {
	msg := map[string]any{"role": "assistant", "content": r.Text}
	finish := "stop"
	if r.ToolCall != nil {
		msg["tool_calls"] = []any{map[string]any{"id": "call_fake_" + id, "type": "function",
			"function": map[string]any{"name": r.ToolCall.Name, "arguments": string(inputObject(r.ToolCall))}}}
		finish = "tool_calls"
	}
	return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
}

// gemini writes Gemini GenerateContentResponse chunks as SSE data lines
// (ai.google.dev "streamGenerateContent"). The last chunk carries
// finishReason and usageMetadata, so each chunk is held back until the next
// one is known.
type gemini struct {
	*sse
	model   string
	pending []any // parts of the chunk not yet written
}

func (g *gemini) resp(parts []any, finish bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
	m := map[string]any{"candidates": []any{cand}, "modelVersion": g.model}
	if finish {
		cand["finishReason"] = "STOP"
		m["usageMetadata"] = map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
	}
	return m
}

func (g *gemini) start() {}

func (g *gemini) put(part any) {
	g.flush()
	g.pending = []any{part}
}

func (g *gemini) text(delta string) { g.put(map[string]any{"text": delta}) }

func (g *gemini) flush() {
	if g.pending != nil {
		g.event("", g.resp(g.pending, false))
		g.pending = nil
	}
}

func (g *gemini) tool(tc *ToolCall, _ string) {
	g.put(map[string]any{"functionCall": map[string]any{"name": tc.Name, "args": inputObject(tc)}})
}

func (g *gemini) finish() {
	parts := g.pending
	if parts == nil {
		parts = []any{map[string]any{"text": ""}}
	}
	g.pending = nil
	g.event("", g.resp(parts, true))
}

func (g *gemini) body(r Reply, _ string) any {
	var parts []any
	if r.Text != "" {
		parts = append(parts, map[string]any{"text": r.Text})
	}
	if r.ToolCall != nil {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": r.ToolCall.Name,
			"args": inputObject(r.ToolCall)}})
	}
	if parts == nil {
		parts = []any{map[string]any{"text": ""}}
	}
	return g.resp(parts, true)
}
