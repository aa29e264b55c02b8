-- ochat user commands. Defined lazily: nothing is required or started until a command runs.
if vim.g.loaded_ochat then
  return
end
vim.g.loaded_ochat = 1

local function cmd(name, fn, opts)
  vim.api.nvim_create_user_command(name, fn, opts)
end

cmd('OChat', function(a)
  local range
  if a.range > 0 then
    range = { buf = vim.api.nvim_get_current_buf(), line1 = a.line1, line2 = a.line2, count = a.range }
  end
  require('ochat').open(a.args, range)
end, {
  nargs = '*',
  range = true,
  desc = 'ochat: open the chat (send [prompt]; a range is attached as context)',
  complete = function(lead)
    return require('ochat').complete_prompt(lead)
  end,
})
cmd('OChatToggle', function()
  require('ochat').toggle()
end, { desc = 'ochat: show or hide the chat' })
cmd('OChatNew', function()
  require('ochat').new()
end, { desc = 'ochat: start a new conversation' })
cmd('OChatAgent', function(a)
  require('ochat').agent(a.args)
end, {
  nargs = '?',
  desc = 'ochat: pick the agent for the next message and its options',
  complete = function(lead)
    return require('ochat').complete_agent(lead)
  end,
})
cmd('OChatHistory', function()
  require('ochat').history()
end, { desc = 'ochat: conversations and terminal sessions of this workspace' })
cmd('OChatCancel', function()
  require('ochat').cancel()
end, { desc = 'ochat: cancel the turn in flight' })
cmd('OChatEdit', function()
  require('ochat').edit()
end, { desc = 'ochat: edit your message under the cursor (or the last one) and run it again' })
cmd('OChatRetry', function()
  require('ochat').retry()
end, { desc = 'ochat: regenerate the answer under the cursor (or the last one)' })
cmd('OChatDiff', function(a)
  require('ochat').diff(a.args)
end, {
  nargs = '?',
  desc = "ochat: review the latest turn's file changes side by side",
  complete = function(lead)
    return require('ochat').complete_diff(lead)
  end,
})
cmd('OChatAllow', function()
  require('ochat').permission('allow')
end, { desc = "ochat: allow once what the agent asks" })
cmd('OChatDeny', function()
  require('ochat').permission('deny')
end, { desc = 'ochat: reject what the agent asks' })
cmd('OChatPermission', function(a)
  require('ochat').permission(a.args ~= '' and a.args or 'show')
end, {
  nargs = '?',
  desc = 'ochat: show the pending permission request (pick: choose any option)',
  complete = function()
    return { 'show', 'pick', 'allow', 'deny' }
  end,
})
cmd('OChatQueue', function()
  require('ochat').queue()
end, { desc = 'ochat: edit, remove or send now a queued message' })
