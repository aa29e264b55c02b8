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
// decoding of a line's message differs: the skim parses the message in
// place while it walks the line (one pass over the bytes) and keeps what
// the build needs to count (block types, tool ids and names, the text of
// user prompts, TodoWrite input), not assistant text, tool results or
// toolUseResult. It accepts and rejects a message exactly where the full
// decode does for everything JSON.stringify writes and everything
// truncation, NUL runs and glued records produce; TestListingMatchesRead,
// TestListingMatchesReadMutated and FuzzClaudeListing check that.

// skimPlaceholder stands for non-empty assistant text or thinking that the
// skim does not decode.
const skimPlaceholder = "…"

// claudeSkimMsg is a line's message as the skim parsed it.
type claudeSkimMsg struct {
	present bool // the line has a message that is not null
	// ok is false where decodeLenient + claudeBlocks would fail: invalid
	// JSON, content that is neither a string nor an array of block
	// objects, a block field of the wrong JSON type
	ok     bool
	msg    claudeMessage
	text   string        // string content
	blocks []claudeBlock // text and thinking still raw (finishSkimBlocks)
}

// skimClaudeMessageAt parses the message value that starts at b[i]. end is
// the index just after it; wellFormed is false only when the value is not
// balanced JSON at all (the line is then not a record).
func skimClaudeMessageAt(b []byte, i int) (end int, m claudeSkimMsg, wellFormed bool) {
	if i >= len(b) {
		return 0, m, false
	}
	if b[i] != '{' {
		e, ok := skipValue(b, i)
		if !ok {
			return 0, m, false
		}
		v := b[i:e]
		// not an object: decodeLenient tolerates the type error and the
		// message stays empty
		m.present = string(v) != "null"
		m.ok = !hasControl(v)
		return e, m, true
	}
	m.present = true
	var content []byte
	var blocks []claudeBlock
	blocksOK := true
	hook := func(k, b []byte, j int) (int, bool, bool) {
		if j >= len(b) || b[j] != '[' || !bytes.EqualFold(k, []byte("content")) {
			return 0, false, false
		}
		e, bl, good, ok := skimClaudeBlocksAt(b, j)
		if !ok {
			// stricter than skipValue: let the balance decide the line,
			// the message fails
			e, ok = skipValue(b, j)
			bl, good = nil, false
		}
		blocks, blocksOK = bl, good
		return e, true, ok
	}
	end, ok := objectFieldsHook(b, i, hook, func(k, v []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("id")):
			m.msg.ID = skimStringField(v, m.msg.ID)
		case bytes.EqualFold(k, []byte("role")):
			m.msg.Role = skimStringField(v, m.msg.Role)
		case bytes.EqualFold(k, []byte("model")):
			m.msg.Model = skimStringField(v, m.msg.Model)
		case bytes.EqualFold(k, []byte("stop_reason")):
			m.msg.StopReason = skimStringField(v, m.msg.StopReason)
		case bytes.EqualFold(k, []byte("content")):
			content = v
		}
		return true
	})
	if !ok {
		// balanced but not a well-formed object: the full decode fails
		e, ok := skipValue(b, i)
		return e, claudeSkimMsg{present: true}, ok
	}
	m.ok = !hasControl(b[i:end])
	switch {
	case len(content) == 0 || string(content) == "null":
	case content[0] == '"':
		m.text = jsonString(content)
	case content[0] == '[':
		m.blocks = blocks
		m.ok = m.ok && blocksOK
	default:
		m.ok = false
	}
	return end, m, true
}

// skimClaudeBlocksAt parses the content array that starts at b[i]. good
// is false when an element would fail json.Unmarshal into claudeBlock;
// ok is false when the array is not well formed.
func skimClaudeBlocksAt(b []byte, i int) (end int, blocks []claudeBlock, good, ok bool) {
	blocks = []claudeBlock{} // json.Unmarshal of [] gives an empty, non-nil slice
	good = true
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, blocks, true, true
	}
	for {
		var blk claudeBlock
		var e int
		if i < len(b) && b[i] == '{' {
			var g bool
			blk, e, g, ok = skimClaudeBlockAt(b, i)
			good = good && g
		} else {
			e, ok = skipValue(b, i)
			good = good && ok && string(b[i:e]) == "null" // null is a zero block
		}
		if !ok {
			return 0, nil, false, false
		}
		blocks = append(blocks, blk)
		i = skipSpace(b, e)
		if i >= len(b) {
			return 0, nil, false, false
		}
		if b[i] == ']' {
			return i + 1, blocks, good, true
		}
		if b[i] != ',' {
			return 0, nil, false, false
		}
		i = skipSpace(b, i+1)
	}
}

// skimClaudeBlockAt mirrors json.Unmarshal of the content block object at
// b[i] into claudeBlock (strict: good is false for a field of the wrong
// type). Text and thinking stay raw; TodoWrite input is copied.
func skimClaudeBlockAt(b []byte, i int) (blk claudeBlock, end int, good, ok bool) {
	isStr := func(v []byte) bool { return v[0] == '"' || string(v) == "null" }
	good = true
	var input []byte
	end, ok = objectFieldsAt(b, i, func(k, val []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("type")):
			good = good && isStr(val)
			blk.Type = skimStringField(val, blk.Type)
		case bytes.EqualFold(k, []byte("text")):
			good = good && isStr(val)
			blk.rawText = val
		case bytes.EqualFold(k, []byte("thinking")):
			good = good && isStr(val)
			blk.rawThinking = val
		case bytes.EqualFold(k, []byte("id")):
			good = good && isStr(val)
			blk.ID = skimStringField(val, blk.ID)
		case bytes.EqualFold(k, []byte("name")):
			good = good && isStr(val)
			blk.Name = skimStringField(val, blk.Name)
		case bytes.EqualFold(k, []byte("tool_use_id")):
			good = good && isStr(val)
			blk.ToolUseID = skimStringField(val, blk.ToolUseID)
		case bytes.EqualFold(k, []byte("is_error")):
			switch string(val) {
			case "true":
				blk.IsError = true
			case "false":
				blk.IsError = false
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
				if blk.Source == nil {
					blk.Source = &struct {
						Type      string `json:"type"`
						MediaType string `json:"media_type"`
						Data      string `json:"data"`
					}{}
				}
				objectFields(val, func(sk, sv []byte) bool {
					switch {
					case bytes.EqualFold(sk, []byte("type")), bytes.EqualFold(sk, []byte("data")):
						good = good && isStr(sv)
					case bytes.EqualFold(sk, []byte("media_type")):
						good = good && isStr(sv)
						blk.Source.MediaType = skimStringField(sv, blk.Source.MediaType)
					}
					return true
				})
			default:
				good = false
			}
		}
		return true
	})
	if ok && blk.Name == "TodoWrite" && input != nil {
		blk.Input = json.RawMessage(bytes.Clone(input)) // build reads it after the line buffer is reused
	}
	return blk, end, good, ok
}

// finishSkimBlocks decodes the raw text of user blocks (prompts decide
// visibility and the title) and marks assistant text and thinking only as
// present or empty. It drops the references into the line buffer.
func finishSkimBlocks(blocks []claudeBlock, user bool) {
	for k := range blocks {
		bl := &blocks[k]
		if user {
			bl.Text = skimStringField(bl.rawText, "")
			bl.Thinking = skimStringField(bl.rawThinking, "")
		} else {
			bl.Text = skimNonEmpty(bl.rawText)
			bl.Thinking = skimNonEmpty(bl.rawThinking)
		}
		bl.rawText, bl.rawThinking = nil, nil
	}
}

// skimStringField mirrors decoding a JSON value into a string field: a
// string sets it, null or another type leaves it (decodeLenient tolerates
// the type error).
func skimStringField(v []byte, old string) string {
	if len(v) > 0 && v[0] == '"' {
		if s, ok := rawString(v); ok && utf8.ValidString(s) {
			return s
		}
		return jsonString(v) // escapes; invalid UTF-8 becomes U+FFFD as in encoding/json
	}
	return old
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
