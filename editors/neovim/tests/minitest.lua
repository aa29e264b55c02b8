-- Minimal test runner: describe/it/pending/eq/wait_for; runs every spec file given as an argument and prints
-- "N passed, N failed" (plus pending), then exits 0 or 1.
-- nvim --headless -n -i NONE -u NONE --cmd 'set rtp+=.' -c 'luafile tests/minitest.lua' tests/x_spec.lua
local R = { passed = 0, failed = 0, pending = 0, names = {} }
local function out(s) io.stdout:write(s .. '\n') io.stdout:flush() end
function _G.describe(name, fn) table.insert(R.names, name) fn() table.remove(R.names) end
function _G.it(name, fn)
  local full = table.concat(R.names, ' / ') .. ' / ' .. name
  local ok, err = xpcall(fn, debug.traceback)
  if ok and type(err) == 'string' and err:match('^pending') then R.pending = R.pending + 1 out(err .. ': ' .. full)
  elseif ok then R.passed = R.passed + 1 out('ok      ' .. full)
  else R.failed = R.failed + 1 out('FAIL    ' .. full .. '\n' .. tostring(err)) end
  if R.after_each then pcall(R.after_each) end
end
function _G.pending(name, why) R.pending = R.pending + 1 out('pending ' .. name .. ' (' .. why .. ')') end
function _G.after_each(fn) R.after_each = fn end
function _G.eq(want, got, what)
  if not vim.deep_equal(want, got) then
    error(string.format('%s\nwant: %s\ngot:  %s', what or 'not equal', vim.inspect(want), vim.inspect(got)), 2)
  end
end
function _G.wait_for(cond, ms, what)
  if not vim.wait(ms or 5000, cond, 5) then error('timed out waiting for ' .. (what or 'a condition'), 2) end
end
for _, f in ipairs(vim.fn.argv()) do
  R.after_each = nil
  local ok, err = xpcall(dofile, debug.traceback, f)
  if not ok then R.failed = R.failed + 1 out('FAIL    ' .. f .. ' (load)\n' .. tostring(err)) end
end
out(string.format('%d passed, %d failed%s', R.passed, R.failed, R.pending > 0 and (', ' .. R.pending .. ' pending') or ''))
vim.cmd(R.failed == 0 and 'qall!' or 'cquit! 1')
