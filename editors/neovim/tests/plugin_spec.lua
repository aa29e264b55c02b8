-- plugin/ochat.lua defines the commands and nothing else: no module is loaded and no process starts until a command
-- runs. Run this file first (before anything requires ochat).
describe('plugin file', function()
  it('defines the commands lazily', function()
    local before = vim.tbl_count(package.loaded)
    vim.cmd('runtime plugin/ochat.lua')
    for _, name in ipairs({ 'OChat', 'OChatToggle', 'OChatNew', 'OChatAgent', 'OChatHistory', 'OChatCancel', 'OChatDiff', 'OChatEdit', 'OChatRetry' }) do
      eq(2, vim.fn.exists(':' .. name), name)
    end
    eq(nil, package.loaded['ochat'])
    eq(nil, package.loaded['ochat.rpc'])
    eq(before, vim.tbl_count(package.loaded), 'no module loaded')
  end)

  it('requires without side effects', function()
    local wins, bufs = #vim.api.nvim_list_wins(), #vim.api.nvim_list_bufs()
    for _, m in ipairs({ 'ochat', 'ochat.rpc', 'ochat.chat', 'ochat.render', 'ochat.permission', 'ochat.diff', 'ochat.history', 'ochat.agents', 'ochat.health', 'ochat.util' }) do
      require(m)
    end
    eq(wins, #vim.api.nvim_list_wins())
    eq(bufs, #vim.api.nvim_list_bufs())
    eq(nil, next(require('ochat.rpc').connections), 'no connection')
    eq(nil, next(require('ochat.rpc').request_handlers), 'no handler registered')
  end)

  it('completes @files for :OChat', function()
    local root = vim.fn.tempname()
    vim.fn.mkdir(root .. '/.git', 'p')
    local f = io.open(root .. '/hello.txt', 'w')
    f:write('x')
    f:close()
    local cwd = vim.fn.getcwd()
    vim.cmd('enew')
    vim.cmd('cd ' .. root)
    local got = vim.fn.getcompletion('OChat @hel', 'cmdline')
    vim.cmd('cd ' .. cwd)
    vim.cmd('bwipe!')
    eq({ '@hello.txt' }, got)
  end)
end)
