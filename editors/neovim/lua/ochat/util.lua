-- ochat.util: small compatibility helpers for Neovim 0.7.2 .. 0.10+.
--
-- Owns: version guards (vim.uv vs vim.loop, float titles, vim.islist), JSON null stripping, path helpers.
-- Never: keeps state, talks to the daemon, touches windows.
local M = {}

M.uv = vim.uv or vim.loop

--- True when float windows accept `title` (Neovim 0.9+).
M.has_float_title = vim.fn.has('nvim-0.9') == 1

M.islist = vim.islist or vim.tbl_islist

--- Monotonic clock in milliseconds (float).
function M.now_ms()
  return M.uv.hrtime() / 1e6
end

--- Returns a copy of `v` with every vim.NIL (JSON null) removed from tables, recursively.
--- A null at the top level becomes nil. Neovim's apply_workspace_edit crashes on `version = vim.NIL`.
function M.strip_nil(v)
  if v == vim.NIL then
    return nil
  end
  if type(v) ~= 'table' then
    return v
  end
  local out = {}
  for k, x in pairs(v) do
    if x ~= vim.NIL then
      out[k] = M.strip_nil(x)
    end
  end
  return out
end

--- Returns nil for vim.NIL, else v.
function M.nn(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

--- Splits text on "\n" into a list of lines (a trailing newline yields a trailing "").
function M.lines(text)
  return vim.split(text or '', '\n', { plain = true })
end

--- Notifies with the plugin's prefix.
function M.notify(msg, level)
  vim.notify('ochat: ' .. msg, level or vim.log.levels.INFO)
end

--- Formats a JSON-RPC error object or string for the user.
function M.err_text(err)
  if type(err) == 'table' then
    if M.nn(err.code) == -32099 then
      return tostring(M.nn(err.message) or 'ochatd connection closed') -- the plugin's own "no daemon": no code to show
    end
    return string.format('%s (%s)', tostring(M.nn(err.message) or 'error'), tostring(M.nn(err.code) or '?'))
  end
  return tostring(err)
end

--- Normalises a directory path: absolute, no trailing slash.
function M.normpath(p)
  p = vim.fn.fnamemodify(p, ':p')
  if #p > 1 then
    p = p:gsub('/+$', '')
  end
  return p
end

--- The path of `p` relative to `root` when inside it, else `p`.
function M.relpath(p, root)
  if root and p:sub(1, #root + 1) == root .. '/' then
    return p:sub(#root + 2)
  end
  return p
end

--- Reads a whole file; nil when it does not exist.
function M.read_file(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local s = f:read('*a')
  f:close()
  return s
end

--- A value as text for a person: a string as it is, a table as JSON without escaped slashes (vim.json writes `\/`).
function M.plain(v)
  if type(v) == 'string' then
    return v
  end
  local ok, enc = pcall(vim.json.encode, v)
  if not ok then
    return vim.inspect(v)
  end
  return (enc:gsub('\\/', '/'))
end

--- Compact one-line rendering of a JSON value for display (max `max` bytes).
function M.oneline(v, max)
  local s
  if type(v) == 'string' then
    s = v
  else
    s = M.plain(v)
  end
  s = s:gsub('\n', '\\n')
  if max and #s > max then
    s = s:sub(1, max) .. '…'
  end
  return s
end

return M
