-- ochat.history: :OChatHistory.
--
-- Owns: listing the workspace's conversations (ochat/conversations/list) and, when the daemon has it, its
-- terminal-started agent sessions (ochat/sessions/list; live ones marked) in one vim.ui.select, newest first;
-- opening the pick read-only in the chat window so that the next prompt continues it.
-- Never: reads native session files itself (the daemon does), or writes to them.
local util = require('ochat.util')

local M = {}

local function ts(ms)
  ms = util.nn(ms)
  if type(ms) ~= 'number' or ms <= 0 then
    return '                '
  end
  return os.date('%Y-%m-%d %H:%M', math.floor(ms / 1000))
end

--- One display line per entry.
function M.format(e)
  local title = e.title ~= '' and e.title or '(untitled)'
  title = title:gsub('%s+', ' ')
  if #title > 70 then
    title = title:sub(1, 69) .. '…'
  end
  local who = e.agents and #e.agents > 0 and ('[' .. table.concat(e.agents, ',') .. ']') or ''
  local mark = e.live and '● ' or (e.kind == 'session' and '○ ' or '  ')
  return string.format('%s%s  %s  %s%s', mark, ts(e.updatedAt), title, who, e.running and '  (running)' or '')
end

-- Normalises both list shapes into entries {kind, id, title, agents, updatedAt, live, running, raw}.
local function entries(convs, sessions)
  local out = {}
  for _, c in ipairs(convs or {}) do
    table.insert(out, {
      kind = 'conversation',
      id = c.id,
      title = util.nn(c.title) or '',
      agents = util.nn(c.agents) or {},
      updatedAt = util.nn(c.updatedAt) or util.nn(c.createdAt) or 0,
      running = util.nn(c.running) == true,
      raw = c,
    })
  end
  local seen = {}
  for _, e in ipairs(out) do
    seen[e.id] = true
  end
  for _, s in ipairs(sessions or {}) do
    -- ochat/sessions/list may also list the daemon's own conversations: show each once.
    local sid, cid = util.nn(s.id) or util.nn(s.sessionId), util.nn(s.conversationId)
    if (sid and seen[sid]) or (cid and seen[cid]) then
      goto continue
    end
    local agent = util.nn(s.agent) or util.nn(s.provider)
    table.insert(out, {
      kind = 'session',
      id = util.nn(s.id) or util.nn(s.sessionId),
      title = util.nn(s.title) or util.nn(s.summary) or util.nn(s.firstPrompt) or '',
      agents = agent and { agent } or {},
      updatedAt = util.nn(s.updatedAt) or util.nn(s.modifiedAt) or util.nn(s.createdAt) or 0,
      live = util.nn(s.live) == true,
      raw = s,
    })
    ::continue::
  end
  table.sort(out, function(a, b)
    return a.updatedAt > b.updatedAt
  end)
  return out
end
M.entries = entries

--- Fetches both lists; `cb(entries)` (sessions are skipped when the daemon lacks ochat/sessions/list).
function M.fetch(chat, cb)
  local convs, sessions
  local left = 2
  local function one()
    left = left - 1
    if left == 0 then
      cb(entries(convs, sessions))
    end
  end
  chat.conn:request('ochat/conversations/list', vim.empty_dict(), function(err, res)
    if err then
      util.notify('history: ' .. util.err_text(err), vim.log.levels.ERROR)
    end
    convs = res and util.nn(res.conversations) or {}
    one()
  end)
  chat.conn:request('ochat/sessions/list', vim.empty_dict(), function(err, res)
    if err and err.code ~= -32601 then
      util.notify('sessions: ' .. util.err_text(err), vim.log.levels.WARN)
    end
    sessions = res and util.nn(res.sessions) or {}
    one()
  end)
end

--- Opens an entry in the chat window (read-only transcript; the next prompt continues it). `cb(err)`.
function M.open_entry(chat, e, cb)
  if e.kind == 'conversation' then
    chat:subscribe(e.id, cb)
    chat:open({ focus = 'chat' })
    return
  end
  local params = { sessionId = e.id }
  if e.agents[1] then
    params.agent = e.agents[1]
  end
  chat.conn:request('ochat/sessions/open', params, function(err, res)
    if err then
      util.notify('open session: ' .. util.err_text(err), vim.log.levels.ERROR)
      return cb and cb(err)
    end
    local cid = util.nn(res.conversationId) or (type(res.conversation) == 'table' and res.conversation.id)
    if res.messages and not cid then
      -- A read-only view of a native session that the daemon did not import.
      chat:load_snapshot(res)
      chat.conversation_id = nil
      chat:open({ focus = 'chat' })
      return cb and cb(nil)
    end
    chat:subscribe(cid, cb)
    chat:open({ focus = 'chat' })
  end)
end

--- :OChatHistory
function M.pick(chat, cb)
  local t0 = util.now_ms()
  M.fetch(chat, function(list)
    if #list == 0 then
      util.notify('no conversations or sessions in ' .. chat.root)
      return cb and cb(nil)
    end
    M.last_open_ms = util.now_ms() - t0
    vim.ui.select(list, {
      prompt = 'ochat history (● live terminal session, ○ terminal session)',
      format_item = M.format,
      kind = 'ochat.history',
    }, function(choice)
      if choice then
        M.open_entry(chat, choice, cb)
      elseif cb then
        cb(nil)
      end
    end)
  end)
end

return M
