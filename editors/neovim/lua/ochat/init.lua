-- ochat: chat with any coding agent from Neovim through the ochatd workspace daemon.
--
-- Owns: the defaults table, setup() (merges user options over it, registers nothing else surprising) and the
-- functions behind the user commands. Requiring any ochat module has no side effects; nothing starts before a
-- command or an API call.
-- Never: talks JSON-RPC itself (ochat.rpc), renders (ochat.chat), or parses agent or native-store formats.
local M = {}

M.version = '0.1.0'

--- The defaults. Every key can be overridden through setup{}.
M.defaults = {
  -- ochatd executable and leading arguments; `connect --workspace ROOT` is appended.
  cmd = { 'ochatd' },
  -- Extra environment for `ochatd connect` (merged over Neovim's environment), or nil.
  env = nil,
  -- function(bufnr) -> workspace root or nil (then: nearest .git upward, else the cwd).
  root = nil,
  -- Agent for new messages (nil: the daemon's default).
  agent = nil,
  -- Reconnect after the daemon or forwarder exits: delay doubles from initial_ms up to max_ms.
  reconnect = { initial_ms = 200, max_ms = 5000, max_attempts = 8 },
  ui = {
    layout = 'float', -- 'float' | 'split'
    width = 0.8, -- float: fraction of the editor (<= 1) or columns
    height = 0.8, -- float: fraction of the editor (<= 1) or lines
    border = 'rounded',
    split = 'vertical', -- split layout: 'vertical' | 'horizontal'
    split_size = 80, -- split layout: columns (vertical) or lines (horizontal)
    prompt_height = 4, -- lines of the input window
    start_in_insert = false, -- :OChat leaves you in Insert mode in the input (else Normal mode)
    render_interval_ms = 16, -- minimum time between two redraws while streaming
    max_input_chars = 2000, -- expanded activity: tool input shown up to this many bytes
    max_output_lines = 40, -- expanded activity: tool output/reasoning shown up to this many lines
  },
  permission = {
    -- Also open vim.ui.select for every request (it takes the focus): true or false. Without it a request shows in
    -- the chat and in a float that never takes the focus; answer with gy/gn/gp or :OChatAllow/:OChatDeny/:OChatPermission.
    use_select = false,
  },
  diff = {
    write = true, -- write buffers after applying or reverting a file change
  },
  -- Buffer-local keys in the chat and diff windows (false disables one).
  keymaps = {
    toggle_activity = '<CR>',
    diff = 'gd',
    apply = 'ga',
    revert = 'gr',
    cancel = '<C-c>',
    close = 'q',
    focus_prompt = 'i', -- in the chat: go to the prompt (`a` too)
    focus_chat = '<C-k>', -- in the prompt (Insert and Normal mode): go to the chat buffer
    edit = 'ge', -- edit the message under the cursor (or the last of yours) and run it again; a queued one: edit it
    retry = 'gR', -- regenerate the answer under the cursor (or the last one)
    send = '<CR>', -- in the input, Normal mode: send (while a turn runs: queue)
    send_insert = '<C-s>', -- in the input, Insert and Normal mode: send
    help = '?', -- list the keys
    queue_remove = 'gx', -- on a queued message in the transcript: remove it
    queue_send_now = 'gs', -- on a queued message: send it now (cancels the running turn)
    permission_allow = 'gy', -- chat and input, Normal mode: allow once what the agent asks
    permission_deny = 'gn', -- reject it
    permission_pick = 'gp', -- pick any of the agent's options
  },
  debug = false,
}

M.config = vim.deepcopy(M.defaults)

--- Merges `opts` over the defaults. Safe to call again.
function M.setup(opts)
  vim.validate({ opts = { opts, 't', true } })
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  local ui = M.config.ui
  vim.validate({
    cmd = { M.config.cmd, { 't', 's' } },
    layout = {
      ui.layout,
      function(v)
        return v == 'float' or v == 'split'
      end,
      "'float' or 'split'",
    },
  })
  M.did_setup = true
  return M
end

local function chat()
  return require('ochat.chat').get()
end

-- Without a prompt, a range waits in the chat state and goes with the next prompt.
local function put_context(c, context)
  c.pending_context = context
  require('ochat.util').notify('selection attached to the next prompt')
end

--- :OChat [prompt]: opens or focuses the chat; sends the prompt if given. With a range, the selected lines are
--- attached as context (a fenced block naming the file and lines).
function M.open(prompt, range)
  local c = chat()
  local context
  if range and range.count and range.count > 0 then
    context = require('ochat.chat').context_block(range.buf or 0, range.line1, range.line2)
  end
  c:open()
  if prompt and prompt ~= '' then
    c:send(prompt, { context = context })
  elseif context then
    put_context(c, context)
  end
  return c
end

function M.toggle()
  chat():toggle()
end

function M.cancel()
  chat():cancel()
end

function M.new()
  local c = chat()
  c:new_conversation()
  c:open()
end

--- :OChatEdit: edits the user message under the cursor in the chat buffer, else the last one, and runs the turn
--- again from there (ochat/chat/edit).
function M.edit()
  local c = chat()
  c:edit_interactive(c:message_at_cursor())
end

--- :OChatRetry: regenerates the answer under the cursor in the chat buffer, else the last one (ochat/chat/retry).
function M.retry()
  local c = chat()
  c:retry(c:message_at_cursor())
end

function M.agent(name)
  require('ochat.agents').pick(chat(), name)
end

--- Statusline component: "ochat: test asks permission" while an agent waits for an answer, else ''.
function M.status()
  return require('ochat.permission').status()
end

--- :OChatAllow / :OChatDeny / :OChatPermission: answers the oldest pending permission request of this workspace
--- (allow once, reject once) or shows it ('show' enters its float; 'pick' lists every option).
function M.permission(what)
  require('ochat.permission').answer(chat(), what)
end

--- :OChatQueue: the queued messages of the conversation: edit, remove or send one now.
function M.queue()
  chat():pick_queue()
end

function M.history()
  require('ochat.history').pick(chat())
end

--- :OChatDiff [path]: reviews the file changes of the latest turn that has any (one tab per file), or one file.
function M.diff(path)
  local c = chat()
  local m = c:last_changes()
  if not m then
    return require('ochat.util').notify('no file changes in this conversation yet')
  end
  if path and path ~= '' then
    for _, seg in ipairs(require('ochat.render').file_changes(m)) do
      if seg.path == path or require('ochat.util').relpath(seg.path, c.root) == path then
        return require('ochat.diff').open(c, m, seg)
      end
    end
    return require('ochat.util').notify('no change to ' .. path, vim.log.levels.WARN)
  end
  require('ochat.diff').review(c, m)
end

-- Completion ------------------------------------------------------------------------------------------------------

--- :OChat completion: `@file` and the agent's slash commands.
function M.complete_prompt(arglead)
  local root = require('ochat.chat').root_for(0)
  if arglead:sub(1, 1) == '@' then
    local out = {}
    for _, f in ipairs(vim.fn.glob(root .. '/' .. arglead:sub(2) .. '*', false, true)) do
      table.insert(out, '@' .. require('ochat.util').relpath(f, root) .. (vim.fn.isdirectory(f) == 1 and '/' or ''))
    end
    return out
  end
  if arglead:sub(1, 1) == '/' then
    local s = require('ochat.chat').states[root]
    local out = {}
    for _, cmd in ipairs(s and s:commands() or {}) do
      local name = '/' .. cmd.name
      if name:sub(1, #arglead) == arglead then
        table.insert(out, name)
      end
    end
    return out
  end
  return {}
end

--- :OChatAgent completion: agent names from ochat/agents/list. The first completion waits for the list (at most
--- 2 s); later ones use the last list and refresh it in the background.
function M.complete_agent(arglead)
  local ok, c = pcall(chat)
  if not ok then
    return {}
  end
  local agents = require('ochat.agents')
  local list = agents.cache[c.root]
  if list then
    agents.fetch(c, nil, true)
  else
    local done
    agents.fetch(c, function()
      done = true
    end, true)
    vim.wait(2000, function()
      return done
    end, 10)
    list = agents.cache[c.root] or {}
  end
  local out = {}
  for _, a in ipairs(list) do
    if a.name:sub(1, #arglead) == arglead then
      table.insert(out, a.name)
    end
  end
  return out
end

--- :OChatDiff completion: paths of the latest turn's file changes.
function M.complete_diff(arglead)
  local root = require('ochat.chat').root_for(0)
  local s = require('ochat.chat').states[root]
  local m = s and s:last_changes()
  local out = {}
  for _, seg in ipairs(m and require('ochat.render').file_changes(m) or {}) do
    local rel = require('ochat.util').relpath(seg.path, root)
    if rel:sub(1, #arglead) == arglead then
      table.insert(out, rel)
    end
  end
  return out
end

return M
