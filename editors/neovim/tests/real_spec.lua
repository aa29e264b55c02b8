-- End-to-end with a real adapter: codex-acp (pinned, installed with npm by tests/realagent) against the project's fake
-- model server, through a real ochatd. Runs when OCHAT_REAL_AGENT=1 and OCHAT_BIN_DIR holds ochatd and realagent
-- (tests/run.sh builds them); needs node and npm (and the npm registry on the first run).
local H = dofile('tests/helpers.lua')
local api = vim.api

local bin = os.getenv('OCHAT_BIN_DIR')
if os.getenv('OCHAT_REAL_AGENT') ~= '1' or not bin or bin == '' then
  pending('real adapter e2e', 'set OCHAT_REAL_AGENT=1 (needs node and npm) and run tests/run.sh')
  return
end

local root = vim.fn.tempname()
vim.fn.mkdir(root, 'p')
local world, job
local stdout_tail = ''

describe('e2e with a real adapter (codex-acp) against the fake model', function()
  it('prepares the adapter and the fake model', function()
    job = vim.fn.jobstart({ bin .. '/realagent', '-root', root }, {
      on_stdout = function(_, data)
        data[1] = stdout_tail .. data[1]
        stdout_tail = table.remove(data)
        for _, line in ipairs(data) do
          local ok, v = pcall(vim.json.decode, line)
          if ok and type(v) == 'table' and v.workspace then
            world = v
          end
        end
      end,
    })
    assert(job > 0, 'realagent did not start')
    wait_for(function()
      return world ~= nil
    end, 240000, 'realagent (npm install of codex-acp on the first run)')
    for k, v in pairs(world.env) do
      vim.env[k] = v
    end
  end)

  it('chats, asks permission and writes a file through codex-acp', function()
    assert(world, 'no world')
    local ws = world.workspace
    require('ochat').setup({ cmd = { bin .. '/ochatd' }, agent = world.agent })
    local chat = require('ochat.chat').get(ws)
    chat:open({ insert = false })
    -- Answered as a user does by default: gy's allow once (permission.answer), no picker, no focus change.
    local asked
    chat.conn:on('ochat/permission', function(p)
      asked = vim.tbl_map(function(o)
        return o.name .. ' [' .. tostring(o.kind) .. ']'
      end, p.options or {})
      vim.schedule(function()
        require('ochat.permission').answer(chat, 'allow')
      end)
    end)
    local ended, err
    chat:on_turn_end(function(m)
      ended = m
    end)
    chat:send('WRITE_FILE ' .. ws .. '/hello.txt', nil, function(e)
      err = e
    end)
    wait_for(function()
      return ended or err
    end, 120000, 'the codex turn')
    assert(not err, vim.inspect(err))
    chat:flush()
    local text = chat:text()
    eq('completed', ended.status, text)
    assert(asked and #asked >= 2, 'a permission with the agent options was asked: ' .. vim.inspect(asked))
    assert(H.read(ws .. '/hello.txt'), 'hello.txt written; chat:\n' .. text)
    assert(text:find('## codex · completed', 1, true), text)
    assert(text:find('1 file +', 1, true), text)
    io.stdout:write(text .. '\n')
    require('ochat.chat').reset()
  end)

  it('stops the fake model and the daemon', function()
    assert(job and job > 0, 'no realagent job')
    vim.fn.jobstop(job)
    local code = vim.fn.jobwait({ job }, 5000)[1]
    assert(code ~= -1, 'realagent did not stop')
    for _, p in ipairs(vim.fn.glob('/proc/[0-9]*/cmdline', false, true)) do
      local c = H.read(p)
      if c and c:find('ochatd', 1, true) and c:find('serve', 1, true) and world and c:find(world.workspace, 1, true) then
        require('ochat.util').uv.kill(tonumber(p:match('/proc/(%d+)/')), 'sigterm')
      end
    end
  end)
end)
