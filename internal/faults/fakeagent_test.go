package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// runFakeAgent plays a misbehaving ACP agent on stdio, speaking raw JSON-RPC
// lines (ACP's stdio transport), so that it can do what no well-behaved SDK
// agent does. The mode (OCHAT_FAULT_AGENT) sets how it treats the handshake:
//
//	ok             answers initialize and session/new
//	init-exit      writes a line to stderr and exits with status 4 on initialize
//	init-hang      never answers initialize
//	new-hang       never answers session/new
//	new-hang-once  never answers the first session/new of the first process
//	               (remembered in the file $OCHAT_FAULT_STATE); answers later ones
//
// Prompts are scripted by their first word (the last text block wins):
//
//	HANG           never answers the prompt and ignores session/cancel
//	BIGLINE <MB>   chunk "a", one session/update line of <MB> MB, chunk "b"
//	UNKNOWN        an update for session "no-such-session" ("MUST NOT APPEAR"),
//	               then chunk "ok"
//	STRAY          responses to requests never sent (ids 424242 and
//	               "never-sent", one result and one error), then chunk "ok"
//	BIGTOOL <MB>   a tool call (execute) completed with <MB> MB of text
//	               output, then chunk "done"
//	FLOODGATE <n> <k> <file>
//	               n chunks "<i> " as fast as possible, pausing after the
//	               first k until <file> exists
//	anything else  chunk "echo"
//
// A prompt for a session it never created is answered with ACP's
// "Resource not found" error (-32002), as real agents do.
//
// It returns the exit status.
func runFakeAgent(mode string, in io.Reader, out, stderr io.Writer) int {
	br := bufio.NewReaderSize(in, 1<<20)
	bw := bufio.NewWriterSize(out, 1<<20)
	send := func(v any) {
		b, _ := json.Marshal(v)
		bw.Write(b)
		bw.WriteByte('\n')
		bw.Flush()
	}
	reply := func(id json.RawMessage, result any) {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	chunk := func(sid, text string) {
		send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
			"sessionId": sid,
			"update":    map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}},
		}})
	}
	sessions := 0
	known := map[string]bool{}
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		switch m.Method {
		case "initialize":
			switch mode {
			case "init-exit":
				fmt.Fprintln(stderr, "fake agent: refusing to initialize (init-exit)")
				return 4
			case "init-hang":
				continue
			}
			reply(m.ID, map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{"loadSession": false}, "authMethods": []any{}})
		case "session/new":
			sessions++
			if mode == "new-hang" {
				continue
			}
			if mode == "new-hang-once" {
				if st := os.Getenv(fakeStateEnv); st != "" {
					if _, err := os.Stat(st); err != nil {
						os.WriteFile(st, nil, 0o600)
						continue
					}
				}
			}
			sid := "fake-" + strconv.Itoa(sessions)
			known[sid] = true
			reply(m.ID, map[string]any{"sessionId": sid})
		case "session/prompt":
			var p struct {
				SessionID string `json:"sessionId"`
				Prompt    []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			}
			json.Unmarshal(m.Params, &p)
			text := ""
			for _, b := range p.Prompt {
				if b.Text != "" {
					text = b.Text
				}
			}
			if !known[p.SessionID] {
				send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32002, "message": "Resource not found: session " + strconv.Quote(p.SessionID)}})
				continue
			}
			f := strings.Fields(text)
			word := ""
			if len(f) > 0 {
				word = f[0]
			}
			switch word {
			case "HANG":
				continue
			case "BIGLINE":
				mb := 64
				if len(f) > 1 {
					mb, _ = strconv.Atoi(f[1])
				}
				chunk(p.SessionID, "a")
				big := strings.Repeat("x", mb<<20)
				bw.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + strconv.Quote(p.SessionID) +
					`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + big + `"}}}}` + "\n")
				bw.Flush()
				chunk(p.SessionID, "b")
			case "BIGTOOL":
				mb := 9
				if len(f) > 1 {
					mb, _ = strconv.Atoi(f[1])
				}
				send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": p.SessionID,
					"update": map[string]any{"sessionUpdate": "tool_call", "toolCallId": "big", "title": "Run the tests", "kind": "execute", "status": "in_progress"}}})
				send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": p.SessionID,
					"update": map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "big", "status": "completed",
						"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": strings.Repeat("y", mb<<20)}}}}}})
				chunk(p.SessionID, "done")
			case "FLOODGATE":
				if len(f) < 4 {
					break
				}
				n, _ := strconv.Atoi(f[1])
				k, _ := strconv.Atoi(f[2])
				for i := 0; i < n; i++ {
					if i == k {
						for {
							if _, err := os.Stat(f[3]); err == nil {
								break
							}
							time.Sleep(5 * time.Millisecond)
						}
					}
					chunk(p.SessionID, strconv.Itoa(i)+" ")
				}
			case "UNKNOWN":
				chunk("no-such-session", "MUST NOT APPEAR")
				chunk(p.SessionID, "ok")
			case "STRAY":
				send(map[string]any{"jsonrpc": "2.0", "id": 424242, "result": map[string]any{"stopReason": "end_turn"}})
				send(map[string]any{"jsonrpc": "2.0", "id": "never-sent", "error": map[string]any{"code": -32603, "message": "answer to nothing"}})
				chunk(p.SessionID, "ok")
			default:
				chunk(p.SessionID, "echo")
			}
			reply(m.ID, map[string]any{"stopReason": "end_turn"})
		case "session/cancel":
			// HANG ignores it; other prompts have already answered.
		default:
			if len(m.ID) > 0 && m.Method != "" {
				send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found: " + m.Method}})
			}
		}
	}
}
