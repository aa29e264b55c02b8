-- :checkhealth ochat: the daemon binary and its version, the socket directory, the agents and what they need.
local M = {}

local h = vim.health or {}
local start = h.start or h.report_start or require('health').report_start
local ok = h.ok or h.report_ok or require('health').report_ok
local warn = h.warn or h.report_warn or require('health').report_warn
local err = h.error or h.report_error or require('health').report_error
local info = h.info or h.report_info or require('health').report_info

local function run(argv)
  local out = vim.fn.system(argv)
  return vim.v.shell_error, out
end

--- The Unix sockets in `dir`, split into those a process accepts connections on (`live`) and those nobody listens
--- on (`stale`: connecting fails, e.g. ECONNREFUSED). Each connection is closed at once; waits at most `timeout_ms`
--- (default 1000) for all of them. Returns live, stale (lists of paths).
function M.probe_sockets(dir, timeout_ms)
  local uv = vim.loop
  local paths = {}
  for _, p in ipairs(vim.fn.glob(dir .. '/*', false, true)) do
    local st = uv.fs_stat(p)
    if st and st.type == 'socket' then
      table.insert(paths, p)
    end
  end
  local result, pending = {}, #paths
  for _, p in ipairs(paths) do
    local pipe = uv.new_pipe(false)
    local okc = pcall(pipe.connect, pipe, p, function(e)
      result[p] = e == nil
      pending = pending - 1
      pipe:close()
    end)
    if not okc then
      result[p] = false
      pending = pending - 1
      pipe:close()
    end
  end
  vim.wait(timeout_ms or 1000, function()
    return pending <= 0
  end, 10)
  local live, stale = {}, {}
  for _, p in ipairs(paths) do
    table.insert(result[p] and live or stale, p)
  end
  return live, stale
end

function M.check()
  local o = require('ochat')
  local cfg = o.config
  start('ochat: Neovim')
  if vim.fn.has('nvim-0.7') == 1 then
    ok('Neovim ' .. tostring(vim.version().major) .. '.' .. tostring(vim.version().minor) .. '.' .. tostring(vim.version().patch))
  else
    err('Neovim 0.7 or newer is required')
  end
  if not o.did_setup then
    info('require("ochat").setup{} has not been called; the defaults are used')
  end

  start('ochat: daemon')
  local cmd = type(cfg.cmd) == 'string' and { cfg.cmd } or vim.deepcopy(cfg.cmd)
  local exe = vim.fn.exepath(cmd[1])
  if exe == '' then
    err(cmd[1] .. ' not found', { 'build it: in a clone of the ochat repository run go install ./cmd/ochatd ($(go env GOPATH)/bin must be on PATH)', 'or set cmd in setup{}' })
    return
  end
  ok('ochatd: ' .. exe)
  local code, out = run(vim.list_extend(vim.deepcopy(cmd), { '--version' }))
  if code == 0 then
    ok('version: ' .. vim.trim(out))
  else
    warn('`ochatd --version` failed: ' .. vim.trim(out))
  end

  -- :checkhealth runs in its own buffer; the workspace is the one of the buffer it was started from.
  local alt = vim.fn.bufnr('#')
  local root = require('ochat.chat').root_for(alt > 0 and alt or 0)
  info('workspace: ' .. root)
  local rt = os.getenv('XDG_RUNTIME_DIR')
  local dir = rt and rt ~= '' and (rt .. '/ochat') or ((os.getenv('TMPDIR') or '/tmp') .. '/ochat-' .. vim.fn.systemlist('id -u')[1])
  if vim.fn.isdirectory(dir) == 1 then
    ok('socket directory: ' .. dir)
    local live, stale = M.probe_sockets(dir)
    local line = string.format('daemon sockets there: %d answering, %d stale', #live, #stale)
    if #stale > 0 then
      info(line .. ' (a socket file nobody listens on: left by a daemon that was killed; harmless, ochatd replaces it)')
    else
      info(line)
    end
  else
    info('socket directory ' .. dir .. ' does not exist yet (created when the first daemon starts)')
  end
  for r, conn in pairs(require('ochat.rpc').connections) do
    local line = string.format('connection %s: %s, %d handshake(s)', r, conn.state, conn.connects or 0)
    if conn.last_error then
      warn(line .. ', last error: ' .. conn.last_error)
    else
      info(line)
    end
  end

  start('ochat: agents')
  code, out = run(vim.list_extend(vim.deepcopy(cmd), { 'agents', '--json', '--workspace', root }))
  if code ~= 0 then
    warn('`ochatd agents --json` failed: ' .. vim.trim(out))
    return
  end
  local pok, data = pcall(vim.json.decode, out)
  if not pok then
    warn('`ochatd agents --json` printed no JSON: ' .. out:sub(1, 200))
    return
  end
  local list = type(data) == 'table' and (data.agents or data) or {}
  if #list == 0 then
    warn('no agents configured', { 'add one under agent_servers in ~/.config/ochat/settings.json' })
  end
  for _, a in ipairs(list) do
    local avail = a.available
    if avail == true then
      ok(string.format('%s: %s', a.name, a.command or ''))
    else
      local advice = {}
      if a.install and a.install ~= vim.NIL then
        table.insert(advice, a.install)
      end
      warn(string.format('%s: unavailable (%s)', a.name, a.reason ~= vim.NIL and a.reason or '?'), advice)
    end
  end
end

return M
