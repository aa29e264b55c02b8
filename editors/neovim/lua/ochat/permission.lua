-- ochat.permission: agent permission requests (docs/protocol.md "Permissions").
--
-- Owns: showing an ochat/permission request (tool, its input and the full diff of every file in the request) in a
-- float, letting the user pick any of the agent's options (vim.ui.select and number keys in the float), sending
-- ochat/permission/respond, and closing the request when ochat/permissionResolved arrives (also when another editor
-- answered first).
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

local function pretty(v, indent)
  indent = indent or ''
  if type(v) ~= 'table' then
    return { indent .. util.oneline(v) }
  end
  local ok, s = pcall(vim.json.encode, v)
  if ok and #s <= 100 then
    return { indent .. s }
  end
  local out = {}
  if util.islist(v) then
    for _, x in ipairs(v) do
      vim.list_extend(out, pretty(x, indent .. '- '))
    end
    return out
  end
  local keys = vim.tbl_keys(v)
  table.sort(keys)
  for _, k in ipairs(keys) do
    local x = v[k]
    if type(x) == 'string' and x:find('\n') then
      table.insert(out, indent .. k .. ':')
      for _, l in ipairs(util.lines(x)) do
        table.insert(out, indent .. '  ' .. l)
      end
    elseif type(x) == 'table' then
      table.insert(out, indent .. k .. ':')
      vim.list_extend(out, pretty(x, indent .. '  '))
    else
      table.insert(out, indent .. k .. ': ' .. util.oneline(x))
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

--- Lines of the permission view (markdown).
function M.lines(p, root)
  local tc = util.nn(p.toolCall) or {}
  local out = {
    string.format('# %s asks permission', p.agent or 'the agent'),
    '',
    '**Tool:** ' .. (util.nn(tc.name) or util.nn(tc.id) or '?') .. (util.nn(tc.providerKind) and (' (' .. tc.providerKind .. ')') or ''),
  }
  local input = util.nn(tc.input)
  if input ~= nil then
    table.insert(out, '')
    table.insert(out, '**Input:**')
    table.insert(out, '```')
    vim.list_extend(out, pretty(util.strip_nil(input)))
    table.insert(out, '```')
  end
  for _, fc in ipairs(util.nn(p.fileChanges) or {}) do
    table.insert(out, '')
    table.insert(
      out,
      string.format('**%s** +%d -%d', util.relpath(fc.path or '?', root), util.nn(fc.additions) or 0, util.nn(fc.deletions) or 0)
    )
    table.insert(out, '```diff')
    local d = M.diff_text(fc)
    local dl = util.lines(d)
    if dl[#dl] == '' then
      table.remove(dl)
    end
    vim.list_extend(out, dl)
    table.insert(out, '```')
  end
  table.insert(out, '')
  for i, o in ipairs(p.options or {}) do
    table.insert(out, string.format('%d. %s  (%s)', i, o.name or o.optionId, o.kind or ''))
  end
  table.insert(out, '')
  table.insert(out, 'Press a number to answer, s to pick from a list, q to hide (the request stays pending).')
  return out
end

--- Shows a permission request (idempotent per permissionId).
function M.show(chat, p)
  local id = p.permissionId
  if M.open[id] then
    return
  end
  local st = { params = p, chat = chat }
  M.open[id] = st
  local buf = api.nvim_create_buf(false, true)
  st.buf = buf
  api.nvim_buf_set_lines(buf, 0, -1, false, M.lines(p, chat.root))
  api.nvim_buf_set_option(buf, 'filetype', 'markdown')
  api.nvim_buf_set_option(buf, 'modifiable', false)
  api.nvim_buf_set_option(buf, 'bufhidden', 'wipe')
  for i, o in ipairs(p.options or {}) do
    if i <= 9 then
      vim.keymap.set('n', tostring(i), function()
        M.respond(id, o.optionId)
      end, { buffer = buf, nowait = true })
    end
  end
  vim.keymap.set('n', 's', function()
    M.select(id)
  end, { buffer = buf, nowait = true })
  vim.keymap.set('n', 'q', function()
    M.hide(id)
  end, { buffer = buf, nowait = true })
  local cols, lines = vim.o.columns, vim.o.lines
  local w = math.max(40, math.min(100, cols - 6))
  local h = math.max(5, math.min(api.nvim_buf_line_count(buf), lines - 6))
  local conf = {
    relative = 'editor',
    row = math.floor((lines - h) / 2) - 1,
    col = math.floor((cols - w) / 2),
    width = w,
    height = h,
    style = 'minimal',
    border = require('ochat').config.ui.border,
    zindex = 60,
  }
  if util.has_float_title then
    conf.title = ' permission '
    conf.title_pos = 'center'
  end
  st.win = api.nvim_open_win(buf, true, conf)
  api.nvim_win_set_option(st.win, 'wrap', false)
  if M.use_select() then
    vim.schedule(function()
      M.select(id)
    end)
  end
end

--- Whether to open vim.ui.select at once: `permission.use_select` true/false, or 'auto': only when a UI plugin
--- replaced Neovim's own vim.ui.select (its inputlist would block the editor; the float's number keys do not).
function M.use_select()
  local v = require('ochat').config.permission.use_select
  if v == 'auto' then
    local info = debug.getinfo(vim.ui.select, 'S')
    return not (info and info.source and info.source:find('vim/ui.lua', 1, true))
  end
  return v == true
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
    api.nvim_win_close(st.win, true)
  end
end

function M.close(id)
  M.hide(id)
  local st = M.open[id]
  if st then
    st.resolved = true
  end
  M.open[id] = nil
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
