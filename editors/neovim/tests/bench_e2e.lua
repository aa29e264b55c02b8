-- End-to-end figures against a real ochatd and the scripted test agent (needs OCHAT_BIN_DIR):
--   1. prompt to first answer text in the chat buffer (PLAIN turns, warm agent);
--   2. a FLOOD turn (5,000 chunks as fast as the agent can send them): time per flush and notification-to-buffer lag;
--   3. :OChatHistory with 2,000 stored conversations, from the command to every item formatted for vim.ui.select.
-- nvim --headless -n -i NONE -u NONE --cmd 'set rtp^=.' -c 'luafile tests/bench_e2e.lua'
local H = dofile('tests/helpers.lua')
local util = require('ochat.util')
local bin = assert(os.getenv('OCHAT_BIN_DIR'), 'OCHAT_BIN_DIR')

local function pct(list, p)
  local l = vim.list_slice(list)
  table.sort(l)
  return l[math.max(1, math.ceil(#l * p))] or 0
end

local tmp = vim.fn.tempname()
for _, d in ipairs({ 'ws', 'config/ochat', 'state', 'run', 'agent' }) do
  vim.fn.mkdir(tmp .. '/' .. d, 'p', 448)
end
vim.env.XDG_CONFIG_HOME, vim.env.XDG_STATE_HOME, vim.env.XDG_RUNTIME_DIR = tmp .. '/config', tmp .. '/state', tmp .. '/run'
vim.env.TESTAGENT_STATE = tmp .. '/agent'
H.write(tmp .. '/config/ochat/settings.json', vim.json.encode({ agent_servers = { test = { command = bin .. '/testagent' } } }))
require('ochat').setup({ cmd = { bin .. '/ochatd' }, agent = 'test' })
local ws = util.normpath(tmp .. '/ws')
local chat = require('ochat.chat').get(ws)
chat:open({ focus = false })

local function turn(text)
  local ended
  chat:on_turn_end(function(m)
    ended = m
  end)
  chat:send(text)
  assert(vim.wait(60000, function()
    return ended ~= nil
  end, 1), 'turn ' .. text)
  return ended
end

local v = vim.version()
local lines = { string.format('nvim %d.%d.%d, real ochatd + testagent', v.major, v.minor, v.patch) }
-- Lines -4..-1 are the buffer's last three: the answer's header, its first line, the separator.
turn('PLAIN warm up')
local firsts = {}
for i = 1, 20 do
  local word = 'answer' .. i
  local t0 = util.now_ms()
  local ended
  chat:on_turn_end(function(m)
    ended = m
  end)
  chat:send('PLAIN ' .. word)
  assert(vim.wait(10000, function()
    local last = vim.api.nvim_buf_get_lines(chat.buf, -4, -1, false)
    return last[1]:find('^## test') ~= nil and (last[2] or '') ~= ''
  end, 1))
  table.insert(firsts, util.now_ms() - t0)
  vim.wait(10000, function()
    return ended ~= nil
  end, 1)
end
table.insert(lines, string.format('prompt to first answer text in the buffer (20 PLAIN turns): median %.1f ms, p95 %.1f ms, max %.1f ms', pct(firsts, 0.5), pct(firsts, 0.95), pct(firsts, 1)))

chat.stats = { flushes = 0, total_ms = 0, max_ms = 0, last_ms = 0, lags = {} }
local times = {}
local orig = chat.flush
chat.flush = function(self)
  local t0 = util.now_ms()
  orig(self)
  table.insert(times, util.now_ms() - t0)
end
local t0 = util.now_ms()
local m = turn('FLOOD 5000')
local total = util.now_ms() - t0
chat.flush = orig
local st = chat.stats
table.insert(lines, string.format(
  'FLOOD 5000 chunks (%d body lines): %d flushes in %.0f ms; per flush median %.2f ms, p95 %.2f ms, max %.2f ms; notification-to-buffer lag median %.1f ms, p95 %.1f ms, max %.1f ms',
  #m.body, st.flushes, total, pct(times, 0.5), pct(times, 0.95), pct(times, 1), pct(st.lags, 0.5), pct(st.lags, 0.95), pct(st.lags, 1)
))
-- :OChatHistory against the real daemon with 2,000 stored conversations.
do
  local left = 2000
  for i = 1, 2000 do
    chat.conn:request('ochat/conversations/create', { title = 'conversation ' .. i .. ' about the parser' }, function()
      left = left - 1
    end)
  end
  assert(vim.wait(60000, function()
    return left == 0
  end, 5), 'create 2000 conversations')
  local orig_select = vim.ui.select
  local opens, cpu = {}, {}
  for _ = 1, 10 do
    local n
    vim.ui.select = function(items, o, cb)
      for _, it in ipairs(items) do
        o.format_item(it)
      end
      n = #items
      cb(nil)
    end
    local t0, c0 = util.now_ms(), os.clock()
    require('ochat.history').pick(chat)
    assert(vim.wait(10000, function()
      return n ~= nil
    end, 1), 'history')
    assert(n >= 2000, 'listed ' .. tostring(n))
    table.insert(opens, util.now_ms() - t0)
    table.insert(cpu, (os.clock() - c0) * 1000)
  end
  vim.ui.select = orig_select
  table.insert(lines, string.format(
    'OChatHistory with 2000+ stored conversations (real daemon, request to formatted list): wall median %.1f ms, p95 %.1f ms, max %.1f ms; Neovim CPU median %.1f ms, max %.1f ms (the rest is the daemon and the machine)',
    pct(opens, 0.5), pct(opens, 0.95), pct(opens, 1), pct(cpu, 0.5), pct(cpu, 1)
  ))
end
for _, l in ipairs(lines) do
  io.stdout:write(l .. '\n')
end
require('ochat.chat').reset()
for _, p in ipairs(vim.fn.glob('/proc/[0-9]*/cmdline', false, true)) do
  local c = H.read(p)
  if c and c:find('ochatd', 1, true) and c:find('serve', 1, true) and c:find(ws, 1, true) then
    util.uv.kill(tonumber(p:match('/proc/(%d+)/')), 'sigterm')
  end
end
vim.cmd('qall!')
