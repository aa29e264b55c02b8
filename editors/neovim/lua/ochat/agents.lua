-- ochat.agents: :OChatAgent.
--
-- Owns: picking the agent for the next message (ochat/agents/list, unavailable agents shown with the reason and how
-- to install) and the agent's config options (ACP SessionConfigOption: mode, model, effort, … and ACP modes, as
-- reported in ochat/agentState) through vim.ui.select.
-- Never: invents options or values the agent did not report.
local util = require('ochat.util')

local M = {}

--- Last agents list per root (for command completion).
M.cache = {}

function M.fetch(chat, cb)
  chat.conn:request('ochat/agents/list', vim.empty_dict(), function(err, res)
    if err then
      util.notify('agents: ' .. util.err_text(err), vim.log.levels.ERROR)
      return cb and cb({})
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
    s = s .. '  (unavailable: ' .. (util.nn(a.reason) or '?') .. (util.nn(a.install) and ('; install: ' .. a.install) or '') .. ')'
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
  for _, o in ipairs(util.nn(state.configOptions) or {}) do
    table.insert(out, {
      kind = 'config',
      id = o.id,
      name = util.nn(o.name) or o.id,
      current = util.nn(o.currentValue),
      choices = flat_options(o),
    })
  end
  local modes = util.nn(state.modes)
  if type(modes) == 'table' and util.nn(modes.availableModes) then
    local choices = {}
    for _, md in ipairs(modes.availableModes) do
      table.insert(choices, { value = md.id, name = util.nn(md.name) or md.id })
    end
    table.insert(out, { kind = 'mode', id = 'mode', name = 'mode', current = util.nn(modes.currentModeId), choices = choices })
  end
  return out
end

--- Sets one option through the daemon: ochat/agent/setConfig {conversationId, agent, configId, value} (the daemon
--- calls ACP session/set_config_option, or session/set_mode for an agent that only has legacy modes; "mode" is the
--- configId of those); ochat/agents/setConfigOption with the same params when the daemon has that name instead.
--- `cb(err)`.
function M.set(chat, agent, setting, value, cb)
  local params = { conversationId = chat.conversation_id, agent = agent, configId = setting.id, value = value }
  local function answer(err)
    if err then
      util.notify(string.format('set %s: %s', setting.name, util.err_text(err)), vim.log.levels.ERROR)
    else
      setting.current = value
    end
    if cb then
      cb(err)
    end
  end
  chat.conn:request('ochat/agent/setConfig', params, function(err)
    if err and err.code == -32601 then
      -- The name the VS Code extension uses; whichever the daemon has.
      return chat.conn:request('ochat/agents/setConfigOption', params, answer)
    end
    answer(err)
  end)
end

local function pick_settings(chat, agent, cb)
  local settings = M.settings(chat.agent_state[agent])
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

--- :OChatAgent [name]: picks the agent for the next message, then its options.
function M.pick(chat, name, cb)
  if name and name ~= '' then
    chat.agent = name
    chat:update_title()
    return pick_settings(chat, name, cb)
  end
  M.fetch(chat, function(list)
    if #list == 0 then
      return cb and cb(nil)
    end
    vim.ui.select(list, {
      prompt = 'agent for the next message',
      format_item = function(a)
        return (a.name == chat.agent and '* ' or '  ') .. M.format(a)
      end,
      kind = 'ochat.agent',
    }, function(a)
      if not a then
        return cb and cb(nil)
      end
      chat.agent = a.name
      chat:update_title()
      pick_settings(chat, a.name, cb)
    end)
  end)
end

return M
