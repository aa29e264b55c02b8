package native

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// The Claude listing runs the same reader as Read (claudeReader with skim
// set): same uuid dedupe, same active branch, same builder, so the counts,
// title, model and id it shows are the ones Read produces. Only the
// decoding of a line's message differs: skimClaudeMessage finds the
// content blocks with the skimmer instead of encoding/json and keeps what
// the build needs to count (block types, tool ids and names, the text of
// user prompts, TodoWrite input), not assistant text, tool results or
// toolUseResult. It accepts and rejects a message exactly where the full
// decode does for everything JSON.stringify, truncation, NUL runs and
// glued records produce; TestListingMatchesRead and FuzzClaudeListing
// check that.

// skimPlaceholder stands for non-empty assistant text or thinking that the
// skim does not decode.
const skimPlaceholder = "…"

// skimClaudeMessage is the skim-mode twin of decoding a line's message
// with decodeLenient + claudeBlocks: ok is false exactly when that decode
// fails (invalid JSON, content that is neither a string nor an array of
// block objects, a block field of the wrong JSON type). user tells whether
// the text of text blocks is needed (user lines) or only whether it is
// empty (assistant lines).
func skimClaudeMessage(raw []byte, user bool) (m claudeMessage, text string, blocks []claudeBlock, ok bool) {
	if hasControl(raw) {
		return m, "", nil, false
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		// not an object: decodeLenient tolerates the type error, leaving
		// the message empty
		return m, "", nil, len(raw) > 0
	}
	var content []byte
	objectFields(raw, func(k, v []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("id")):
			m.ID = skimStringField(v, m.ID)
		case bytes.EqualFold(k, []byte("role")):
			m.Role = skimStringField(v, m.Role)
		case bytes.EqualFold(k, []byte("model")):
			m.Model = skimStringField(v, m.Model)
		case bytes.EqualFold(k, []byte("stop_reason")):
			m.StopReason = skimStringField(v, m.StopReason)
		case bytes.EqualFold(k, []byte("content")):
			content = v
		}
		return true
	})
	content = bytes.TrimSpace(content)
	switch {
	case len(content) == 0 || string(content) == "null":
		return m, "", nil, true
	case content[0] == '"':
		return m, jsonString(content), nil, true
	case content[0] != '[':
		return m, "", nil, false
	}
	blocks = []claudeBlock{}
	i := skipSpace(content, 1)
	if i < len(content) && content[i] == ']' {
		return m, "", blocks, skipSpace(content, i+1) == len(content)
	}
	for {
		b, end, good := skimClaudeBlock(content, i, user)
		if !good {
			return m, "", nil, false
		}
		blocks = append(blocks, b)
		i = skipSpace(content, end)
		if i >= len(content) {
			return m, "", nil, false
		}
		if content[i] == ']' {
			return m, "", blocks, skipSpace(content, i+1) == len(content)
		}
		if content[i] != ',' {
			return m, "", nil, false
		}
		i = skipSpace(content, i+1)
	}
}

// skimStringField mirrors decoding a JSON value into a string field: a
// string sets it, null leaves it, another type leaves it (decodeLenient
// tolerates the type error).
func skimStringField(v []byte, old string) string {
	if len(v) > 0 && v[0] == '"' {
		if s, ok := rawString(v); ok && utf8.ValidString(s) {
			return s
		}
		return jsonString(v) // escapes; invalid UTF-8 becomes U+FFFD as in encoding/json
	}
	return old
}

// skimClaudeBlock mirrors json.Unmarshal of the element of a content array
// that starts at content[i] into claudeBlock (strict: a field of the wrong
// type fails the line). end is the index just after the element.
func skimClaudeBlock(content []byte, i int, user bool) (b claudeBlock, end int, ok bool) {
	if i >= len(content) {
		return b, 0, false
	}
	if content[i] != '{' {
		e, ok := skipValue(content, i)
		return b, e, ok && string(content[i:e]) == "null"
	}
	isStr := func(v []byte) bool { return v[0] == '"' || string(v) == "null" }
	good := true
	var text, thinking, input []byte
	end, ok = objectFieldsAt(content, i, func(k, val []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("type")):
			good = good && isStr(val)
			b.Type = skimStringField(val, b.Type)
		case bytes.EqualFold(k, []byte("text")):
			good = good && isStr(val)
			text = val
		case bytes.EqualFold(k, []byte("thinking")):
			good = good && isStr(val)
			thinking = val
		case bytes.EqualFold(k, []byte("id")):
			good = good && isStr(val)
			b.ID = skimStringField(val, b.ID)
		case bytes.EqualFold(k, []byte("name")):
			good = good && isStr(val)
			b.Name = skimStringField(val, b.Name)
		case bytes.EqualFold(k, []byte("tool_use_id")):
			good = good && isStr(val)
			b.ToolUseID = skimStringField(val, b.ToolUseID)
		case bytes.EqualFold(k, []byte("is_error")):
			switch string(val) {
			case "true":
				b.IsError = true
			case "false":
				b.IsError = false
			case "null":
			default:
				good = false
			}
		case bytes.EqualFold(k, []byte("input")):
			input = val
		case bytes.EqualFold(k, []byte("source")):
			switch {
			case string(val) == "null":
			case val[0] == '{':
				b.Source = &struct {
					Type      string `json:"type"`
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				}{}
				objectFields(val, func(sk, sv []byte) bool {
					switch {
					case bytes.EqualFold(sk, []byte("type")), bytes.EqualFold(sk, []byte("data")):
						good = good && isStr(sv)
					case bytes.EqualFold(sk, []byte("media_type")):
						good = good && isStr(sv)
						b.Source.MediaType = skimStringField(sv, b.Source.MediaType)
					}
					return true
				})
			default:
				good = false
			}
		}
		return true
	})
	if !ok || !good {
		return b, 0, false
	}
	if user {
		b.Text = skimStringField(text, "")
		b.Thinking = skimStringField(thinking, "")
	} else {
		b.Text = skimNonEmpty(text)
		b.Thinking = skimNonEmpty(thinking)
	}
	if b.Name == "TodoWrite" && input != nil {
		b.Input = json.RawMessage(bytes.Clone(input)) // build reads it after the line buffer is reused
	}
	return b, end, true
}

// skimNonEmpty is skimPlaceholder for a non-empty JSON string value, ""
// otherwise.
func skimNonEmpty(v []byte) string {
	if len(v) > 2 && v[0] == '"' {
		return skimPlaceholder
	}
	return ""
}

// hasControl reports whether b holds a byte below 0x20. In compact JSON
// (what every store writes) such a byte can only be a raw control
// character inside a string, which encoding/json rejects. It tests eight
// bytes at a time.
func hasControl(b []byte) bool {
	const lo, hi = 0x2020202020202020, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if (x-lo)&^x&hi != 0 {
			return true
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return true
		}
	}
	return false
}
