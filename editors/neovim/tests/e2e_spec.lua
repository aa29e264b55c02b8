-- End-to-end: the plugin against a real ochatd (`ochatd connect` → daemon) with the scripted ACP test agent.
-- Needs OCHAT_BIN_DIR holding ochatd and testagent (tests/run.sh builds them). Everything lives in a temp dir:
-- workspace, XDG config/state/data/runtime dirs, the agent's state.
local H = dofile('tests/helpers.lua')
vim.cmd('runtime plugin/ochat.lua')
local api = vim.api

local bin = os.getenv('OCHAT_BIN_DIR')
if not bin or bin == '' then
  pending('e2e', 'OCHAT_BIN_DIR is not set; run tests/run.sh')
  return
end

local tmp = vim.fn.tempname()
local function dir(name)
  local d = tmp .. '/' .. name
  vim.fn.mkdir(d, 'p', 448) -- 0700
  return d
end
local ws = require('ochat.util').normpath(dir('ws'))
vim.env.XDG_CONFIG_HOME = dir('config')
vim.env.XDG_STATE_HOME = dir('state')
vim.env.XDG_DATA_HOME = dir('data')
vim.env.XDG_CACHE_HOME = dir('cache')
vim.env.XDG_RUNTIME_DIR = dir('run')
vim.env.TESTAGENT_STATE = dir('agentstate')
vim.fn.mkdir(vim.env.XDG_CONFIG_HOME .. '/ochat', 'p')
-- A terminal-started Claude Code session of this workspace (tests/fixtures/SOURCES.md).
local claude_session = '24cb974b-077a-4ab3-bdf4-622ee8278cca'
do
  vim.env.CLAUDE_CONFIG_DIR = dir('claude')
  local proj = dir('claude/projects/' .. ws:gsub('[^%w]', '-'))
  local text = H.read('tests/fixtures/claude/' .. claude_session .. '.jsonl')
  -- Moved into the current minute (all its records are from 09:20), so the daemon lists it as live.
  text = text:gsub('/home/dev/project', ws):gsub('2026%-11%-30T09:20:', os.date('!%Y-%m-%dT%H:%M:'))
  H.write(proj .. '/' .. claude_session .. '.jsonl', text)
end
H.write(vim.env.XDG_CONFIG_HOME .. '/ochat/settings.json', vim.json.encode({ agent_servers = { test = { command = bin .. '/testagent' } } }))

local function setup(extra)
  require('ochat').setup(vim.tbl_deep_extend('force', {
    cmd = { bin .. '/ochatd' },
    agent = 'test',
    reconnect = { initial_ms = 50, max_ms = 500, max_attempts = 20 },
    -- These specs answer through a stubbed vim.ui.select; the default flow (gy in the input) is typed in tests/tui*.sh.
    permission = { use_select = true },
  }, extra or {}))
end
setup()

local chat = require('ochat.chat').get(ws)

-- Sends a prompt and waits for its turn to end; returns the assistant message.
local function turn(text, timeout)
  local ended
  chat:on_turn_end(function(m)
    ended = m
  end)
  local err
  chat:send(text, nil, function(e)
    err = e
  end)
  wait_for(function()
    return ended or err
  end, timeout or 10000, 'turn end of ' .. text)
  assert(not err, 'send failed: ' .. vim.inspect(err))
  chat:flush()
  return ended
end

-- The `ochatd serve` processes of our temp workspace (started by `ochatd connect`).
local function daemon_pids()
  local pids = {}
  for _, p in ipairs(vim.fn.glob('/proc/[0-9]*/cmdline', false, true)) do
    local c = H.read(p)
    if c and c:find('ochatd', 1, true) and c:find('serve', 1, true) and c:find(ws, 1, true) then
      table.insert(pids, tonumber(p:match('/proc/(%d+)/')))
    end
  end
  return pids
end

local function stub_select(pick)
  local orig = vim.ui.select
  vim.ui.select = function(items, opts, cb)
    cb(pick(items, opts))
  end
  return function()
    vim.ui.select = orig
  end
end

describe('e2e with ochatd and the test agent', function()
  it('streams a prompt into the float', function()
    chat:open({ insert = false })
    local m = turn('PLAIN hello streaming world')
    eq('completed', m.status)
    local first = api.nvim_buf_get_lines(chat.buf, 0, 1, false)[1]
    -- The context meter appears once the agent's usage_update has arrived.
    assert(first == '# PLAIN hello streaming world  ·  test' or first:find('^# PLAIN hello streaming world  ·  test  ·  context 1%% %(10/1000%)$'), first)
    eq(
      table.concat({
        first,
        '',
        '## You',
        'PLAIN hello streaming world',
        '',
        '## test · completed',
        'hello streaming world',
        '',
      }, '\n'),
      chat:text()
    )
    eq('ready', chat.conn.state)
    assert(chat.conversation_id, 'conversation id set')
  end)

  it('answers a permission and shows the tool and the file change', function()
    local seen
    local restore = stub_select(function(items, opts)
      seen = vim.tbl_map(opts.format_item, items)
      for _, o in ipairs(items) do
        if o.optionId == 'allow' then
          return o
        end
      end
    end)
    local m = turn('WRITE out.txt hello\\nworld')
    restore()
    eq({ 'Allow [allow_once]', 'Always allow [allow_always]', 'Reject [reject_once]' }, seen and vim.tbl_map(function(s)
      return s:gsub('Always Allow', 'Always allow')
    end, seen))
    eq('hello\nworld', H.read(ws .. '/out.txt'))
    eq(nil, next(require('ochat.permission').open), 'permission float closed')
    local text = chat:text()
    assert(text:find('▸ 1 tool · 1 file +2 -0', 1, true), text)
    eq(1, #require('ochat.render').file_changes(m))
  end)

  it('applies and reverts a file change, buffer and disk', function()
    H.write(ws .. '/edit.txt', 'old text\n')
    local buf = vim.fn.bufadd(ws .. '/edit.txt')
    vim.fn.bufload(buf)
    local restore = stub_select(function(items)
      return items[1].optionId == 'allow' and items[1] or items[2]
    end)
    local m = turn('WRITE edit.txt new text\\n')
    restore()
    eq('new text\n', H.read(ws .. '/edit.txt'))
    local seg = require('ochat.render').file_changes(m)[1]
    eq(ws .. '/edit.txt', seg.path)
    local done
    -- The agent wrote the file itself: applying is "already applied", which is no error.
    require('ochat.diff').change(chat, m, seg, 'apply', function(err)
      done = { err }
    end)
    wait_for(function()
      return done
    end, 5000, 'apply of an applied change')
    eq(nil, done[1])
    eq('ochat: edit.txt: already applied', H.notes[#H.notes])
    eq('applied', seg.status)
    done = nil
    require('ochat.diff').change(chat, m, seg, 'revert', function(err)
      done = { err }
    end)
    wait_for(function()
      return done
    end, 5000, 'revert')
    eq(nil, done[1])
    eq('old text\n', H.read(ws .. '/edit.txt'))
    eq({ 'old text' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    done = nil
    require('ochat.diff').change(chat, m, seg, 'apply', function(err)
      done = { err }
    end)
    wait_for(function()
      return done
    end, 5000, 'apply')
    eq('new text\n', H.read(ws .. '/edit.txt'))
    eq({ 'new text' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    -- The user changes the file: reverting conflicts; forcing goes through this editor, one undo step.
    H.write(ws .. '/edit.txt', 'mine\n')
    local offered
    restore = stub_select(function(items, opts)
      offered = vim.tbl_map(opts.format_item, items)
      return items[2]
    end)
    done = nil
    require('ochat.diff').change(chat, m, seg, 'revert', function(err)
      done = { err }
    end)
    wait_for(function()
      return done
    end, 5000, 'forced revert')
    restore()
    eq(nil, done[1])
    eq('revert anyway: overwrite edit.txt in the editor (one undo step)', offered[2])
    eq('old text\n', H.read(ws .. '/edit.txt'))
    eq({ 'old text' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    eq('reverted', seg.status)
    api.nvim_buf_call(buf, function()
      vim.cmd('silent undo')
    end)
    eq({ 'mine' }, api.nvim_buf_get_lines(buf, 0, -1, false), 'one undo takes the forced revert back')
    api.nvim_buf_call(buf, function()
      vim.cmd('silent write!')
    end)
    -- Another client applies it again: ochat/fileChangeStatus updates the status shown here.
    H.write(ws .. '/edit.txt', 'old text\n')
    local other = require('ochat.rpc').new(ws, require('ochat').config)
    other:start()
    local applied
    other:request('ochat/fileChange/apply', { conversationId = chat.conversation_id, messageId = m.id, path = seg.path }, function(err, res)
      applied = { err, res }
    end)
    wait_for(function()
      return applied and seg.status == 'applied'
    end, 5000, 'status from the other client: ' .. vim.inspect(applied))
    other:stop()
    eq(nil, applied[1])
    eq('new text\n', H.read(ws .. '/edit.txt'))
    -- The side-by-side review of the same change.
    local tab = require('ochat.diff').open(chat, m, seg)
    local wins = api.nvim_tabpage_list_wins(tab)
    eq({ 'old text' }, api.nvim_buf_get_lines(api.nvim_win_get_buf(wins[1]), 0, -1, false))
    eq({ 'new text' }, api.nvim_buf_get_lines(api.nvim_win_get_buf(wins[2]), 0, -1, false))
    vim.cmd('tabclose')
  end)

  it('closes a permission answered by another editor', function()
    setup({ permission = { use_select = false } })
    local other = require('ochat.rpc').new(ws, require('ochat').config)
    other:start()
    local subscribed
    other:request('ochat/subscribe', { conversationId = chat.conversation_id }, function(err)
      subscribed = not err
    end)
    wait_for(function()
      return subscribed
    end, 5000, 'second client subscribed')
    other:on('ochat/permission', function(p)
      other:request('ochat/permission/respond', { permissionId = p.permissionId, optionId = 'reject' })
    end)
    local shown
    chat.conn:on('ochat/permission', function(p)
      shown = p.permissionId
    end)
    local m = turn('WRITE rejected.txt nope')
    other:stop()
    setup()
    assert(shown, 'the request reached this editor')
    eq(nil, require('ochat.permission').open[shown], 'closed here after the other editor answered')
    eq(nil, H.read(ws .. '/rejected.txt'))
    local found
    for _, n in ipairs(H.notes) do
      found = found or n:find('answered elsewhere: reject', 1, true)
    end
    assert(found, vim.inspect(H.notes))
    eq('completed', m.status)
  end)

  it('shows a prompt sent by another client in this conversation', function()
    local other = require('ochat.rpc').new(ws, require('ochat').config)
    other:start()
    local sent
    other:request('ochat/chat/send', { conversationId = chat.conversation_id, agent = 'test', text = 'PLAIN sent from elsewhere' }, function(err, res)
      sent = { err, res }
    end)
    local ended
    chat:on_turn_end(function(m)
      ended = m
    end)
    wait_for(function()
      return ended
    end, 10000, 'the other client\'s turn here')
    other:stop()
    eq(nil, sent[1])
    wait_for(function()
      return chat:text():find('## You\nPLAIN sent from elsewhere\n\n## test · completed\nsent from elsewhere\n', 1, true) ~= nil
    end, 2000, 'prompt and answer: ' .. chat:text())
  end)

  it('cancels a slow turn', function()
    local ended
    chat:on_turn_end(function(m)
      ended = m
    end)
    chat:send('SLOW 100')
    wait_for(function()
      return chat:text():find('c3 ', 1, true)
    end, 5000, 'some chunks')
    local answer
    local orig = chat.cancel
    chat.cancel = function(self)
      orig(self, function(err, res)
        answer = { err, res }
      end)
    end
    chat:open({ focus = 'prompt', insert = false }) -- the command acts on the workspace of the current buffer
    vim.cmd('OChatCancel')
    chat.cancel = orig
    wait_for(function()
      return answer
    end, 5000, 'cancel answer')
    eq({ nil, { cancelled = true } }, answer)
    wait_for(function()
      return ended
    end, 5000, 'cancelled turn end')
    eq('cancelled', ended.status, vim.inspect({ ended.stopReason, ended.body }))
    chat:flush()
    assert(chat:text():find('## test · cancelled', 1, true), chat:text())
  end)

  it('reconnects when the daemon is restarted under it', function()
    local pids = daemon_pids()
    eq(1, #pids, 'one daemon serves the workspace')
    local before = chat.conn.connects
    require('ochat.util').uv.kill(pids[1], 'sigkill')
    wait_for(function()
      return chat.conn.connects > before and chat.conn.state == 'ready'
    end, 10000, 'reconnected')
    local m = turn('PLAIN after restart')
    eq('completed', m.status)
    assert(chat:text():find('after restart', 1, true))
  end)

  it('opens a stored conversation from :OChatHistory and continues it', function()
    local id = chat.conversation_id
    chat:new_conversation()
    turn('PLAIN another conversation')
    local items
    local restore = stub_select(function(list, opts)
      items = vim.tbl_map(opts.format_item, list)
      for _, e in ipairs(list) do
        if e.id == id then
          return e
        end
      end
    end)
    local opened
    require('ochat.history').pick(chat, function(err)
      opened = { err }
    end)
    wait_for(function()
      return opened
    end, 5000, 'history open')
    restore()
    eq(nil, opened[1])
    -- Two conversations, plus the terminal-started Claude session of the fixture when the daemon lists sessions.
    local convs = vim.tbl_filter(function(i)
      return not (i:find('^●') or i:find('^○'))
    end, items)
    eq(2, #convs, vim.inspect(items))
    assert(convs[1]:find('PLAIN another conversation', 1, true), convs[1])
    eq(id, chat.conversation_id)
    local text = chat:text()
    assert(text:find('## You\nPLAIN hello streaming world\n\n## test · completed', 1, true), text)
    assert(text:find('hello\\nworld', 1, true) or text:find('WRITE out.txt', 1, true), text)
    local m = turn('PLAIN continued')
    eq('completed', m.status)
    assert(chat:text():find('PLAIN continued', 1, true))
    local msgs
    chat.conn:request('ochat/conversations/get', { conversationId = id }, function(_, res)
      msgs = res and res.messages
    end)
    wait_for(function()
      return msgs
    end, 5000, 'stored conversation')
    eq('continued', msgs[#msgs].segments[#msgs[#msgs].segments].content)
  end)

  it('opens a terminal-started Claude session from a fixture', function()
    local res
    chat.conn:request('ochat/sessions/list', vim.empty_dict(), function(err, r)
      res = { err, r }
    end)
    wait_for(function()
      return res
    end, 5000, 'sessions list')
    if res[1] and res[1].code == -32601 then
      return 'pending (the daemon has no ochat/sessions/list yet)'
    end
    eq(nil, res[1])
    local entry
    local restore = stub_select(function(list)
      for _, e in ipairs(list) do
        if e.id == claude_session or (e.raw and e.raw.sessionId == claude_session) then
          entry = e
          return e
        end
      end
    end)
    local opened
    require('ochat.history').pick(chat, function(err)
      opened = { err }
    end)
    wait_for(function()
      return opened
    end, 5000, 'session open')
    restore()
    assert(entry, 'the fixture session is listed: ' .. vim.inspect(res[2]))
    eq('session', entry.kind)
    eq(nil, opened[1])
    local text = chat:text()
    for _, want in ipairs({ 'PLAIN: say hello', 'PONG from fake LLM', 'WRITE_FILE ' .. ws .. '/hello.txt', 'Done: created ' .. ws .. '/hello.txt', 'PLAIN: after resume' }) do
      assert(text:find(want, 1, true), 'missing ' .. want .. ' in\n' .. text)
    end
    assert(text:find('▸ 1 tool', 1, true), 'the Write tool call is shown: ' .. text)
    -- Just written, the session counts as live: it is followed, and a turn the terminal appends shows up here.
    assert(chat.native, 'a live session is followed')
    local file = vim.env.CLAUDE_CONFIG_DIR .. '/projects/' .. ws:gsub('[^%w]', '-') .. '/' .. claude_session .. '.jsonl'
    local user, answer
    for _, l in ipairs(vim.split(H.read(file), '\n', { trimempty = true })) do
      local rec = vim.json.decode(l)
      if rec.uuid == 'f52c1170-5044-4bca-90b1-b2e84dc3eba6' then
        user = rec
      elseif rec.uuid == '5a201b93-63e2-4896-92b4-6710e8939a81' then
        answer = rec
      end
    end
    user.parentUuid, user.uuid = answer.uuid, 'f52c1170-0000-4000-8000-000000000001'
    user.message.content[1].text = 'PLAIN: typed while following'
    answer.parentUuid, answer.uuid = user.uuid, '5a201b93-0000-4000-8000-000000000002'
    answer.message.id = 'msg_fake_8'
    answer.message.content[1].text = 'PONG while following'
    local f = assert(io.open(file, 'ab'))
    f:write(vim.json.encode(user) .. '\n' .. vim.json.encode(answer) .. '\n')
    f:close()
    wait_for(function()
      return chat:text():find('PONG while following', 1, true) ~= nil
    end, 5000, 'the appended turn')
    assert(chat:text():find('## You\nPLAIN: typed while following', 1, true), chat:text())
    -- The next prompt continues it (here with the test agent, through a handoff).
    local m = turn('PLAIN continued from the editor')
    eq('completed', m.status)
    assert(chat.conversation_id, 'the session became a conversation')
    text = chat:text()
    assert(text:find('PONG from fake LLM', 1, true) and text:find('continued from the editor\n', 1, true), text)
  end)

  it('edits a message and retries an answer; an edit in another client reloads this one', function()
    chat:new_conversation()
    turn('PLAIN one')
    turn('PLAIN two')
    local first = chat.messages[1]
    local ended
    chat:on_turn_end(function(m)
      ended = m
    end)
    local res
    chat:edit(first, 'PLAIN uno', function(err, r)
      res = { err, r }
    end)
    wait_for(function()
      return res and ended
    end, 10000, 'edited turn')
    eq(nil, res[1])
    chat:flush()
    eq('## You\nPLAIN uno\n\n## test · completed\nuno\n', chat:text():gsub('^[^\n]*\n\n', ''))
    -- Retry the only answer: the prompt goes again, the answer is replaced.
    local old_answer = chat.messages[2].id
    ended, res = nil, nil
    chat:on_turn_end(function(m)
      ended = m
    end)
    chat:retry(nil, function(err, r)
      res = { err, r }
    end)
    wait_for(function()
      return res and ended
    end, 10000, 'retried turn')
    eq(nil, res[1])
    assert(res[2].assistantMessageId ~= old_answer, 'a new answer')
    chat:flush()
    eq('## You\nPLAIN uno\n\n## test · completed\nuno\n', chat:text():gsub('^[^\n]*\n\n', ''))
    local stored
    chat.conn:request('ochat/conversations/get', { conversationId = chat.conversation_id }, function(_, r)
      stored = r
    end)
    wait_for(function()
      return stored
    end, 5000, 'stored')
    eq(2, #stored.messages)
    eq(res[2].userMessageId, stored.messages[1].id)
    -- Another client edits the message: the daemon sends us ochat/resync and we show its new turn.
    local other = require('ochat.rpc').new(ws, require('ochat').config)
    other:start()
    local done
    other:request('ochat/chat/edit', { conversationId = chat.conversation_id, messageId = stored.messages[1].id, text = 'PLAIN from the other editor' }, function(err)
      done = { err }
    end)
    wait_for(function()
      return done and chat:text():find('## test · completed\nfrom the other editor\n', 1, true) ~= nil
    end, 10000, 'the other client\'s edit here: ' .. chat:text())
    other:stop()
    eq(nil, done[1])
    assert(not chat:text():find('uno', 1, true), chat:text())
    local reloaded
    for _, n in ipairs(H.notes) do
      reloaded = reloaded or n:find('edited in another client', 1, true)
    end
    assert(reloaded, vim.inspect(H.notes))
  end)

  it('shows the agent state and its config options in :OChatAgent', function()
    wait_for(function()
      return chat.agent_state.test ~= nil
    end, 5000, 'ochat/agentState for the test agent')
    local menus = {}
    local restore = stub_select(function(items, opts)
      table.insert(menus, vim.tbl_map(opts.format_item, items))
      return #menus == 1 and vim.tbl_filter(function(a)
        return a.name == 'test'
      end, items)[1] or nil
    end)
    local done
    require('ochat.agents').pick(chat, nil, function(a)
      done = { a }
    end)
    wait_for(function()
      return done
    end, 5000, 'agent pick')
    restore()
    eq('test', done[1])
    eq('test', chat.agent)
    local agents_menu = table.concat(menus[1], '\n')
    assert(agents_menu:find('* test  (' .. bin .. '/testagent)', 1, true), agents_menu)
    assert(menus[2] and #menus[2] >= 1, 'config options listed: ' .. vim.inspect(chat.agent_state.test))
  end)

  it('sets agent options from :OChatAgent: before the conversation exists, in a live session, and they stick', function()
    chat:new_conversation()
    -- Picks option `id` = `value` of the test agent through the two menus.
    local function pick(id, value)
      local restore = stub_select(function(items, opts)
        if opts.kind == 'ochat.agent_option' then
          return vim.tbl_filter(function(x)
            return x.id == id
          end, items)[1]
        end
        return vim.tbl_filter(function(x)
          return x.value == value
        end, items)[1]
      end)
      local done
      require('ochat.agents').pick(chat, 'test', function()
        done = true
      end)
      wait_for(function()
        return done
      end, 5000, 'pick ' .. id)
      restore()
    end
    pick('mode', 'plan')
    eq(nil, chat.conversation_id, 'no conversation yet')
    eq('mode=plan model=fast', table.concat(turn('CONFIG').body, '\n'))
    local cid = chat.conversation_id
    -- A live session: the agent is asked at once.
    pick('model', 'smart')
    local model
    for _, o in ipairs(chat.agent_state.test.configOptions) do
      if o.id == 'model' then
        model = o.currentValue
      end
    end
    eq('smart', model, 'the state the daemon answered')
    eq('mode=plan model=smart', table.concat(turn('CONFIG').body, '\n'))
    local listed
    chat.conn:request('ochat/agents/list', { conversationId = cid }, function(_, r)
      listed = r
    end)
    wait_for(function()
      return listed
    end, 5000, 'agents list')
    eq({ mode = 'plan', model = 'smart' }, listed.states[1].config)
    -- A new conversation starts with the options picked.
    chat:new_conversation()
    eq('mode=plan model=smart', table.concat(turn('CONFIG').body, '\n'))
    assert(chat.conversation_id ~= cid)
    chat.config_choices = nil
  end)

  it('keeps a file without a final newline byte-exact through gr and ga in the diff tab, and says what happened', function()
    for _, case in ipairs({ { name = 'noeol-new.txt' }, { name = 'noeol-old.txt', old = 'old\n' } }) do
      local path = ws .. '/' .. case.name
      if case.old then
        H.write(path, case.old)
      end
      local restore = stub_select(function(items)
        return items[1].optionId == 'allow' and items[1] or items[2]
      end)
      local m = turn('WRITE ' .. case.name .. ' line1\\nline2')
      restore()
      eq('line1\nline2', H.read(path))
      local seg = require('ochat.render').file_changes(m)[1]
      require('ochat.diff').open(chat, m, seg)
      for round = 1, 2 do
        local n = #H.notes
        vim.cmd('normal gr')
        wait_for(function()
          return #H.notes > n
        end, 5000, 'revert ' .. round)
        eq('ochat: reverted ' .. case.name, H.notes[#H.notes])
        eq(case.old, H.read(path), case.name .. ' reverted')
        n = #H.notes
        vim.cmd('normal ga')
        wait_for(function()
          return #H.notes > n
        end, 5000, 'apply ' .. round)
        eq('ochat: applied ' .. case.name, H.notes[#H.notes])
        eq('line1\nline2', H.read(path), case.name .. ': 11 bytes, no final newline, round ' .. round)
        eq('applied', seg.status)
      end
      local n = #H.notes
      vim.cmd('normal ga')
      wait_for(function()
        return #H.notes > n
      end, 5000, 'apply again')
      eq('ochat: ' .. case.name .. ': already applied', H.notes[#H.notes])
      vim.cmd('tabclose')
    end
  end)

  it('trusts workspace agents from :OChatAgent with ochatd trust', function()
    vim.fn.mkdir(ws .. '/.ochat', 'p')
    local settings = ws .. '/.ochat/settings.json'
    H.write(settings, vim.json.encode({ agent_servers = { wsagent = { command = bin .. '/testagent' } } }))
    -- Sending to the untrusted agent fails: the reason shows under the prompt in the chat and on the message line.
    chat:new_conversation()
    chat.agent = 'wsagent'
    local sent
    chat:send('PLAIN: hi', nil, function(e)
      sent = { e }
    end)
    wait_for(function()
      return sent
    end, 10000, 'refused send')
    chat:flush()
    chat.agent = 'test'
    assert(sent[1], 'the send is refused')
    local text = chat:text()
    assert(text:find('## You · not sent\nPLAIN: hi\n\n**Not sent:** agent wsagent cannot start: workspace settings ' .. settings .. ' are not trusted', 1, true), text)
    assert(H.notes[#H.notes]:find('ochat: send: agent wsagent cannot start', 1, true), H.notes[#H.notes])
    local menus = {}
    local restore = stub_select(function(items, opts)
      table.insert(menus, vim.tbl_map(opts.format_item, items))
      if #menus == 1 then
        return items[#items]
      end
      return items[1]
    end)
    local done
    require('ochat.agents').pick(chat, nil, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 10000, 'trust')
    restore()
    vim.cmd('tabclose')
    local listed = table.concat(menus[1], '\n')
    assert(listed:find('wsagent  (unavailable: workspace settings ' .. settings .. ' are not trusted', 1, true), listed)
    assert(listed:find('; to fix: review ' .. settings .. ', then run: ochatd trust --workspace ' .. ws .. ')', 1, true), listed)
    eq('  Trust workspace agents (review .ochat/settings.json first)', menus[1][#menus[1]])
    local list
    require('ochat.agents').fetch(chat, function(l)
      list = l
    end)
    wait_for(function()
      return list
    end, 5000, 'agents again')
    local wsagent = vim.tbl_filter(function(a)
      return a.name == 'wsagent'
    end, list)[1]
    eq(true, wsagent.available, vim.inspect(wsagent))
    eq(nil, require('ochat.util').nn(wsagent.untrusted))
  end)

  it('reloads an open buffer that the agent wrote; one with unsaved changes is left alone and told', function()
    chat:new_conversation()
    H.write(ws .. '/main.go', 'package main\n')
    vim.cmd('tabnew ' .. vim.fn.fnameescape(ws .. '/main.go'))
    local buf = api.nvim_get_current_buf()
    vim.cmd('tabprevious')
    local allow = function(items)
      return vim.tbl_filter(function(o)
        return o.optionId == 'allow'
      end, items)[1]
    end
    local restore = stub_select(allow)
    turn('WRITE main.go package main\\n\\nfunc main() {}\\n')
    restore()
    eq('package main\n\nfunc main() {}\n', H.read(ws .. '/main.go'))
    eq({ 'package main', '', 'func main() {}' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    eq(false, vim.bo[buf].modified)
    api.nvim_buf_set_lines(buf, 0, -1, false, { '// mine' })
    restore = stub_select(allow)
    turn('WRITE main.go package other\\n')
    restore()
    eq({ '// mine' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    local told = vim.tbl_filter(function(n)
      return n:find('main.go changed on disk and this buffer has unsaved changes', 1, true) ~= nil
    end, H.notes)
    eq(1, #told, vim.inspect(H.notes))
    vim.cmd('bwipe! ' .. buf)
  end)

  it('shows a rejected write as not applied, out of the totals', function()
    local restore = stub_select(function(items)
      return vim.tbl_filter(function(o)
        return o.optionId == 'reject'
      end, items)[1]
    end)
    local m = turn('WRITE never.txt nope')
    restore()
    eq(nil, H.read(ws .. '/never.txt'))
    eq('rejected', require('ochat.render').file_changes(m)[1].status, vim.inspect(m.segments))
    local text = chat:text()
    assert(text:find('▸ 1 tool (1 failed) · 1 file not applied\n', 1, true), text)
  end)

  it(':OChatAgent refuses an unknown agent, naming the known ones, and completes names', function()
    chat:open({ focus = 'prompt', insert = false }) -- the commands act on the workspace of the current buffer
    eq(true, vim.tbl_contains(vim.fn.getcompletion('OChatAgent ', 'cmdline'), 'test'))
    local notes = #H.notes
    vim.cmd('OChatAgent nosuch')
    wait_for(function()
      return #H.notes > notes
    end, 5000, 'the refusal')
    assert(H.notes[#H.notes]:find('^ochat: unknown agent "nosuch"; known agents: .*test'), H.notes[#H.notes])
    eq('test', chat.agent)
  end)

  it('warns about an @file that does not exist and sends the prompt as typed', function()
    local notes = #H.notes
    local m = turn('PLAIN see @nonexist.go')
    eq('completed', m.status)
    eq('ochat: @nonexist.go: no such file in the workspace', H.notes[notes + 1])
    assert(chat:text():find('## You\nPLAIN see @nonexist.go\n', 1, true), chat:text())
  end)

  it('marks the turn the daemon died in as interrupted', function()
    chat:new_conversation()
    chat:send('SLOW 400')
    wait_for(function()
      return chat:text():find('c3 ', 1, true)
    end, 5000, 'some chunks')
    local pids = daemon_pids()
    eq(1, #pids)
    require('ochat.util').uv.kill(pids[1], 'sigkill')
    -- The next daemon marks the turn interrupted, keeping what was checkpointed; the chat resubscribes and shows it.
    wait_for(function()
      -- The marker comes under the turn's text.
      return chat:text():find('\n## test · interrupted[^\n]*\nc0 [^\n]*\n⚠ interrupted\n')
    end, 15000, 'the interrupted turn after reconnecting')
    eq('interrupted', chat.messages[#chat.messages].status)
  end)

  it(':checkhealth ochat finds the daemon, its version and the agents', function()
    -- A socket file nobody listens on (as a killed daemon leaves it: bound, never listening) is counted apart.
    local stale = vim.env.XDG_RUNTIME_DIR .. '/ochat/stale-test.sock'
    local pipe = vim.loop.new_pipe(false)
    assert(pipe:bind(stale))
    vim.cmd('edit ' .. ws .. '/out.txt')
    vim.cmd('checkhealth ochat')
    local text = H.buf_text(0)
    vim.cmd('bwipe!')
    pipe:close()
    os.remove(stale)
    assert(text:find('daemon sockets there: 1 answering, 1 stale', 1, true), text)
    for _, want in ipairs({ 'ochatd: ' .. bin .. '/ochatd', 'version: ochatd ', 'workspace: ' .. ws, 'test: ' .. bin .. '/testagent' }) do
      assert(text:find(want, 1, true), 'missing ' .. want .. ' in\n' .. text)
    end
  end)

  it('stops cleanly', function()
    require('ochat.chat').reset()
    eq(nil, next(require('ochat.rpc').connections))
    for _, pid in ipairs(daemon_pids()) do
      require('ochat.util').uv.kill(pid, 'sigterm')
    end
  end)
end)
