package native

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// codexMeta is the Codex listing fast path: like claudeMeta it skims each
// line and decodes only session_meta, turn_context and user messages;
// tool outputs and assistant text are never decoded. Counts follow the
// full reader (rollbacks included). names maps thread id → thread name.
func codexMeta(path string, r io.Reader, size int64, names map[string]string) (Session, bool, error) {
	s := Session{Agent: AgentCodex, Path: path, Size: size}
	type turn struct{ msgs, tools int }
	turns := []turn{{}} // turns[0]: before the first user message
	inTurn := false
	metaSeen := false
	first, last := "", ""
	firstPrompt := ""
	str := func(v []byte) string {
		if x, ok := rawString(v); ok {
			return x
		}
		return jsonString(v)
	}
	err := eachLine(r, &s.Diagnostics, func(n int, line []byte) {
		var typ, ts string
		var payload []byte
		ok := validLine(line) && objectFields(line, func(k, v []byte) bool {
			switch string(k) {
			case "type":
				typ = str(v)
			case "timestamp":
				ts = str(v)
			case "payload":
				payload = v
			}
			return true
		})
		if !ok {
			s.Diagnostics.SkippedLines++
			s.Diagnostics.problemf("line %d: not a JSON record, skipped", n)
			return
		}
		if ts != "" && ts[0] >= '0' && ts[0] <= '9' {
			if first == "" || ts < first {
				first = ts
			}
			if ts > last {
				last = ts
			}
		}
		if payload == nil {
			// bare era: the line itself is the item (or the header)
			if typ == "" {
				var h struct {
					ID        string `json:"id"`
					Timestamp string `json:"timestamp"`
				}
				if !metaSeen && json.Unmarshal(line, &h) == nil && h.ID != "" {
					metaSeen = true
					s.ID = h.ID
					first = h.Timestamp
				}
				return
			}
			if !codexResponseTypes[typ] {
				return
			}
			payload, typ = line, "response_item"
		}
		var ptype, role, name string
		objectFields(payload, func(k, v []byte) bool {
			switch string(k) {
			case "type":
				ptype = str(v)
			case "role":
				role = str(v)
			case "name":
				name = str(v)
			}
			return true
		})
		cur := &turns[len(turns)-1]
		switch typ {
		case "session_meta":
			if metaSeen {
				return
			}
			metaSeen = true
			var p codexPayload
			if decodeLenient(payload, &p) != nil {
				return
			}
			s.ID, s.Cwd, s.ParentID = p.ID, p.Cwd, p.ParentThreadID
			if p.Git != nil {
				s.GitBranch = p.Git.Branch
			}
			if s.ParentID == "" && bytes.Contains(p.Source, []byte(`"subagent"`)) {
				var src struct {
					Subagent struct {
						ThreadSpawn struct {
							ParentThreadID string `json:"parent_thread_id"`
						} `json:"thread_spawn"`
					} `json:"subagent"`
				}
				_ = json.Unmarshal(p.Source, &src)
				s.ParentID = src.Subagent.ThreadSpawn.ParentThreadID
			}
			if p.Timestamp != "" {
				first = p.Timestamp
			}
		case "turn_context":
			var p struct {
				Cwd   string `json:"cwd"`
				Model string `json:"model"`
			}
			if decodeLenient(payload, &p) == nil {
				if p.Model != "" {
					s.Model = p.Model
				}
				if s.Cwd == "" {
					s.Cwd = p.Cwd
				}
			}
		case "event_msg":
			if ptype == "thread_rolled_back" {
				var p struct {
					NumTurns int `json:"num_turns"`
				}
				_ = json.Unmarshal(payload, &p)
				for k := 0; k < p.NumTurns && len(turns) > 1; k++ {
					turns = turns[:len(turns)-1]
				}
				// the turn before the removed ones is open again if it had an answer
				inTurn = turns[len(turns)-1].msgs > 1 || (len(turns) == 1 && turns[0].msgs > 0)
			}
		case "response_item":
			switch ptype {
			case "message":
				switch role {
				case "user":
					var p struct {
						Content json.RawMessage `json:"content"`
					}
					_ = decodeLenient(payload, &p)
					text := codexText(p.Content)
					if isScaffold(text) || strings.HasPrefix(strings.TrimSpace(text), "<") {
						return
					}
					if strings.TrimSpace(text) == "" && !bytes.Contains(p.Content, []byte(`"input_image"`)) {
						return
					}
					turns = append(turns, turn{msgs: 1})
					inTurn = false
					if firstPrompt == "" {
						firstPrompt = text
					}
				case "assistant":
					if !inTurn {
						var p struct {
							Content json.RawMessage `json:"content"`
						}
						_ = decodeLenient(payload, &p)
						if codexText(p.Content) != "" {
							cur.msgs++
							inTurn = true
						}
					}
				}
			case "reasoning":
				if !inTurn {
					var p struct {
						Summary json.RawMessage `json:"summary"`
						Content json.RawMessage `json:"content"`
					}
					_ = decodeLenient(payload, &p)
					if codexText(p.Summary) != "" || codexText(p.Content) != "" {
						cur.msgs++
						inTurn = true
					}
				}
			case "function_call", "custom_tool_call", "local_shell_call", "web_search_call":
				if !inTurn {
					cur.msgs++
					inTurn = true
				}
				if name != "update_plan" {
					cur.tools++
				}
			}
		}
	})
	for _, t := range turns {
		s.MessageCount += t.msgs
		s.ToolCount += t.tools
	}
	if s.ID == "" {
		s.ID = codexIDFromName(path)
	}
	s.Title = truncate(firstPrompt, 200)
	if names[s.ID] != "" {
		s.Title = truncate(names[s.ID], 200)
	}
	s.CreatedAt, s.UpdatedAt = parseTime(first), parseTime(last)
	s.Resume = ResumeCommand(AgentCodex, s.ID, path)
	return s, s.MessageCount > 0, err
}
