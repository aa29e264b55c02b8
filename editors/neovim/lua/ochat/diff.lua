-- ochat.diff: file changes in the editor.
--
-- Owns: side-by-side `diffthis` review of any fileChange segment (oldText | newText) and of every file of a turn
-- (one tab per file, so no file of a multi-file change is hidden); apply and revert through the daemon
-- (ochat/fileChange/apply|revert, which sends workspace/applyEdit back to us; force after a conflict only when the
-- user asks); the user's edited proposal of a diff tab, as a WorkspaceEdit built here; ochat/fileChangeStatus; the
-- workspace/applyEdit handler itself, which applies with
-- vim.lsp.util.apply_workspace_edit (offset encoding utf-16, JSON nulls stripped first) so open buffers change and
-- undo works, then writes the touched buffers; open buffers following an agent's writes to disk (follow_disk).
-- Never: edits files behind Neovim's back (every change goes through a buffer) or touches files outside a fileChange.
local util = require('ochat.util')

local M = {}
local api = vim.api

local function cfg()
  return require('ochat').config
end

local function filetype_of(path, buf)
  local ok, ft = pcall(vim.filetype.match, { filename = path, buf = buf })
  if ok and type(ft) == 'string' then
    return ft
  end
  ok, ft = pcall(vim.filetype.match, path, buf) -- 0.7 signature
  if ok and type(ft) == 'string' then
    return ft
  end
  return ''
end

local function text_lines(text)
  if text == nil then
    return {}
  end
  local ls = util.lines(text)
  if ls[#ls] == '' then
    table.remove(ls)
  end
  return ls
end

local function scratch(name, lines, path, modifiable)
  local buf = api.nvim_create_buf(false, true)
  pcall(api.nvim_buf_set_name, buf, name)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  api.nvim_buf_set_option(buf, 'modifiable', modifiable == true)
  api.nvim_buf_set_option(buf, 'bufhidden', 'wipe')
  local ft = filetype_of(path, buf)
  if ft ~= '' then
    api.nvim_buf_set_option(buf, 'filetype', ft)
  end
  return buf
end

--- Opens a tab with before | after of one fileChange, in diff mode. Returns the tab page.
function M.open(chat, m, seg)
  local rel = util.relpath(seg.path or '?', chat.root)
  vim.cmd('tabnew')
  local tab = api.nvim_get_current_tabpage()
  local empty = api.nvim_get_current_buf()
  local left = scratch(string.format('ochat://before/%s/%s', m.id or '-', rel), text_lines(util.nn(seg.oldText)), rel)
  -- The proposed side is editable: `ga` applies what it holds.
  local right = scratch(string.format('ochat://after/%s/%s', m.id or '-', rel), text_lines(util.nn(seg.newText)), rel, true)
  for b, t in pairs({ [left] = util.nn(seg.oldText), [right] = util.nn(seg.newText) }) do
    if type(t) == 'string' and t ~= '' and not t:match('[\r\n]$') then
      api.nvim_buf_set_option(b, 'fixendofline', false)
      api.nvim_buf_set_option(b, 'endofline', false)
    end
  end
  api.nvim_buf_set_var(left, 'ochat_root', chat.root)
  api.nvim_buf_set_var(right, 'ochat_root', chat.root)
  api.nvim_win_set_buf(0, left)
  vim.cmd('diffthis')
  local lw = api.nvim_get_current_win()
  vim.cmd('rightbelow vsplit')
  api.nvim_win_set_buf(0, right)
  vim.cmd('diffthis')
  if api.nvim_buf_is_valid(empty) and empty ~= left and empty ~= right then
    pcall(api.nvim_buf_delete, empty, { force = true })
  end
  local k = cfg().keymaps
  for _, b in ipairs({ left, right }) do
    local function map(lhs, fn)
      if lhs then
        vim.keymap.set('n', lhs, fn, { buffer = b, nowait = true, silent = true })
      end
    end
    map(k.apply, function()
      M.apply_from_diff(chat, m, seg, right)
    end)
    map(k.revert, function()
      M.change(chat, m, seg, 'revert')
    end)
    map(k.close, function()
      pcall(vim.cmd, 'tabclose')
    end)
  end
  api.nvim_tabpage_set_var(tab, 'ochat_diff', { path = seg.path, messageId = m.id })
  -- The key hints live in each side's status line (winbar needs 0.8); the cursor starts on the editable side.
  local function esc(t)
    return (t:gsub('%%', '%%%%'))
  end
  api.nvim_win_set_option(lw, 'statusline', esc(' before · ' .. rel .. ' · read-only'))
  local rw = api.nvim_get_current_win()
  api.nvim_win_set_option(
    rw,
    'statusline',
    esc(string.format(' after · %s · edit it, then %s apply · %s revert · %s close', rel, k.apply or ':OChatDiff', k.revert or '-', k.close or ':tabclose'))
  )
  api.nvim_set_current_win(rw)
  return tab
end

--- Opens every fileChange of a turn, one tab each (first file focused). Returns the list of tab pages.
function M.review(chat, m)
  local tabs = {}
  for _, seg in ipairs(require('ochat.render').file_changes(m)) do
    table.insert(tabs, M.open(chat, m, seg))
  end
  if tabs[1] then
    api.nvim_set_current_tabpage(tabs[1])
  end
  if #tabs > 1 then
    util.notify(string.format('%d files changed: one tab each (gt / gT)', #tabs))
  end
  return tabs
end

-- The text of a loaded buffer as it would be written.
local function buf_text(b)
  local t = table.concat(api.nvim_buf_get_lines(b, 0, -1, false), '\n')
  if api.nvim_buf_get_option(b, 'endofline') or api.nvim_buf_get_option(b, 'fixendofline') then
    t = t .. '\n'
  end
  return t
end

--- Reloads an unmodified loaded buffer whose file changed on disk (agents write files themselves), so that an edit
--- applies to what is on disk and :write does not stop at "file changed since reading". Undo survives the reload
--- ('undoreload'). Returns false when the buffer has unsaved changes and the disk differs.
function M.sync_from_disk(b)
  if not api.nvim_buf_is_loaded(b) then
    return true
  end
  local path = api.nvim_buf_get_name(b)
  local disk = util.read_file(path)
  if disk == nil or disk == buf_text(b) then
    return true
  end
  if vim.fn.getbufvar(b, '&modified') == 1 then
    return false
  end
  api.nvim_buf_call(b, function()
    vim.cmd('silent! edit!')
    -- Close the reload's undo step, so that an edit applied next is undone on its own.
    vim.cmd('let &undolevels = &undolevels')
  end)
  return true
end

-- Disk state of a file as a string (mtime in ns and size), nil when it does not exist.
local function disk_key(path)
  local st = util.uv.fs_stat(path)
  return st and string.format('%d.%09d:%d', st.mtime.sec, st.mtime.nsec or 0, st.size) or nil
end

--- Disk states already told about, per buffer: a buffer with unsaved changes is told about each disk state once.
M.told = {}

--- The loaded file buffers (buftype '') whose file is `path` (absolute; symlinks resolved on both sides).
function M.buffers_of(path)
  local want = { [path] = true, [vim.fn.resolve(path)] = true }
  local out = {}
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(b) and api.nvim_buf_get_option(b, 'buftype') == '' then
      local name = api.nvim_buf_get_name(b)
      if name ~= '' and (want[name] or want[vim.fn.resolve(vim.fn.fnamemodify(name, ':p'))]) then
        table.insert(out, b)
      end
    end
  end
  return out
end

--- Makes open buffers follow what an agent wrote to disk (claudecode.nvim and CodeCompanion do the same).
--- `changes`: list of {path = absolute path, text = what the file now holds or an excerpt of it (nil: unknown)}.
--- For each loaded buffer of a path, one without unsaved changes gets `:checktime`, which reloads it silently when
--- the file changed (also with 'noautoread': a one-shot buffer-local FileChangedShell answers "reload"; the undo
--- history survives through 'undoreload'); a deleted file is told, not unloaded. A buffer with unsaved changes is
--- left alone (no blocking W12 prompt now); when the file holds `text` and differs from the buffer, a vim.notify
--- says so, once per disk state. Neovim's own check (on focus, :checktime, :w) still warns before anything is
--- overwritten. Returns the buffers reloaded.
function M.follow_disk(changes)
  local reloaded = {}
  for _, c in ipairs(changes) do
    for _, b in ipairs(M.buffers_of(c.path)) do
      local name = api.nvim_buf_get_name(b)
      local short = vim.fn.fnamemodify(name, ':~:.')
      if vim.fn.getbufvar(b, '&modified') == 1 then
        local key = disk_key(name)
        local disk = key and M.told[b] ~= key and util.read_file(name)
        if disk and disk ~= buf_text(b) and (c.text == nil or disk:find(c.text, 1, true)) then
          M.told[b] = key
          util.notify(short .. ' changed on disk and this buffer has unsaved changes: :e! loads the file, :w overwrites it', vim.log.levels.WARN)
        end
      else
        local tick = api.nvim_buf_get_changedtick(b)
        local group = api.nvim_create_augroup('ochat_follow_disk', { clear = true })
        api.nvim_create_autocmd('FileChangedShell', {
          group = group,
          buffer = b,
          callback = function()
            if vim.v.fcs_reason == 'deleted' then
              vim.v.fcs_choice = ''
              util.notify(short .. ' was deleted on disk; the buffer keeps its text', vim.log.levels.WARN)
            else
              vim.v.fcs_choice = 'reload'
            end
          end,
        })
        local ok, err = pcall(vim.cmd, 'silent checktime ' .. b) -- silent: no "file" 3L, 20B message per buffer
        pcall(api.nvim_del_augroup_by_id, group)
        if not ok then
          util.notify('reload ' .. short .. ': ' .. tostring(err), vim.log.levels.WARN)
        elseif api.nvim_buf_is_valid(b) and api.nvim_buf_get_changedtick(b) ~= tick then
          M.told[b] = nil
          table.insert(reloaded, b)
        end
      end
    end
  end
  return reloaded
end

-- Full-document replacement of `path` by `text` (nil: delete the file), as a WorkspaceEdit.
function M.build_edit(path, text)
  local uri = vim.uri_from_fname(path)
  if text == nil then
    return { documentChanges = { { kind = 'delete', uri = uri, options = { ignoreIfNotExists = true } } } }
  end
  local changes = {}
  if vim.fn.filereadable(path) == 0 and vim.fn.bufloaded(path) == 0 then
    table.insert(changes, { kind = 'create', uri = uri, options = { ignoreIfExists = true } })
  end
  local bufnr = vim.fn.bufadd(path)
  vim.fn.bufload(bufnr)
  M.sync_from_disk(bufnr)
  local n = api.nvim_buf_line_count(bufnr)
  local last = api.nvim_buf_get_lines(bufnr, n - 1, n, false)[1] or ''
  local _, last16 = vim.str_utfindex(last)
  local new = text:gsub('\r\n?', '\n')
  if new:sub(-1) == '\n' then
    new = new:sub(1, -2)
  end
  table.insert(changes, {
    textDocument = { uri = uri }, -- no version: a null one crashes apply_workspace_edit
    edits = { { range = { start = { line = 0, character = 0 }, ['end'] = { line = n - 1, character = last16 } }, newText = new } },
  })
  return { documentChanges = changes }, text:sub(-1) ~= '\n' and text ~= ''
end

-- The LSP position (UTF-16) where `text` ends.
local function end_position(text)
  local ls = vim.split(text:gsub('\r\n?', '\n'), '\n', { plain = true })
  local _, n16 = vim.str_utfindex(ls[#ls])
  return { line = #ls - 1, character = n16 }
end

--- Whether the document `text` (its content before the edit: the disk's) ends with a line break once the TextEdits
--- `edits` are applied: an edit reaching the end of the document decides by its newText's end (an empty newText
--- leaves the end as it was); otherwise the final line break stays as it is. Pure: for the workspace/applyEdit handler.
function M.eol_after(text, edits)
  local eol = text:match('[\r\n]$') ~= nil
  local last = end_position(text)
  for _, e in ipairs(edits) do
    local en = e.range and e.range['end']
    local reaches = en and (en.line > last.line or (en.line == last.line and en.character >= last.character))
    if reaches and (e.newText or '') ~= '' then
      eol = e.newText:match('[\r\n]$') ~= nil
    end
  end
  return eol
end

local function touched_uris(edit)
  local uris = {}
  for uri in pairs(edit.changes or {}) do
    uris[uri] = true
  end
  for _, c in ipairs(edit.documentChanges or {}) do
    if c.textDocument and c.textDocument.uri then
      uris[c.textDocument.uri] = true
    elseif c.kind == 'create' then
      uris[c.uri] = true
    elseif c.kind == 'rename' then
      uris[c.newUri] = true
    end
  end
  return uris
end

--- Applies a WorkspaceEdit as the handler of workspace/applyEdit does: strips JSON nulls, applies with utf-16
--- offsets and writes the touched buffers when `diff.write` is set. Returns an ApplyWorkspaceEditResult.
function M.apply_workspace_edit(edit, noeol)
  edit = util.strip_nil(edit) or {}
  local conflicts = {}
  for uri in pairs(touched_uris(edit)) do
    local b = vim.fn.bufnr(vim.uri_to_fname(uri))
    if b > 0 and not M.sync_from_disk(b) then
      conflicts[uri] = true
    end
  end
  -- Whether each edited document ends with a line break afterwards (Neovim keeps that in 'endofline', not in the
  -- lines, and 'fixendofline' would add one on :write).
  local eols = {}
  for _, c in ipairs(edit.documentChanges or {}) do
    if c.textDocument and c.textDocument.uri and c.edits then
      local fname = vim.uri_to_fname(c.textDocument.uri)
      eols[c.textDocument.uri] = M.eol_after(util.read_file(fname) or '', c.edits)
      local b = vim.fn.bufnr(fname)
      if b > 0 and api.nvim_buf_is_loaded(b) then
        -- apply_text_edits drops the blank last line an edit ending past the end leaves only when 'endofline' (or
        -- 'fixendofline') is set; the right value is set below.
        api.nvim_buf_set_option(b, 'endofline', true)
      end
    end
  end
  local ok, err = pcall(vim.lsp.util.apply_workspace_edit, edit, 'utf-16')
  if not ok then
    return { applied = false, failureReason = tostring(err) }
  end
  for uri, eol in pairs(eols) do
    local b = vim.uri_to_bufnr(uri)
    if noeol then
      eol = false
    end
    if api.nvim_buf_is_loaded(b) then
      if not eol then
        api.nvim_buf_set_option(b, 'fixendofline', false)
      end
      api.nvim_buf_set_option(b, 'endofline', eol)
    end
  end
  for uri in pairs(touched_uris(edit)) do
    local b = vim.uri_to_bufnr(uri)
    if api.nvim_buf_is_loaded(b) then
      -- Close the undo step, so that one undo takes back exactly this edit.
      api.nvim_buf_call(b, function()
        vim.cmd('let &undolevels = &undolevels')
      end)
    end
  end
  if cfg().diff.write then
    for uri in pairs(touched_uris(edit)) do
      local b = vim.uri_to_bufnr(uri)
      if conflicts[uri] then
        util.notify(vim.uri_to_fname(uri) .. ' had unsaved changes and changed on disk: edit applied to the buffer, not written', vim.log.levels.WARN)
      elseif api.nvim_buf_is_loaded(b) and vim.fn.getbufvar(b, '&modified') == 1 then
        local wok, werr = pcall(api.nvim_buf_call, b, function()
          vim.cmd('silent lockmarks write!')
        end)
        if not wok then
          return { applied = false, failureReason = 'write ' .. vim.uri_to_fname(uri) .. ': ' .. tostring(werr) }
        end
      end
    end
  end
  return { applied = true }
end

local function show_document(params)
  local ok = pcall(function()
    local fname = vim.uri_to_fname(params.uri)
    if params.external then
      error('external documents are not opened')
    end
    vim.cmd('edit ' .. vim.fn.fnameescape(fname))
    local sel = util.nn(params.selection)
    if sel and sel.start then
      pcall(api.nvim_win_set_cursor, 0, { sel.start.line + 1, sel.start.character })
    end
  end)
  return { success = ok }
end

--- Registers the workspace/applyEdit and window/showDocument handlers with ochat.rpc.
function M.register()
  local h = require('ochat.rpc').request_handlers
  h['workspace/applyEdit'] = function(params)
    return M.apply_workspace_edit(params.edit)
  end
  h['window/showDocument'] = show_document
end

-- The status the daemon records for an action.
local function status_of(action)
  return action == 'apply' and 'applied' or 'reverted'
end

-- Whether a -32003 answer is the "file changed since the agent's edit" conflict (force can help), rather than a
-- running turn or a file that is not regular or too big (it cannot).
local function is_edit_conflict(err)
  return err and err.code == -32003 and type(err.message) == 'string' and err.message:find('changed since', 1, true) ~= nil
end

--- Applies ('apply') or reverts ('revert') a fileChange through the daemon: ochat/fileChange/<action>
--- {conversationId, messageId, path[, force]}. The daemon sends workspace/applyEdit back (this plugin declares
--- applyEdit), so the edit lands in the buffer as one undo step. An answer `{applied:false, reason:"already …"}`
--- means the file holds the target already: the status is recorded, and the user is told, not warned. On the -32003
--- conflict (the file changed since the agent's edit) the message is shown and the user may review the diff or
--- force it (`force: true`, through the editor: one undo step; the daemon never forces on disk). A daemon without
--- the method (-32601) gets a clear error: ochatd is too old. `cb(err)` when done (nil also for "already …").
function M.change(chat, m, seg, action, cb, force)
  local function done(err, status, quiet)
    if not err then
      seg.status = status or status_of(action)
      chat:mark(m, { activity = true })
      if not quiet then
        util.notify(string.format('%s %s', status_of(action), util.relpath(seg.path or '?', chat.root)))
      end
    else
      util.notify(string.format('%s %s: %s', action, util.relpath(seg.path or '?', chat.root), util.err_text(err)), vim.log.levels.ERROR)
    end
    if cb then
      cb(err)
    end
  end
  if not (chat.conversation_id and m.id) then
    return done({ code = -32001, message = 'this change is not in a stored conversation (only changes of ochat conversations can be applied or reverted)' })
  end
  local params = { conversationId = chat.conversation_id, messageId = m.id, path = seg.path }
  if force then
    params.force = true
  end
  chat.conn:request('ochat/fileChange/' .. action, params, function(err, res)
    if err and err.code == -32601 then
      return done({ code = -32601, message = 'this ochatd has no ochat/fileChange/' .. action .. ': update ochatd' })
    end
    if is_edit_conflict(err) and not force then
      return M.offer_force(chat, m, seg, action, err, cb)
    end
    if err then
      return done(err)
    end
    res = type(res) == 'table' and res or {}
    local status = type(util.nn(res.status)) == 'string' and res.status or nil
    if res.applied == false then
      local reason = util.nn(res.reason) or util.nn(res.failureReason) or 'not applied'
      if reason:find('^already') then
        util.notify(string.format('%s: %s', util.relpath(seg.path or '?', chat.root), reason))
        return done(nil, status, true)
      end
      return done({ code = -32603, message = reason })
    end
    done(nil, status)
  end)
end

--- After a -32003 conflict: shows the daemon's message and asks (vim.ui.select) whether to review the diff, force
--- the change through the editor (the whole file becomes the target text; one undo step) or leave the file.
function M.offer_force(chat, m, seg, action, err, cb)
  local rel = util.relpath(seg.path or '?', chat.root)
  util.notify(string.format('%s %s: %s', action, rel, util.err_text(err)), vim.log.levels.WARN)
  local choices = {
    { id = 'diff', label = 'review the diff first' },
    { id = 'force', label = string.format('%s anyway: overwrite %s in the editor (one undo step)', action, rel) },
    { id = 'leave', label = 'leave the file as it is' },
  }
  vim.ui.select(choices, {
    prompt = string.format('%s changed since the agent\'s edit', rel),
    format_item = function(c)
      return c.label
    end,
    kind = 'ochat.filechange_conflict',
  }, function(c)
    if c and c.id == 'force' then
      return M.change(chat, m, seg, action, cb, true)
    end
    if c and c.id == 'diff' then
      M.open(chat, m, seg)
    end
    if cb then
      cb(err)
    end
  end)
end

--- `ga` in a diff tab: applies the change; when the proposed (right) side was edited, applies the edited text
--- instead (built here as a WorkspaceEdit, since the daemon only knows the agent's text). `cb(err)`.
function M.apply_from_diff(chat, m, seg, right, cb)
  local lines = api.nvim_buf_get_lines(right, 0, -1, false)
  if vim.deep_equal(lines, text_lines(util.nn(seg.newText))) then
    return M.change(chat, m, seg, 'apply', cb)
  end
  local nt = util.nn(seg.newText)
  local final = (nt == nil or nt == '' or nt:match('[\r\n]$')) and '\n' or ''
  local err = M.change_locally({ path = seg.path, newText = table.concat(lines, '\n') .. final })
  if err then
    util.notify(string.format('apply %s: %s', seg.path or '?', util.err_text(err)), vim.log.levels.ERROR)
  else
    seg.status = 'applied (edited)'
    chat:mark(m, { activity = true })
    util.notify(string.format('applied %s (your edited version)', util.relpath(seg.path or '?', chat.root)))
    api.nvim_buf_set_option(right, 'modified', false)
  end
  if cb then
    cb(err)
  end
end

--- Replaces the whole of `seg.path` with `seg.newText` as an undoable buffer edit (written when `diff.write`): the
--- edited proposal of a diff tab, which the daemon does not know. Returns an error object or nil.
function M.change_locally(seg)
  if util.nn(seg.newText) == nil then
    return { code = -32602, message = 'this change has no new text to apply' }
  end
  local edit, noeol = M.build_edit(seg.path, seg.newText)
  local res = M.apply_workspace_edit(edit, noeol)
  if not res.applied then
    return { code = -32603, message = res.failureReason }
  end
end

return M
