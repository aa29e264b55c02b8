-- Unit tests: rendering, the chat buffer, permissions, diffs and history against a fake in-process connection.
local H = dofile('tests/helpers.lua')
local render = require('ochat.render')
local api = vim.api

after_each(H.reset)

local function ev(conn, chat, mid, e)
  conn:emit('ochat/event', { conversationId = chat.conversation_id, turnId = mid, messageId = mid, agent = 'test', event = e })
end

-- Sends "hi" through a fake daemon that answers ochat/chat/send with fixed ids.
local function start_turn(chat, conn)
  conn.handlers['ochat/chat/send'] = function()
    return { conversationId = 'C1', userMessageId = 'U1', assistantMessageId = 'A1', turnId = 'A1' }
  end
  local done
  chat:send('hi', nil, function()
    done = true
  end)
  wait_for(function()
    return done
  end, 1000, 'send answer')
end

describe('render', function()
  it('appends deltas line-wise and separates content segments', function()
    local m = render.new_message({ id = 'A', role = 'assistant', status = 'streaming' })
    eq(1, render.apply_event(m, { type = 'content.delta', seq = 1, delta = 'Hel' }).body_from)
    eq(1, render.apply_event(m, { type = 'content.delta', seq = 2, delta = 'lo\nwor' }).body_from)
    eq(nil, render.apply_event(m, { type = 'content.delta', seq = 2, delta = 'dup' }), 'duplicate seq ignored')
    render.apply_event(m, { type = 'activity.upsert', seq = 3, segment = { type = 'tool', id = 't1', name = 'Read a', status = 'running' } })
    render.apply_event(m, { type = 'content.delta', seq = 4, delta = 'next' })
    -- The tool shows where it came, between the paragraphs before and after it.
    eq({ 'Hello', 'wor', '', '◐ Read a', '', 'next' }, m.body)
    eq(4, render.apply_event(m, { type = 'activity.upsert', seq = 5, segment = { type = 'tool', id = 't1', status = 'completed' } }).body_from)
    eq({ 'Hello', 'wor', '', '● Read a', '', 'next' }, m.body)
  end)

  it('summarises activity and upserts by id and path', function()
    local m = render.new_message({ id = 'A', role = 'assistant' })
    render.apply_event(m, { type = 'reasoning.delta', delta = 'think' })
    render.apply_event(m, { type = 'activity.upsert', segment = { type = 'tool', id = 't1', name = 'Write a', status = 'pending' } })
    render.apply_event(m, { type = 'activity.upsert', segment = { type = 'tool', id = 't1', status = 'running' } })
    render.apply_event(m, { type = 'activity.upsert', segment = { type = 'tool', id = 't2', name = 'Read b', status = 'completed' } })
    render.apply_event(m, { type = 'activity.upsert', segment = { type = 'fileChange', path = '/r/a', additions = 3, deletions = 1 } })
    render.apply_event(m, { type = 'activity.upsert', segment = { type = 'fileChange', path = '/r/b', additions = 2, deletions = 0 } })
    render.apply_event(m, { type = 'plan.updated', entries = { { content = 'x', status = 'completed' }, { content = 'y', status = 'pending' } } })
    eq('thought · 2 tools (1 running) · 2 files +5 -1 · plan 1/2', render.summary(m))
    eq('Write a', m.segments[2].name, 'partial update keeps the name')
  end)

  it('renders a stored message like the live one', function()
    local live = render.new_message({ id = 'A', role = 'assistant' })
    for _, d in ipairs({ 'a\n', 'b' }) do
      render.apply_event(live, { type = 'content.delta', delta = d })
    end
    render.apply_event(live, { type = 'activity.upsert', segment = { type = 'tool', id = 't', status = 'completed' } })
    render.apply_event(live, { type = 'content.delta', delta = 'c' })
    local stored = render.new_message({
      id = 'A',
      role = 'assistant',
      segments = {
        { type = 'content', content = 'a\nb' },
        { type = 'tool', id = 't', status = 'completed' },
        { type = 'content', content = 'c' },
      },
    })
    eq(live.body, stored.body)
  end)
end)

describe('chat buffer', function()
  it('streams a turn into the float as markdown', function()
    local chat, conn = H.fake_chat()
    chat:open()
    start_turn(chat, conn)
    eq('markdown', api.nvim_buf_get_option(chat.buf, 'filetype'))
    eq('editor', api.nvim_win_get_config(chat.win).relative)
    ev(conn, chat, 'A1', { type = 'content.delta', seq = 1, delta = 'Hello ' })
    ev(conn, chat, 'A1', { type = 'content.delta', seq = 2, delta = '**world**\n\n- one' })
    ev(conn, chat, 'A1', { type = 'activity.upsert', seq = 3, segment = { type = 'tool', id = 't', name = 'Write a.txt', status = 'completed', providerKind = 'edit', input = { path = 'a.txt' } } })
    ev(conn, chat, 'A1', { type = 'activity.upsert', seq = 4, segment = { type = 'fileChange', path = chat.root .. '/a.txt', additions = 3, deletions = 0 } })
    ev(conn, chat, 'A1', { type = 'turn.completed', seq = 5, stopReason = 'end_turn' })
    wait_for(function()
      return chat:text():find('completed', 1, true) ~= nil
    end, 1000, 'completion')
    eq(
      table.concat({
        '# hi',
        '',
        '## You',
        'hi',
        '',
        '## assistant · completed',
        'Hello **world**',
        '',
        '- one',
        '',
        '● Write a.txt',
        '± a.txt +3 -0',
        '▸ 1 tool · 1 file +3 -0',
        '',
      }, '\n'),
      chat:text()
    )
  end)

  it('expands the activity line in place and collapses it again', function()
    local chat, conn = H.fake_chat()
    chat:open({ focus = 'chat' })
    start_turn(chat, conn)
    ev(conn, chat, 'A1', { type = 'content.delta', seq = 1, delta = 'body' })
    ev(conn, chat, 'A1', { type = 'activity.upsert', seq = 2, segment = { type = 'tool', id = 't', name = 'Run ls', status = 'completed', input = { cmd = 'ls' }, output = 'a\nb' } })
    ev(conn, chat, 'A1', { type = 'plan.updated', seq = 3, entries = { { content = 'step', status = 'in_progress' } } })
    ev(conn, chat, 'A1', { type = 'activity.upsert', seq = 4, segment = { type = 'fileChange', path = chat.root .. '/x.go', additions = 2, deletions = 1 } })
    chat:flush()
    local lines = api.nvim_buf_get_lines(chat.buf, 0, -1, false)
    local act
    for i, l in ipairs(lines) do
      if l:find('^▸') then
        act = i
      end
    end
    api.nvim_set_current_win(chat.win)
    api.nvim_win_set_cursor(chat.win, { act, 0 })
    chat:toggle_activity_at_cursor()
    local text = chat:text()
    for _, want in ipairs({ '▾ 1 tool · 1 file +2 -1 · plan 0/1', '● Run ls', 'input: $ ls', 'output: a', '± x.go +2 -1', '[~] step' }) do
      assert(text:find(want, 1, true), 'missing ' .. want .. ' in\n' .. text)
    end
    assert(text:find('body', 1, true), 'body kept')
    local marks = {}
    for _, ns in pairs(api.nvim_get_namespaces()) do
      for _, e in ipairs(api.nvim_buf_get_extmarks(chat.buf, ns, 0, -1, { details = true })) do
        marks[e[2]] = e[4].hl_group
      end
    end
    eq('OChatActivity', marks[act - 1])
    eq('OChatDetail', marks[act])
    chat:toggle_activity_at_cursor()
    assert(not chat:text():find('output: a', 1, true), 'collapsed again')
    assert(chat:text():find('\n● Run ls\n', 1, true), 'the tool line stays in the body')
    assert(chat:text():find('\nbody\n', 1, true), 'body after collapse')
  end)

  it('keeps later turns intact when an earlier one grows', function()
    local chat, conn = H.fake_chat()
    chat:open()
    start_turn(chat, conn)
    ev(conn, chat, 'A1', { type = 'content.delta', seq = 1, delta = 'first' })
    ev(conn, chat, 'A2', { type = 'content.delta', seq = 1, delta = 'second' })
    chat:flush()
    ev(conn, chat, 'A1', { type = 'content.delta', seq = 2, delta = '\nmore\nlines' })
    ev(conn, chat, 'A1', { type = 'activity.upsert', seq = 3, segment = { type = 'tool', id = 't', status = 'running' } })
    chat:flush()
    eq('# hi\n\n## You\nhi\n\n## assistant …\nfirst\nmore\nlines\n\n◐ t\n▸ 1 tool (1 running)\n\n## test …\nsecond\n', chat:text())
  end)

  it('survives :q of other windows and toggles', function()
    local chat = H.fake_chat()
    chat:open()
    local win = chat.win
    vim.cmd('wincmd p')
    vim.cmd('split')
    vim.cmd('q')
    assert(api.nvim_win_is_valid(win), 'chat float closed with another window')
    chat:toggle()
    assert(not api.nvim_win_is_valid(win), 'toggle hides')
    chat:toggle()
    assert(chat:is_open(), 'toggle shows')
    api.nvim_win_close(chat.prompt_win, true)
    wait_for(function()
      return not chat:is_open()
    end, 500, 'closing the prompt hides the pair')
  end)

  it('opens as a split when configured', function()
    local chat = H.fake_chat({ ui = { layout = 'split' } })
    chat:open()
    eq('', api.nvim_win_get_config(chat.win).relative)
    eq(chat.buf, api.nvim_win_get_buf(chat.win))
  end)

  it('attaches @files and a visual range', function()
    local chat, conn, root = H.fake_chat()
    H.write(root .. '/main.go', 'package main\n')
    start_turn(chat, conn)
    local buf = api.nvim_create_buf(true, false)
    api.nvim_buf_set_lines(buf, 0, -1, false, { 'a', 'b', 'c' })
    local ctx = require('ochat.chat').context_block(buf, 2, 3)
    chat:send('look at @main.go please', { context = ctx })
    local sent = H.requests(conn, 'ochat/chat/send')[2]
    eq({ { kind = 'file', path = 'main.go' } }, sent.attachments)
    eq('C1', sent.conversationId)
    assert(sent.text:find('``` [No Name]:2-3\nb\nc\n```', 1, true), sent.text)
  end)
end)

describe('connection', function()
  it('fails at once with a clear message when ochatd is missing', function()
    require('ochat').setup({ cmd = { '/nonexistent/ochatd' } })
    local root = vim.fn.tempname()
    vim.fn.mkdir(root, 'p')
    local chat = require('ochat.chat').get(root)
    local got
    chat:send('hello', nil, function(err)
      got = err
    end)
    wait_for(function()
      return got
    end, 1000, 'the send to fail')
    assert(got.message:find('/nonexistent/ochatd not found', 1, true), got.message)
    eq('closed', chat.conn.state)
  end)
end)

describe('workspace root', function()
  it('is the nearest .git directory or worktree file above the buffer', function()
    local base = require('ochat.util').normpath(vim.fn.tempname())
    vim.fn.mkdir(base .. '/repo/.git', 'p')
    vim.fn.mkdir(base .. '/repo/src', 'p')
    vim.fn.mkdir(base .. '/wt/sub', 'p')
    H.write(base .. '/wt/.git', 'gitdir: ../repo/.git/worktrees/wt\n')
    H.write(base .. '/repo/src/a.go', 'x')
    H.write(base .. '/wt/sub/b.go', 'x')
    local root_for = require('ochat.chat').root_for
    vim.cmd('edit ' .. base .. '/repo/src/a.go')
    eq(base .. '/repo', root_for(0))
    vim.cmd('edit ' .. base .. '/wt/sub/b.go')
    eq(base .. '/wt', root_for(0))
    vim.cmd('bwipe! ' .. base .. '/repo/src/a.go')
    vim.cmd('bwipe!')
  end)
end)

describe('chat details', function()
  it('completes @files in the prompt', function()
    local chat, _, root = H.fake_chat()
    H.write(root .. '/main.go', 'x')
    vim.fn.mkdir(root .. '/mod', 'p')
    chat:open()
    api.nvim_set_current_buf(chat.prompt_buf)
    local words = vim.tbl_map(function(i)
      return i.word
    end, require('ochat.chat').omnifunc(0, 'm'))
    table.sort(words)
    eq({ 'main.go', 'mod/' }, words)
  end)

  it('completes the agent\'s slash commands at the start of the prompt', function()
    local chat, conn = H.fake_chat({ agent = 'codex' })
    conn:emit('ochat/agentState', { agent = 'codex', commands = { { name = 'review', description = 'review changes' }, { name = 'init' } } })
    chat:open()
    api.nvim_set_current_buf(chat.prompt_buf)
    api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { '/re' })
    api.nvim_win_set_cursor(0, { 1, 3 })
    local omni = require('ochat.chat').omnifunc
    eq(1, omni(1, ''))
    eq({ { word = 'review', menu = '[/]', info = 'review changes' } }, omni(0, 're'))
    api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { 'look at @ma' })
    api.nvim_win_set_cursor(0, { 1, 11 })
    eq(9, omni(1, ''))
  end)

  it('shows the context meter from the agent\'s usage', function()
    local chat, conn = H.fake_chat({ agent = 'codex' })
    chat:open()
    conn:emit('ochat/agentState', { agent = 'codex', usage = { used = 1234, size = 200000 } })
    conn:emit('ochat/agentState', { agent = 'codex', title = 'named by\nthe agent ' })
    eq('# named by the agent  ·  codex  ·  context 1% (1234/200000)', api.nvim_buf_get_lines(chat.buf, 0, 1, false)[1])
  end)

  it('<C-k> in the prompt goes to the chat buffer; i and a come back', function()
    local chat = H.fake_chat()
    chat:open()
    eq(chat.prompt_win, api.nvim_get_current_win())
    api.nvim_feedkeys(api.nvim_replace_termcodes('<C-k>', true, false, true), 'x', false)
    eq(chat.win, api.nvim_get_current_win(), 'Normal mode <C-k>')
    for _, key in ipairs({ 'i', 'a' }) do
      api.nvim_feedkeys(key, 'x', false)
      eq(chat.prompt_win, api.nvim_get_current_win(), key)
      vim.cmd('stopinsert')
      api.nvim_feedkeys(api.nvim_replace_termcodes('i<C-k>', true, false, true), 'x', false)
      eq(chat.win, api.nvim_get_current_win(), 'Insert mode <C-k>')
    end
    local maps = vim.tbl_map(function(m)
      return m.desc or ''
    end, api.nvim_buf_get_keymap(chat.prompt_buf, 'i'))
    assert(vim.tbl_contains(maps, 'ochat: go to the chat buffer'), vim.inspect(maps))
  end)

  it('keeps the conversation title over a handoff-named agent session, cut to the window width', function()
    local chat, conn = H.fake_chat({ agent = 'codex' })
    chat.title = 'fix the parser'
    chat:open()
    conn:emit('ochat/agentState', { agent = 'codex', title = '<handoff> The conversation went on without you: here is what happened since your last turn' })
    eq('# fix the parser  ·  codex', api.nvim_buf_get_lines(chat.buf, 0, 1, false)[1])
    chat.title = nil
    conn:emit('ochat/agentState', { agent = 'codex', title = '<handoff>\nThe conversation went on without you' })
    eq('# ochat  ·  codex', api.nvim_buf_get_lines(chat.buf, 0, 1, false)[1], 'a handoff block is never a title')
    chat.title = string.rep('long title ', 40)
    chat:update_title()
    local line = api.nvim_buf_get_lines(chat.buf, 0, 1, false)[1]
    eq(chat:text_width(), vim.fn.strdisplaywidth(line), line)
    assert(line:find('…$'), line)
    eq(1, vim.fn.line('$', chat.win) > 0 and api.nvim_win_call(chat.win, function()
      return vim.fn.screenpos(chat.win, 1, vim.fn.strlen(line)).row - vim.fn.screenpos(chat.win, 1, 1).row + 1
    end), 'the header takes one screen line')
  end)

  it('takes a fresh snapshot on ochat/resync', function()
    local chat, conn = H.fake_chat()
    start_turn(chat, conn)
    conn.handlers['ochat/subscribe'] = function()
      return { conversation = { id = 'C1', title = 'again' }, messages = { { id = 'U1', role = 'user', content = 'hi' } } }
    end
    conn.handlers['ochat/subscribe'] = function()
      return {
        conversation = { id = 'C1', title = 'again' },
        messages = { { id = 'U1', role = 'user', content = 'hi' } },
        agentStates = { { conversationId = 'C1', agent = 'test', usage = { used = 5, size = 10 } } },
      }
    end
    conn:emit('ochat/resync', { conversationId = 'C1', reason = 'slow client' })
    wait_for(function()
      return chat.title == 'again'
    end, 1000, 'snapshot')
    eq(5, chat.agent_state.test.usage.used, 'agent states of the snapshot')
    eq({ conversationId = 'C1' }, H.requests(conn, 'ochat/subscribe')[1])
  end)

  it('keeps events that arrive before the answer that names a new conversation', function()
    local chat, conn = H.fake_chat()
    chat:open()
    conn.handlers['ochat/chat/send'] = function()
      conn:emit('ochat/event', { conversationId = 'C7', messageId = 'A7', agent = 'test', event = { type = 'content.delta', seq = 1, delta = 'early bird' } })
      return { conversationId = 'C7', userMessageId = 'U7', assistantMessageId = 'A7', turnId = 'A7' }
    end
    local done
    chat:send('new one', nil, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'answer')
    chat:flush()
    eq('# new one\n\n## You\nnew one\n\n## assistant …\nearly bird\n', chat:text())
  end)

  it('shows a turn started by another editor with its prompt', function()
    local chat, conn = H.fake_chat()
    chat:open()
    start_turn(chat, conn)
    ev(conn, chat, 'A1', { type = 'turn.completed', seq = 1, stopReason = 'end_turn' })
    conn.handlers['ochat/conversations/get'] = function()
      return {
        conversation = { id = 'C1' },
        messages = {
          { id = 'U1', role = 'user', content = 'hi' },
          { id = 'A1', role = 'assistant', agent = 'test', status = 'completed', segments = {} },
          { id = 'U9', role = 'user', content = 'from elsewhere' },
          { id = 'A9', role = 'assistant', agent = 'test', status = 'streaming', segments = {} },
        },
      }
    end
    ev(conn, chat, 'A9', { type = 'content.delta', seq = 1, delta = 'answer 9' })
    wait_for(function()
      return #H.requests(conn, 'ochat/conversations/get') == 1 and chat:text():find('from elsewhere', 1, true)
    end, 1000, 'adopted turn')
    ev(conn, chat, 'A9', { type = 'content.delta', seq = 2, delta = ' continues' })
    eq('# hi  ·  test\n\n## You\nhi\n\n## assistant · completed\n\n## You\nfrom elsewhere\n\n## test …\nanswer 9 continues\n', chat:text())
  end)

  it('resumes a running turn from a truncated replay', function()
    local chat, conn = H.fake_chat()
    chat:open()
    conn.handlers['ochat/subscribe'] = function()
      return {
        conversation = { id = 'C3', title = 'long' },
        messages = { { id = 'U', role = 'user', content = 'go' }, { id = 'A', role = 'assistant', agent = 'test', status = 'streaming' } },
        running = {
          turnId = 'A',
          assistantMessageId = 'A',
          agent = 'test',
          events = {},
          truncated = true,
          lastSeq = 900,
          message = { id = 'A', role = 'assistant', agent = 'test', status = 'streaming', segments = { { type = 'content', content = 'so far' } } },
        },
      }
    end
    local done
    chat:subscribe('C3', function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'subscribe')
    conn:emit('ochat/event', { conversationId = 'C3', messageId = 'A', event = { type = 'content.delta', seq = 900, delta = ' DUP' } })
    conn:emit('ochat/event', { conversationId = 'C3', messageId = 'A', event = { type = 'content.delta', seq = 901, delta = ' and more' } })
    eq('# long  ·  test\n\n## You\ngo\n\n## test …\nso far and more\n', chat:text())
  end)

  it('marks a prompt the daemon refused', function()
    local chat, conn = H.fake_chat()
    chat:open()
    conn.handlers['ochat/chat/send'] = function()
      return nil, { code = -32003, message = 'a turn is already running' }
    end
    local done
    chat:send('again', nil, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'answer')
    chat:flush()
    eq('# ochat\n\n## You · not sent\nagain\n\n**Not sent:** a turn is already running (-32003)\n', chat:text())
    eq('ochat: send: a turn is already running (-32003)', H.notes[#H.notes])
  end)

  it('titles the float where Neovim supports it', function()
    local chat = H.fake_chat()
    chat:open()
    local title = api.nvim_win_get_config(chat.win).title
    if vim.fn.has('nvim-0.9') == 1 then
      eq(' ochat ', type(title) == 'table' and title[1][1] or title)
    else
      eq(nil, title)
    end
  end)
end)

describe('permission', function()
  it('never takes the focus or the mode; gy in the input answers allow once, digits answer nothing', function()
    local chat, conn = H.fake_chat({ permission = { use_select = false } })
    chat:open()
    start_turn(chat, conn)
    conn.handlers['ochat/permission/respond'] = function()
      return {}
    end
    local orig, selected = vim.ui.select, false
    vim.ui.select = function()
      selected = true
    end
    api.nvim_set_current_win(chat.prompt_win)
    local win = api.nvim_get_current_win()
    conn:emit('ochat/permission', {
      permissionId = 'P0',
      conversationId = 'C1',
      agent = 'claude',
      toolCall = { name = 'Bash', input = { command = { 'bash', '-lc', 'ls /tmp/x' }, call_id = 'c1', turn_id = 't1', started_at_ms = 5, cwd = chat.root } },
      options = {
        { optionId = 'always', name = 'Always Allow', kind = 'allow_always' },
        { optionId = 'once', name = 'Allow', kind = 'allow_once' },
        { optionId = 'no', name = 'Reject', kind = 'reject_once' },
      },
    })
    eq(win, api.nvim_get_current_win(), 'focus stays in the input')
    eq(false, selected, 'no picker opened')
    local st = require('ochat.permission').open.P0
    local text = H.buf_text(st.buf)
    assert(text:find('$ ls /tmp/x', 1, true), text)
    for _, bad in ipairs({ 'call_id', 'turn_id', 'started_at_ms', '\\/' }) do
      assert(not text:find(bad, 1, true), bad .. ' shown in\n' .. text)
    end
    assert(chat:text():find('> ⚠ claude asks permission: Bash · $ ls /tmp/x', 1, true), chat:text())
    eq('ochat: claude asks permission', require('ochat').status())
    vim.cmd('normal 1')
    eq(0, #H.requests(conn, 'ochat/permission/respond'), 'a digit answers nothing')
    vim.cmd('normal gy')
    wait_for(function()
      return #H.requests(conn, 'ochat/permission/respond') == 1
    end, 1000, 'respond')
    eq({ permissionId = 'P0', optionId = 'once' }, H.requests(conn, 'ochat/permission/respond')[1])
    wait_for(function()
      return require('ochat.permission').open.P0 == nil
    end, 1000, 'closed')
    eq('', require('ochat').status())
    assert(not chat:text():find('asks permission', 1, true), 'footer cleared')
    vim.ui.select = orig
  end)

  it('shows tool, input and every diff, and answers the picked option', function()
    local chat, conn = H.fake_chat()
    start_turn(chat, conn)
    conn.handlers['ochat/permission/respond'] = function()
      return {}
    end
    local seen
    local orig = vim.ui.select
    vim.ui.select = function(items, opts, cb)
      seen = vim.tbl_map(opts.format_item, items)
      cb(items[2])
    end
    conn:emit('ochat/permission', {
      permissionId = 'P1',
      conversationId = 'C1',
      agent = 'test',
      toolCall = { type = 'tool', id = 't', name = 'Write a.txt', providerKind = 'edit', input = { path = 'a.txt' } },
      fileChanges = {
        { type = 'fileChange', path = chat.root .. '/a.txt', additions = 1, deletions = 0, oldText = vim.NIL, newText = 'new\n' },
        { type = 'fileChange', path = chat.root .. '/b.txt', additions = 1, deletions = 1, diff = '--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n' },
      },
      options = {
        { optionId = 'always', name = 'Always Allow', kind = 'allow_always' },
        { optionId = 'once', name = 'Allow', kind = 'allow_once' },
        { optionId = 'no', name = 'Reject', kind = 'reject_once' },
      },
    })
    local st = require('ochat.permission').open.P1
    local text = H.buf_text(st.buf)
    for _, want in ipairs({ 'Write a.txt (edit)', 'path: a.txt', '**a.txt** +1 -0', '+new', '**b.txt** +1 -1', '-x', '+y', '- Reject  (reject_once)', '- Allow  (allow_once)  ← gy' }) do
      assert(text:find(want, 1, true), 'missing ' .. want .. ' in\n' .. text)
    end
    wait_for(function()
      return #H.requests(conn, 'ochat/permission/respond') == 1
    end, 1000, 'respond')
    vim.ui.select = orig
    eq({ 'Always Allow [allow_always]', 'Allow [allow_once]', 'Reject [reject_once]' }, seen)
    eq({ permissionId = 'P1', optionId = 'once' }, H.requests(conn, 'ochat/permission/respond')[1])
    wait_for(function()
      return require('ochat.permission').open.P1 == nil
    end, 1000, 'closed after answering')
  end)

  it('closes when another editor answered', function()
    local chat, conn = H.fake_chat({ permission = { use_select = false } })
    start_turn(chat, conn)
    conn:emit('ochat/permission', { permissionId = 'P2', conversationId = 'C1', toolCall = { name = 'x' }, options = { { optionId = 'a', name = 'A' } } })
    local win = require('ochat.permission').open.P2.win
    assert(api.nvim_win_is_valid(win))
    conn:emit('ochat/permissionResolved', { permissionId = 'P2', conversationId = 'C1', optionId = 'a', outcome = 'selected' })
    assert(not api.nvim_win_is_valid(win), 'float closed')
    eq(nil, require('ochat.permission').open.P2)
    eq(0, #H.requests(conn, 'ochat/permission/respond'))
  end)
end)

describe('diff', function()
  it('opens before|after side by side in diff mode', function()
    local chat = H.fake_chat()
    local m = render.new_message({ id = 'A', role = 'assistant' })
    local seg = { type = 'fileChange', path = chat.root .. '/f.lua', oldText = 'a\nb\n', newText = 'a\nc\n' }
    require('ochat.diff').open(chat, m, seg)
    local wins = api.nvim_tabpage_list_wins(0)
    eq(2, #wins)
    eq({ 'a', 'b' }, api.nvim_buf_get_lines(api.nvim_win_get_buf(wins[1]), 0, -1, false))
    eq({ 'a', 'c' }, api.nvim_buf_get_lines(api.nvim_win_get_buf(wins[2]), 0, -1, false))
    eq(true, api.nvim_win_get_option(wins[1], 'diff'))
    eq(true, api.nvim_win_get_option(wins[2], 'diff'))
    eq('lua', api.nvim_buf_get_option(api.nvim_win_get_buf(wins[2]), 'filetype'))
    -- The cursor starts on the editable side (u there is no E21), and each side says what it is and its keys.
    eq(wins[2], api.nvim_get_current_win())
    eq(true, api.nvim_buf_get_option(api.nvim_win_get_buf(wins[2]), 'modifiable'))
    assert(api.nvim_win_get_option(wins[2], 'statusline'):find('ga apply', 1, true), api.nvim_win_get_option(wins[2], 'statusline'))
    assert(api.nvim_win_get_option(wins[1], 'statusline'):find('read-only', 1, true))
  end)

  it('applies the proposed side as edited in the diff tab', function()
    local chat, _, root = H.fake_chat()
    local path = root .. '/e.txt'
    H.write(path, 'one\n')
    local m = render.new_message({ id = 'A', role = 'assistant' })
    local seg = { type = 'fileChange', path = path, oldText = 'one\n', newText = 'two\n' }
    require('ochat.diff').open(chat, m, seg)
    local right = api.nvim_tabpage_list_wins(0)[2]
    api.nvim_set_current_win(right)
    api.nvim_buf_set_lines(0, 0, -1, false, { 'two', 'and my own line' })
    vim.cmd('normal ga')
    eq('two\nand my own line\n', H.read(path))
    eq('applied (edited)', seg.status)
  end)

  it('reviews every file of a turn, one tab each', function()
    local chat = H.fake_chat()
    local m = render.new_message({
      id = 'A',
      role = 'assistant',
      segments = {
        { type = 'fileChange', path = chat.root .. '/1', newText = '1' },
        { type = 'fileChange', path = chat.root .. '/2', newText = '2' },
        { type = 'fileChange', path = chat.root .. '/3', newText = '3' },
      },
    })
    local tabs = require('ochat.diff').review(chat, m)
    eq(3, #tabs)
    eq(4, #api.nvim_list_tabpages())
  end)

  -- A chat showing conversation C1 whose answer A has one fileChange of <root>/a.txt (old line → new line).
  local function change_chat()
    local chat, conn, root = H.fake_chat()
    chat:open({ focus = 'chat' })
    local path = root .. '/a.txt'
    chat:load_snapshot({
      conversation = { id = 'C1', title = 't' },
      messages = {
        { id = 'U', role = 'user', content = 'change it' },
        { id = 'A', role = 'assistant', agent = 'test', status = 'completed', segments = { { type = 'fileChange', path = path, additions = 1, deletions = 1, oldText = 'old line\n', newText = 'new line\n' } } },
      },
    })
    local m = chat.by_id.A
    m.expanded = true -- file lines (with their status) are shown
    chat:full_render()
    return chat, conn, path, m, require('ochat.render').file_changes(m)[1]
  end

  local function change(chat, m, seg, action)
    local done
    require('ochat.diff').change(chat, m, seg, action, function(err)
      done = { err }
    end)
    wait_for(function()
      return done
    end, 1000, action)
    return done[1]
  end

  it('applies and reverts through ochat/fileChange/*, the status from the answer', function()
    local chat, conn, path, m, seg = change_chat()
    conn.handlers['ochat/fileChange/revert'] = function()
      return { applied = true, via = 'editor', status = 'reverted' }
    end
    eq(nil, change(chat, m, seg, 'revert'))
    eq({ conversationId = 'C1', messageId = 'A', path = path }, H.requests(conn, 'ochat/fileChange/revert')[1])
    eq('reverted', seg.status)
    assert(chat:text():find('a.txt +1 -1 reverted', 1, true), chat:text())
  end)

  it('takes "already applied" as done, and tells rather than warns', function()
    local chat, conn, _, m, seg = change_chat()
    conn.handlers['ochat/fileChange/apply'] = function()
      return { applied = false, reason = 'already applied', status = 'applied' }
    end
    eq(nil, change(chat, m, seg, 'apply'))
    eq('applied', seg.status)
    eq('ochat: a.txt: already applied', H.notes[#H.notes])
  end)

  it('says the daemon is too old when it lacks ochat/fileChange/*', function()
    local chat, _, path, m, seg = change_chat()
    H.write(path, 'old line\n')
    local err = change(chat, m, seg, 'apply')
    eq(-32601, err and err.code)
    assert(H.notes[#H.notes]:find('update ochatd', 1, true), H.notes[#H.notes])
    eq('old line\n', H.read(path), 'nothing written by the plugin')
  end)

  it('on a conflict offers force, which goes through the editor as one undo step', function()
    local chat, conn, path, m, seg = change_chat()
    H.write(path, 'mine\n')
    local buf = vim.fn.bufadd(path)
    vim.fn.bufload(buf)
    conn.handlers['ochat/fileChange/revert'] = function(p)
      if not p.force then
        return nil, { code = -32003, message = path .. " changed since the agent's edit; review the diff (or apply with force: true to overwrite it)" }
      end
      -- The daemon answers a forced change by sending workspace/applyEdit to this editor.
      local res = require('ochat.rpc').request_handlers['workspace/applyEdit']({
        label = 'ochat: revert the change to a.txt',
        edit = { documentChanges = { { textDocument = { uri = vim.uri_from_fname(path) }, edits = { { range = { start = { line = 0, character = 0 }, ['end'] = { line = 1, character = 0 } }, newText = 'old line\n' } } } } },
      })
      return { applied = res.applied, via = 'editor', status = 'reverted' }
    end
    local offered
    local orig = vim.ui.select
    vim.ui.select = function(items, opts, cb)
      offered = vim.tbl_map(opts.format_item, items)
      cb(items[2])
    end
    local err = change(chat, m, seg, 'revert')
    vim.ui.select = orig
    eq(nil, err)
    eq({ 'review the diff first', 'revert anyway: overwrite a.txt in the editor (one undo step)', 'leave the file as it is' }, offered)
    eq({ nil, true }, { H.requests(conn, 'ochat/fileChange/revert')[1].force, H.requests(conn, 'ochat/fileChange/revert')[2].force })
    eq('old line\n', H.read(path))
    eq('reverted', seg.status)
    api.nvim_buf_call(buf, function()
      vim.cmd('silent undo')
    end)
    eq({ 'mine' }, api.nvim_buf_get_lines(buf, 0, -1, false), 'one undo takes the forced edit back')
  end)

  it('on a conflict the user may leave the file as it is', function()
    local chat, conn, path, m, seg = change_chat()
    H.write(path, 'mine\n')
    conn.handlers['ochat/fileChange/apply'] = function()
      return nil, { code = -32003, message = path .. " changed since the agent's edit; review the diff (or apply with force: true to overwrite it)" }
    end
    local orig = vim.ui.select
    vim.ui.select = function(items, _, cb)
      cb(items[3])
    end
    local err = change(chat, m, seg, 'apply')
    vim.ui.select = orig
    eq(-32003, err and err.code)
    eq(1, #H.requests(conn, 'ochat/fileChange/apply'))
    eq('mine\n', H.read(path))
    eq(nil, seg.status)
  end)

  it('shows the status an ochat/fileChangeStatus notification reports', function()
    local chat, conn, path = change_chat()
    conn:emit('ochat/fileChangeStatus', { conversationId = 'C1', messageId = 'A', path = path, status = 'reverted' })
    wait_for(function()
      return chat:text():find('a.txt +1 -1 reverted', 1, true) ~= nil
    end, 1000, 'status shown: ' .. chat:text())
    conn:emit('ochat/fileChangeStatus', { conversationId = 'other', messageId = 'A', path = path, status = 'applied' })
    chat:flush()
    assert(chat:text():find('a.txt +1 -1 reverted', 1, true), 'another conversation changes nothing')
  end)

  it('workspace/applyEdit creates and deletes files', function()
    local _, _, root = H.fake_chat()
    local path = root .. '/b.txt'
    local uri = vim.uri_from_fname(path)
    local apply = require('ochat.rpc').request_handlers['workspace/applyEdit']
    eq({ applied = true }, apply({ edit = { documentChanges = {
      { kind = 'create', uri = uri, options = { ignoreIfExists = true } },
      { textDocument = { uri = uri }, edits = { { range = { start = { line = 0, character = 0 }, ['end'] = { line = 1, character = 0 } }, newText = 'hello\n' } } },
    } } }))
    eq('hello\n', H.read(path))
    eq({ applied = true }, apply({ edit = { documentChanges = { { kind = 'delete', uri = uri, options = { ignoreIfNotExists = true } } } } }))
    eq(nil, H.read(path))
  end)

  it('handles workspace/applyEdit with a null version', function()
    local _, _, root = H.fake_chat()
    local path = root .. '/v.txt'
    H.write(path, 'one\ntwo\n')
    local res = require('ochat.rpc').request_handlers['workspace/applyEdit']({
      edit = {
        documentChanges = {
          {
            textDocument = { uri = vim.uri_from_fname(path), version = vim.NIL },
            edits = { { range = { start = { line = 1, character = 0 }, ['end'] = { line = 1, character = 3 } }, newText = 'zwei' } },
          },
        },
      },
    })
    eq({ applied = true }, res)
    eq('one\nzwei\n', H.read(path))
  end)
end)

describe('history', function()
  it('lists conversations and terminal sessions, newest first, live marked, and opens a pick', function()
    local chat, conn = H.fake_chat()
    conn.handlers['ochat/sessions/list'] = function()
      return {
        sessions = {
          { id = 'c2', kind = 'conversation', title = 'newer', agents = {}, updatedAt = 3000, live = false },
          { id = 's2', kind = 'native', agent = 'claude', title = 'opened already', updatedAt = 2500, conversationId = 'c9', live = false },
          { id = 's1', kind = 'native', agent = 'claude', title = 'from terminal', updatedAt = 2000, live = true, path = '/x/s1.jsonl' },
          { id = 'c1', kind = 'conversation', title = 'old one', agents = { 'claude' }, updatedAt = 1000, live = true },
        },
        diagnostics = {},
      }
    end
    conn.handlers['ochat/subscribe'] = function(p)
      return { conversation = { id = p.conversationId, title = 'newer' }, messages = { { id = 'u', role = 'user', content = 'q' }, { id = 'a', role = 'assistant', agent = 'claude', status = 'completed', segments = { { type = 'content', content = 'answer' } } } } }
    end
    local items
    local orig = vim.ui.select
    vim.ui.select = function(list, opts, cb)
      items = vim.tbl_map(opts.format_item, list)
      cb(list[1])
    end
    local done
    require('ochat.history').pick(chat, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'open')
    vim.ui.select = orig
    eq(4, #items)
    assert(items[1]:find('^  .*newer'), items[1])
    assert(items[2]:find('^○ .*opened already.*%[claude%]'), items[2])
    assert(items[3]:find('^● .*from terminal.*%[claude%]'), items[3])
    assert(items[4]:find('old one.*%(running%)'), items[4])
    eq(0, #H.requests(conn, 'ochat/conversations/list'), 'the session list names the conversations too')
    eq('c2', chat.conversation_id)
    eq('# newer  ·  claude\n\n## You\nq\n\n## claude · completed\nanswer\n', chat:text())
    eq(false, api.nvim_buf_get_option(chat.buf, 'modifiable'), 'read-only transcript')
  end)

  it('follows a live terminal session and continues it on the next prompt', function()
    local chat, conn = H.fake_chat()
    chat:open()
    conn.handlers['ochat/sessions/follow'] = function()
      return {
        sessionId = 's1',
        agent = 'claude',
        path = '/x/s1.jsonl',
        session = { title = 'from terminal' },
        messages = { { id = 'n1', role = 'user', content = 'typed in a terminal' } },
      }
    end
    conn.handlers['ochat/sessions/unfollow'] = function()
      return {}
    end
    local done
    require('ochat.history').open_entry(chat, { kind = 'session', id = 's1', path = '/x/s1.jsonl', live = true, agents = { 'claude' }, title = 'x' }, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'follow')
    eq({ path = '/x/s1.jsonl' }, H.requests(conn, 'ochat/sessions/follow')[1])
    conn:emit('ochat/sessionAppended', {
      sessionId = 's1',
      path = '/x/s1.jsonl',
      reset = false,
      messages = { { id = 'n2', role = 'assistant', agent = 'claude', status = 'streaming', segments = { { type = 'content', content = 'the terminal answers' } } } },
    })
    eq('# from terminal  ·  claude\n\n## You\ntyped in a terminal\n\n## claude …\nthe terminal answers\n', chat:text())
    conn.handlers['ochat/sessions/open'] = function()
      return {
        conversationId = 'c5',
        conversation = { id = 'c5', title = 'from terminal' },
        messages = { { id = 'm1', role = 'user', content = 'typed in a terminal' }, { id = 'm2', role = 'assistant', agent = 'claude', status = 'completed', segments = { { type = 'content', content = 'the terminal answers' } } } },
        created = true,
      }
    end
    conn.handlers['ochat/chat/send'] = function(p)
      return { conversationId = p.conversationId, userMessageId = 'U', assistantMessageId = 'A', turnId = 'A' }
    end
    local sent
    chat:send('and now from the editor', nil, function(err)
      sent = { err }
    end)
    wait_for(function()
      return sent
    end, 1000, 'send')
    eq(nil, sent[1])
    eq({ path = '/x/s1.jsonl' }, H.requests(conn, 'ochat/sessions/open')[1])
    eq({ path = '/x/s1.jsonl' }, H.requests(conn, 'ochat/sessions/unfollow')[1])
    eq('c5', H.requests(conn, 'ochat/chat/send')[1].conversationId)
    assert(chat:text():find('## claude · completed\nthe terminal answers\n\n## You\nand now from the editor', 1, true), chat:text())
  end)

  it('falls back to ochat/conversations/list', function()
    local chat, conn = H.fake_chat()
    conn.handlers['ochat/conversations/list'] = function()
      return { conversations = { { id = 'c1', title = 't', updatedAt = 1 } } }
    end
    local n
    local orig = vim.ui.select
    vim.ui.select = function(list, _, cb)
      n = #list
      cb(nil)
    end
    local done
    require('ochat.history').pick(chat, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'pick')
    vim.ui.select = orig
    eq(1, n)
  end)
end)

describe('agents', function()
  it('picks an agent and one of its config options', function()
    local chat, conn = H.fake_chat()
    conn.handlers['ochat/agents/list'] = function()
      return { agents = { { name = 'claude', available = true, command = 'claude-agent-acp' }, { name = 'gemini', available = false, reason = 'not on PATH', install = 'npm i -g x' } } }
    end
    conn.handlers['ochat/agent/setConfig'] = function()
      return { applied = true, state = { configOptions = { { id = 'model', name = 'Model', type = 'select', currentValue = 'b', options = { { value = 'a', name = 'Alpha' }, { value = 'b', name = 'Beta' } } } } }, config = { model = 'b' } }
    end
    chat.conversation_id = 'C1'
    chat.agent_state.claude = { agent = 'claude', configOptions = { { id = 'model', name = 'Model', type = 'select', currentValue = 'a', options = { { value = 'a', name = 'Alpha' }, { value = 'b', name = 'Beta' } } } } }
    local shown = {}
    local orig = vim.ui.select
    vim.ui.select = function(list, opts, cb)
      table.insert(shown, vim.tbl_map(opts.format_item, list))
      cb(list[#shown == 3 and 2 or 1])
    end
    local done
    require('ochat.agents').pick(chat, nil, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'pick')
    vim.ui.select = orig
    eq('claude', chat.agent)
    assert(shown[1][2]:find('unavailable: not on PATH; to fix: npm i -g x', 1, true), shown[1][2])
    eq({ 'Model: Alpha' }, shown[2])
    eq({ 'Alpha  (current)', 'Beta' }, shown[3])
    eq({ conversationId = 'C1', agent = 'claude', configId = 'model', value = 'b' }, H.requests(conn, 'ochat/agent/setConfig')[1])
    eq('b', chat.agent_state.claude.configOptions[1].currentValue, 'the state the daemon answered')
  end)

  it('keeps a choice made before the conversation exists and sets it before the first prompt, and in new ones', function()
    local chat, conn = H.fake_chat()
    local n = 0
    conn.handlers['ochat/conversations/create'] = function(p)
      n = n + 1
      return { conversation = { id = 'C' .. n, title = p.title, agents = {} } }
    end
    conn.handlers['ochat/agent/setConfig'] = function()
      return { applied = false, config = { effort = 'high' } }
    end
    conn.handlers['ochat/chat/send'] = function(p)
      return { conversationId = p.conversationId, userMessageId = 'U' .. n, assistantMessageId = 'A' .. n, turnId = 'A' .. n }
    end
    chat.agent = 'codex'
    local setting = { kind = 'config', id = 'effort', name = 'Effort', choices = {} }
    local done
    require('ochat.agents').set(chat, 'codex', setting, 'high', function(err)
      done = { err }
    end)
    wait_for(function()
      return done
    end, 1000, 'set')
    eq(nil, done[1])
    eq('high', setting.current)
    eq({}, H.requests(conn, 'ochat/agent/setConfig'), 'nothing to set yet: the daemon needs a conversation')
    local sent
    chat:send('make it fast\nplease', nil, function(err)
      sent = { err }
    end)
    wait_for(function()
      return sent
    end, 1000, 'send')
    eq(nil, sent[1])
    local order = vim.tbl_map(function(r)
      return r.method
    end, conn.requests)
    eq({ 'ochat/conversations/create', 'ochat/agent/setConfig', 'ochat/chat/send' }, order)
    eq({ title = 'make it fast' }, conn.requests[1].params)
    eq({ conversationId = 'C1', agent = 'codex', configId = 'effort', value = 'high' }, conn.requests[2].params)
    eq('C1', conn.requests[3].params.conversationId)
    eq('C1', chat.conversation_id)
    -- It sticks: a new conversation of this chat starts with it too.
    chat:new_conversation()
    sent = nil
    chat:send('again', nil, function(err)
      sent = { err }
    end)
    wait_for(function()
      return sent
    end, 1000, 'second send')
    eq({ conversationId = 'C2', agent = 'codex', configId = 'effort', value = 'high' }, H.requests(conn, 'ochat/agent/setConfig')[2])
  end)
end)

describe('edit and retry', function()
  -- A conversation C1 with two finished turns: U1 "first" → A1, U2 "second" → A2.
  local function two_turns()
    local chat, conn = H.fake_chat()
    chat:open({ focus = 'chat' })
    chat:load_snapshot({
      conversation = { id = 'C1', title = 't' },
      messages = {
        { id = 'U1', role = 'user', content = 'first' },
        { id = 'A1', role = 'assistant', agent = 'test', status = 'completed', segments = { { type = 'content', content = 'one' } } },
        { id = 'U2', role = 'user', content = 'second' },
        { id = 'A2', role = 'assistant', agent = 'test', status = 'completed', segments = { { type = 'content', content = 'two' } } },
      },
    })
    return chat, conn
  end

  local function answer_with(conn, method, u, a)
    conn.handlers[method] = function()
      return { conversationId = 'C1', userMessageId = u, assistantMessageId = a, turnId = a }
    end
  end

  it(':OChatEdit edits the last user message through vim.ui.input and drops what followed', function()
    local chat, conn = two_turns()
    answer_with(conn, 'ochat/chat/edit', 'U3', 'A3')
    chat.agent = 'codex'
    local asked
    local orig = vim.ui.input
    vim.ui.input = function(opts, cb)
      asked = opts
      cb('second, edited')
    end
    vim.cmd('OChatEdit')
    vim.ui.input = orig
    eq('second', asked.default)
    wait_for(function()
      return chat.by_id.U3 ~= nil
    end, 1000, 'edit answer')
    eq({ { messageId = 'U2', text = 'second, edited', conversationId = 'C1', agent = 'codex' } }, H.requests(conn, 'ochat/chat/edit'))
    ev(conn, chat, 'A3', { type = 'content.delta', seq = 1, delta = 'deux' })
    ev(conn, chat, 'A3', { type = 'turn.completed', seq = 2, stopReason = 'end_turn' })
    wait_for(function()
      return chat:text():find('deux', 1, true) ~= nil
    end, 1000, 'new answer')
    eq('# t  ·  codex\n\n## You\nfirst\n\n## test · completed\none\n\n## You\nsecond, edited\n\n## codex · completed\ndeux\n', chat:text())
    eq({ 'U1', 'A1', 'U3', 'A3' }, vim.tbl_map(function(m)
      return m.id
    end, chat.messages))
  end)

  it('ge edits the message under the cursor in a scratch buffer when it has several lines', function()
    local chat, conn = two_turns()
    chat.messages[1].body = { 'first', 'line two' }
    chat:full_render()
    answer_with(conn, 'ochat/chat/edit', 'U3', 'A3')
    api.nvim_set_current_win(chat.win)
    api.nvim_win_set_cursor(chat.win, { chat.messages[2].block.start + 2, 0 }) -- in the first answer
    vim.cmd('normal ge')
    local buf = api.nvim_get_current_buf()
    eq({ 'first', 'line two' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    api.nvim_buf_set_lines(buf, 1, 2, false, { 'line 2' })
    vim.cmd('write')
    wait_for(function()
      return chat.by_id.U3 ~= nil
    end, 1000, 'edit answer')
    eq('U1', H.requests(conn, 'ochat/chat/edit')[1].messageId)
    eq('first\nline 2', H.requests(conn, 'ochat/chat/edit')[1].text)
    eq({ 'U3', 'A3' }, vim.tbl_map(function(m)
      return m.id
    end, chat.messages))
    wait_for(function()
      return not api.nvim_buf_is_valid(buf)
    end, 1000, 'scratch buffer closed')
  end)

  it('gR regenerates the answer under the cursor; :OChatRetry the last one', function()
    local chat, conn = two_turns()
    answer_with(conn, 'ochat/chat/retry', 'U3', 'A3')
    api.nvim_set_current_win(chat.win)
    api.nvim_win_set_cursor(chat.win, { chat.messages[2].block.start + 1, 0 })
    vim.cmd('normal gR')
    wait_for(function()
      return chat.by_id.A3 ~= nil
    end, 1000, 'retry answer')
    eq({ conversationId = 'C1', messageId = 'A1' }, H.requests(conn, 'ochat/chat/retry')[1])
    eq('# t\n\n## You\nfirst\n\n## assistant …\n', chat:text())
    answer_with(conn, 'ochat/chat/retry', 'U4', 'A4')
    vim.cmd('wincmd p')
    chat:open({ focus = 'prompt', insert = false })
    vim.cmd('OChatRetry')
    wait_for(function()
      return chat.by_id.A4 ~= nil
    end, 1000, 'second retry')
    eq('A3', H.requests(conn, 'ochat/chat/retry')[2].messageId)
  end)

  it('keeps the messages and says why when the daemon refuses', function()
    local chat, conn = two_turns()
    conn.handlers['ochat/chat/retry'] = function()
      return nil, { code = -32003, message = 'a turn is running in this conversation; cancel it first' }
    end
    local got
    chat:retry(nil, function(err)
      got = err
    end)
    wait_for(function()
      return got
    end, 1000, 'error')
    eq(4, #chat.messages)
    assert(H.notes[#H.notes]:find('retry: a turn is running', 1, true), H.notes[#H.notes])
  end)

  it('reloads the conversation on ochat/resync from an edit elsewhere', function()
    local chat, conn = two_turns()
    conn.handlers['ochat/subscribe'] = function()
      return { conversation = { id = 'C1', title = 't' }, messages = { { id = 'U1', role = 'user', content = 'changed elsewhere' } } }
    end
    conn:emit('ochat/resync', { conversationId = 'C1', reason = 'conversation edited: message U1 replaced' })
    wait_for(function()
      return #chat.messages == 1
    end, 1000, 'resubscribed')
    eq('# t\n\n## You\nchanged elsewhere\n', chat:text())
    eq({ conversationId = 'C1' }, H.requests(conn, 'ochat/subscribe')[1])
  end)
end)

describe('workspace trust', function()
  -- A fake daemon listing one untrusted workspace agent; `cmd` is a shell script that records its arguments.
  -- `root` (optional): the workspace directory; `install` (optional): function(settings, root) -> install text.
  local function untrusted_chat(root, install)
    local rec = vim.fn.tempname()
    local chat, conn
    chat, conn, root = H.fake_chat({ cmd = { 'sh', '-c', 'echo "$@" > "$0"; echo Trusted: these commands may now run', rec } }, root)
    local settings = root .. '/.ochat/settings.json'
    vim.fn.mkdir(root .. '/.ochat', 'p')
    H.write(settings, '{"agent_servers": {"mine": {"command": "my-agent"}}}\n')
    local trusted = false
    conn.handlers['ochat/agents/list'] = function()
      if trusted then
        return { agents = { { name = 'mine', command = 'my-agent', source = 'workspace', available = true } } }
      end
      return {
        agents = {
          {
            name = 'mine',
            command = '',
            source = 'workspace',
            available = false,
            untrusted = true,
            reason = 'workspace settings ' .. settings .. ' are not trusted: run `ochatd trust` (or review the file first)',
            install = install and install(settings, root) or ('review ' .. settings .. ', then run: ochatd trust --workspace ' .. root),
          },
        },
      }
    end
    return chat, conn, root, settings, rec, function()
      trusted = true
    end
  end

  local function pick_with(chat, answers)
    local shown = {}
    local orig = vim.ui.select
    vim.ui.select = function(items, opts, cb)
      table.insert(shown, { prompt = opts.prompt, items = vim.tbl_map(opts.format_item, items) })
      cb(answers[#shown](items))
    end
    local done
    require('ochat.agents').pick(chat, nil, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 5000, 'pick')
    vim.ui.select = orig
    return shown
  end

  it('labels what to fix and trusts the workspace after showing the file and a yes', function()
    local chat, conn, root, settings, rec, trust = untrusted_chat()
    local shown = pick_with(chat, {
      function(items)
        return items[#items]
      end,
      function(items)
        trust()
        return items[1]
      end,
    })
    local first = shown[1].items
    assert(first[1]:find('; to fix: review ' .. settings .. ', then run: ochatd trust --workspace ' .. root, 1, true), first[1])
    eq('  Trust workspace agents (review .ochat/settings.json first)', first[2])
    eq('Let the agents of ' .. settings .. ' run as you in ' .. root .. '?', shown[2].prompt)
    eq({ 'Yes: trust ' .. settings .. ' as it is now', 'No' }, shown[2].items)
    eq(settings, vim.api.nvim_buf_get_name(0), 'the settings file is shown')
    eq(true, vim.bo.readonly)
    eq('trust --workspace ' .. root .. '\n', H.read(rec))
    assert(H.notes[#H.notes]:find('Trusted: these commands may now run', 1, true), vim.inspect(H.notes))
    wait_for(function()
      return #H.requests(conn, 'ochat/agents/list') == 2
    end, 1000, 'listed again')
    wait_for(function()
      return require('ochat.agents').cache[chat.root][1].available == true
    end, 1000, 'available now')
  end)

  it('trusts a workspace whose path has spaces and non-ASCII, whatever quoting the install text uses', function()
    local root = vim.fn.tempname() .. " wörk spåce 🚀"
    local q = function(p)
      return "'" .. p .. "'"
    end
    local chat, _, _, settings, rec = untrusted_chat(root, function(settings, r)
      return 'review ' .. q(settings) .. ', then run: ochatd trust --workspace ' .. q(r)
    end)
    eq(root, chat.conn.root)
    local shown = pick_with(chat, {
      function(items)
        return items[#items]
      end,
      function(items)
        return items[1]
      end,
    })
    eq('Let the agents of ' .. settings .. ' run as you in ' .. root .. '?', shown[2].prompt)
    eq(settings, vim.api.nvim_buf_get_name(0), 'the settings file is shown')
    eq('trust --workspace ' .. root .. '\n', H.read(rec))
  end)

  it('runs nothing when the user says no', function()
    local chat, _, _, _, rec = untrusted_chat()
    pick_with(chat, {
      function(items)
        return items[#items]
      end,
      function(items)
        return items[2]
      end,
    })
    eq(nil, H.read(rec))
  end)
end)

describe('open buffers follow the agent\'s writes', function()
  -- A chat with a turn running (C1/A1) and `name` on disk holding `old`, loaded in a buffer. Returns chat, conn,
  -- the file's path and the buffer.
  local function with_file(name, old)
    local chat, conn, root = H.fake_chat()
    start_turn(chat, conn)
    local path = root .. '/' .. name
    H.write(path, old)
    local buf = vim.fn.bufadd(path)
    vim.fn.bufload(buf)
    return chat, conn, path, buf
  end

  local function change(conn, chat, seq, path, old, new)
    ev(conn, chat, 'A1', { type = 'activity.upsert', seq = seq, segment = { type = 'fileChange', path = path, oldText = old, newText = new, additions = 1, deletions = 1 } })
  end

  it('reloads an unmodified buffer after each fileChange, also with noautoread', function()
    for _, autoread in ipairs({ true, false }) do
      local chat, conn, path, buf = with_file('main.go', 'package main\n')
      vim.o.autoread = autoread
      H.write(path, 'package main\n\nfunc main() {}\n')
      change(conn, chat, 1, path, 'package main\n', 'package main\n\nfunc main() {}\n')
      vim.o.autoread = true
      eq({ 'package main', '', 'func main() {}' }, api.nvim_buf_get_lines(buf, 0, -1, false), 'autoread=' .. tostring(autoread))
      eq(false, vim.bo[buf].modified)
      -- The reload is undoable: the old text comes back with one undo.
      api.nvim_buf_call(buf, function()
        vim.cmd('silent undo')
      end)
      eq({ 'package main' }, api.nvim_buf_get_lines(buf, 0, -1, false))
      H.reset()
      api.nvim_buf_delete(buf, { force = true })
    end
  end)

  it('reloads at the end of the turn what a tool wrote after reporting it', function()
    local chat, conn, path, buf = with_file('a.txt', 'one\n')
    change(conn, chat, 1, path, 'one\n', 'two\n') -- reported before the write (a pending diff)
    eq({ 'one' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    H.write(path, 'two\n')
    ev(conn, chat, 'A1', { type = 'turn.completed', seq = 2, stopReason = 'end_turn' })
    eq({ 'two' }, api.nvim_buf_get_lines(buf, 0, -1, false))
  end)

  it('leaves a buffer with unsaved changes alone and says so once, without a prompt', function()
    local chat, conn, path, buf = with_file('b.txt', 'base\n')
    api.nvim_buf_set_lines(buf, 0, -1, false, { 'mine' })
    local notes = #H.notes
    -- Not written yet: nothing to say.
    change(conn, chat, 1, path, 'base\n', 'theirs\n')
    eq(notes, #H.notes, vim.inspect(H.notes))
    H.write(path, 'theirs\n')
    ev(conn, chat, 'A1', { type = 'activity.upsert', seq = 2, segment = { type = 'tool', id = 't1', status = 'completed' } })
    ev(conn, chat, 'A1', { type = 'turn.completed', seq = 3, stopReason = 'end_turn' })
    eq({ 'mine' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    eq(true, vim.bo[buf].modified)
    eq(notes + 1, #H.notes, vim.inspect(H.notes))
    assert(H.notes[#H.notes]:find('b.txt changed on disk and this buffer has unsaved changes: :e! loads the file, :w overwrites it', 1, true), H.notes[#H.notes])
    -- Neovim still knows the file changed since it was read, so its own check (and :w) warns: W12, a conflict.
    local reason
    local id = api.nvim_create_autocmd('FileChangedShell', {
      buffer = buf,
      callback = function()
        reason = vim.v.fcs_reason
        vim.v.fcs_choice = ''
      end,
    })
    vim.cmd('checktime ' .. buf)
    api.nvim_del_autocmd(id)
    eq('conflict', reason)
    api.nvim_buf_delete(buf, { force = true })
  end)

  it('does not touch buffers for a change that was rejected', function()
    local chat, conn, path, buf = with_file('c.txt', 'keep\n')
    api.nvim_buf_set_lines(buf, 0, -1, false, { 'edited' })
    local notes = #H.notes
    ev(conn, chat, 'A1', { type = 'activity.upsert', seq = 1, segment = { type = 'fileChange', path = path, oldText = 'keep\n', newText = 'edited\n', status = 'rejected' } })
    ev(conn, chat, 'A1', { type = 'turn.completed', seq = 2, stopReason = 'end_turn' })
    eq(notes, #H.notes, vim.inspect(H.notes))
    api.nvim_buf_delete(buf, { force = true })
  end)
end)

describe('turn status and rejected changes', function()
  local ui = { max_input_chars = 100, max_output_lines = 10 }

  it('marks interrupted, failed and cancelled turns on the activity line', function()
    local function line(msg)
      return render.activity(render.new_message(msg), ui, '/r')[1]
    end
    eq('⚠ interrupted', line({ id = 'A', role = 'assistant', status = 'interrupted', segments = { { type = 'content', content = 'half' } } }))
    eq('✗ failed: agent exited with status 3', line({ id = 'A', role = 'assistant', status = 'failed', error = 'agent exited with status 3\nstderr: boom' }))
    eq('cancelled', line({ id = 'A', role = 'assistant', status = 'cancelled' }))
    eq(nil, line({ id = 'A', role = 'assistant', status = 'completed', segments = { { type = 'content', content = 'x' } } }))
    eq(
      '▸ 1 tool (1 running) · ⚠ interrupted', -- as stored: the tool never finished
      line({ id = 'A', role = 'assistant', status = 'interrupted', segments = { { type = 'tool', id = 't', name = 'Read', status = 'running' } } })
    )
    local long = string.rep('é', 150)
    eq('✗ failed: ' .. string.rep('é', 99) .. '…', line({ id = 'A', role = 'assistant', status = 'failed', error = long }))
  end)

  it('shows the marker of an interrupted turn from a snapshot, highlighted, and of a live failure', function()
    local chat, conn = H.fake_chat()
    chat:open()
    conn.handlers['ochat/subscribe'] = function()
      return {
        conversation = { id = 'C4', title = 'crashed' },
        messages = {
          { id = 'U', role = 'user', content = 'go' },
          { id = 'A', role = 'assistant', agent = 'test', status = 'interrupted', segments = { { type = 'content', content = 'so far' } } },
        },
      }
    end
    local done
    chat:subscribe('C4', function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'subscribe')
    eq('# crashed  ·  test\n\n## You\ngo\n\n## test · interrupted\nso far\n⚠ interrupted\n', chat:text())
    local marks = api.nvim_buf_get_extmarks(chat.buf, api.nvim_get_namespaces().ochat_activity, { 7, 0 }, { 7, -1 }, { details = true })
    local groups = {}
    for _, mk in ipairs(marks) do
      groups[mk[4].hl_group] = true
    end
    assert(groups.OChatStatus, vim.inspect(marks))
    -- <CR> on a marker without activity expands nothing.
    api.nvim_set_current_win(chat.win)
    api.nvim_win_set_cursor(chat.win, { 8, 0 })
    chat:toggle_activity_at_cursor()
    eq('⚠ interrupted', api.nvim_buf_get_lines(chat.buf, 7, 8, false)[1])
    -- A live turn that fails gets its marker when it ends.
    conn:emit('ochat/event', { conversationId = 'C4', messageId = 'B', agent = 'test', event = { type = 'content.delta', seq = 1, delta = 'part' } })
    conn:emit('ochat/event', { conversationId = 'C4', messageId = 'B', agent = 'test', event = { type = 'turn.failed', seq = 2, message = 'agent exited with status 3' } })
    local text = chat:text()
    assert(text:find('## test · failed\npart\n\n**Failed:** agent exited with status 3\n✗ failed: agent exited with status 3\n', 1, true), text)
  end)

  it('shows a rejected file change as not applied and leaves it out of the totals', function()
    local m = render.new_message({ id = 'A', role = 'assistant' })
    render.apply_event(m, { type = 'activity.upsert', segment = { type = 'fileChange', path = '/r/a.go', additions = 3, deletions = 1 } })
    render.apply_event(m, { type = 'activity.upsert', segment = { type = 'fileChange', path = '/r/b.go', additions = 5, deletions = 2, status = 'rejected' } })
    eq('1 file +3 -1 (1 not applied)', render.summary(m))
    m.expanded = true
    local lines = render.activity(m, ui, '/r')
    eq({ '▾ 1 file +3 -1 (1 not applied)', '  ± a.go +3 -1', '  ± b.go +5 -2 not applied' }, lines)
    local only = render.new_message({ id = 'B', role = 'assistant', status = 'cancelled', segments = { { type = 'fileChange', path = '/r/b.go', additions = 5, deletions = 2, status = 'rejected' } } })
    eq({ '▸ 1 file not applied · cancelled' }, (render.activity(only, ui, '/r')))
  end)
end)

describe('prompt checks', function()
  it('does not send a blank prompt, and says so', function()
    local chat, conn = H.fake_chat()
    local notes = #H.notes
    chat:send('  \n\t ', nil)
    eq(0, #H.requests(conn, 'ochat/chat/send'))
    eq({ 'ochat: nothing to send: the prompt is empty' }, vim.list_slice(H.notes, notes + 1))
  end)

  it('warns about @words that name no workspace file and sends the text as typed', function()
    local chat, conn, root = H.fake_chat()
    H.write(root .. '/main.go', 'package main\n')
    vim.fn.mkdir(root .. '/pkg', 'p')
    local outside = vim.fn.tempname() .. '.txt'
    H.write(outside, 'secret\n')
    start_turn(chat, conn)
    local notes = #H.notes
    local text = 'compare @main.go with @nonexist.go, @pkg/, @' .. outside .. ' and mail me@example.com'
    chat:send(text, nil)
    local sent = H.requests(conn, 'ochat/chat/send')[2]
    eq(text, sent.text)
    eq({ { kind = 'file', path = 'main.go' } }, sent.attachments)
    eq({
      'ochat: @nonexist.go: no such file in the workspace',
      'ochat: @pkg/: a folder; only files are attached',
      'ochat: @' .. outside .. ': outside the workspace; not attached',
    }, vim.list_slice(H.notes, notes + 1))
  end)
end)

describe(':OChatAgent name', function()
  local function agents_chat()
    local chat, conn, root = H.fake_chat()
    conn.handlers['ochat/agents/list'] = function()
      return { agents = { { name = 'claude', available = true, command = 'claude-agent-acp' }, { name = 'gemini', available = false, reason = 'not on PATH', install = 'npm i -g @google/gemini-cli' } } }
    end
    return chat, conn, root
  end

  local function pick(chat, name)
    local done
    require('ochat.agents').pick(chat, name, function(a)
      done = { a }
    end)
    wait_for(function()
      return done
    end, 1000, 'pick ' .. name)
    return done[1]
  end

  it('refuses an unknown name with the known ones and keeps the agent', function()
    local chat = agents_chat()
    chat.agent = 'claude'
    eq(nil, pick(chat, 'nosuch'))
    eq('claude', chat.agent)
    eq('ochat: unknown agent "nosuch"; known agents: claude, gemini', H.notes[#H.notes])
  end)

  it('takes an unavailable agent, showing why and what to fix', function()
    local chat = agents_chat()
    eq('gemini', pick(chat, 'gemini'))
    eq('gemini', chat.agent)
    eq('ochat: agent for the next message: gemini  (unavailable: not on PATH; to fix: npm i -g @google/gemini-cli)', H.notes[#H.notes])
  end)

  it('takes a known available agent', function()
    local chat = agents_chat()
    eq('claude', pick(chat, 'claude'))
    eq('claude', chat.agent)
  end)

  it('completes names from ochat/agents/list, the first time too', function()
    local _, conn, root = agents_chat()
    local buf = api.nvim_create_buf(false, true)
    api.nvim_buf_set_var(buf, 'ochat_root', root) -- the command acts on the workspace of the current buffer
    api.nvim_set_current_buf(buf)
    eq({ 'claude' }, require('ochat').complete_agent('cl'))
    eq({ 'claude', 'gemini' }, require('ochat').complete_agent(''))
    wait_for(function()
      return #H.requests(conn, 'ochat/agents/list') >= 2
    end, 1000, 'refreshed in the background')
  end)
end)

describe('message queue', function()
  it('queues a message sent while a turn runs, shows the queue, and edits, removes or sends one now', function()
    local chat, conn = H.fake_chat()
    chat:open()
    start_turn(chat, conn)
    conn.handlers['ochat/chat/send'] = function()
      return { conversationId = 'C1', queued = true, queueId = 'Q1' }
    end
    for _, m in ipairs({ 'ochat/queue/update', 'ochat/queue/remove', 'ochat/queue/sendNow' }) do
      conn.handlers[m] = function()
        return {}
      end
    end
    -- Typed in the input and sent with <CR> in Normal mode while A1 runs.
    api.nvim_set_current_win(chat.prompt_win)
    api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { 'and then', 'the tests' })
    vim.cmd('stopinsert')
    api.nvim_feedkeys(api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
    wait_for(function()
      return #H.requests(conn, 'ochat/chat/send') == 2
    end, 1000, 'second send')
    eq({ '' }, api.nvim_buf_get_lines(chat.prompt_buf, 0, -1, false), 'input emptied')
    eq('and then\nthe tests', H.requests(conn, 'ochat/chat/send')[2].text)
    wait_for(function()
      return H.notes[#H.notes]:find('queued', 1, true) ~= nil
    end, 1000, 'queued note')
    eq(2, #chat.messages, 'not shown as a turn')
    conn:emit('ochat/queue', { conversationId = 'C1', items = { { id = 'Q1', text = 'and then\nthe tests', agent = 'test', createdAt = 1 } } })
    local text = chat:text()
    assert(text:find('## Queued (1)', 1, true), text)
    assert(text:find('\n1. and then … (test)\n', 1, true), text)
    -- ge on the queued line edits it (several lines: a scratch buffer, :w takes it).
    api.nvim_set_current_win(chat.win)
    local lines = api.nvim_buf_get_lines(chat.buf, 0, -1, false)
    local at
    for i, l in ipairs(lines) do
      if l:find('^1%. and then') then
        at = i
      end
    end
    api.nvim_win_set_cursor(chat.win, { at, 0 })
    vim.cmd('normal ge')
    local buf = api.nvim_get_current_buf()
    eq({ 'and then', 'the tests' }, api.nvim_buf_get_lines(buf, 0, -1, false))
    api.nvim_buf_set_lines(buf, 1, 2, false, { 'the linter' })
    vim.cmd('write')
    wait_for(function()
      return #H.requests(conn, 'ochat/queue/update') == 1
    end, 1000, 'update')
    eq({ conversationId = 'C1', id = 'Q1', text = 'and then\nthe linter' }, H.requests(conn, 'ochat/queue/update')[1])
    vim.cmd('silent! close')
    api.nvim_set_current_win(chat.win)
    api.nvim_win_set_cursor(chat.win, { at, 0 })
    vim.cmd('normal gs')
    vim.cmd('normal gx')
    wait_for(function()
      return #H.requests(conn, 'ochat/queue/remove') == 1 and #H.requests(conn, 'ochat/queue/sendNow') == 1
    end, 1000, 'remove and send now')
    eq({ conversationId = 'C1', id = 'Q1' }, H.requests(conn, 'ochat/queue/sendNow')[1])
    conn:emit('ochat/queue', { conversationId = 'C1', items = {} })
    assert(not chat:text():find('Queued', 1, true), 'queue gone')
  end)

  it('shows a queued message the daemon sent as the next turn, from the queue change alone', function()
    local chat, conn = H.fake_chat()
    chat:open()
    start_turn(chat, conn)
    conn:emit('ochat/queue', { conversationId = 'C1', items = { { id = 'Q1', text = 'next one', agent = 'test' } } })
    ev(conn, chat, 'A1', { type = 'turn.completed', seq = 1, stopReason = 'end_turn' })
    conn:emit('ochat/queue', { conversationId = 'C1', items = {}, sent = { id = 'Q1', userMessageId = 'U2', assistantMessageId = 'A2', turnId = 'A2' } })
    ev(conn, chat, 'A2', { type = 'content.delta', seq = 1, delta = 'on it' })
    local text = chat:text()
    assert(text:find('## You\nnext one\n\n## test …\non it\n', 1, true), text)
    assert(not text:find('Queued', 1, true), text)
    eq('A2', chat.running_id)
    eq(0, #H.requests(conn, 'ochat/conversations/get'), 'no round trip')
  end)

  it('takes the queue from the subscribe snapshot and drops it with a new conversation', function()
    local chat, conn = H.fake_chat()
    chat:open()
    conn.handlers['ochat/subscribe'] = function()
      return { conversation = { id = 'C9', title = 'q' }, messages = {}, queue = { { id = 'Q', text = 'later', agent = 'test' } } }
    end
    local done
    chat:subscribe('C9', function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'subscribe')
    assert(chat:text():find('1. later (test)', 1, true), chat:text())
    api.nvim_buf_set_lines(chat.prompt_buf, 0, -1, false, { 'a draft' })
    chat:new_conversation()
    assert(not chat:text():find('later', 1, true), chat:text())
    eq({ '' }, api.nvim_buf_get_lines(chat.prompt_buf, 0, -1, false), 'the draft does not leak into the new conversation')
  end)
end)

describe('input and window details', function()
  it('is a nofile buffer: several lines, never modified for :qa, <C-s> sends from Insert mode, ? lists the keys', function()
    local chat, conn = H.fake_chat()
    conn.handlers['ochat/chat/send'] = function()
      return { conversationId = 'C1', userMessageId = 'U1', assistantMessageId = 'A1' }
    end
    chat:open()
    eq('nofile', api.nvim_buf_get_option(chat.prompt_buf, 'buftype'))
    eq('nofile', api.nvim_buf_get_option(chat.buf, 'buftype'))
    eq(chat.prompt_win, api.nvim_get_current_win())
    eq('n', api.nvim_get_mode().mode, ':OChat leaves Normal mode')
    api.nvim_feedkeys(api.nvim_replace_termcodes('ione<CR>two<C-s>', true, false, true), 'x', false)
    wait_for(function()
      return #H.requests(conn, 'ochat/chat/send') == 1
    end, 1000, 'send')
    eq('one\ntwo', H.requests(conn, 'ochat/chat/send')[1].text)
    eq(false, api.nvim_buf_get_option(chat.prompt_buf, 'modified'))
    local echoed
    local orig = api.nvim_echo
    api.nvim_echo = function(chunks)
      echoed = chunks[1][1]
    end
    api.nvim_feedkeys('?', 'x', false)
    api.nvim_echo = orig
    assert(echoed and echoed:find('<C%-s>') and echoed:find('gy') and echoed:find('send the message'), echoed)
  end)

  it('links the floats to Normal, not to the magenta Pmenu of stock 0.7, and conceals nothing', function()
    local chat = H.fake_chat()
    chat:open()
    for _, w in ipairs({ chat.win, chat.prompt_win }) do
      assert(api.nvim_win_get_option(w, 'winhighlight'):find('NormalFloat:OChatNormal', 1, true))
    end
    eq('Normal', vim.fn.synIDattr(vim.fn.synIDtrans(vim.fn.hlID('OChatNormal')), 'name'))
    eq(0, api.nvim_win_get_option(chat.win, 'conceallevel'))
  end)

  it('shows the end of a streamed paragraph taller than the window', function()
    local chat, conn = H.fake_chat({ ui = { height = 10 } })
    chat:open()
    start_turn(chat, conn)
    ev(conn, chat, 'A1', { type = 'content.delta', seq = 1, delta = string.rep('word ', 2000) .. 'THE-END' })
    chat:flush()
    local cur = api.nvim_win_get_cursor(chat.win)
    local line = api.nvim_buf_get_lines(chat.buf, cur[1] - 1, cur[1], false)[1]
    assert(line:find('THE%-END$'), 'the cursor is on the streamed paragraph, not the blank line below it')
    eq(#line - 1, cur[2], 'at its end, where the new text is')
    ev(conn, chat, 'A1', { type = 'content.delta', seq = 2, delta = ' MORE' })
    chat:flush()
    cur = api.nvim_win_get_cursor(chat.win)
    assert(api.nvim_buf_get_lines(chat.buf, cur[1] - 1, cur[1], false)[1]:find('MORE$'), 'still following')
  end)

  it('opens a history conversation at its last turn and shows its agent, not the previous one', function()
    local chat, conn = H.fake_chat({ agent = 'codex' })
    conn:emit('ochat/agentState', { agent = 'codex', usage = { used = 500, size = 1000 } })
    local msgs = {}
    for i = 1, 30 do
      table.insert(msgs, { id = 'U' .. i, role = 'user', content = 'question ' .. i })
      table.insert(msgs, { id = 'A' .. i, role = 'assistant', agent = 'claude', status = 'completed', segments = { { type = 'content', content = 'answer ' .. i } } })
    end
    conn.handlers['ochat/subscribe'] = function()
      return { conversation = { id = 'C5', title = 'old one' }, messages = msgs }
    end
    local done
    require('ochat.history').open_entry(chat, { kind = 'conversation', id = 'C5' }, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 1000, 'open')
    -- Its agent and the one the next message goes to; the other conversation's context meter is gone.
    eq('# old one  ·  claude (next: codex)', api.nvim_buf_get_lines(chat.buf, 0, 1, false)[1])
    eq('## You', api.nvim_get_current_line())
    eq('question 30', api.nvim_buf_get_lines(chat.buf, api.nvim_win_get_cursor(chat.win)[1], api.nvim_win_get_cursor(chat.win)[1] + 1, false)[1])
    eq(api.nvim_win_get_cursor(chat.win)[1], vim.fn.line('w0', chat.win), 'the last turn at the top of the window')
  end)

  it('lists each agent option once', function()
    local settings = require('ochat.agents').settings({
      configOptions = {
        { id = 'mode', name = 'Mode', currentValue = 'a', options = { { value = 'a', name = 'A' }, { value = 'a', name = 'A' } } },
        { id = 'mode', name = 'Mode', currentValue = 'a', options = { { value = 'a', name = 'A' } } },
      },
      modes = { currentModeId = 'a', availableModes = { { id = 'a', name = 'A' } } },
    })
    eq(1, #settings)
    eq(1, #settings[1].choices)
  end)

  it('says once, without an error code, that ochatd is missing', function()
    local root = vim.fn.tempname()
    vim.fn.mkdir(root, 'p')
    require('ochat').setup({ cmd = { root .. '/no-such-ochatd' } })
    H.notes = {}
    local chat = require('ochat.chat').get(root)
    local done
    chat:send('hello', nil, function()
      done = true
    end)
    wait_for(function()
      return done
    end, 2000, 'send fails')
    local about = vim.tbl_filter(function(n)
      return n:find('no-such-ochatd', 1, true) ~= nil
    end, H.notes)
    eq(1, #about, vim.inspect(H.notes))
    assert(not about[1]:find('-32099', 1, true), about[1])
  end)

  it('says when it reconnected to the daemon', function()
    local chat, conn = H.fake_chat()
    H.notes = {}
    conn:emit('ochat/ready', { reconnect = true })
    eq('ochat: reconnected to ochatd', H.notes[#H.notes])
    assert(chat)
  end)
end)
