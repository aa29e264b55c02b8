-- Benchmarks (figures, not assertions):
--   1. render time per update batch while a 5,000-line answer streams into the open chat float;
--   2. :OChatHistory open time with 2,000 entries (1,500 conversations + 500 terminal sessions), from the command
--      to vim.ui.select holding every formatted item.
-- nvim --headless -n -i NONE -u NONE --cmd 'set rtp+=.' -c 'luafile tests/bench.lua'
local H = dofile('tests/helpers.lua')
local util = require('ochat.util')
local api = vim.api

local function pct(list, p)
  table.sort(list)
  return list[math.max(1, math.ceil(#list * p))]
end

local out = {}
local function say(s)
  table.insert(out, s)
  io.stdout:write(s .. '\n')
end

local v = vim.version()
say(string.format('nvim %d.%d.%d, %s', v.major, v.minor, v.patch, #api.nvim_list_uis() > 0 and 'with a TUI attached (redraw included)' or 'headless'))

-- 1. Streaming render.
do
  local chat, conn = H.fake_chat()
  if #api.nvim_list_uis() == 0 then
    vim.o.columns, vim.o.lines = 160, 50
  end
  chat:open({ focus = false })
  conn.handlers['ochat/chat/send'] = function()
    return { conversationId = 'C', userMessageId = 'U', assistantMessageId = 'A', turnId = 'A' }
  end
  local sent
  chat:send('bench', nil, function()
    sent = true
  end)
  vim.wait(1000, function()
    return sent
  end)
  local lines, per_batch, seq = 5000, 50, 0
  local times, cpu = {}, {}
  local line = string.rep('word ', 14) .. '`code` **bold**'
  local t_all = util.now_ms()
  local i = 0
  while i < lines do
    for _ = 1, per_batch do
      i = i + 1
      seq = seq + 1
      -- Deltas split mid-line, as models stream them.
      chat:on_event({ conversationId = 'C', messageId = 'A', event = { type = 'content.delta', seq = seq, delta = line:sub(1, 40) } })
      seq = seq + 1
      chat:on_event({ conversationId = 'C', messageId = 'A', event = { type = 'content.delta', seq = seq, delta = line:sub(41) .. '\n' } })
      if i % 500 == 0 then
        seq = seq + 1
        chat:on_event({ conversationId = 'C', messageId = 'A', event = { type = 'activity.upsert', seq = seq, segment = { type = 'tool', id = 't' .. i, name = 'Read', status = 'completed' } } })
      end
    end
    local t0, c0 = util.now_ms(), os.clock()
    chat:flush()
    vim.cmd('redraw')
    table.insert(times, util.now_ms() - t0)
    table.insert(cpu, (os.clock() - c0) * 1000)
  end
  local total = util.now_ms() - t_all
  assert(api.nvim_buf_line_count(chat.buf) > lines, 'all lines rendered')
  say(string.format(
    'stream 5000 lines in %d batches of %d lines (%d deltas): per batch wall median %.2f ms, p95 %.2f ms, max %.2f ms; CPU median %.2f ms, p95 %.2f ms, max %.2f ms; total wall %.0f ms',
    #times, per_batch, seq, pct(times, 0.5), pct(times, 0.95), pct(times, 1.0), pct(cpu, 0.5), pct(cpu, 0.95), pct(cpu, 1.0), total
  ))
  -- The same answer replayed from a snapshot (history open) renders in one go.
  local msgs = { { id = 'U', role = 'user', content = 'bench' }, { id = 'A', role = 'assistant', status = 'completed', segments = { { type = 'content', content = string.rep(line .. '\n', lines) } } } }
  local t0 = util.now_ms()
  chat:load_snapshot({ conversation = { id = 'C', title = 'bench' }, messages = msgs })
  vim.cmd('redraw')
  say(string.format('snapshot of the same 5000-line answer: full render %.2f ms', util.now_ms() - t0))
  H.reset()
end

-- 2. History picker with 2,000 entries.
do
  local chat, conn = H.fake_chat()
  local sessions = {}
  for i = 1, 1500 do
    sessions[i] = { id = 'c' .. i, kind = 'conversation', title = 'conversation number ' .. i .. ' about the parser and the tests', agents = { 'claude', 'codex' }, createdAt = 1764496000000 + i, updatedAt = 1764496000000 + i * 1000, live = false }
  end
  for i = 1, 500 do
    sessions[1500 + i] = { id = 's' .. i, kind = 'native', agent = 'claude', title = 'terminal session ' .. i, updatedAt = 1764496000000 + i * 777, live = i % 50 == 0, path = '/home/me/.claude/projects/x/s' .. i .. '.jsonl' }
  end
  conn.handlers['ochat/sessions/list'] = function()
    return { sessions = sessions, diagnostics = {} }
  end
  local times, cpu = {}, {}
  local orig = vim.ui.select
  for _ = 1, 10 do
    local t0, c0 = util.now_ms(), os.clock()
    local done
    vim.ui.select = function(items, opts, cb)
      local shown = {}
      for k, it in ipairs(items) do
        shown[k] = opts.format_item(it)
      end
      done = #shown
      cb(nil)
    end
    require('ochat.history').pick(chat)
    vim.wait(2000, function()
      return done
    end, 1)
    assert(done == 2000, 'all entries listed')
    table.insert(times, util.now_ms() - t0)
    table.insert(cpu, (os.clock() - c0) * 1000)
  end
  vim.ui.select = orig
  say(string.format(
    'OChatHistory with 2000 entries (request to formatted list, fake daemon): wall median %.1f ms, max %.1f ms; CPU median %.1f ms, max %.1f ms',
    pct(times, 0.5), pct(times, 1.0), pct(cpu, 0.5), pct(cpu, 1.0)
  ))
  H.reset()
end

local file = os.getenv('OCHAT_BENCH_OUT')
if file and file ~= '' then
  H.write(file, table.concat(out, '\n') .. '\n')
end
vim.cmd('qall!')
