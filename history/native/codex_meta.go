package native

import (
	"bytes"
	"io"
)

// The Codex listing runs the full reader (codexReader, skim set), so it
// shows what Read gives: the same turns after rollbacks, the same tool
// calls upserted by call_id when items are repeated, the same plans, MCP
// calls and compaction. Only the decoding differs: skimCodexLine finds a
// line's top-level fields with the skimmer, and slimCodexPayload keeps
// only the payload fields that decide messages, tools, ids, title and
// model before encoding/json sees them: tool outputs, aggregated command
// output, patch bodies, call arguments (except update_plan's, which makes
// a plan instead of a tool) and encrypted reasoning are never decoded.

// codexMeta is the Codex listing fast path. names maps thread id → thread
// name (session_index.jsonl).
func codexMeta(path string, rd io.Reader, size int64, names map[string]string) (Session, bool, error) {
	r := newCodexReader(path)
	r.skim = true
	r.t.Size = size
	err := eachLine(rd, &r.t.Diagnostics, r.add)
	t := r.build(names)
	return t.Session, len(t.Messages) > 0, err
}

// skimCodexLine is the skim-mode twin of decodeLenient(line, &codexLine):
// ok is false where that decode fails for everything the CLI writes and
// how files break (see inListingContract).
func skimCodexLine(line []byte) (l codexLine, ok bool) {
	if !validLine(line) || hasControl(line) {
		return l, false
	}
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return l, false
	}
	if t[0] != '{' {
		// valid JSON that is not an object: a tolerated type error
		e, ok := skipValue(t, 0)
		return l, ok && e == len(t)
	}
	ok = objectFields(t, func(k, v []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("timestamp")):
			l.Timestamp = skimStringField(v, l.Timestamp)
		case bytes.EqualFold(k, []byte("type")):
			l.Type = skimStringField(v, l.Type)
		case bytes.EqualFold(k, []byte("id")):
			l.ID = skimStringField(v, l.ID)
		case bytes.EqualFold(k, []byte("payload")):
			l.Payload = v
		}
		return true
	})
	return l, ok
}

// codexSlimKeys are the payload fields (codexPayload tags) that can change
// the messages, tool calls, id, cwd, model, branch, parent or title of a
// transcript. "arguments" is kept only for update_plan, "message" only
// for error events.
var codexSlimKeys = []string{
	"type", "id", "cwd", "timestamp", "model", "git", "parent_thread_id", "source", "role", "content", "summary",
	"name", "namespace", "call_id", "status", "action", "success", "changes", "exit_code", "duration_ms",
	"num_turns", "reason", "invocation", "item",
}

// slimCodexPayload returns a JSON object holding only the fields of
// payload that the build needs to count (in their order, duplicates kept,
// so encoding/json decodes them exactly as from the whole payload). A
// payload that is not an object is returned as it is.
func slimCodexPayload(payload []byte) []byte {
	p := bytes.TrimSpace(payload)
	if len(p) == 0 || p[0] != '{' {
		return payload
	}
	var typ, name string
	objectFields(p, func(k, v []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("type")):
			typ = skimStringField(v, typ)
		case bytes.EqualFold(k, []byte("name")):
			name = skimStringField(v, name)
		}
		return true
	})
	out := make([]byte, 0, 256)
	out = append(out, '{')
	objectFields(p, func(k, v []byte) bool {
		keep := false
		for _, s := range codexSlimKeys {
			if bytes.EqualFold(k, []byte(s)) {
				keep = true
				break
			}
		}
		switch {
		case bytes.EqualFold(k, []byte("arguments")):
			keep = name == "update_plan"
		case bytes.EqualFold(k, []byte("message")):
			keep = typ == "error"
		}
		if !keep {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, k...)
		out = append(out, '"', ':')
		out = append(out, v...)
		return true
	})
	return append(out, '}')
}
