-- ochat.history: :OChatHistory.
--
-- Owns: listing the workspace's conversations and terminal-started agent sessions in one vim.ui.select, newest
-- first, live ones marked — from ochat/sessions/list (docs/protocol.md "Terminal sessions": native sessions plus the
-- conversations not opened from one), or from ochat/conversations/list when the daemon has no session index; and
-- opening the pick in the chat window: a conversation by subscribing, a finished terminal session as the conversation
-- ochat/sessions/open makes of it, a live one by following it (ochat/sessions/follow) so it grows as the terminal
-- writes. The transcript is read-only; the next prompt continues it.
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

--- One display line per entry: `●` a live terminal session, `○` a finished one, `(running)` a conversation with a
--- turn in flight.
function M.format(e)
  local title = e.title ~= '' and e.title or '(untitled)'
  title = title:gsub('%s+', ' ')
  if #title > 70 then
    title = title:sub(1, 69) .. '…'
  end
  local who = e.agents and #e.agents > 0 and ('[' .. table.concat(e.agents, ',') .. ']') or ''
  local mark = '  '
  if e.kind == 'session' then
    mark = e.live and '● ' or '○ '
  end
  return string.format('%s%s  %s  %s%s', mark, ts(e.updatedAt), title, who, e.running and '  (running)' or '')
end

local function conversation_entry(c, running)
  return {
    kind = 'conversation',
    id = c.id,
    title = util.nn(c.title) or '',
    agents = util.nn(c.agents) or (util.nn(c.agent) and { c.agent }) or {},
    updatedAt = util.nn(c.updatedAt) or util.nn(c.createdAt) or 0,
    running = running == true,
    raw = c,
  }
end

--- Normalises the lists into entries {kind = 'conversation'|'session', id, title, agents, updatedAt, live, running,
--- raw}, newest first. `sessions` are ochat/sessions/list rows (kind "native" or "conversation"); `convs` are
--- ochat/conversations/list rows, used for conversations the session list does not name.
function M.entries(convs, sessions)
  local out, seen = {}, {}
  for _, s in ipairs(sessions or {}) do
    local id = util.nn(s.id) or util.nn(s.sessionId)
    if util.nn(s.kind) == 'conversation' then
      if not seen[id] then
        seen[id] = true
        table.insert(out, conversation_entry(s, util.nn(s.live)))
      end
    elseif id then
      local agent = util.nn(s.agent)
      local cid = util.nn(s.conversationId)
      if cid then
        seen[cid] = true -- the session stands for the conversation it was opened as
      end
      table.insert(out, {
        kind = 'session',
        id = id,
        title = util.nn(s.title) or '',
        agents = agent and { agent } or {},
        updatedAt = util.nn(s.updatedAt) or util.nn(s.createdAt) or 0,
        live = util.nn(s.live) == true,
        path = util.nn(s.path),
        conversationId = cid,
        raw = s,
      })
    end
  end
  for _, c in ipairs(convs or {}) do
    if not seen[c.id] then
      seen[c.id] = true
      table.insert(out, conversation_entry(c, util.nn(c.running)))
    end
  end
  table.sort(out, function(a, b)
    return a.updatedAt > b.updatedAt
  end)
  return out
end

--- Fetches the entries; `cb(entries)`, or `cb(nil, err)` when the daemon could not be asked (the error is already
--- shown). Uses ochat/sessions/list, and ochat/conversations/list only when the daemon has no session index (-32601).
function M.fetch(chat, cb)
  chat.conn:request('ochat/sessions/list', vim.empty_dict(), function(err, res)
    if not err then
      return cb(M.entries(nil, util.nn(res.sessions) or {}))
    end
    if err.code ~= -32601 then
      util.notify('sessions: ' .. util.err_text(err), vim.log.levels.WARN)
    end
    chat.conn:request('ochat/conversations/list', vim.empty_dict(), function(err2, res2)
      if err2 then
        util.notify('history: ' .. util.err_text(err2), vim.log.levels.ERROR)
        return cb(nil, err2)
      end
      cb(M.entries(util.nn(res2.conversations) or {}, nil))
    end)
  end)
end

--- The params naming a native session for ochat/sessions/* (its file when known: ids may repeat across CLIs).
function M.session_ref(e)
  if e.path and e.path:sub(1, 1) == '/' then
    return { path = e.path }
  end
  return { sessionId = e.id }
end

--- Opens an entry in the chat window (read-only transcript; the next prompt continues it). `cb(err)`.
function M.open_entry(chat, e, cb)
  -- An opened conversation starts at its last turn (your last prompt), as CodeCompanion does, not at its last line.
  local function done(err)
    if not err then
      chat:scroll_to_last_turn()
    end
    if cb then
      cb(err)
    end
  end
  if e.kind == 'conversation' then
    chat:open({ focus = 'chat' })
    chat:subscribe(e.id, done)
    return
  end
  if e.live and not e.conversationId then
    chat:open({ focus = 'chat' })
    chat:follow_native(M.session_ref(e), e, done)
    return
  end
  chat:open({ focus = 'chat' })
  chat:open_native(M.session_ref(e), done)
end


--- :OChatHistory
function M.pick(chat, cb)
  local t0 = util.now_ms()
  M.fetch(chat, function(list, err)
    if not list then
      return cb and cb(err) -- already reported; "no conversations" would be untrue
    end
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
