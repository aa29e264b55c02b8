-- ochat.permission: agent permission requests (docs/protocol.md "Permissions").
--
-- Owns: showing an ochat/permission request (tool, its input and the full diff of every file in the request) in a
-- float that never takes the focus, in the chat's footer, in a notification and in require('ochat').status();
-- answering it by explicit keys (gy allow once, gn reject, gp any option) or :OChatAllow/:OChatDeny/:OChatPermission;
-- sending ochat/permission/respond, and closing the request when ochat/permissionResolved arrives (also when another
-- editor answered first).
-- Never: decides anything for the user, or filters, renames or reorders the agent's options.
local util = require('ochat.util')

local M = {}
local api = vim.api

--- Open requests by permissionId: {params, chat, buf, win, resolved}.
M.open = {}

function M.attach(chat)
  chat.conn:on('ochat/permission', function(p)
    if chat.conversation_id and p.conversationId == chat.conversation_id then
      M.show(chat, p)
    end
  end)
  chat.conn:on('ochat/permissionResolved', function(p)
    M.resolved(p)
  end)
end

-- The input as a person reads it: the command, paths relative to the workspace, strings as they are (no JSON
-- escapes), the agent's bookkeeping fields (Codex call_id, turn_id, …) left out.
local function pretty(v, root, indent)
  indent = indent or ''
  local render = require('ochat.render')
  if type(v) ~= 'table' then
    return { indent .. util.oneline(v) }
  end
  if util.islist(v) then
    local out = {}
    for _, x in ipairs(v) do
      vim.list_extend(out, pretty(x, root, indent .. '- '))
    end
    return out
  end
  local out = {}
  local c = render.command_text(util.nn(v.command) or util.nn(v.cmd))
  if c then
    for i, l in ipairs(util.lines(c)) do
      table.insert(out, indent .. (i == 1 and '$ ' or '  ') .. l)
    end
  end
  local keys = vim.tbl_keys(v)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(keys) do
    local x = v[k]
    if not render.internal_keys[k] and not (c and (k == 'command' or k == 'cmd')) then
      if type(x) == 'string' and (k == 'path' or k == 'file_path' or k == 'filePath' or k == 'cwd' or k == 'abs_path') then
        x = util.relpath(x, root)
        if x == root then
          x = '.'
        end
      end
      if type(x) == 'string' and x:find('\n') then
        table.insert(out, indent .. k .. ':')
        for _, l in ipairs(util.lines(x)) do
          table.insert(out, indent .. '  ' .. l)
        end
      elseif type(x) == 'table' then
        table.insert(out, indent .. k .. ':')
        vim.list_extend(out, pretty(x, root, indent .. '  '))
      else
        table.insert(out, indent .. k .. ': ' .. util.oneline(x))
      end
    end
  end
  return out
end

--- The unified diff of a fileChange: its `diff` field, else computed from oldText/newText with vim.diff.
function M.diff_text(fc)
  local d = util.nn(fc.diff)
  if d and d ~= '' then
    return d
  end
  local old, new = util.nn(fc.oldText) or '', util.nn(fc.newText) or ''
  if old ~= '' and old:sub(-1) ~= '\n' then
    old = old .. '\n'
  end
  if new ~= '' and new:sub(-1) ~= '\n' then
    new = new .. '\n'
  end
  return vim.diff(old, new, { result_type = 'unified', ctxlen = 3 }) or ''
end

--- Lines of the permission view (markdown): the agent's options and the keys first (the float may be shorter than
--- the diff), then the tool, its input and the diff of every file.
function M.lines(p, root)
  local tc = util.nn(p.toolCall) or {}
  local out = { string.format('# %s asks permission', p.agent or 'the agent'), '' }
  local def = M.default_option(p, 'allow')
  for _, o in ipairs(p.options or {}) do
    table.insert(out, string.format('- %s  (%s)%s', o.name or o.optionId, o.kind or '', o == def and '  ← gy / <CR>' or ''))
  end
  local k = require('ochat').config.keymaps
  table.insert(out, string.format('%s allow once · %s reject · %s pick any option (or :OChatAllow, :OChatDeny, :OChatPermission)', k.permission_allow or '', k.permission_deny or '', k.permission_pick or ''))
  M.head_lines = #out
  table.insert(out, '')
  table.insert(out, '**Tool:** ' .. (util.nn(tc.name) or util.nn(tc.id) or '?') .. (util.nn(tc.providerKind) and (' (' .. tc.providerKind .. ')') or ''))
  local input = util.nn(tc.input)
  if input ~= nil then
    table.insert(out, '')
    table.insert(out, '**Input:**')
    table.insert(out, '```')
    vim.list_extend(out, pretty(util.strip_nil(input), root))
    table.insert(out, '```')
  end
  for _, fc in ipairs(util.nn(p.fileChanges) or {}) do
    table.insert(out, '')
    table.insert(out, string.format('**%s** +%d -%d', util.relpath(fc.path or '?', root), util.nn(fc.additions) or 0, util.nn(fc.deletions) or 0))
    table.insert(out, '```diff')
    local dl = util.lines(M.diff_text(fc))
    if dl[#dl] == '' then
      table.remove(dl)
    end
    vim.list_extend(out, dl)
    table.insert(out, '```')
  end
  return out
end

--- The option a plain "allow" (or "deny") answers with: the agent's allow-once (reject-once) option, else its first
--- allow (reject) option; nil when it has none.
function M.default_option(p, what)
  local prefix = what == 'deny' and 'reject' or 'allow'
  local first
  for _, o in ipairs(p.options or {}) do
    if o.kind == prefix .. '_once' then
      return o
    end
    if not first and type(o.kind) == 'string' and o.kind:sub(1, #prefix) == prefix then
      first = o
    end
  end
  return first
end

--- One line about a request: "test asks permission: Write hello.txt · $ ls".
function M.summary(p)
  local tc = util.strip_nil(util.nn(p.toolCall) or {})
  local name = util.oneline(tc.name or tc.id or 'a tool', 120)
  local detail = require('ochat.render').tool_detail(tc.input, nil)
  if detail and not name:find(detail, 1, true) then
    name = name .. ' · ' .. util.oneline(detail, 120)
  end
  return string.format('%s asks permission: %s', p.agent or 'the agent', name)
end

--- The requests of `chat` that wait for an answer, oldest first.
function M.pending(chat)
  local out = {}
  for _, st in pairs(M.open) do
    if st.chat == chat and not st.resolved then
      table.insert(out, st)
    end
  end
  table.sort(out, function(a, b)
    return a.n < b.n
  end)
  return vim.tbl_map(function(st)
    return st.params
  end, out)
end

--- Statusline component: "ochat: test asks permission" while a request waits (else '').
function M.status()
  local n, first = 0, nil
  for _, st in pairs(M.open) do
    if not st.resolved then
      n = n + 1
      if not first or st.n < first.n then
        first = st
      end
    end
  end
  if n == 0 then
    return ''
  end
  return string.format('ochat: %s asks permission%s', first.params.agent or 'the agent', n > 1 and string.format(' (%d)', n) or '')
end

local seq = 0
M.head_lines = 6 -- lines of the view up to the keys (set by M.lines)

-- Cut to what the command line shows without a "Press ENTER" prompt.
local function fit_cols(text)
  local max = vim.o.columns - 20
  if vim.fn.strdisplaywidth(text) > max then
    text = vim.fn.strcharpart(text, 0, math.max(10, max - 1)) .. '…'
  end
  return text
end

-- Where the float goes: over the chat's transcript when it is open (never over the input), else the top right of
-- the editor. It is never entered.
local function geometry(chat, nlines)
  local cols, lines = vim.o.columns, vim.o.lines - vim.o.cmdheight - 1
  if chat.win and api.nvim_win_is_valid(chat.win) and api.nvim_win_get_config(chat.win).relative ~= '' then
    local pos = api.nvim_win_get_position(chat.win)
    local w = api.nvim_win_get_width(chat.win)
    -- At most 60% of the transcript: the request's lines in the chat's footer stay in view under it.
    local h = math.max(3, math.min(nlines, math.floor(api.nvim_win_get_height(chat.win) * 0.6)))
    return { row = pos[1] + 1, col = pos[2] + 2, width = math.max(20, w - 4), height = h }
  end
  -- No chat on screen: a notification-sized float at the bottom right, the request's options and keys (the first
  -- lines); :OChatPermission enters it to read the rest.
  local w = math.max(30, math.min(90, cols - 4))
  local h = math.max(3, math.min(nlines, M.head_lines, math.floor(lines / 3)))
  return { row = math.max(0, lines - h - 3), col = math.max(0, cols - w - 2), width = w, height = h }
end

local function changed()
  pcall(vim.cmd, 'redrawstatus!')
  pcall(vim.api.nvim_exec_autocmds, 'User', { pattern = 'OChatPermission', modeline = false })
end

--- Shows a permission request (idempotent per permissionId) without moving the cursor or changing the mode.
function M.show(chat, p)
  local id = p.permissionId
  if M.open[id] then
    return
  end
  seq = seq + 1
  local st = { params = p, chat = chat, n = seq }
  M.open[id] = st
  local buf = api.nvim_create_buf(false, true)
  st.buf = buf
  api.nvim_buf_set_lines(buf, 0, -1, false, M.lines(p, chat.root))
  api.nvim_buf_set_option(buf, 'filetype', 'markdown')
  api.nvim_buf_set_option(buf, 'modifiable', false)
  api.nvim_buf_set_option(buf, 'bufhidden', 'wipe')
  local k = require('ochat').config.keymaps
  -- Keys inside the float (reached with :OChatPermission): explicit ones only, no digits.
  local function map(lhs, fn)
    if lhs then
      vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true })
    end
  end
  map('<CR>', function()
    M.answer_id(id, 'allow')
  end)
  map(k.permission_allow, function()
    M.answer_id(id, 'allow')
  end)
  map(k.permission_deny, function()
    M.answer_id(id, 'deny')
  end)
  map(k.permission_pick, function()
    M.select(id)
  end)
  map('s', function()
    M.select(id)
  end)
  map('q', function()
    M.leave(id)
  end)
  local g = geometry(chat, api.nvim_buf_line_count(buf))
  local conf = {
    relative = 'editor',
    row = g.row,
    col = g.col,
    width = g.width,
    height = g.height,
    style = 'minimal',
    border = require('ochat').config.ui.border,
    zindex = 60,
    focusable = true,
  }
  if util.has_float_title then
    conf.title = ' permission · ' .. (k.permission_allow or '') .. ' allow once · ' .. (k.permission_deny or '') .. ' reject '
    conf.title_pos = 'center'
  end
  st.win = api.nvim_open_win(buf, false, conf)
  api.nvim_win_set_option(st.win, 'wrap', false)
  pcall(api.nvim_win_set_option, st.win, 'winhighlight', 'Normal:OChatNormal,NormalFloat:OChatNormal,FloatBorder:OChatPermissionBorder')
  chat:render_footer()
  -- One short line: a longer message would stop the editor at a "Press ENTER" prompt that eats the next key typed.
  local note = string.format('%s asks permission: %s allow once · %s reject · :OChatPermission', p.agent or 'the agent', k.permission_allow or ':OChatAllow', k.permission_deny or ':OChatDeny')
  util.notify(fit_cols(note), vim.log.levels.WARN)
  changed()
  if M.use_select() then
    vim.schedule(function()
      M.select(id)
    end)
  end
end

--- Whether to open vim.ui.select for every request at once (`permission.use_select`; it takes the focus).
function M.use_select()
  return require('ochat').config.permission.use_select == true
end

-- The oldest pending request of `chat` (any chat when nil).
local function oldest(chat)
  local best
  for id, st in pairs(M.open) do
    if not st.resolved and not st.answered and (not chat or st.chat == chat) and (not best or st.n < best[2].n) then
      best = { id, st }
    end
  end
  return best and best[1]
end

--- Answers the oldest pending request of `chat`: 'allow' (the agent's allow-once option), 'deny' (reject-once) or
--- 'pick' (vim.ui.select over every option); 'show' enters the float to read it.
function M.answer(chat, what)
  local id = oldest(chat) or oldest(nil)
  if not id then
    return util.notify('no permission request is waiting')
  end
  if what == 'show' then
    return M.focus(id)
  end
  M.answer_id(id, what)
end

function M.answer_id(id, what)
  local st = M.open[id]
  if not st then
    return
  end
  if what == 'pick' then
    return M.select(id)
  end
  local o = M.default_option(st.params, what)
  if not o then
    if what == 'deny' then
      return M.respond(id, nil) -- no reject option: cancel the request
    end
    return M.select(id)
  end
  M.respond(id, o.optionId)
end

--- Enters the request's float (Normal mode) to scroll its diff; q goes back.
function M.focus(id)
  local st = M.open[id]
  if st and st.win and api.nvim_win_is_valid(st.win) then
    st.back = api.nvim_get_current_win()
    vim.cmd('stopinsert')
    api.nvim_set_current_win(st.win)
  end
end

-- Leaves the float for the window the user came from; the request stays pending.
function M.leave(id)
  local st = M.open[id]
  if st and st.back and api.nvim_win_is_valid(st.back) then
    api.nvim_set_current_win(st.back)
  elseif st and st.win and api.nvim_get_current_win() == st.win then
    vim.cmd('wincmd p')
  end
end

--- Opens vim.ui.select over all of the agent's options for a pending request.
function M.select(id)
  local st = M.open[id]
  if not st or st.selecting then
    return
  end
  st.selecting = true
  local chat = st.chat
  chat:flush() -- the turn's activity line shows the pending tool
  pcall(vim.cmd, 'redraw') -- a blocking picker (inputlist) must not hide the float behind an old screen
  local p = st.params
  local tc = util.nn(p.toolCall) or {}
  vim.ui.select(p.options or {}, {
    prompt = string.format('%s: %s', p.agent or 'agent', util.nn(tc.name) or 'permission'),
    format_item = function(o)
      return (o.name or o.optionId) .. (o.kind and (' [' .. o.kind .. ']') or '')
    end,
    kind = 'ochat.permission',
  }, function(choice)
    st.selecting = false
    if choice and M.open[id] and not st.resolved then
      M.respond(id, choice.optionId)
    end
  end)
end

--- Answers a pending request with an option id (or `cancelled` when optionId is nil).
function M.respond(id, option_id, cb)
  local st = M.open[id]
  if not st or st.resolved then
    return
  end
  local params = { permissionId = id }
  if option_id then
    params.optionId = option_id
  else
    params.cancelled = true
  end
  st.answered = option_id or 'cancelled'
  st.chat.conn:request('ochat/permission/respond', params, function(err)
    if err and err.code ~= -32001 then
      st.answered = nil
      util.notify('permission: ' .. util.err_text(err), vim.log.levels.ERROR)
    elseif M.open[id] then
      M.close(id)
    end
    if cb then
      cb(err)
    end
  end)
end

function M.hide(id)
  local st = M.open[id]
  if st and st.win and api.nvim_win_is_valid(st.win) then
    if api.nvim_get_current_win() == st.win then
      M.leave(id)
    end
    pcall(api.nvim_win_close, st.win, true)
  end
end

function M.close(id)
  M.hide(id)
  local st = M.open[id]
  if st then
    st.resolved = true
  end
  M.open[id] = nil
  if st then
    st.chat:render_footer()
  end
  changed()
end

--- Handles ochat/permissionResolved: closes the request whoever answered it.
function M.resolved(p)
  local st = M.open[p.permissionId]
  if not st then
    return
  end
  if not st.answered then
    util.notify(string.format('permission answered elsewhere: %s', util.nn(p.optionId) or util.nn(p.outcome) or '?'))
  end
  M.close(p.permissionId)
end

return M
