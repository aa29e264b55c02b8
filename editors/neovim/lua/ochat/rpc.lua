-- ochat.rpc: one JSON-RPC connection to the workspace daemon per workspace root.
--
-- Owns: spawning `ochatd connect --workspace ROOT` through Neovim's own vim.lsp.rpc (LSP base-protocol framing,
-- docs/protocol.md "Transport"), the initialize/initialized handshake, queueing requests until the handshake is done,
-- failing outstanding requests when the process exits, reconnecting with exponential backoff, routing notifications
-- to listeners and answering daemon→editor requests (workspace/applyEdit, window/showDocument).
-- Never: renders anything or interprets ochat/* payloads; never blocks: every callback runs scheduled on the main loop.
local util = require('ochat.util')

local M = {}

--- Connections by normalised workspace root.
M.connections = {}

--- Handlers for daemon→editor requests: method -> function(params, conn) -> result, err. Filled by other modules.
M.request_handlers = {}

local Conn = {}
Conn.__index = Conn
M.Conn = Conn

local function main(fn)
  if vim.in_fast_event() then
    vim.schedule(fn)
  else
    fn()
  end
end

-- vim.lsp.rpc.start changed shape in Neovim 0.10: start(cmd: string[], dispatchers, opts) returning
-- {request, notify, is_closing, terminate}; before it was start(cmd: string, args: string[], dispatchers, opts)
-- returning {request, notify, pid, handle}.
local function rpc_start(argv, dispatchers, opts)
  if vim.fn.has('nvim-0.10') == 1 then
    return vim.lsp.rpc.start(argv, dispatchers, opts)
  end
  return vim.lsp.rpc.start(argv[1], vim.list_slice(argv, 2), dispatchers, opts)
end

local function rpc_stop(client)
  if not client then
    return
  end
  if client.terminate then
    pcall(client.terminate)
  elseif client.handle and not client.handle:is_closing() then
    pcall(client.handle.kill, client.handle, 15)
  end
end

--- Returns the connection for `root`, starting it if needed.
--- @param root string workspace root (absolute)
--- @param config table the merged ochat config
function M.get(root, config)
  root = util.normpath(root)
  local c = M.connections[root]
  if c and not c.stopped then
    return c
  end
  c = M.new(root, config)
  M.connections[root] = c
  c:start()
  return c
end

--- Creates a connection object without registering or starting it (a second client, e.g. in tests).
function M.new(root, config)
  return setmetatable({
    root = root,
    config = config,
    listeners = {}, -- method -> list of fn(params, conn)
    queue = {}, -- requests waiting for the handshake
    pending = {}, -- our id -> callback
    next_id = 0,
    state = 'idle', -- idle | starting | ready | closed
    gen = 0, -- bumped per spawned process; stale callbacks are ignored
    attempts = 0,
    connects = 0, -- successful handshakes so far
  }, Conn)
end

--- Stops every connection (used by tests and VimLeavePre).
function M.stop_all()
  for _, c in pairs(M.connections) do
    c:stop()
  end
  M.connections = {}
end

--- Adds a listener for a notification method (or the pseudo events "ochat/ready" and "ochat/closed").
--- @return function unsubscribe
function Conn:on(method, fn)
  self.listeners[method] = self.listeners[method] or {}
  table.insert(self.listeners[method], fn)
  return function()
    local l = self.listeners[method] or {}
    for i, f in ipairs(l) do
      if f == fn then
        table.remove(l, i)
        return
      end
    end
  end
end

function Conn:emit(method, params)
  for _, fn in ipairs(vim.list_slice(self.listeners[method] or {})) do
    local ok, err = pcall(fn, params, self)
    if not ok then
      util.notify(string.format('handler for %s failed: %s', method, err), vim.log.levels.ERROR)
    end
  end
end

function Conn:argv()
  local cmd = self.config.cmd
  if type(cmd) == 'string' then
    cmd = { cmd }
  end
  local argv = vim.list_extend(vim.deepcopy(cmd), { 'connect', '--workspace', self.root })
  return argv
end

-- Fails every queued request with err and stops retrying until the next request.
function Conn:give_up(err)
  self.state = 'closed'
  self.attempts = self.config.reconnect.max_attempts or math.huge
  local q = self.queue
  self.queue = {}
  for _, r in ipairs(q) do
    pcall(r[3], err, nil)
  end
end

function Conn:start()
  self.gen = self.gen + 1
  local gen = self.gen
  local exe = self:argv()[1]
  if vim.fn.executable(exe) ~= 1 then
    local msg = string.format('%s not found or not executable: build ochatd (in a clone of the ochat repository: go install ./cmd/ochatd, with $(go env GOPATH)/bin on PATH) or set cmd in setup{}', exe)
    self.last_error = msg
    vim.schedule(function()
      if gen == self.gen then
        util.notify(msg, vim.log.levels.ERROR)
        self:give_up({ code = -32099, message = msg, reported = true }) -- said once, here
      end
    end)
    return
  end
  self.state = 'starting'
  local function live()
    return gen == self.gen and not self.stopped
  end
  local dispatchers = {
    notification = function(method, params)
      main(function()
        if live() then
          self:emit(method, params or {})
        end
      end)
    end,
    server_request = function(method, params)
      local h = M.request_handlers[method]
      if not h then
        return nil, vim.lsp.rpc.rpc_response_error(vim.lsp.protocol.ErrorCodes.MethodNotFound, 'unknown method ' .. method)
      end
      local ok, result, err = pcall(h, params or {}, self)
      if not ok then
        return nil, vim.lsp.rpc.rpc_response_error(vim.lsp.protocol.ErrorCodes.InternalError, tostring(result))
      end
      return result, err
    end,
    on_exit = function(code, signal)
      vim.schedule(function()
        if gen == self.gen then
          self:on_exit(code, signal)
        end
      end)
    end,
    on_error = function(code, err)
      vim.schedule(function()
        if self.config.debug then
          util.notify(string.format('rpc error %s: %s', tostring(code), vim.inspect(err)), vim.log.levels.WARN)
        end
      end)
    end,
  }
  local ok, client = pcall(rpc_start, self:argv(), dispatchers, { cwd = self.root, env = self.config.env })
  if not ok or not client then
    self.client = nil
    self.last_error = ok and 'spawn failed' or tostring(client)
    vim.schedule(function()
      if gen == self.gen then
        self:on_exit(-1, 0)
      end
    end)
    return
  end
  self.client = client
  local params = {
    processId = vim.fn.getpid(),
    clientInfo = { name = 'ochat.nvim', version = require('ochat').version },
    rootUri = vim.uri_from_fname(self.root),
    capabilities = { workspace = { applyEdit = true }, window = { showDocument = { support = true } } },
  }
  client.request('initialize', params, function(err, result)
    main(function()
      if not live() then
        return
      end
      if err then
        self.last_error = util.err_text(err)
        util.notify('initialize failed: ' .. self.last_error, vim.log.levels.ERROR)
        rpc_stop(client)
        return
      end
      self.server_info = result
      client.notify('initialized', {})
      self.state = 'ready'
      self.attempts = 0
      self.connects = self.connects + 1
      local q = self.queue
      self.queue = {}
      for _, r in ipairs(q) do
        self:request(r[1], r[2], r[3])
      end
      self:emit('ochat/ready', { reconnect = self.connects > 1, serverInfo = result })
    end)
  end)
end

function Conn:on_exit(code, signal)
  self.state = 'closed'
  self.client = nil
  local pending = self.pending
  self.pending = {}
  local closed = { code = -32099, message = 'ochatd connection closed' }
  for _, cb in pairs(pending) do
    pcall(cb, closed, nil)
  end
  self:emit('ochat/closed', { code = code, signal = signal })
  if self.stopped then
    return
  end
  local rc = self.config.reconnect
  if rc.max_attempts and self.attempts >= rc.max_attempts then
    self:give_up(closed)
    util.notify(
      string.format('ochatd exited (code %s) and did not come back after %d attempts; run :checkhealth ochat', code, self.attempts),
      vim.log.levels.ERROR
    )
    return
  end
  local delay = math.min(rc.initial_ms * (2 ^ self.attempts), rc.max_ms)
  self.attempts = self.attempts + 1
  local gen = self.gen
  vim.defer_fn(function()
    if gen == self.gen and not self.stopped then
      self:start()
    end
  end, delay)
end

--- Sends a request. `cb(err, result)` always runs, on the main loop: with an error object on failure, including
--- {code=-32099} when the connection closes first. Requests made before the handshake are queued.
function Conn:request(method, params, cb)
  cb = cb or function() end
  if self.state ~= 'ready' or not self.client then
    table.insert(self.queue, { method, params, cb })
    if self.state == 'closed' and self.config.reconnect.max_attempts and self.attempts >= self.config.reconnect.max_attempts then
      -- Gave up earlier: a new explicit request starts over.
      self.attempts = 0
      self:start()
    end
    return
  end
  self.next_id = self.next_id + 1
  local id = self.next_id
  self.pending[id] = cb
  local ok = self.client.request(method, params or vim.empty_dict(), function(err, result)
    main(function()
      local f = self.pending[id]
      if f then
        self.pending[id] = nil
        f(err, result)
      end
    end)
  end)
  if not ok then
    self.pending[id] = nil
    cb({ code = -32099, message = 'ochatd connection closed' }, nil)
  end
end

--- Sends a notification; dropped when not connected.
function Conn:notify(method, params)
  if self.client and self.state == 'ready' then
    self.client.notify(method, params or vim.empty_dict())
  end
end

--- Stops the connection for good (no reconnect).
function Conn:stop()
  self.stopped = true
  local client = self.client
  if client and self.state == 'ready' then
    client.notify('exit', vim.empty_dict())
  end
  rpc_stop(client)
  self.gen = self.gen + 1
  self.state = 'closed'
  if M.connections[self.root] == self then
    M.connections[self.root] = nil
  end
end

--- Drops the current process and reconnects at once (as after a daemon restart).
function Conn:restart()
  self.attempts = 0
  rpc_stop(self.client)
end

return M
