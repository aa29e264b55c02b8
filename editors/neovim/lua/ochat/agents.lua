-- ochat.agents: :OChatAgent.
--
-- Owns: picking the agent for the next message (ochat/agents/list, unavailable agents shown with the reason and what
-- to fix; a name typed after :OChatAgent checked against the list; untrusted workspace agents with a "Trust workspace agents" action running `ochatd trust`) and the agent's config options (ACP SessionConfigOption: mode, model, effort, … and ACP modes, as
-- reported in ochat/agentState) through vim.ui.select.
-- Never: invents options or values the agent did not report.
local util = require('ochat.util')

local M = {}

--- Last agents list per root (for command completion).
M.cache = {}

--- Lists the agents (ochat/agents/list) and caches the list for completion. `cb(list, err)`: on an error the list
--- is empty and `err` the JSON-RPC error (already reported unless `quiet`).
function M.fetch(chat, cb, quiet)
  chat.conn:request('ochat/agents/list', vim.empty_dict(), function(err, res)
    if err then
      if not quiet then
        util.notify('agents: ' .. util.err_text(err), vim.log.levels.ERROR)
      end
      return cb and cb({}, err)
    end
    local list = util.nn(res.agents) or {}
    M.cache[chat.root] = list
    if cb then
      cb(list)
    end
  end)
end

function M.format(a)
  local s = a.name
  if util.nn(a.available) == false then
    s = s .. '  (unavailable: ' .. (util.nn(a.reason) or '?') .. (util.nn(a.install) and ('; to fix: ' .. a.install) or '') .. ')'
  elseif util.nn(a.command) then
    s = s .. '  (' .. a.command .. ')'
  end
  return s
end

-- Flattens ACP select options (plain or grouped) into {value, name}.
local function flat_options(opt)
  local out = {}
  for _, o in ipairs(util.nn(opt.options) or {}) do
    if util.nn(o.options) then
      for _, x in ipairs(o.options) do
        table.insert(out, { value = x.value, name = (util.nn(o.name) or util.nn(o.group) or '') .. ' / ' .. (util.nn(x.name) or tostring(x.value)) })
      end
    else
      table.insert(out, { value = o.value, name = util.nn(o.name) or tostring(o.value) })
    end
  end
  return out
end
M.flat_options = flat_options

--- The settable options of an agent state as {id, name, current, choices={{value,name}}, kind='config'|'mode'}.
function M.settings(state)
  local out = {}
  if not state then
    return out
  end
  -- An agent may report the same setting twice (a "mode" config option and ACP's legacy modes; an option in two
  -- groups): each setting and each value is listed once.
  local seen, has_mode = {}, false
  for _, o in ipairs(util.nn(state.configOptions) or {}) do
    if o.id and not seen[o.id] then
      seen[o.id] = true
      has_mode = has_mode or o.id == 'mode' or util.nn(o.category) == 'mode'
      local choices, vals = {}, {}
      for _, c in ipairs(flat_options(o)) do
        if not vals[c.value] then
          vals[c.value] = true
          table.insert(choices, c)
        end
      end
      table.insert(out, {
        kind = 'config',
        id = o.id,
        name = util.nn(o.name) or o.id,
        current = util.nn(o.currentValue),
        choices = choices,
      })
    end
  end
  local modes = util.nn(state.modes)
  if not has_mode and type(modes) == 'table' and util.nn(modes.availableModes) then
    local choices = {}
    for _, md in ipairs(modes.availableModes) do
      table.insert(choices, { value = md.id, name = util.nn(md.name) or md.id })
    end
    table.insert(out, { kind = 'mode', id = 'mode', name = 'mode', current = util.nn(modes.currentModeId), choices = choices })
  end
  return out
end

--- Sets one option through the daemon: ochat/agent/setConfig {conversationId, agent, configId, value} (the daemon
--- calls ACP session/set_config_option, or session/set_mode / set_model for an agent that only has legacy modes and
--- models; "mode" / "model" are their configIds, and remembers the value for the conversation). The choice is also
--- kept in the chat (`chat.config_choices[agent][configId]`), so it sticks: a conversation that does not exist yet
--- (the daemon answers -32602 "create it first") and every new one of this chat gets it before its first prompt
--- (see Chat:send). `cb(err)`.
function M.set(chat, agent, setting, value, cb)
  local function remember()
    chat.config_choices = chat.config_choices or {}
    chat.config_choices[agent] = chat.config_choices[agent] or {}
    chat.config_choices[agent][setting.id] = value
    setting.current = value
  end
  if not chat.conversation_id then
    remember()
    util.notify(string.format('%s: %s = %s, set when the conversation starts', agent, setting.name, tostring(value)))
    return cb and cb(nil)
  end
  local params = { conversationId = chat.conversation_id, agent = agent, configId = setting.id, value = value }
  chat.conn:request('ochat/agent/setConfig', params, function(err, res)
    if err then
      util.notify(string.format('set %s: %s', setting.name, util.err_text(err)), vim.log.levels.ERROR)
    else
      remember()
      local state = type(res) == 'table' and util.nn(res.state)
      if type(state) == 'table' then
        chat:merge_agent_state(vim.tbl_extend('force', state, { agent = agent }))
      end
    end
    if cb then
      cb(err)
    end
  end)
end

--- The remembered choices of `agent` as a list of {configId, value}, or nil when there are none.
function M.choices(chat, agent)
  local out = {}
  for id, v in pairs((chat.config_choices or {})[agent or ''] or {}) do
    table.insert(out, { configId = id, value = v })
  end
  table.sort(out, function(a, b)
    return a.configId < b.configId
  end)
  return #out > 0 and out or nil
end

--- Sends the remembered choices of `agent` for the chat's (just created) conversation, one after the other, then
--- calls `cb()`; a refused value is reported and skipped.
function M.apply_choices(chat, agent, cb)
  local list = M.choices(chat, agent) or {}
  local i = 0
  local function nxt()
    i = i + 1
    local c = list[i]
    if not c then
      return cb()
    end
    chat.conn:request('ochat/agent/setConfig', { conversationId = chat.conversation_id, agent = agent, configId = c.configId, value = c.value }, function(err)
      if err then
        util.notify(string.format('set %s: %s', c.configId, util.err_text(err)), vim.log.levels.WARN)
      end
      nxt()
    end)
  end
  nxt()
end

local function pick_settings(chat, agent, cb)
  local settings = M.settings(chat.agent_state[agent])
  if not chat.conversation_id then
    -- Before the conversation exists, the values picked for it are the current ones.
    for _, st in ipairs(settings) do
      local v = ((chat.config_choices or {})[agent] or {})[st.id]
      if v ~= nil then
        st.current = v
      end
    end
  end
  if #settings == 0 then
    util.notify(string.format('agent for the next message: %s (it reports its options once a session runs)', agent))
    return cb and cb(agent)
  end
  vim.ui.select(settings, {
    prompt = agent .. ' options',
    format_item = function(s)
      local cur = s.current
      for _, c in ipairs(s.choices) do
        if c.value == s.current then
          cur = c.name
        end
      end
      return string.format('%s: %s', s.name, tostring(cur or '-'))
    end,
    kind = 'ochat.agent_option',
  }, function(setting)
    if not setting then
      return cb and cb(agent)
    end
    vim.ui.select(setting.choices, {
      prompt = setting.name,
      format_item = function(c)
        return c.name .. (c.value == setting.current and '  (current)' or '')
      end,
      kind = 'ochat.agent_value',
    }, function(choice)
      if not choice then
        return cb and cb(agent)
      end
      M.set(chat, agent, setting, choice.value, function()
        if cb then
          cb(agent)
        end
      end)
    end)
  end)
end

--- Where an untrusted entry's settings are, and for which workspace: the workspace is the root this plugin connected
--- with (`ochatd connect --workspace <root>`), never text parsed out of `install` (the daemon shell-quotes paths
--- there, so a path with spaces or non-ASCII would come back with its quotes). The settings file is the one `install`
--- names ("review <path>, then run: …") when that file exists as written, else <root>/.ochat/settings.json.
--- Returns settings path, workspace root.
function M.trust_target(chat, a)
  local dir = (chat.conn and chat.conn.root) or chat.root
  local install = util.nn(a and a.install) or ''
  local path = install:match('^review (.-), then run:')
  if not (path and vim.fn.filereadable(path) == 1) then
    path = dir .. '/.ochat/settings.json'
  end
  return path, dir
end

--- The "Trust workspace agents" action: opens the workspace settings file (read-only, in a new tab) for review,
--- asks (vim.ui.select yes/no) and, on yes, runs `ochatd trust --workspace <dir>` (the `cmd` of setup{} with its
--- `env`). `cb(ok, output)` after the command ended (ok false when declined or when it failed).
function M.trust(chat, a, cb)
  local path, dir = M.trust_target(chat, a)
  vim.cmd('tab sview ' .. vim.fn.fnameescape(path))
  local choices = { { yes = true, label = 'Yes: trust ' .. path .. ' as it is now' }, { yes = false, label = 'No' } }
  vim.ui.select(choices, {
    prompt = 'Let the agents of ' .. path .. ' run as you in ' .. dir .. '?',
    format_item = function(c)
      return c.label
    end,
    kind = 'ochat.trust',
  }, function(c)
    if not (c and c.yes) then
      return cb and cb(false)
    end
    local conf = require('ochat').config
    local argv = type(conf.cmd) == 'string' and { conf.cmd } or vim.deepcopy(conf.cmd)
    vim.list_extend(argv, { 'trust', '--workspace', dir })
    local out = {}
    local function collect(_, data)
      for _, l in ipairs(data or {}) do
        if l ~= '' then
          table.insert(out, l)
        end
      end
    end
    local ok, job = pcall(vim.fn.jobstart, argv, {
      env = conf.env,
      stdout_buffered = true,
      stderr_buffered = true,
      on_stdout = collect,
      on_stderr = collect,
      on_exit = function(_, code)
        local text = table.concat(out, '\n')
        util.notify(text ~= '' and text or ('ochatd trust exited with status ' .. code), code == 0 and vim.log.levels.INFO or vim.log.levels.ERROR)
        if cb then
          cb(code == 0, text)
        end
      end,
    })
    if not ok or job <= 0 then
      util.notify('cannot run ' .. table.concat(argv, ' ') .. ': ' .. tostring(job), vim.log.levels.ERROR)
      return cb and cb(false)
    end
  end)
end

--- :OChatAgent name: checks `name` against ochat/agents/list. An unknown name is refused (error naming the known
--- agents; the agent stays as it was); an unavailable agent is taken with its reason and what to fix shown (the
--- send will fail until fixed). When the list cannot be had the name is taken with a warning. Then its options.
--- `cb(agent or nil)`.
local function pick_named(chat, name, cb)
  M.fetch(chat, function(list, err)
    if err then
      util.notify(string.format('agent for the next message: %s (not checked: %s)', name, util.err_text(err)), vim.log.levels.WARN)
    else
      local found
      local names = {}
      for _, a in ipairs(list) do
        table.insert(names, a.name)
        if a.name == name then
          found = a
        end
      end
      if not found then
        util.notify(string.format('unknown agent %q; known agents: %s', name, #names > 0 and table.concat(names, ', ') or '(none)'), vim.log.levels.ERROR)
        return cb and cb(nil)
      end
      if util.nn(found.available) == false then
        -- It has no session, so no options to offer yet: the reason and the fix are what the user needs.
        util.notify('agent for the next message: ' .. M.format(found), vim.log.levels.WARN)
        chat.agent = name
        chat:update_title()
        return cb and cb(name)
      end
    end
    chat.agent = name
    chat:update_title()
    pick_settings(chat, name, cb)
  end, true)
end

--- :OChatAgent [name]: picks the agent for the next message, then its options.
function M.pick(chat, name, cb)
  if name and name ~= '' then
    return pick_named(chat, name, cb)
  end
  M.fetch(chat, function(list)
    if #list == 0 then
      return cb and cb(nil)
    end
    local items = vim.list_slice(list)
    local untrusted
    for _, a in ipairs(list) do
      if util.nn(a.untrusted) == true then
        untrusted = untrusted or a
      end
    end
    if untrusted then
      table.insert(items, { trust = untrusted })
    end
    vim.ui.select(items, {
      prompt = 'agent for the next message',
      format_item = function(a)
        if a.trust then
          return '  Trust workspace agents (review ' .. util.relpath((M.trust_target(chat, a.trust)), chat.root) .. ' first)'
        end
        return (a.name == chat.agent and '* ' or '  ') .. M.format(a)
      end,
      kind = 'ochat.agent',
    }, function(a)
      if not a then
        return cb and cb(nil)
      end
      if a.trust then
        return M.trust(chat, a.trust, function(ok)
          if ok then
            M.fetch(chat) -- the daemon reads trust afresh: the list now has them available
          end
          if cb then
            cb(nil)
          end
        end)
      end
      chat.agent = a.name
      chat:update_title()
      pick_settings(chat, a.name, cb)
    end)
  end)
end

return M
