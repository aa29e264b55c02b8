-- Test helpers: a fake in-process connection (for unit tests of rendering, permissions, diffs and history without a
-- daemon) and small utilities. The end-to-end spec uses the real ochatd instead.
local H = {}

local rpc = require('ochat.rpc')

--- Notifications shown by the plugin (kept out of the test output).
H.notes = {}
vim.notify = function(msg)
  table.insert(H.notes, msg)
end

--- A fake rpc.Conn: records requests and answers them from `handlers[method](params) -> result, err` on the next
--- loop iteration (as the real one does); unknown methods get -32601.
function H.fake_conn(root)
  local c = setmetatable({ root = root, listeners = {}, requests = {}, handlers = {}, state = 'ready' }, rpc.Conn)
  c.request = function(self, method, params, cb)
    table.insert(self.requests, { method = method, params = params })
    local h = self.handlers[method]
    vim.schedule(function()
      if not cb then
        return
      end
      if h then
        local res, err = h(params)
        cb(err, res)
      else
        cb({ code = -32601, message = 'unknown method ' .. method }, nil)
      end
    end)
  end
  c.notify = function() end
  c.stop = function(self)
    self.stopped = true
  end
  return c
end

--- Creates a chat state for a fresh temp workspace, wired to a fake connection. Returns chat, conn, root.
--- `root` (optional) names the workspace directory to use instead of a fresh temp one.
function H.fake_chat(opts, root)
  root = root or vim.fn.tempname()
  vim.fn.mkdir(root, 'p')
  root = require('ochat.util').normpath(root)
  require('ochat').setup(vim.tbl_deep_extend('force', { permission = { use_select = true } }, opts or {}))
  local conn = H.fake_conn(root)
  rpc.connections[root] = conn
  local chat = require('ochat.chat').get(root)
  return chat, conn, root
end

function H.requests(conn, method)
  local out = {}
  for _, r in ipairs(conn.requests) do
    if r.method == method then
      table.insert(out, r.params)
    end
  end
  return out
end

function H.reset()
  for id in pairs(require('ochat.permission').open) do
    require('ochat.permission').close(id)
  end
  require('ochat.chat').reset()
  pcall(vim.cmd, 'silent! tabonly!')
  pcall(vim.cmd, 'silent! only!')
end

function H.write(path, text)
  local f = assert(io.open(path, 'wb'))
  f:write(text)
  f:close()
end

H.read = require('ochat.util').read_file

function H.buf_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

return H
