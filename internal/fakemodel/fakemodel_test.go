package fakemodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recorded is one line of testdata/*.llm-requests.jsonl.
type recorded struct {
	Dir     string            `json:"dir"`
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	// decision lines
	API             string         `json:"api"`
	SC              map[string]any `json:"sc"`
	ToolResultAfter bool           `json:"toolResultAfter"`
	Stop            string         `json:"stop"`
	ToolCall        bool           `json:"toolCall"`
	Parts           []any          `json:"parts"`
}

// exchange pairs a recorded request with the recorded fake's decision.
type exchange struct {
	req, dec recorded
}

func loadRecorded(t *testing.T, name string) []exchange {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []exchange
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r recorded
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch r.Dir {
		case "req":
			out = append(out, exchange{req: r})
		case "decision":
			out[len(out)-1].dec = r
		}
	}
	return out
}

// answer is what a client would make of one reply.
type answer struct {
	text     string
	toolName string
	toolIn   string // JSON object, or the custom tool's free-form input
	complete bool   // the stream ended the way the dialect says it ends
}

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func send(ctx context.Context, t *testing.T, s *Server, method, url string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.URL()+url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sseData returns the data: payloads of an SSE body.
func sseData(body []byte) []string {
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// parseAnswer decodes a reply the way each dialect's client does.
func parseAnswer(t *testing.T, api API, stream bool, body []byte) answer {
	t.Helper()
	var a answer
	obj := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("bad JSON %q: %v", s, err)
		}
		return m
	}
	if !stream && api != APIResponses {
		m := obj(string(body))
		switch api {
		case APIAnthropic:
			for _, c := range list(m["content"]) {
				if c["type"] == "text" {
					a.text += str(c["text"])
				} else if c["type"] == "tool_use" {
					a.toolName = str(c["name"])
					b, _ := json.Marshal(c["input"])
					a.toolIn = string(b)
				}
			}
			a.complete = m["stop_reason"] != nil
		case APIGemini:
			for _, p := range list(list(m["candidates"])[0]["content"].(map[string]any)["parts"]) {
				a.text += str(p["text"])
			}
			a.complete = list(m["candidates"])[0]["finishReason"] == "STOP"
		}
		return a
	}
	for _, d := range sseData(body) {
		if d == "[DONE]" {
			a.complete = true
			continue
		}
		m := obj(d)
		switch api {
		case APIAnthropic:
			switch m["type"] {
			case "content_block_start":
				if cb := m["content_block"].(map[string]any); cb["type"] == "tool_use" {
					a.toolName = str(cb["name"])
				}
			case "content_block_delta":
				dl := m["delta"].(map[string]any)
				a.text += str(dl["text"])
				a.toolIn += str(dl["partial_json"])
			case "message_stop":
				a.complete = true
			}
		case APIResponses:
			switch m["type"] {
			case "response.output_item.done":
				it := m["item"].(map[string]any)
				switch it["type"] {
				case "message":
					for _, c := range list(it["content"]) {
						a.text += str(c["text"])
					}
				case "custom_tool_call":
					a.toolName, a.toolIn = str(it["name"]), str(it["input"])
				case "function_call":
					a.toolName, a.toolIn = str(it["name"]), str(it["arguments"])
				}
			case "response.completed":
				a.complete = m["response"].(map[string]any)["usage"] != nil
			}
		case APIChat:
			for _, c := range list(m["choices"]) {
				dl := c["delta"].(map[string]any)
				a.text += str(dl["content"])
				for _, tc := range list(dl["tool_calls"]) {
					fn := tc["function"].(map[string]any)
					if n := str(fn["name"]); n != "" {
						a.toolName = n
					}
					a.toolIn += str(fn["arguments"])
				}
			}
		case APIGemini:
			c := list(m["candidates"])[0]
			for _, p := range list(c["content"].(map[string]any)["parts"]) {
				a.text += str(p["text"])
				if fc, ok := p["functionCall"].(map[string]any); ok {
					a.toolName = str(fc["name"])
					b, _ := json.Marshal(fc["args"])
					a.toolIn = string(b)
				}
			}
			if c["finishReason"] == "STOP" {
				a.complete = true
			}
		}
	}
	return a
}

// wantToolCall says whether the recorded fake answered with a tool call.
func wantToolCall(d recorded) bool {
	switch d.API {
	case "anthropic":
		return d.Stop == "tool_use"
	case "chat":
		return d.ToolCall
	case "gemini":
		for _, p := range d.Parts {
			if m, ok := p.(map[string]any); ok && m["functionCall"] != nil {
				return true
			}
		}
		return false
	case "responses":
		return d.SC["kind"] == "write" && !d.ToolResultAfter
	}
	return false
}

// TestReplayRecorded sends every request the real adapters sent to the
// recorded fake and checks that this server makes the same decision
// (scenario, tool result seen, tool call or not) and answers in a stream
// the dialect's client can decode.
func TestReplayRecorded(t *testing.T) {
	for _, tc := range []struct {
		file string
		api  API
		tool string // write tool the agent offers
	}{
		{"claude-agent-acp.llm-requests.jsonl", APIAnthropic, "Write"},
		{"codex-acp.llm-requests.jsonl", APIResponses, "apply_patch"},
		{"opencode.llm-requests.jsonl", APIChat, "write"},
		{"gemini.llm-requests.jsonl", APIGemini, "write_file"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s := startServer(t, Options{})
			exs := loadRecorded(t, tc.file)
			if len(exs) == 0 {
				t.Fatal("no recorded requests")
			}
			for i, ex := range exs {
				if ex.req.Method == http.MethodHead {
					resp := send(context.Background(), t, s, http.MethodHead, ex.req.URL, nil)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("#%d HEAD %s: status %d", i, ex.req.URL, resp.StatusCode)
					}
					continue
				}
				kind, _ := ex.dec.SC["kind"].(string)
				ctx, cancel := context.WithCancel(context.Background())
				resp := send(ctx, t, s, ex.req.Method, ex.req.URL, ex.req.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("#%d %s: status %d", i, ex.req.URL, resp.StatusCode)
				}
				got := s.Requests()
				r := got[len(got)-1]
				if r.API != tc.api {
					t.Errorf("#%d: api %q, want %q", i, r.API, tc.api)
				}
				wantSC := Scenario(kind)
				if tc.api == APIGemini && len(r.Tools) == 0 && strings.HasSuffix(r.Path, ":generateContent") {
					wantSC = ScenarioJSON // the router classifier
				}
				if r.Reply.Scenario != wantSC {
					t.Errorf("#%d: scenario %q, want %q (last user text %q)", i, r.Reply.Scenario, wantSC, r.LastUserText())
				}
				if wantSC != ScenarioJSON && r.ToolResultAfter != ex.dec.ToolResultAfter {
					t.Errorf("#%d: toolResultAfter %v, want %v", i, r.ToolResultAfter, ex.dec.ToolResultAfter)
				}
				if r.Reply.Stall {
					// One chunk arrives, then the stream stalls: read the
					// first text and hang up, as an agent's cancel does.
					br := bufio.NewReader(resp.Body)
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							t.Fatalf("#%d: stream ended before the first chunk: %v", i, err)
						}
						if strings.Contains(line, "Thinking") {
							break
						}
					}
					cancel()
					resp.Body.Close()
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				a := parseAnswer(t, tc.api, r.Stream, body)
				if !a.complete {
					t.Errorf("#%d: stream did not end properly:\n%s", i, body)
				}
				if gotTool := a.toolName != ""; gotTool != wantToolCall(ex.dec) {
					t.Errorf("#%d: tool call %q, want one: %v", i, a.toolName, wantToolCall(ex.dec))
				}
				path, _ := ex.dec.SC["path"].(string)
				switch {
				case wantSC == ScenarioJSON:
					if a.text != ClassifierJSON {
						t.Errorf("#%d: classifier answer %q", i, a.text)
					}
				case a.toolName != "":
					if a.toolName != tc.tool || !strings.Contains(a.toolIn, path) {
						t.Errorf("#%d: tool %s(%s), want %s creating %s", i, a.toolName, a.toolIn, tc.tool, path)
					}
					if !strings.HasPrefix(a.toolIn, "*** Begin Patch") && !json.Valid([]byte(a.toolIn)) {
						t.Errorf("#%d: tool input is not JSON: %q", i, a.toolIn)
					}
				case wantSC == ScenarioWrite:
					if a.text != "Done: created "+path {
						t.Errorf("#%d: final text %q", i, a.text)
					}
				default:
					if !strings.HasPrefix(a.text, PlainPrefix) {
						t.Errorf("#%d: plain text %q", i, a.text)
					}
				}
			}
		})
	}
}

func TestParseScenario(t *testing.T) {
	for _, tc := range []struct {
		in         string
		sc         Scenario
		path, mark string
	}{
		{"WRITE_FILE /tmp/x/hello.txt", ScenarioWrite, "/tmp/x/hello.txt", "WRITE_FILE /tmp/x/hello.txt"},
		{"  WRITE_FILE /a b\n\n", ScenarioWrite, "/a", "WRITE_FILE /a b"},
		{"WRITE_FILE", ScenarioPlain, "", "WRITE_FILE"},
		{"SLOW: take your time", ScenarioSlow, "", "SLOW: take your time"},
		{"previous turns:\nWRITE_FILE /x\n\nnow: hello", ScenarioPlain, "", "now: hello"},
		{"context\nSLOW", ScenarioSlow, "", "SLOW"},
		{"say hello", ScenarioPlain, "", "say hello"},
		{strings.Repeat("x", 60), ScenarioPlain, "", strings.Repeat("x", 40)},
		{"", ScenarioPlain, "", ""},
	} {
		sc, path, mark := ParseScenario(tc.in)
		if sc != tc.sc || path != tc.path || mark != tc.mark {
			t.Errorf("ParseScenario(%q) = %q, %q, %q; want %q, %q, %q", tc.in, sc, path, mark, tc.sc, tc.path, tc.mark)
		}
	}
}

// TestSideRequests checks that a tool call is only made when the request
// offers the write tool, whatever the user text says.
func TestSideRequests(t *testing.T) {
	s := startServer(t, Options{})
	for _, tc := range []struct {
		name, url, body string
		api             API
	}{
		{"chat title request", "/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"system","content":"You are a title generator."},{"role":"user","content":"WRITE_FILE /tmp/a"}]}`, APIChat},
		{"anthropic without Write", "/v1/messages",
			`{"model":"m","stream":true,"tools":[{"name":"Read"}],"messages":[{"role":"user","content":[{"type":"text","text":"WRITE_FILE /tmp/a"}]}]}`, APIAnthropic},
		{"responses without tools", "/v1/responses",
			`{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"WRITE_FILE /tmp/a"}]}]}`, APIResponses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := send(context.Background(), t, s, http.MethodPost, tc.url, []byte(tc.body))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a := parseAnswer(t, tc.api, true, body)
			if a.toolName != "" || !strings.HasPrefix(a.text, PlainPrefix) || !a.complete {
				t.Errorf("got %+v, want plain text and no tool call", a)
			}
		})
	}
}

// TestResponder checks per-test overrides and that the recorded reply is
// the one sent.
func TestResponder(t *testing.T) {
	s := startServer(t, Options{})
	s.SetResponder(func(r *Request, def Reply) Reply {
		if def.Scenario == ScenarioPlain {
			return Reply{Text: "scripted answer for " + r.LastUserText()}
		}
		return def
	})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp := send(context.Background(), t, s, http.MethodPost, "/v1/chat/completions", []byte(body))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if a := parseAnswer(t, APIChat, true, b); a.text != "scripted answer for hi" {
		t.Errorf("text %q", a.text)
	}
	reqs := s.ModelRequests()
	if len(reqs) != 1 || reqs[0].Reply.Text != "scripted answer for hi" || !reqs[0].SawText("hi") {
		t.Errorf("recorded %+v", reqs)
	}

	s.SetResponder(func(*Request, Reply) Reply { return Reply{Status: 529, Text: "overloaded"} })
	resp = send(context.Background(), t, s, http.MethodPost, "/v1/messages", []byte(`{"stream":true,"messages":[]}`))
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !strings.Contains(string(b), "overloaded") {
		t.Errorf("status %d body %s", resp.StatusCode, b)
	}
}

// TestStallTimeout checks that a stalled stream finishes normally once
// the stall timeout passes.
func TestStallTimeout(t *testing.T) {
	s := startServer(t, Options{StallTimeout: time.Millisecond})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"SLOW please"}]}]}`
	resp := send(context.Background(), t, s, http.MethodPost, "/v1/messages", []byte(body))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := parseAnswer(t, APIAnthropic, true, b)
	if !a.complete || !strings.HasPrefix(a.text, "Thinking slowly") {
		t.Errorf("got %+v", a)
	}
}

// TestNonStream checks the JSON (non-streaming) answers.
func TestNonStream(t *testing.T) {
	s := startServer(t, Options{})
	for _, tc := range []struct {
		url, body string
		api       API
	}{
		{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"ping"}]}`, APIAnthropic},
		{"/v1beta/models/gemini-x:generateContent", `{"contents":[{"role":"user","parts":[{"text":"ping"}]}]}`, APIGemini},
	} {
		resp := send(context.Background(), t, s, http.MethodPost, tc.url, []byte(tc.body))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if a := parseAnswer(t, tc.api, false, b); a.text != PlainPrefix+": ping" || !a.complete {
			t.Errorf("%s: got %+v from %s", tc.url, a, b)
		}
	}
}

func TestWaitForAndUnknownPath(t *testing.T) {
	s := startServer(t, Options{})
	done := make(chan Request, 1)
	go func() {
		r, err := s.WaitFor(context.Background(), func(r Request) bool { return r.SawText("marker-7") })
		if err == nil {
			done <- r
		}
		close(done)
	}()
	resp := send(context.Background(), t, s, http.MethodPost, "/v1/nothing", []byte(`{}`))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: status %d", resp.StatusCode)
	}
	resp = send(context.Background(), t, s, http.MethodPost, "/v1/chat/completions",
		[]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"marker-7"}]}]}`))
	resp.Body.Close()
	r, ok := <-done
	if !ok || r.Seq != 2 || r.API != APIChat {
		t.Errorf("WaitFor = %+v, %v", r, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.WaitFor(ctx, func(Request) bool { return false }); err == nil {
		t.Error("WaitFor with a done context: no error")
	}
}
