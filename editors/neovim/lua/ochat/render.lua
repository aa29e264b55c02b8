-- ochat.render: the client-side model of a conversation and its Markdown rendering.
--
-- Owns: turning canonical messages (transcript/types.go Message/Segment) and live events (transcript.Event, applied
-- as the daemon's transcript.Apply does: deltas append, activity upserts by tool id / file path, plan replaced) into
-- an incrementally maintained list of body lines plus a header line and one activity line per assistant turn.
-- Never: touches buffers or windows, talks to the daemon. Content text is kept as a list of lines, never as one
-- growing string, so a long streamed answer costs O(delta) per event.
local util = require('ochat.util')

local M = {}

local function count(v)
  v = util.nn(v)
  return type(v) == 'number' and v or 0
end

-- Appends `text` to the line list `lines` (last element is the open line). Returns the 1-based index of the first
-- line that changed.
local function append_text(lines, text)
  local first = math.max(#lines, 1)
  if #lines == 0 then
    lines[1] = ''
  end
  local parts = util.lines(text)
  lines[#lines] = lines[#lines] .. parts[1]
  for i = 2, #parts do
    lines[#lines + 1] = parts[i]
  end
  return first
end
M.append_text = append_text

--- Creates the client model of a message from its canonical JSON shape (fields as in transcript.Message).
--- `root`: the workspace root, for workspace-relative paths in tool and file lines.
function M.new_message(msg, root)
  local m = {
    root = root,
    line_items = {}, -- body line index -> the tool or fileChange segment shown on it
    id = msg.id,
    role = msg.role,
    agent = util.nn(msg.agent),
    status = util.nn(msg.status),
    stopReason = util.nn(msg.stopReason),
    durationMs = util.nn(msg.durationMs),
    error = util.nn(msg.error),
    timestamp = util.nn(msg.timestamp),
    attachments = util.nn(msg.attachments) or {},
    segments = {},
    body = {},
    last_seq = 0,
    expanded = false,
  }
  if m.role == 'user' then
    append_text(m.body, util.nn(msg.content) or '')
    return m
  end
  for _, seg in ipairs(util.nn(msg.segments) or {}) do
    M.apply_segment(m, util.strip_nil(seg))
  end
  return m
end

-- Text segments keep their text in `chunks`. The body shows the turn in the order it happened: content text, and
-- one line per tool call and per file change where it came; `m.tail` says what the body ends with ('text' or
-- 'line'), so text after a tool starts a new paragraph and text before it is not glued to it.
local function add_text(m, typ, text)
  local last = m.segments[#m.segments]
  local first
  if not (last and last.type == typ) then
    last = { type = typ, chunks = {} }
    table.insert(m.segments, last)
    if typ == 'content' and #m.body > 0 then
      if m.tail == 'line' then
        table.insert(m.body, '')
        table.insert(m.body, '')
        first = #m.body - 1
      else
        first = append_text(m.body, '\n\n')
      end
    end
  end
  table.insert(last.chunks, text)
  if typ == 'content' then
    local f = append_text(m.body, text)
    m.tail = 'text'
    first = first and math.min(first, f) or f
    return first
  end
end

local tool_mark = { pending = '○', running = '◐', completed = '●', error = '✗' }

-- Keys of a tool's input that are an agent's bookkeeping, not something a person reads (Codex: call_id, turn_id,
-- started_at_ms, parsed_cmd).
local internal_keys = { call_id = true, turn_id = true, started_at_ms = true, parsed_cmd = true, process_id = true, callId = true, turnId = true }
M.internal_keys = internal_keys

local path_keys = { path = true, file_path = true, filePath = true, abs_path = true, cwd = true, notebook_path = true }

-- A command as a person types it: a string, or an argv list joined by spaces (`bash -lc SCRIPT` shows SCRIPT).
local function command_text(c)
  if type(c) == 'string' then
    return c
  end
  if type(c) == 'table' and util.islist(c) then
    if #c == 3 and type(c[1]) == 'string' and c[1]:match('sh$') and (c[2] == '-lc' or c[2] == '-c') then
      return tostring(c[3])
    end
    return table.concat(vim.tbl_map(tostring, c), ' ')
  end
end
M.command_text = command_text

--- The readable one-line detail of a tool's input: its command, else its path relative to the workspace, else nil.
function M.tool_detail(input, root)
  if type(input) ~= 'table' then
    return nil
  end
  local c = command_text(util.nn(input.command) or util.nn(input.cmd))
  if c then
    return '$ ' .. c:gsub('\n', ' ↵ ')
  end
  for k in pairs(path_keys) do
    local v = util.nn(input[k])
    if type(v) == 'string' and k ~= 'cwd' then
      return util.relpath(v, root)
    end
  end
end

--- The body line of a tool call ("● Run tests · $ go test ./...") or a file change ("± a.txt +2 -0").
function M.segment_line(s, root)
  if s.type == 'fileChange' then
    local status = s.status == 'rejected' and ' not applied' or (s.status and (' ' .. s.status) or '')
    return string.format('± %s +%d -%d%s', util.relpath(s.path or '?', root), count(s.additions), count(s.deletions), status)
  end
  local name = util.oneline(s.name or s.id or 'tool', 200)
  local line = (tool_mark[s.status] or '○') .. ' ' .. name
  local detail = M.tool_detail(s.input, root)
  if detail and not name:find(detail, 1, true) and not (detail:sub(1, 2) == '$ ' and name:find(detail:sub(3), 1, true)) then
    line = line .. ' · ' .. util.oneline(detail, 200)
  end
  if s.status == 'error' and type(s.error) == 'string' and s.error ~= '' then
    line = line .. ': ' .. util.oneline(vim.trim(s.error):match('[^\n]*'), 120)
  end
  return line
end

-- Adds the body line of a new tool or file segment; returns the first body line that changed.
local function add_line(m, seg)
  local body = m.body
  if m.tail == 'text' then
    while #body > 0 and body[#body]:match('^%s*$') do
      body[#body] = nil
      m.line_items[#body + 1] = nil
    end
  end
  local first = #body + 1
  if m.tail == 'text' and #body > 0 then
    table.insert(body, '')
  end
  table.insert(body, M.segment_line(seg, m.root))
  seg._line = #body
  m.line_items[#body] = seg
  m.tail = 'line'
  return first
end

--- Rewrites the tool and file lines of the body whose segment changed outside an event (a file change applied or
--- reverted). Returns the first body line that changed, or nil.
function M.refresh_lines(m)
  local from
  for i, seg in pairs(m.line_items or {}) do
    local l = M.segment_line(seg, m.root)
    if m.body[i] ~= l then
      m.body[i] = l
      from = from and math.min(from, i) or i
    end
  end
  return from
end

--- Applies one stored segment (used for snapshots). Returns nothing.
function M.apply_segment(m, seg)
  if seg.type == 'content' or seg.type == 'reasoning' then
    add_text(m, seg.type, seg.content or '')
  elseif seg.type == 'tool' or seg.type == 'fileChange' then
    M.upsert(m, seg)
  elseif seg.type == 'plan' then
    M.set_plan(m, seg.entries or {})
  else
    table.insert(m.segments, seg)
  end
end

--- Upserts a tool segment (by id) or fileChange segment (by path); a present field overwrites, a missing one keeps.
--- Returns the segment and the first body line that changed (nil: none).
function M.upsert(m, seg)
  local key = seg.type == 'tool' and 'id' or 'path'
  for _, s in ipairs(m.segments) do
    if s.type == seg.type and s[key] == seg[key] then
      for k, v in pairs(seg) do
        s[k] = v
      end
      if s._line then
        local l = M.segment_line(s, m.root)
        if m.body[s._line] ~= l then
          m.body[s._line] = l
          return s, s._line
        end
      end
      return s
    end
  end
  table.insert(m.segments, seg)
  return seg, add_line(m, seg)
end

function M.set_plan(m, entries)
  for _, s in ipairs(m.segments) do
    if s.type == 'plan' then
      s.entries = entries
      return
    end
  end
  table.insert(m.segments, { type = 'plan', entries = entries })
end

--- Applies a live event (transcript.Event JSON) to an assistant message.
--- Returns a dirty table {header=bool, activity=bool, body_from=int|nil} or nil when the event was a duplicate.
function M.apply_event(m, ev)
  local seq = count(ev.seq)
  if seq > 0 then
    if seq <= m.last_seq then
      return nil
    end
    m.last_seq = seq
  end
  local t = ev.type
  if t == 'content.delta' then
    return { body_from = add_text(m, 'content', util.nn(ev.delta) or '') }
  elseif t == 'reasoning.delta' then
    local had = M.has(m, 'reasoning')
    add_text(m, 'reasoning', util.nn(ev.delta) or '')
    return { activity = (not had) or m.expanded }
  elseif t == 'activity.upsert' then
    local from
    if type(ev.segment) == 'table' then
      from = select(2, M.upsert(m, util.strip_nil(ev.segment)))
    end
    return { activity = true, body_from = from }
  elseif t == 'plan.updated' then
    M.set_plan(m, util.strip_nil(ev.entries) or {})
    return { activity = true }
  elseif t == 'turn.completed' then
    m.stopReason = util.nn(ev.stopReason)
    m.status = m.stopReason == 'cancelled' and 'cancelled' or 'completed'
    return { header = true, activity = true, body_from = M.close_tools(m) }
  elseif t == 'turn.failed' then
    m.status = 'failed'
    m.error = util.nn(ev.message)
    local from = M.close_tools(m)
    return { header = true, activity = true, body_from = math.min(from or #m.body + 1, #m.body + 1) }
  end
  return {}
end

-- At the end of a turn a tool still open is shown as finished with the turn (the daemon closes it in the store too).
-- Returns the first body line that changed, or nil.
function M.close_tools(m)
  local from
  for _, s in ipairs(m.segments) do
    if s.type == 'tool' and (s.status == 'pending' or s.status == 'running') then
      s.status = m.status == 'failed' and 'error' or 'completed'
      if s._line then
        m.body[s._line] = M.segment_line(s, m.root)
        from = from or s._line
      end
    end
  end
  return from
end

function M.has(m, typ)
  for _, s in ipairs(m.segments) do
    if s.type == typ then
      return true
    end
  end
  return false
end

--- The file changes of a message, in order.
function M.file_changes(m)
  local out = {}
  for _, s in ipairs(m.segments or {}) do
    if s.type == 'fileChange' then
      table.insert(out, s)
    end
  end
  return out
end

--- Body lines as displayed (the failure message is appended for a failed turn, and the daemon's refusal under a
--- prompt that was not sent).
function M.body_lines(m)
  if m.role == 'user' and m.error then
    local out = vim.list_slice(m.body)
    table.insert(out, '')
    for i, l in ipairs(vim.split(m.error, '\n', { plain = true })) do
      table.insert(out, i == 1 and ('**Not sent:** ' .. l) or l)
    end
    return out
  end
  if m.role == 'assistant' and m.status == 'failed' then
    local out = vim.list_slice(m.body)
    if #out > 0 then
      table.insert(out, '')
    end
    table.insert(out, '**Failed:** ' .. (m.error or 'the agent stopped'))
    return out
  end
  return m.body
end

function M.header(m)
  if m.role == 'user' then
    return m.error and '## You · not sent' or '## You'
  end
  local h = '## ' .. ((m.agent or '') ~= '' and m.agent or 'assistant')
  if m.status == 'streaming' or m.status == nil then
    return h .. ' …'
  end
  local extra = { m.status }
  if m.stopReason and m.stopReason ~= 'end_turn' and m.stopReason ~= 'cancelled' then
    table.insert(extra, m.stopReason)
  end
  if m.durationMs and m.durationMs > 0 then
    table.insert(extra, string.format('%.1fs', m.durationMs / 1000))
  end
  return h .. ' · ' .. table.concat(extra, ' · ')
end

local plan_mark = { pending = '[ ]', in_progress = '[~]', completed = '[x]' }

--- The compact summary of a turn's activity ("thought · 3 tools (1 running) · 2 files +10 -3 · plan 1/3"), or nil.
function M.summary(m)
  local parts = {}
  local tools, by = 0, {}
  local files, adds, dels, rejected = 0, 0, 0, 0
  local plan
  for _, s in ipairs(m.segments) do
    if s.type == 'tool' then
      tools = tools + 1
      by[s.status or 'pending'] = (by[s.status or 'pending'] or 0) + 1
    elseif s.type == 'fileChange' then
      if s.status == 'rejected' then
        rejected = rejected + 1 -- refused or cancelled: never written, so not in the totals
      else
        files = files + 1
        adds = adds + count(s.additions)
        dels = dels + count(s.deletions)
      end
    elseif s.type == 'plan' then
      plan = s.entries
    end
  end
  if M.has(m, 'reasoning') then
    table.insert(parts, 'thought')
  end
  if tools > 0 then
    local st = {}
    for _, k in ipairs({ 'pending', 'running', 'error' }) do
      if by[k] then
        table.insert(st, by[k] .. ' ' .. (k == 'error' and 'failed' or k))
      end
    end
    table.insert(parts, tools .. (tools == 1 and ' tool' or ' tools') .. (#st > 0 and ' (' .. table.concat(st, ', ') .. ')' or ''))
  end
  if files > 0 then
    table.insert(parts, string.format('%d %s +%d -%d%s', files, files == 1 and 'file' or 'files', adds, dels, rejected > 0 and string.format(' (%d not applied)', rejected) or ''))
  elseif rejected > 0 then
    table.insert(parts, string.format('%d %s not applied', rejected, rejected == 1 and 'file' or 'files'))
  end
  if plan and #plan > 0 then
    local done = 0
    for _, e in ipairs(plan) do
      if e.status == 'completed' then
        done = done + 1
      end
    end
    table.insert(parts, string.format('plan %d/%d', done, #plan))
  end
  if #parts == 0 then
    return nil
  end
  return table.concat(parts, ' · ')
end

local function push_block(lines, items, prefix, text, item, max_lines)
  local ls = util.lines(text)
  local n = #ls
  if max_lines and n > max_lines then
    ls = vim.list_slice(ls, 1, max_lines)
    table.insert(ls, string.format('… %d more lines', n - max_lines))
  end
  for i, l in ipairs(ls) do
    table.insert(lines, (i == 1 and prefix or string.rep(' ', vim.fn.strdisplaywidth(prefix))) .. l)
    items[#lines] = item
  end
end

--- The marker of a turn that did not end normally, as the CLI shows it: "⚠ interrupted" (the daemon died mid-turn),
--- "✗ failed: <first line of the error, at most 100 characters>", "cancelled"; nil for any other turn.
function M.status_marker(m)
  if m.role ~= 'assistant' then
    return nil
  end
  if m.status == 'interrupted' then
    return '⚠ interrupted'
  elseif m.status == 'failed' then
    local e = vim.trim((type(m.error) == 'string' and m.error or ''):match('[^\n]*'))
    if vim.fn.strchars(e) > 100 then
      e = vim.fn.strcharpart(e, 0, 99) .. '…'
    end
    return e ~= '' and ('✗ failed: ' .. e) or '✗ failed'
  elseif m.status == 'cancelled' then
    return 'cancelled'
  end
end

--- The activity block: nil when the turn has neither activity nor a status marker (M.status_marker), else lines
--- and items (line index -> segment) for keymaps. The first line is the summary ("▸ 1 tool · 1 file +2 -0") followed
--- by the marker, or the marker alone for a turn without activity (item kind 'status', nothing to expand); its item
--- has `mark_col`, the byte where the marker starts. Expanded it lists tools with input/output, plan entries,
--- per-file `+adds -dels` (a rejected change: "not applied") and the reasoning.
function M.activity(m, opts, root)
  local sum = M.summary(m)
  local mark = M.status_marker(m)
  if not sum then
    if not mark then
      return {}, {}
    end
    return { mark }, { { kind = 'status', mark_col = 0, status = m.status } }
  end
  local head = (m.expanded and '▾ ' or '▸ ') .. sum
  local first = { kind = 'activity' }
  if mark then
    first.mark_col, first.status = #head + #' · ', m.status
    head = head .. ' · ' .. mark
  end
  local lines, items = { head }, { first }
  if not m.expanded then
    return lines, items
  end
  local maxc, maxl = opts.max_input_chars, opts.max_output_lines
  for _, s in ipairs(m.segments) do
    if s.type == 'tool' then
      local item = { kind = 'tool', seg = s }
      local name = s.name or s.id or 'tool'
      push_block(lines, items, '  ' .. (tool_mark[s.status] or '○') .. ' ', name .. (s.providerKind and (' (' .. s.providerKind .. ')') or ''), item)
      if s.input ~= nil then
        push_block(lines, items, '    input: ', M.readable(s.input, root, maxc), item)
      end
      if s.output and s.output ~= '' then
        push_block(lines, items, '    output: ', s.output, item, maxl)
      end
      if s.error and s.error ~= '' then
        push_block(lines, items, '    error: ', s.error, item, maxl)
      end
    elseif s.type == 'fileChange' then
      local item = { kind = 'file', seg = s }
      local status = s.status == 'rejected' and 'not applied' or s.status
      push_block(
        lines,
        items,
        '  ± ',
        string.format('%s +%d -%d%s', util.relpath(s.path or '?', root), count(s.additions), count(s.deletions), status and (' ' .. status) or ''),
        item
      )
    elseif s.type == 'plan' then
      local item = { kind = 'plan', seg = s }
      push_block(lines, items, '  ', 'plan:', item)
      for _, e in ipairs(s.entries or {}) do
        push_block(lines, items, '    ' .. (plan_mark[e.status] or '[ ]') .. ' ', e.content or '', item)
      end
    elseif s.type == 'reasoning' then
      local item = { kind = 'reasoning', seg = s }
      push_block(lines, items, '  thought: ', table.concat(s.chunks or { s.content or '' }), item, maxl)
    end
  end
  return lines, items
end

--- A tool input as a person reads it, on one line: the command, a workspace-relative path, `key: value` pairs for
--- the rest (strings as they are, without JSON escapes), the agent's bookkeeping fields left out.
function M.readable(input, root, max)
  input = util.strip_nil(input)
  if type(input) ~= 'table' then
    return util.oneline(input, max)
  end
  local parts = {}
  local detail = M.tool_detail(input, root)
  if detail then
    table.insert(parts, detail)
  end
  local keys = vim.tbl_keys(input)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(keys) do
    local v = input[k]
    if not internal_keys[k] and not (detail and (k == 'command' or k == 'cmd' or (path_keys[k] and detail == util.relpath(tostring(v), root)))) then
      if path_keys[k] and type(v) == 'string' then
        v = util.relpath(v, root)
      end
      table.insert(parts, tostring(k) .. ': ' .. util.plain(v))
    end
  end
  return util.oneline(table.concat(parts, ' · '), max)
end

return M
