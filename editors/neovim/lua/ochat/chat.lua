-- ochat.chat: the chat window of one workspace and the conversation shown in it.
--
-- Owns: per-workspace chat state (connection, conversation id, agent, messages), the transcript buffer
-- (filetype=markdown, read-only, rendered incrementally with coalesced redraws), the prompt buffer (buftype=prompt,
-- `@file` completion), the float or split layout and its toggle, ochat/subscribe snapshots and ochat/event
-- streaming, ochat/agentState caching, send and cancel.
-- Never: parses agent or native-store formats, answers permissions (ochat.permission) or edits files (ochat.diff).
local util = require('ochat.util')
local render = require('ochat.render')
local rpc = require('ochat.rpc')

local M = {}

--- Chat states by workspace root.
M.states = {}

local api = vim.api

local Chat = {}
Chat.__index = Chat
M.Chat = Chat

local function cfg()
  return require('ochat').config
end

--- Finds the workspace root for a buffer: the configured function, else the nearest `.git` upward, else cwd.
function M.root_for(bufnr)
  local c = cfg()
  if c.root then
    local r = c.root(bufnr or 0)
    if r then
      return util.normpath(r)
    end
  end
  local ok, r = pcall(api.nvim_buf_get_var, bufnr or 0, 'ochat_root')
  if ok and type(r) == 'string' then
    return r -- a chat, prompt or diff buffer belongs to its workspace
  end
  local name = api.nvim_buf_get_name(bufnr or 0)
  local dir = util.normpath((name ~= '' and vim.fn.filereadable(name) == 1) and vim.fn.fnamemodify(name, ':p:h') or vim.fn.getcwd())
  local git = vim.fn.finddir('.git', dir .. ';')
  if git ~= '' then
    return util.normpath(vim.fn.fnamemodify(git, ':p:h:h')) -- ':p' of a directory ends in '/'
  end
  git = vim.fn.findfile('.git', dir .. ';') -- a worktree or submodule: .git is a file
  if git ~= '' then
    return util.normpath(vim.fn.fnamemodify(git, ':p:h'))
  end
  local cwd = util.normpath(vim.fn.getcwd())
  if dir == cwd or dir:sub(1, #cwd + 1) == cwd .. '/' then
    return cwd
  end
  return util.normpath(dir) -- a file outside the cwd and outside any repository: its own directory
end

--- Returns the chat state for the workspace of `bufnr` (or `root`), creating it and its connection if needed.
function M.get(root)
  root = util.normpath(root or M.root_for(0))
  local s = M.states[root]
  if s then
    return s
  end
  s = setmetatable({
    root = root,
    agent = cfg().agent,
    messages = {},
    by_id = {},
    blocks = {},
    agent_state = {}, -- agent -> last ochat/agentState params
    -- Render figures: flushes, time in flushes (ms), and lags = notification-to-flush delays (ms), for bench/.
    stats = { flushes = 0, total_ms = 0, max_ms = 0, last_ms = 0, lags = {} },
    dirty = {},
  }, Chat)
  M.states[root] = s
  require('ochat.diff').register()
  s.conn = rpc.get(root, cfg())
  s.conn:on('ochat/event', function(p)
    s:on_event(p)
  end)
  s.conn:on('ochat/agentState', function(p)
    if p.conversationId == s.conversation_id or not s.conversation_id then
      s:merge_agent_state(p)
      -- The agent's session title names the conversation only while the conversation has none: after a retry or
      -- an agent switch the agent names its new session after the prompt, which may start with a handoff block.
      if type(p.title) == 'string' and (s.title or '') == '' and not M.is_handoff(p.title) then
        s.title = p.title
      end
      s:update_title()
    end
  end)
  s.conn:on('ochat/queue', function(p)
    if s.conversation_id and p.conversationId == s.conversation_id then
      s:on_queue_sent(util.nn(p.sent))
      s:set_queue(p.items)
    end
  end)
  s.conn:on('ochat/fileChangeStatus', function(p)
    s:on_file_change_status(p)
  end)
  s.conn:on('ochat/sessionAppended', function(p)
    s:on_session_appended(p)
  end)
  s.conn:on('ochat/resync', function(p)
    -- We fell behind and were dropped from the live events, or another client edited or retried a message and the
    -- stored messages were replaced: take a fresh snapshot (with the running turn).
    if s.conversation_id and p.conversationId == s.conversation_id then
      if type(p.reason) == 'string' and p.reason:find('^conversation edited') then
        util.notify('the conversation was edited in another client: reloaded')
      end
      s:subscribe(s.conversation_id)
    end
  end)
  s.conn:on('ochat/ready', function(p)
    if p.reconnect then
      util.notify('reconnected to ochatd')
      if s.conversation_id then
        s:subscribe(s.conversation_id)
      end
    end
  end)
  require('ochat.permission').attach(s)
  return s
end

--- A message of this chat's model (render.new_message with the workspace root for relative paths).
function Chat:new_msg(msg)
  return render.new_message(msg, self.root)
end

-- Merges ochat/agentState params: a present field replaces, a missing one keeps the earlier value.
function Chat:merge_agent_state(p)
  local st = self.agent_state[p.agent or ''] or {}
  for k, v in pairs(p) do
    st[k] = v
  end
  self.agent_state[p.agent or ''] = st
end

-- The context meter belongs to a conversation's session: drop it when another one is shown (the agents' options
-- and commands stay, for picking them before the next conversation exists).
function Chat:forget_usage()
  for _, st in pairs(self.agent_state) do
    st.usage = nil
  end
end

--- Stops every chat (tests).
function M.reset()
  for _, s in pairs(M.states) do
    s:hide()
    for _, b in ipairs({ s.buf, s.prompt_buf }) do
      if b and api.nvim_buf_is_valid(b) then
        api.nvim_buf_delete(b, { force = true })
      end
    end
  end
  M.states = {}
  rpc.stop_all()
end

-- Buffers ----------------------------------------------------------------------------------------------------------

local function set_lines(buf, s, e, lines)
  api.nvim_buf_set_option(buf, 'modifiable', true)
  api.nvim_buf_set_lines(buf, s, e, false, lines)
  api.nvim_buf_set_option(buf, 'modifiable', false)
end

function Chat:ensure_buffers()
  if not (self.buf and api.nvim_buf_is_valid(self.buf)) then
    local buf = api.nvim_create_buf(false, true)
    self.buf = buf
    pcall(api.nvim_buf_set_name, buf, 'ochat://' .. self.root .. '/chat-' .. buf)
    api.nvim_buf_set_option(buf, 'bufhidden', 'hide')
    api.nvim_buf_set_option(buf, 'swapfile', false)
    api.nvim_buf_set_option(buf, 'filetype', 'markdown')
    api.nvim_buf_set_var(buf, 'ochat_root', self.root)
    self:full_render()
    self:map_chat_keys(buf)
  end
  if not (self.prompt_buf and api.nvim_buf_is_valid(self.prompt_buf)) then
    -- The input is a plain scratch buffer (buftype=nofile): several lines, pastes kept whole, never "modified" for
    -- :q/:qa, and no prompt-buffer line that Enter in Insert mode would send.
    local pb = api.nvim_create_buf(false, true)
    self.prompt_buf = pb
    pcall(api.nvim_buf_set_name, pb, 'ochat://' .. self.root .. '/input-' .. pb)
    api.nvim_buf_set_option(pb, 'buftype', 'nofile')
    api.nvim_buf_set_option(pb, 'bufhidden', 'hide')
    api.nvim_buf_set_option(pb, 'swapfile', false)
    api.nvim_buf_set_option(pb, 'filetype', 'markdown')
    api.nvim_buf_set_var(pb, 'ochat_root', self.root)
    api.nvim_buf_set_option(pb, 'omnifunc', "v:lua.require'ochat.chat'.omnifunc")
    self:map_prompt_keys(pb)
  end
end

--- The text in the input buffer ('' when there is none).
function Chat:input_text()
  if not (self.prompt_buf and api.nvim_buf_is_valid(self.prompt_buf)) then
    return ''
  end
  return vim.trim(table.concat(api.nvim_buf_get_lines(self.prompt_buf, 0, -1, false), '\n'))
end

--- Sends what the input buffer holds and empties it (kept when there is nothing to send).
function Chat:submit()
  local text = self:input_text()
  if text == '' and not self.pending_context then
    return util.notify('nothing to send: the input is empty (type your message, then <CR> in Normal mode or <C-s>)', vim.log.levels.WARN)
  end
  api.nvim_buf_set_lines(self.prompt_buf, 0, -1, false, {})
  self:send(text)
end

--- The keys of the chat and input buffers, as `?` lists them.
function Chat:key_help()
  local k = cfg().keymaps
  local rows = {
    { k.send, 'input, Normal mode: send the message (a turn running: queue it)' },
    { k.send_insert, 'input, Insert and Normal mode: send the message' },
    { k.focus_chat, 'input: go to the transcript' },
    { k.focus_prompt, 'transcript: go to the input' },
    { k.toggle_activity, 'transcript: expand/collapse the activity line of a turn' },
    { k.diff, 'transcript: diff of the file change under the cursor' },
    { k.apply, 'transcript: apply the file change under the cursor' },
    { k.revert, 'transcript: revert the file change under the cursor' },
    { k.edit, 'transcript: edit your message (or a queued one) under the cursor' },
    { k.retry, 'transcript: regenerate the answer under the cursor' },
    { k.queue_remove, 'transcript: remove the queued message under the cursor' },
    { k.queue_send_now, 'transcript: send the queued message under the cursor now (cancels the turn)' },
    { k.permission_allow, 'allow once the permission the agent asks (also :OChatAllow)' },
    { k.permission_deny, 'reject the permission the agent asks (also :OChatDeny)' },
    { k.permission_pick, 'pick any of the agent\'s options (also :OChatPermission)' },
    { k.cancel, 'cancel the turn' },
    { k.close, 'Normal mode: hide the chat' },
    { k.help, 'these keys' },
  }
  local out = {}
  for _, r in ipairs(rows) do
    if r[1] then
      table.insert(out, string.format('%-8s %s', r[1], r[2]))
    end
  end
  return out
end

function Chat:show_help()
  vim.api.nvim_echo({ { 'ochat keys\n' .. table.concat(self:key_help(), '\n'), 'Normal' } }, false, {})
end

-- Keys both buffers share: answering the agent's pending permission request without leaving where one types.
function Chat:map_permission_keys(buf)
  local k = cfg().keymaps
  local perm = require('ochat.permission')
  for lhs, fn in pairs({
    [k.permission_allow or ''] = function()
      perm.answer(self, 'allow')
    end,
    [k.permission_deny or ''] = function()
      perm.answer(self, 'deny')
    end,
    [k.permission_pick or ''] = function()
      perm.answer(self, 'pick')
    end,
  }) do
    if lhs ~= '' then
      vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true })
    end
  end
  if k.help then
    vim.keymap.set('n', k.help, function()
      self:show_help()
    end, { buffer = buf, nowait = true, silent = true, desc = 'ochat: list the keys' })
  end
end

function Chat:map_chat_keys(buf)
  local k = cfg().keymaps
  local function map(lhs, fn, desc)
    if lhs then
      vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
    end
  end
  map(k.toggle_activity, function()
    self:toggle_activity_at_cursor()
  end, 'ochat: expand/collapse activity')
  map(k.diff, function()
    self:file_action_at_cursor('open')
  end, 'ochat: diff of the file change under the cursor (or of the turn)')
  map(k.apply, function()
    self:file_action_at_cursor('apply')
  end, 'ochat: apply the file change under the cursor')
  map(k.revert, function()
    self:file_action_at_cursor('revert')
  end, 'ochat: revert the file change under the cursor')
  map(k.close, function()
    self:hide()
  end, 'ochat: hide the chat')
  map(k.cancel, function()
    self:cancel()
  end, 'ochat: cancel the turn')
  map(k.focus_prompt, function()
    self:focus_prompt()
  end, 'ochat: go to the prompt')
  if k.focus_prompt == 'i' then
    map('a', function()
      self:focus_prompt()
    end, 'ochat: go to the prompt')
  end
  map(k.edit, function()
    if self:queue_item_at_cursor() then
      return self:queue_action_at_cursor('edit')
    end
    self:edit_interactive(self:message_at_cursor())
  end, 'ochat: edit the message under the cursor and run it again')
  map(k.retry, function()
    self:retry(self:message_at_cursor())
  end, 'ochat: regenerate the answer under the cursor')
  map(k.queue_remove, function()
    self:queue_action_at_cursor('remove')
  end, 'ochat: remove the queued message under the cursor')
  map(k.queue_send_now, function()
    self:queue_action_at_cursor('sendNow')
  end, 'ochat: send the queued message under the cursor now')
  self:map_permission_keys(buf)
end

function Chat:map_prompt_keys(buf)
  local k = cfg().keymaps
  if k.send then
    vim.keymap.set('n', k.send, function()
      self:submit()
    end, { buffer = buf, nowait = true, silent = true, desc = 'ochat: send the message' })
  end
  if k.send_insert then
    vim.keymap.set({ 'n', 'i' }, k.send_insert, function()
      self:submit()
    end, { buffer = buf, silent = true, desc = 'ochat: send the message' })
  end
  self:map_permission_keys(buf)
  if k.close then
    vim.keymap.set('n', k.close, function()
      self:hide()
    end, { buffer = buf, nowait = true, silent = true })
  end
  if k.cancel then
    vim.keymap.set({ 'n', 'i' }, k.cancel, function()
      self:cancel()
    end, { buffer = buf, silent = true })
  end
  if k.focus_chat then
    vim.keymap.set({ 'n', 'i' }, k.focus_chat, function()
      self:focus_chat()
    end, { buffer = buf, silent = true, desc = 'ochat: go to the chat buffer' })
  end
  -- `@` followed by a file name: complete workspace files.
  vim.keymap.set('i', '@', function()
    vim.schedule(function()
      if api.nvim_get_current_buf() == buf and vim.fn.pumvisible() == 0 then
        api.nvim_feedkeys(api.nvim_replace_termcodes('<C-x><C-o>', true, false, true), 'n', false)
      end
    end)
    return '@'
  end, { buffer = buf, expr = true })
end

-- The agent whose state applies: the one picked, else the one that answered last.
function Chat:current_agent()
  if self.agent then
    return self.agent
  end
  for i = #self.messages, 1, -1 do
    if self.messages[i].agent then
      return self.messages[i].agent
    end
  end
end

--- The slash commands the current agent reported (ochat/agentState `commands`), as {name, description}.
function Chat:commands()
  local st = self.agent_state[self:current_agent() or '']
  return st and util.nn(st.commands) or {}
end

local omni_kind

--- omnifunc for the prompt: `@partial` completes files relative to the workspace root; `/partial` at the start of
--- the prompt completes the agent's slash commands.
function M.omnifunc(findstart, base)
  local root = vim.b.ochat_root or vim.fn.getcwd()
  if findstart == 1 then
    local line = api.nvim_get_current_line():sub(1, api.nvim_win_get_cursor(0)[2])
    local slash = line:match('^/[^%s]*$')
    if slash then
      omni_kind = 'command'
      return api.nvim_win_get_cursor(0)[2] - #slash + 1
    end
    local at = line:find('@[^%s@]*$')
    omni_kind = 'file'
    if not at then
      return -3
    end
    return api.nvim_win_get_cursor(0)[2] - (#line - at)
  end
  local out = {}
  if omni_kind == 'command' then
    local s = M.states[root]
    for _, c in ipairs(s and s:commands() or {}) do
      if vim.startswith(c.name, base) then
        table.insert(out, { word = c.name, menu = '[/]', info = util.nn(c.description) or '' })
      end
    end
    return out
  end
  for _, f in ipairs(vim.fn.glob(root .. '/' .. base .. '*', false, true)) do
    local rel = util.relpath(f, root)
    if vim.fn.isdirectory(f) == 1 then
      rel = rel .. '/'
    end
    table.insert(out, { word = rel, menu = '[file]' })
    if #out >= 200 then
      break
    end
  end
  return out
end

-- Rendering -------------------------------------------------------------------------------------------------------

local TOP = 2 -- title line + blank

-- A title on one line (agents name sessions after multi-line prompts), at most 100 bytes.
local function one_line(t)
  t = (t or ''):gsub('%s+', ' ')
  t = vim.trim(t)
  if #t > 100 then
    t = t:sub(1, 99) .. '…'
  end
  return t
end

--- Whether `text` starts with a handoff block (the context the daemon gives an agent that joins a conversation),
--- which is prompt plumbing and never a title.
function M.is_handoff(text)
  return type(text) == 'string' and vim.trim(text):match('^<handoff[%s>]') ~= nil
end

-- `line` cut to `width` display cells (the last one an ellipsis when cut).
local function fit(line, width)
  if width <= 0 or vim.fn.strdisplaywidth(line) <= width then
    return line
  end
  local n = vim.fn.strchars(line)
  while n > 0 and vim.fn.strdisplaywidth(vim.fn.strcharpart(line, 0, n)) > width - 1 do
    n = n - 1
  end
  return vim.fn.strcharpart(line, 0, n) .. '…'
end

-- The text width of the chat window (0: no window).
function Chat:text_width()
  if not (self.win and api.nvim_win_is_valid(self.win)) then
    return 0
  end
  local w = api.nvim_win_get_width(self.win)
  local ok, info = pcall(vim.fn.getwininfo, self.win)
  if ok and info[1] and type(info[1].textoff) == 'number' then
    w = w - info[1].textoff
  end
  return w
end

-- The conversation's title on one line ('' for none, or for a handoff block).
function Chat:shown_title()
  return M.is_handoff(self.title) and '' or one_line(self.title)
end

function Chat:title_line()
  local t = self:shown_title()
  local parts = { '# ' .. (t ~= '' and t or 'ochat') }
  local agent = self:current_agent()
  local answered
  for i = #self.messages, 1, -1 do
    if self.messages[i].agent then
      answered = self.messages[i].agent
      break
    end
  end
  if answered and agent and answered ~= agent then
    -- This conversation's agent, and the one the next message goes to (picked with :OChatAgent or in setup{}).
    table.insert(parts, answered .. ' (next: ' .. agent .. ')')
  elseif agent and agent ~= '' then
    table.insert(parts, agent)
  end
  -- The context meter, as the agent reported it (ACP usage_update: used / size tokens).
  local st = self.agent_state[agent or '']
  local usage = st and util.nn(st.usage)
  if type(usage) == 'table' and type(util.nn(usage.used)) == 'number' and type(util.nn(usage.size)) == 'number' and usage.size > 0 then
    table.insert(parts, string.format('context %d%% (%d/%d)', math.floor(usage.used * 100 / usage.size + 0.5), usage.used, usage.size))
  end
  return fit(table.concat(parts, '  ·  '), self:text_width())
end

function Chat:update_title()
  if self.buf and api.nvim_buf_is_valid(self.buf) then
    set_lines(self.buf, 0, 1, { self:title_line() })
  end
  if self.win and api.nvim_win_is_valid(self.win) and util.has_float_title and cfg().ui.layout == 'float' then
    local t = self:shown_title()
    pcall(api.nvim_win_set_config, self.win, { title = ' ' .. (t ~= '' and t or 'ochat') .. ' ', title_pos = 'center' })
  end
end

-- Highlights of the activity block, created on first use: the summary line, tool/plan/reasoning details, file lines
-- and failed tools. Users can override the groups; these are default links.
local hl_ns
local function highlight_ns()
  if not hl_ns then
    hl_ns = api.nvim_create_namespace('ochat_activity')
    -- OChatNormal/OChatBorder: the chat floats look like the editor, not like Neovim 0.7's magenta Pmenu
    -- (NormalFloat's default there).
    for group, link in pairs({ OChatActivity = 'Comment', OChatDetail = 'NonText', OChatFile = 'Directory', OChatError = 'ErrorMsg', OChatStatus = 'WarningMsg', OChatNormal = 'Normal', OChatBorder = 'FloatBorder', OChatPermissionBorder = 'WarningMsg' }) do
      vim.cmd(string.format('highlight default link %s %s', group, link))
    end
  end
  return hl_ns
end

-- Highlights a block's tool and file lines in the body (from body line `from`) and its activity block (after the
-- body).
function Chat:highlight_activity(b, from)
  local ns = highlight_ns()
  local m = b.msg
  for i = from or 1, b.blen do
    local seg = m and m.line_items and m.line_items[i]
    if seg then
      local group = seg.type == 'fileChange' and (seg.status == 'rejected' and 'OChatDetail' or 'OChatFile') or (seg.status == 'error' and 'OChatError' or 'OChatActivity')
      api.nvim_buf_add_highlight(self.buf, ns, group, b.start + i, 0, -1)
    end
  end
  local a0 = b.start + 1 + b.blen
  for i = 0, b.alen - 1 do
    local item = b.items and b.items[i + 1]
    local group = 'OChatDetail'
    if i == 0 then
      group = 'OChatActivity'
    elseif item and item.kind == 'file' then
      group = item.seg.status == 'rejected' and 'OChatDetail' or 'OChatFile'
    elseif item and item.kind == 'tool' and item.seg.status == 'error' then
      group = 'OChatError'
    end
    api.nvim_buf_add_highlight(self.buf, ns, group, a0 + i, 0, -1)
    if i == 0 and item and item.mark_col and item.status ~= 'cancelled' then
      -- "⚠ interrupted", "✗ failed: …" stand out from the summary before them.
      api.nvim_buf_add_highlight(self.buf, ns, item.status == 'failed' and 'OChatError' or 'OChatStatus', a0, item.mark_col, -1)
    end
  end
end

local function block_len(b)
  return 1 + b.alen + b.blen + 1
end

function Chat:block_lines(m)
  local act, items = render.activity(m, cfg().ui, self.root)
  local body = render.body_lines(m)
  local lines = { render.header(m) }
  vim.list_extend(lines, body)
  vim.list_extend(lines, act)
  table.insert(lines, '')
  return lines, { alen = #act, blen = #body, items = items }
end

--- Re-renders the whole buffer from the model (snapshots, history).
function Chat:full_render()
  if not (self.buf and api.nvim_buf_is_valid(self.buf)) then
    return
  end
  local lines = { self:title_line(), '' }
  self.blocks = {}
  for _, m in ipairs(self.messages) do
    local bl, info = self:block_lines(m)
    info.msg = m
    info.start = #lines
    table.insert(self.blocks, info)
    m.block = info
    vim.list_extend(lines, bl)
  end
  self.dirty = {}
  set_lines(self.buf, 0, -1, lines)
  api.nvim_buf_clear_namespace(self.buf, highlight_ns(), 0, -1)
  for _, b in ipairs(self.blocks) do
    self:highlight_activity(b)
  end
  self:render_footer()
  self:follow()
end

-- The first line (0-based) after the last message block: where the footer (pending permission, queue) starts.
function Chat:footer_start()
  local last = self.blocks[#self.blocks]
  return last and (last.start + block_len(last)) or TOP
end

--- The footer under the messages: the permission requests that wait for an answer and the queued messages, with
--- their keys. `self.footer_items[line index]` is the queue item on that line.
function Chat:footer_lines()
  local k = cfg().keymaps
  local lines, items = {}, {}
  for _, p in ipairs(require('ochat.permission').pending(self)) do
    table.insert(lines, '> ⚠ ' .. require('ochat.permission').summary(p))
    table.insert(lines, string.format('> %s allow once · %s reject · %s all options · :OChatPermission shows the details', k.permission_allow or ':OChatAllow', k.permission_deny or ':OChatDeny', k.permission_pick or ':OChatPermission'))
    table.insert(lines, '')
  end
  local q = self.queue or {}
  if #q > 0 then
    table.insert(lines, string.format('## Queued (%d) · sent when the turn ends · %s edit · %s remove · %s send now', #q, k.edit or '', k.queue_remove or '', k.queue_send_now or ''))
    for i, it in ipairs(q) do
      local text = util.nn(it.text) or ''
      local first = one_line(text:match('[^\n]*'))
      local more = select(2, text:gsub('\n', '')) > 0 and ' …' or ''
      table.insert(lines, string.format('%d. %s%s%s', i, first, more, util.nn(it.agent) and (' (' .. it.agent .. ')') or ''))
      items[#lines] = it
    end
    table.insert(lines, '')
  end
  return lines, items
end

function Chat:render_footer()
  if not (self.buf and api.nvim_buf_is_valid(self.buf)) then
    return
  end
  self:flush()
  local lines, items = self:footer_lines()
  local start = self:footer_start()
  set_lines(self.buf, start, -1, lines)
  self.footer_items = items
  for i = 1, #lines do
    if lines[i]:sub(1, 1) == '>' or lines[i]:sub(1, 2) == '##' then
      api.nvim_buf_add_highlight(self.buf, highlight_ns(), 'OChatStatus', start + i - 1, 0, -1)
    end
  end
  self:follow()
end

-- Queue (docs/protocol.md "Message queue") ------------------------------------------------------------------------

--- Takes the conversation's queue (ochat/queue, or a snapshot's `queue`) and shows it.
function Chat:set_queue(items)
  self.queue = util.nn(items) or {}
  self:render_footer()
end

-- The daemon sent a queued message as the next turn (`sent` {id, userMessageId, assistantMessageId}, before the
-- turn's first event): show its prompt and the turn, with no round trip.
function Chat:on_queue_sent(sent)
  if type(sent) ~= 'table' or not sent.userMessageId or self.by_id[sent.userMessageId] then
    return
  end
  local item
  for _, it in ipairs(self.queue or {}) do
    if it.id == sent.id then
      item = it
    end
  end
  if not item then
    return -- not known here: the turn's first event fetches the stored prompt (adopt_turn)
  end
  self:add_message(self:new_msg({ id = sent.userMessageId, role = 'user', content = util.nn(item.text) or '', attachments = util.nn(item.attachments) }))
  local aid = sent.assistantMessageId or sent.turnId
  if aid and not self.by_id[aid] then
    self:add_message(self:new_msg({ id = aid, role = 'assistant', agent = util.nn(item.agent), status = 'streaming' }))
  end
  self.running_id = aid
end

--- The queued message under the cursor in the chat buffer, or nil.
function Chat:queue_item_at_cursor()
  if not (self.buf and api.nvim_get_current_buf() == self.buf) or not self.footer_items then
    return nil
  end
  return self.footer_items[api.nvim_win_get_cursor(0)[1] - self:footer_start()]
end

--- Edits ('edit', with `text` or asked for), removes ('remove') or sends now ('sendNow') a queued message.
function Chat:queue_action(item, action, text, cb)
  local params = { conversationId = self.conversation_id, id = item.id }
  local function go(method)
    self.conn:request(method, params, function(err, res)
      if err then
        util.notify('queue: ' .. util.err_text(err), vim.log.levels.ERROR)
      end
      if cb then
        cb(err, res)
      end
    end)
  end
  if action == 'remove' then
    return go('ochat/queue/remove')
  elseif action == 'sendNow' then
    return go('ochat/queue/sendNow')
  end
  if text then
    params.text = text
    return go('ochat/queue/update')
  end
  self:edit_text(util.nn(item.text) or '', 'queued message', function(t)
    params.text = t
    go('ochat/queue/update')
  end)
end

function Chat:queue_action_at_cursor(action)
  local it = self:queue_item_at_cursor()
  if not it then
    return util.notify('no queued message under the cursor', vim.log.levels.WARN)
  end
  self:queue_action(it, action)
end

--- :OChatQueue: pick a queued message, then what to do with it.
function Chat:pick_queue()
  local q = self.queue or {}
  if #q == 0 then
    return util.notify('nothing is queued')
  end
  vim.ui.select(q, {
    prompt = 'queued message',
    format_item = function(it)
      return one_line(util.nn(it.text) or '')
    end,
  }, function(it)
    if not it then
      return
    end
    local acts = { { 'edit', 'Edit' }, { 'sendNow', 'Send now (cancels the running turn)' }, { 'remove', 'Remove' } }
    vim.ui.select(acts, {
      prompt = 'queued message',
      format_item = function(a)
        return a[2]
      end,
    }, function(a)
      if a then
        self:queue_action(it, a[1])
      end
    end)
  end)
end

-- Takes a message out of the transcript (a prompt the daemon queued instead of running).
function Chat:drop_message(m)
  local i = self:index_of(m)
  if i then
    table.remove(self.messages, i)
    self:full_render()
  end
end

function Chat:add_message(m)
  table.insert(self.messages, m)
  if m.id then
    self.by_id[m.id] = m
  end
  if not (self.buf and api.nvim_buf_is_valid(self.buf)) then
    return
  end
  self:flush() -- earlier dirty blocks first, so starts are right
  self.last_flush = nil -- a new block is not streaming: its first change need not wait for the interval
  local last = self.blocks[#self.blocks]
  local start = last and (last.start + block_len(last)) or TOP
  local bl, info = self:block_lines(m)
  info.msg = m
  info.start = start
  m.block = info
  table.insert(self.blocks, info)
  set_lines(self.buf, start, start, bl)
  self:highlight_activity(info)
  self:follow()
end

-- Marks a message dirty and schedules a coalesced flush.
function Chat:mark(m, d)
  if not d then
    return
  end
  local cur = self.dirty[m]
  if not cur then
    cur = {}
    self.dirty[m] = cur
  end
  self.dirty_since = self.dirty_since or util.now_ms()
  cur.header = cur.header or d.header
  cur.activity = cur.activity or d.activity
  if d.activity and not d.body_from then
    d = { body_from = render.refresh_lines(m) } -- a file change's status also shows on its line in the body
  end
  if d.body_from then
    cur.body_from = cur.body_from and math.min(cur.body_from, d.body_from) or d.body_from
  end
  -- Under a flood of notifications the scheduled flush waits behind them: flush inline once the oldest change has
  -- waited a whole interval, so the lag stays near one interval.
  if util.now_ms() - self.dirty_since >= cfg().ui.render_interval_ms then
    return self:flush()
  end
  self:schedule_flush()
end

function Chat:schedule_flush()
  if self.flush_scheduled then
    return
  end
  self.flush_scheduled = true
  local wait = cfg().ui.render_interval_ms - (util.now_ms() - (self.last_flush or 0))
  local function run()
    self.flush_scheduled = false
    self:flush()
  end
  if wait > 1 then
    vim.defer_fn(run, math.floor(wait))
  else
    vim.schedule(run)
  end
end

--- Writes every pending change to the buffer: per dirty message, the changed tail of the body, the activity block
--- and the header, bottom-up, then shifts the blocks below. One call is one "update batch".
function Chat:flush()
  if next(self.dirty) == nil or not (self.buf and api.nvim_buf_is_valid(self.buf)) then
    self.dirty = {}
    self.dirty_since = nil
    return
  end
  local t0 = util.now_ms()
  local buf = self.buf
  api.nvim_buf_set_option(buf, 'modifiable', true)
  local shift = 0
  for _, b in ipairs(self.blocks) do
    b.start = b.start + shift
    local d = self.dirty[b.msg]
    if d then
      local m = b.msg
      local before = block_len(b)
      if d.body_from then
        local body = render.body_lines(m)
        local from = math.max(1, math.min(d.body_from, b.blen + 1, #body + 1))
        local s = b.start + 1
        api.nvim_buf_set_lines(buf, s + from - 1, s + b.blen, false, vim.list_slice(body, from))
        b.blen = #body
        if not d.activity then
          self:highlight_activity({ msg = m, start = b.start, blen = b.blen, alen = 0 }, from)
        end
      end
      if d.activity then
        local act, items = render.activity(m, cfg().ui, self.root)
        local a0 = b.start + 1 + b.blen
        api.nvim_buf_set_lines(buf, a0, a0 + b.alen, false, act)
        b.alen = #act
        b.items = items
        self:highlight_activity(b, d.body_from or b.blen + 1)
      end
      if d.header then
        api.nvim_buf_set_lines(buf, b.start, b.start + 1, false, { render.header(m) })
      end
      shift = shift + block_len(b) - before
    end
  end
  api.nvim_buf_set_option(buf, 'modifiable', false)
  self.dirty = {}
  self:follow()
  local now = util.now_ms()
  local dt = now - t0
  self.last_flush = now
  local st = self.stats
  -- Notification-to-buffer latency: from the first change of this batch to its flush (coalescing included).
  if self.dirty_since then
    local lag = now - self.dirty_since
    self.dirty_since = nil
    st.lags = st.lags or {}
    if #st.lags >= 1000 then
      table.remove(st.lags, 1)
    end
    table.insert(st.lags, lag)
  end
  st.flushes = st.flushes + 1
  st.total_ms = st.total_ms + dt
  st.last_ms = dt
  if dt > st.max_ms then
    st.max_ms = dt
  end
end

-- Keeps the cursor on the last line while the user has not moved away from it.
function Chat:follow()
  local win = self.win
  if not (win and api.nvim_win_is_valid(win)) or api.nvim_win_get_buf(win) ~= self.buf then
    return
  end
  local n = api.nvim_buf_line_count(self.buf)
  local cur = api.nvim_win_get_cursor(win)[1]
  if self.force_follow or cur >= (self.last_line_count or n) - 3 then
    -- The cursor goes to the end of the last line with text: on the blank line below a streamed paragraph taller
    -- than the window, the window would show that blank line alone; at the paragraph's end it shows its newest text.
    local lnum, text = n, ''
    for l = n, math.max(1, n - 3), -1 do
      text = api.nvim_buf_get_lines(self.buf, l - 1, l, false)[1] or ''
      lnum = l
      if text ~= '' then
        break
      end
    end
    api.nvim_win_set_cursor(win, { lnum, math.max(0, #text - 1) })
  end
  self.force_follow = false
  self.last_line_count = n
end

--- Puts the top of the window at the start of the last turn (the last prompt of yours), else the first line.
function Chat:scroll_to_last_turn()
  self:flush()
  local line = 1
  for i = #self.blocks, 1, -1 do
    if self.blocks[i].msg.role == 'user' then
      line = self.blocks[i].start + 1
      break
    end
  end
  if self.win and api.nvim_win_is_valid(self.win) and api.nvim_win_get_buf(self.win) == self.buf then
    pcall(api.nvim_win_set_cursor, self.win, { line, 0 })
    api.nvim_win_call(self.win, function()
      vim.cmd('normal! zt')
    end)
    self.last_line_count = math.huge -- the user reads from here: do not jump to the end while a turn streams
  end
end

-- Message/turn lookup by cursor.
function Chat:block_at(lnum0)
  for _, b in ipairs(self.blocks) do
    if lnum0 >= b.start and lnum0 < b.start + block_len(b) then
      return b
    end
  end
end

function Chat:toggle_activity_at_cursor()
  local l = api.nvim_win_get_cursor(0)[1] - 1
  local b = self:block_at(l)
  if not b or b.alen == 0 or (b.items and b.items[1] and b.items[1].kind == 'status') then
    return -- no activity, or only the status marker: nothing to expand
  end
  b.msg.expanded = not b.msg.expanded
  self:mark(b.msg, { activity = true })
  self:flush()
  pcall(api.nvim_win_set_cursor, 0, { b.start + 2 + b.blen, 0 })
end

-- The segment item under body/activity line `l` (0-based) of block `b`: {kind='file'|'tool'|…, seg}, or nil.
function Chat:item_at(b, l)
  local bi = l - b.start
  if bi >= 1 and bi <= b.blen then
    local seg = b.msg.line_items and b.msg.line_items[bi]
    return seg and { kind = seg.type == 'fileChange' and 'file' or 'tool', seg = seg }
  end
  return b.items and b.items[bi - b.blen]
end

function Chat:file_action_at_cursor(action)
  local l = api.nvim_win_get_cursor(0)[1] - 1
  local b = self:block_at(l)
  local diff = require('ochat.diff')
  if b then
    local item = self:item_at(b, l)
    if item and item.kind == 'file' then
      if action == 'open' then
        return diff.open(self, b.msg, item.seg)
      end
      return diff.change(self, b.msg, item.seg, action)
    end
    if action == 'open' and #render.file_changes(b.msg) > 0 then
      return diff.review(self, b.msg)
    end
  end
  util.notify('no file change under the cursor', vim.log.levels.WARN)
end

-- Windows ---------------------------------------------------------------------------------------------------------

function Chat:is_open()
  return self.win ~= nil and api.nvim_win_is_valid(self.win)
end

local function float_geometry(ui)
  local cols, lines = vim.o.columns, vim.o.lines - vim.o.cmdheight - 1
  local w = ui.width <= 1 and math.floor(cols * ui.width) or ui.width
  local h = ui.height <= 1 and math.floor(lines * ui.height) or ui.height
  w = math.max(20, math.min(w, cols - 4))
  h = math.max(6, math.min(h, lines - 2))
  local ph = ui.prompt_height
  local row = math.floor((lines - h) / 2)
  local col = math.floor((cols - w) / 2)
  return { w = w, chat_h = h - ph - 2, prompt_h = ph, row = row, col = col }
end

--- Opens (or focuses) the chat window. `opts.focus`: 'prompt' (default) | 'chat' | false.
function Chat:open(opts)
  opts = opts or {}
  self:ensure_buffers()
  local ui = cfg().ui
  if not self:is_open() then
    if ui.layout == 'split' then
      local cmd = ui.split == 'horizontal' and 'botright split' or 'botright vsplit'
      vim.cmd(cmd)
      self.win = api.nvim_get_current_win()
      api.nvim_win_set_buf(self.win, self.buf)
      if ui.split == 'horizontal' then
        api.nvim_win_set_height(self.win, ui.split_size)
      else
        api.nvim_win_set_width(self.win, ui.split_size)
      end
      vim.cmd('belowright ' .. ui.prompt_height .. 'split')
      self.prompt_win = api.nvim_get_current_win()
      api.nvim_win_set_buf(self.prompt_win, self.prompt_buf)
    else
      local g = float_geometry(ui)
      local conf = {
        relative = 'editor',
        row = g.row,
        col = g.col,
        width = g.w,
        height = g.chat_h,
        style = 'minimal',
        border = ui.border,
        zindex = 45,
      }
      if util.has_float_title then
        local t = self:shown_title()
        conf.title = ' ' .. (t ~= '' and t or 'ochat') .. ' '
        conf.title_pos = 'center'
      end
      self.win = api.nvim_open_win(self.buf, false, conf)
      self.prompt_win = api.nvim_open_win(self.prompt_buf, false, {
        relative = 'editor',
        row = g.row + g.chat_h + 2,
        col = g.col,
        width = g.w,
        height = g.prompt_h,
        style = 'minimal',
        border = ui.border,
        zindex = 45,
      })
    end
    for _, w in ipairs({ self.win, self.prompt_win }) do
      api.nvim_win_set_option(w, 'wrap', true)
      api.nvim_win_set_option(w, 'linebreak', true)
      api.nvim_win_set_option(w, 'winfixwidth', true)
    end
    if ui.layout == 'float' then
      highlight_ns()
      for _, w in ipairs({ self.win, self.prompt_win }) do
        api.nvim_win_set_option(w, 'winhighlight', 'Normal:OChatNormal,NormalFloat:OChatNormal,FloatBorder:OChatBorder')
      end
    end
    -- No conceal: Neovim 0.7's markdown syntax hides the `**` around inline code and the code's backticks with it.
    api.nvim_win_set_option(self.win, 'conceallevel', 0)
    self:watch_windows()
    self:update_title() -- fitted to the window now there is one
    self.force_follow = true
    self:follow()
  end
  if opts.focus == 'chat' then
    api.nvim_set_current_win(self.win)
  elseif opts.focus ~= false then
    api.nvim_set_current_win(self.prompt_win)
    if opts.insert == true or (opts.insert == nil and cfg().ui.start_in_insert) then
      vim.cmd('startinsert!')
    else
      vim.cmd('stopinsert') -- a command typed next (`:lua …`) runs as a command
    end
  end
end

-- Closing either window of the pair hides both; other windows coming and going leave the chat alone.
function Chat:watch_windows()
  local group = api.nvim_create_augroup('ochat_chat_' .. self.buf, { clear = true })
  api.nvim_create_autocmd('WinClosed', {
    group = group,
    callback = function(ev)
      local w = tonumber(ev.match)
      if w == self.win or w == self.prompt_win then
        vim.schedule(function()
          self:hide()
        end)
      end
    end,
  })
  api.nvim_create_autocmd('VimResized', {
    group = group,
    callback = function()
      vim.schedule(function()
        self:update_title()
      end)
      if self:is_open() and cfg().ui.layout == 'float' then
        local g = float_geometry(cfg().ui)
        pcall(api.nvim_win_set_config, self.win, { relative = 'editor', row = g.row, col = g.col, width = g.w, height = g.chat_h })
        pcall(api.nvim_win_set_config, self.prompt_win, { relative = 'editor', row = g.row + g.chat_h + 2, col = g.col, width = g.w, height = g.prompt_h })
      end
    end,
  })
end

function Chat:hide()
  if self.buf then
    pcall(api.nvim_del_augroup_by_name, 'ochat_chat_' .. self.buf)
  end
  for _, w in ipairs({ self.prompt_win, self.win }) do
    if w and api.nvim_win_is_valid(w) then
      if #api.nvim_list_wins() > 1 then
        pcall(api.nvim_win_close, w, true)
      end
    end
  end
  self.win, self.prompt_win = nil, nil
end

function Chat:toggle()
  if self:is_open() then
    self:hide()
  else
    self:open()
  end
end

--- Moves the cursor from the prompt to the chat buffer (Normal mode, at the end).
function Chat:focus_chat()
  if self.win and api.nvim_win_is_valid(self.win) then
    vim.cmd('stopinsert')
    api.nvim_set_current_win(self.win)
  end
end

function Chat:focus_prompt()
  if self.prompt_win and api.nvim_win_is_valid(self.prompt_win) then
    api.nvim_set_current_win(self.prompt_win)
    vim.cmd('startinsert!')
  end
end

-- Conversation ----------------------------------------------------------------------------------------------------

--- Replaces the model with a stored snapshot (ochat/subscribe or ochat/conversations/get result).
function Chat:load_snapshot(res)
  local conv = res.conversation or {}
  self.conversation_id = conv.id or self.conversation_id
  self.title = util.nn(conv.title)
  self.messages, self.by_id = {}, {}
  for _, msg in ipairs(res.messages or {}) do
    if not msg.hidden then
      local m = self:new_msg(msg)
      table.insert(self.messages, m)
      self.by_id[m.id] = m
    end
  end
  local running = util.nn(res.running)
  if running then
    local mid = running.assistantMessageId or running.turnId
    -- Replay the running turn from its start: from the events so far, or, when the daemon's replay buffer overflowed
    -- (truncated), from the partial message as of lastSeq. Live events then continue after the last seq seen.
    local base = { id = mid, role = 'assistant', agent = running.agent, status = 'streaming' }
    local partial = util.nn(running.message)
    if util.nn(running.truncated) and type(partial) == 'table' then
      base = vim.tbl_extend('force', partial, { id = mid, status = 'streaming' })
    end
    local fresh = self:new_msg(base)
    local m = self.by_id[mid]
    if m then
      for k, v in pairs(fresh) do
        m[k] = v
      end
    else
      m = fresh
      table.insert(self.messages, m)
      self.by_id[mid] = m
    end
    for _, ev in ipairs(util.nn(running.events) or {}) do
      render.apply_event(m, ev)
    end
    local last = util.nn(running.lastSeq)
    if type(last) == 'number' and last > m.last_seq then
      m.last_seq = last
    end
  end
  -- Another conversation: the header shows its agent and context meter, not the previous one's (a resync of the same
  -- one keeps them).
  if self.loaded_id ~= self.conversation_id then
    self.loaded_id = self.conversation_id
    self:forget_usage()
  end
  self.queue = util.nn(res.queue) or {}
  -- What earlier ochat/agentState notifications said, for a late subscriber (merged per agent).
  for _, st in ipairs(util.nn(res.agentStates) or {}) do
    self:merge_agent_state(st)
  end
  self:full_render()
  for _, p in ipairs(util.nn(res.permissions) or {}) do
    require('ochat.permission').show(self, p)
  end
end

--- Subscribes to a conversation and shows it; `cb(err)` when done.
function Chat:subscribe(id, cb)
  self:unfollow()
  local prev = self.conversation_id
  if prev and prev ~= id then
    self.conn:request('ochat/unsubscribe', { conversationId = prev })
  end
  self.conversation_id = id
  self.conn:request('ochat/subscribe', { conversationId = id }, function(err, res)
    if err then
      util.notify('open conversation: ' .. util.err_text(err), vim.log.levels.ERROR)
    else
      self:load_snapshot(res)
    end
    if cb then
      cb(err)
    end
  end)
end

--- Starts a new, empty conversation (the next prompt creates it).
function Chat:new_conversation()
  self:unfollow()
  if self.conversation_id then
    self.conn:request('ochat/unsubscribe', { conversationId = self.conversation_id })
  end
  self.conversation_id, self.title = nil, nil
  self.messages, self.by_id = {}, {}
  self.queue = {}
  self:forget_usage()
  if self.prompt_buf and api.nvim_buf_is_valid(self.prompt_buf) then
    api.nvim_buf_set_lines(self.prompt_buf, 0, -1, false, {}) -- a draft belongs to the conversation it was typed in
  end
  self:full_render()
end

-- Terminal-started sessions -----------------------------------------------------------------------------------------

--- Opens a native session as the conversation ochat/sessions/open makes of it (or made before) and subscribes.
--- `ref` is {sessionId} or {path}. `cb(err)`.
function Chat:open_native(ref, cb)
  self.conn:request('ochat/sessions/open', ref, function(err, res)
    if err then
      util.notify('open session: ' .. util.err_text(err), vim.log.levels.ERROR)
      return cb and cb(err)
    end
    self:subscribe(res.conversationId, cb)
  end)
end

--- Shows a native session that a terminal is still writing, read-only, growing with each ochat/sessionAppended.
--- The next prompt turns it into a conversation first (see send). `cb(err)`.
function Chat:follow_native(ref, entry, cb)
  if self.conversation_id then
    self.conn:request('ochat/unsubscribe', { conversationId = self.conversation_id })
  end
  self:unfollow()
  self.conn:request('ochat/sessions/follow', ref, function(err, res)
    if err then
      util.notify('follow session: ' .. util.err_text(err), vim.log.levels.ERROR)
      return cb and cb(err)
    end
    local session = util.nn(res.session) or {}
    self.conversation_id = nil
    self.native = { ref = ref, sessionId = util.nn(res.sessionId), path = util.nn(res.path), agent = util.nn(res.agent) }
    self.title = util.nn(session.title) or (entry and entry.title) or ''
    self:set_native_messages(util.nn(res.messages) or {}, true)
    if cb then
      cb(nil)
    end
  end)
end

function Chat:set_native_messages(msgs, reset)
  if reset then
    self.messages, self.by_id = {}, {}
  end
  for _, msg in ipairs(msgs) do
    if not util.nn(msg.hidden) then
      local m = self:new_msg(msg)
      local old = self.by_id[m.id]
      if old then
        for k in pairs(old) do
          old[k] = nil
        end
        for k, v in pairs(m) do
          old[k] = v
        end
      else
        table.insert(self.messages, m)
        self.by_id[m.id] = m
      end
    end
  end
  self:full_render()
end

function Chat:on_session_appended(p)
  local n = self.native
  if not n or not ((n.sessionId and p.sessionId == n.sessionId) or (n.path and p.path == n.path)) then
    return
  end
  self:set_native_messages(util.nn(p.messages) or {}, util.nn(p.reset) == true)
end

-- What the file of a change holds after it (or an excerpt of that): the new text, the old one once reverted.
local function disk_text(seg)
  if seg.status == 'reverted' then
    return seg.oldText
  end
  return seg.newText
end

--- ochat/fileChangeStatus {conversationId, messageId, path, status}: a client applied or reverted a file change;
--- its file line shows the new status.
function Chat:on_file_change_status(p)
  if not (self.conversation_id and p.conversationId == self.conversation_id) then
    return
  end
  local m = self.by_id[p.messageId]
  if not m then
    return
  end
  for _, seg in ipairs(render.file_changes(m)) do
    if seg.path == p.path then
      seg.status = util.nn(p.status)
      self:mark(m, { activity = true })
      -- Another client applied or reverted it, through its editor or on disk: buffers here follow.
      require('ochat.diff').follow_disk({ { path = seg.path, text = disk_text(seg) } })
    end
  end
end

--- Lets open buffers of the files `m` changed follow the disk (ochat.diff.follow_disk): reloaded when unmodified,
--- a notice when they have unsaved changes. Changes the user rejected were never written and are skipped.
function Chat:follow_disk(m)
  local changes = {}
  for _, seg in ipairs(render.file_changes(m)) do
    if seg.path and seg.status ~= 'rejected' then
      table.insert(changes, { path = seg.path, text = disk_text(seg) })
    end
  end
  if #changes > 0 then
    require('ochat.diff').follow_disk(changes)
  end
end

--- Stops following a native session.
function Chat:unfollow()
  if self.native then
    self.conn:request('ochat/sessions/unfollow', self.native.ref)
    self.native = nil
  end
end

function Chat:on_event(p)
  if not self.conversation_id then
    if self.sending_new then
      -- The conversation our send is creating may stream before the send's answer names it.
      table.insert(self.early_events, p)
    end
    return
  end
  if p.conversationId ~= self.conversation_id then
    return
  end
  local ev = p.event or {}
  local mid = p.messageId or p.turnId
  local m = self.by_id[mid]
  if not m then
    m = self:new_msg({ id = mid, role = 'assistant', agent = p.agent, status = 'streaming' })
    self:add_message(m)
    self.running_id = self.running_id or mid -- a turn started elsewhere (or from the queue): a send now queues
    if (self.pending_sends or 0) == 0 then
      self:adopt_turn(m)
    end
  end
  local d = render.apply_event(m, ev)
  if d then
    self:mark(m, d)
    local seg = type(ev.segment) == 'table' and ev.segment or nil
    if ev.type == 'activity.upsert' and seg and (seg.type == 'fileChange' or seg.status == 'completed' or seg.status == 'error') then
      -- A file change, or a tool that finished (it may have written its file after reporting the change).
      self:follow_disk(m)
    end
    if ev.type == 'turn.completed' or ev.type == 'turn.failed' then
      if self.running_id == mid then
        self.running_id = nil
      end
      self:follow_disk(m)
      for _, fn in ipairs(self.turn_waiters or {}) do
        pcall(fn, m)
      end
      self.turn_waiters = {}
    end
  end
end

-- A turn started elsewhere (another editor, the CLI): fetch the stored conversation for its user message and show
-- it before the live turn, keeping the live message object that events keep updating.
function Chat:adopt_turn(live)
  local cid = self.conversation_id
  self.conn:request('ochat/conversations/get', { conversationId = cid }, function(err, res)
    if err or self.conversation_id ~= cid then
      return
    end
    local msgs, by_id, has_live = {}, {}, false
    for _, msg in ipairs(util.nn(res.messages) or {}) do
      if not msg.hidden then
        local m = msg.id == live.id and live or self.by_id[msg.id] or self:new_msg(msg)
        has_live = has_live or m == live
        table.insert(msgs, m)
        by_id[m.id] = m
      end
    end
    if not has_live then
      table.insert(msgs, live)
      by_id[live.id] = live
    end
    self.messages, self.by_id = msgs, by_id
    self:full_render()
  end)
end

--- Extracts `@path` attachments from a prompt: an `@` at the start of a word (not in `me@example.com`), the path
--- relative to the workspace root or absolute, trailing punctuation dropped. Returns the attachments of existing
--- files ({kind='file', path=relative}) and the problems as "@word: why" (no such file, a folder, outside the
--- workspace), in order.
function Chat:attachments(text)
  local out, problems, seen = {}, {}, {}
  for path in (' ' .. text):gmatch('[%s%(%[{"\'`]@([^%s@]+)') do
    local p = path:gsub('[,.;:!?%)%]}"\'`]+$', '')
    if p ~= '' and not seen[p] then
      seen[p] = true
      local abs = p:sub(1, 1) == '/' and p or (self.root .. '/' .. p)
      local rel = util.relpath(vim.fn.resolve(util.normpath(abs)), vim.fn.resolve(self.root))
      if vim.fn.filereadable(abs) == 1 and (rel:sub(1, 1) == '/' or rel == '..' or rel:sub(1, 3) == '../') then
        -- The daemon reads attachments only inside the workspace and refuses the whole send otherwise.
        table.insert(problems, '@' .. p .. ': outside the workspace; not attached')
      elseif vim.fn.filereadable(abs) == 1 then
        table.insert(out, { kind = 'file', path = rel })
      elseif vim.fn.isdirectory(abs) == 1 then
        table.insert(problems, '@' .. p .. ': a folder; only files are attached')
      else
        table.insert(problems, '@' .. p .. ': no such file in the workspace')
      end
    end
  end
  return out, problems
end

--- Formats a visual-range context block for the prompt: a fenced code block with the file and line range.
function M.context_block(bufnr, l1, l2)
  local name = api.nvim_buf_get_name(bufnr)
  local root = M.root_for(bufnr)
  local lines = api.nvim_buf_get_lines(bufnr, l1 - 1, l2, false)
  local ft = api.nvim_buf_get_option(bufnr, 'filetype')
  local rel = name ~= '' and util.relpath(name, root) or '[No Name]'
  return string.format('```%s %s:%d-%d\n%s\n```', ft, rel, l1, l2, table.concat(lines, '\n')), rel
end

--- Sends a prompt. `opts.context`: text placed before the prompt (e.g. a visual selection block);
--- `opts.attachments`: extra attachments. `cb(err, result)` receives the ochat/chat/send result.
function Chat:send(text, opts, cb)
  if vim.trim(text or '') == '' and not (opts and opts.context) and not self.pending_context then
    -- Nothing to say: the daemon would refuse it, and a "not sent" turn in the transcript helps no one.
    util.notify('nothing to send: the prompt is empty', vim.log.levels.WARN)
    return cb and cb('empty prompt')
  end
  if self.native and not self.conversation_id then
    -- Continue a followed terminal session: make it a conversation first (the daemon continues it with the same
    -- agent through session/load, or hands it to the chosen one).
    local ref = self.native.ref
    return self.conn:request('ochat/sessions/open', ref, function(err, res)
      if err then
        util.notify('continue session: ' .. util.err_text(err), vim.log.levels.ERROR)
        return cb and cb(err)
      end
      self:unfollow()
      self:load_snapshot({ conversation = res.conversation, messages = res.messages })
      self.conversation_id = res.conversationId
      self:send(text, opts, cb)
    end)
  end
  local agents = require('ochat.agents')
  if not self.conversation_id and self.agent and agents.choices(self, self.agent) then
    -- Options were picked for this agent before the conversation existed: create it, set them (the daemon keeps
    -- them for the conversation and sets them in the session it starts), then send, so the first prompt runs with
    -- them.
    local title = (text:match('[^\n]*') or ''):sub(1, 60)
    return self.conn:request('ochat/conversations/create', { title = title }, function(err, res)
      if err then
        util.notify('send: ' .. util.err_text(err), vim.log.levels.ERROR)
        return cb and cb(err)
      end
      self.conversation_id = res.conversation.id
      self.title = util.nn(res.conversation.title) or title
      self:update_title()
      agents.apply_choices(self, self.agent, function()
        self:send(text, opts, cb)
      end)
    end)
  end
  opts = opts or {}
  if not opts.context and self.pending_context then
    opts.context, self.pending_context = self.pending_context, nil
  end
  local full = opts.context and (opts.context .. '\n\n' .. text) or text
  local attachments, problems = self:attachments(text)
  for _, why in ipairs(problems) do
    util.notify(why, vim.log.levels.WARN) -- the prompt is sent as typed
  end
  vim.list_extend(attachments, opts.attachments or {})
  local um = self:new_msg({ role = 'user', content = full, attachments = attachments })
  -- While a turn runs the daemon queues the message (docs/protocol.md "Message queue"): it shows in the queue, not
  -- as a turn, until the daemon sends it.
  local busy = self.running_id ~= nil
  if not busy then
    self:add_message(um)
  end
  local params = { text = full, conversationId = self.conversation_id, agent = self.agent }
  if #attachments > 0 then
    params.attachments = attachments
  end
  self.pending_sends = (self.pending_sends or 0) + 1
  local creating = not self.conversation_id
  if creating then
    self.sending_new, self.early_events = true, {}
  end
  self.conn:request('ochat/chat/send', params, function(err, res)
    self.pending_sends = self.pending_sends - 1
    local early = {}
    if creating then
      early, self.sending_new, self.early_events = self.early_events or {}, false, {}
    end
    if err then
      um.error = util.err_text(err)
      if busy then
        self:add_message(um)
      end
      self:mark(um, { header = true, body_from = 1 })
      if not (type(err) == 'table' and err.reported) then
        util.notify('send: ' .. um.error, vim.log.levels.ERROR)
      end
      if cb then
        cb(err)
      end
      return
    end
    if util.nn(res.queued) == true then
      if not busy then
        self:drop_message(um)
      end
      util.notify('a turn is running: your message is queued and goes next (' .. (cfg().keymaps.edit or '') .. ' edit, ' .. (cfg().keymaps.queue_remove or '') .. ' remove, ' .. (cfg().keymaps.queue_send_now or '') .. ' send now)')
      return cb and cb(nil, res)
    end
    if busy then
      self:add_message(um)
    end
    if not self.conversation_id then
      self.conversation_id = res.conversationId
      self.title = self.title or (text:match('[^\n]*') or ''):sub(1, 60)
      self:update_title()
    end
    um.id = res.userMessageId
    if um.id then
      self.by_id[um.id] = um
    end
    local aid = res.assistantMessageId or res.turnId
    self.running_id = aid
    if aid and not self.by_id[aid] then
      self:add_message(self:new_msg({ id = aid, role = 'assistant', agent = self.agent, status = 'streaming' }))
    end
    for _, p in ipairs(early) do
      if p.conversationId == self.conversation_id then
        self:on_event(p)
      end
    end
    if cb then
      cb(nil, res)
    end
  end)
end

-- Edit and retry -------------------------------------------------------------------------------------------------

--- The message under the cursor when the current window shows the chat buffer, else nil.
function Chat:message_at_cursor()
  if not (self.buf and api.nvim_get_current_buf() == self.buf) then
    return nil
  end
  local b = self:block_at(api.nvim_win_get_cursor(0)[1] - 1)
  return b and b.msg
end

-- Index of a message in self.messages.
function Chat:index_of(m)
  for i, x in ipairs(self.messages) do
    if x == m then
      return i
    end
  end
end

--- The user message an edit applies to: `m` itself when it is one, the user message an assistant `m` answers, or
--- (no `m`) the last user message.
function Chat:user_message_for(m)
  local i = m and self:index_of(m) or #self.messages
  for j = i or 0, 1, -1 do
    if self.messages[j].role == 'user' then
      return self.messages[j], j
    end
  end
end

--- The assistant message a retry regenerates: `m` itself when it is one, the answer to a user `m`, or (no `m`) the
--- last assistant message.
function Chat:answer_for(m)
  if m and m.role == 'assistant' then
    return m
  end
  local i = m and self:index_of(m)
  if i then
    local nxt = self.messages[i + 1]
    return nxt and nxt.role == 'assistant' and nxt or nil
  end
  for j = #self.messages, 1, -1 do
    if self.messages[j].role == 'assistant' then
      return self.messages[j]
    end
  end
end

-- Sends ochat/chat/edit or ochat/chat/retry about `user` (the user message that is replaced and everything after
-- it) and, on the answer, shows the kept messages, the new user message and the new turn.
function Chat:replace_turn(method, params, user, text, cb)
  if not self.conversation_id then
    util.notify('nothing to ' .. (method == 'ochat/chat/edit' and 'edit' or 'retry') .. ' yet: send a prompt first', vim.log.levels.WARN)
    return cb and cb({ code = -32001, message = 'no conversation' })
  end
  params.conversationId = self.conversation_id
  params.agent = self.agent
  self.pending_sends = (self.pending_sends or 0) + 1
  self.conn:request(method, params, function(err, res)
    self.pending_sends = self.pending_sends - 1
    if err then
      util.notify((method == 'ochat/chat/edit' and 'edit: ' or 'retry: ') .. util.err_text(err), vim.log.levels.ERROR)
      return cb and cb(err)
    end
    local keep, by_id = {}, {}
    for _, m in ipairs(self.messages) do
      if m == user or (m.id and m.id == user.id) then
        break
      end
      table.insert(keep, m)
      if m.id then
        by_id[m.id] = m
      end
    end
    local um = self:new_msg({ id = res.userMessageId, role = 'user', content = text, attachments = user.attachments })
    table.insert(keep, um)
    by_id[um.id] = um
    local aid = res.assistantMessageId or res.turnId
    -- Events of the new turn may have come before this answer: keep the message they built.
    local live = aid and self.by_id[aid] or self:new_msg({ id = aid, role = 'assistant', agent = self.agent, status = 'streaming' })
    if aid then
      table.insert(keep, live)
      by_id[aid] = live
    end
    self.messages, self.by_id = keep, by_id
    self.running_id = aid
    self:full_render()
    if cb then
      cb(nil, res)
    end
  end)
end

--- Replaces a user message with `text` and runs the turn again from there (ochat/chat/edit); the message and every
--- later one are dropped. `m`: the user message (an assistant message means the prompt it answers); nil: the last.
function Chat:edit(m, text, cb)
  local user = self:user_message_for(m)
  if not (user and user.id) then
    util.notify('no message of yours to edit', vim.log.levels.WARN)
    return cb and cb({ code = -32001, message = 'no user message' })
  end
  self:replace_turn('ochat/chat/edit', { messageId = user.id, text = text }, user, text, cb)
end

--- Regenerates an answer (ochat/chat/retry): its prompt is sent again and the answer and every later message are
--- dropped. `m`: the answer or its user message; nil: the last answer.
function Chat:retry(m, cb)
  local answer = self:answer_for(m)
  local user = answer and self:user_message_for(answer) or (m and m.role == 'user' and m) or nil
  local target = answer or user
  if not (target and target.id and user) then
    util.notify('no answer to retry', vim.log.levels.WARN)
    return cb and cb({ code = -32001, message = 'no answer' })
  end
  self:replace_turn('ochat/chat/retry', { messageId = target.id }, user, table.concat(user.body, '\n'), cb)
end

--- :OChatEdit: asks for the new text of the user message under the cursor (else the last one) and sends it. One
--- line: vim.ui.input; several: a scratch buffer (`:w` sends, `:q!` drops it).
function Chat:edit_interactive(m, cb)
  local user = self:user_message_for(m or self:message_at_cursor())
  if not (user and user.id) then
    util.notify('no message of yours to edit', vim.log.levels.WARN)
    return cb and cb(nil)
  end
  return self:edit_text(table.concat(user.body, '\n'), 'message', function(text)
    self:edit(user, text, cb)
  end, function()
    return cb and cb(nil)
  end)
end

--- Asks for a new version of `old` (`what`: "message", "queued message"): one line through vim.ui.input, several in
--- a scratch buffer (`:w` takes it, `:q!` drops it). Calls done(text) with a changed, non-blank text, else
--- none() when given.
function Chat:edit_text(old, what, done, none)
  none = none or function() end
  if not old:find('\n') then
    return vim.ui.input({ prompt = 'Edit ' .. what .. ': ', default = old }, function(text)
      if not text or not text:match('%S') or text == old then
        return none()
      end
      done(text)
    end)
  end
  local buf = api.nvim_create_buf(false, true)
  pcall(api.nvim_buf_set_name, buf, 'ochat://' .. self.root .. '/edit-' .. buf)
  api.nvim_buf_set_option(buf, 'buftype', 'acwrite')
  api.nvim_buf_set_option(buf, 'bufhidden', 'wipe')
  api.nvim_buf_set_option(buf, 'swapfile', false)
  api.nvim_buf_set_option(buf, 'filetype', 'markdown')
  api.nvim_buf_set_lines(buf, 0, -1, false, util.lines(old))
  api.nvim_buf_set_option(buf, 'modified', false)
  api.nvim_create_autocmd('BufWriteCmd', {
    buffer = buf,
    callback = function()
      local text = table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
      api.nvim_buf_set_option(buf, 'modified', false)
      if text:match('%S') then
        done(text)
      end
      vim.schedule(function()
        if api.nvim_buf_is_valid(buf) then
          pcall(api.nvim_buf_delete, buf, { force = true })
        end
      end)
    end,
  })
  vim.cmd('botright split')
  api.nvim_win_set_buf(0, buf)
  util.notify('edit the ' .. what .. ', then :w to send it (:q! drops the edit)')
  return buf
end

--- Cancels the turn in flight.
function Chat:cancel(cb)
  if not self.conversation_id then
    return cb and cb(nil, { cancelled = false })
  end
  self.conn:request('ochat/chat/cancel', { conversationId = self.conversation_id }, function(err, res)
    if err then
      util.notify('cancel: ' .. util.err_text(err), vim.log.levels.ERROR)
    end
    if cb then
      cb(err, res)
    end
  end)
end

--- Calls fn(message) when the current turn ends (tests and scripts).
function Chat:on_turn_end(fn)
  self.turn_waiters = self.turn_waiters or {}
  table.insert(self.turn_waiters, fn)
end

--- The latest assistant message that has file changes, or nil.
function Chat:last_changes()
  for i = #self.messages, 1, -1 do
    local m = self.messages[i]
    if m.role == 'assistant' and #render.file_changes(m) > 0 then
      return m
    end
  end
end

--- The buffer text (tests).
function Chat:text()
  self:flush()
  return table.concat(api.nvim_buf_get_lines(self.buf, 0, -1, false), '\n')
end

return M
