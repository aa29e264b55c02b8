// The chat webview alone in headless Chromium (stub host), acting as a person: text, tools and file changes in
// the order they happened; tool input and titles readable (relative paths, no agent bookkeeping); a rejected
// change not shown as an error; row buttons that leave the section open; Enter while a turn runs and the queue
// (edit, remove, send now); a failed send that keeps the text; the permission card and the keyboard focus;
// the code block bar; agents that need a login.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { launch, open, host, posted, artifacts } from './harness.mjs';
import { agents, permission } from './fixture.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const root = '/home/me/proj';
const t0 = 1764496000000;
function snap(extra = {}) {
  return {
    conversation: { id: 'C1', title: 'order', agents: ['codex'], createdAt: t0, updatedAt: t0 },
    messages: [{ id: 'U1', role: 'user', timestamp: t0, content: 'create a.txt' }, { id: 'A1', role: 'assistant', agent: 'codex', timestamp: t0 + 1, status: 'streaming', segments: [] }],
    running: { turnId: 'A1', messageId: 'A1', agent: 'codex', startedAt: Date.now() },
    permissions: [], agentState: {}, readOnly: false, ...extra,
  };
}
const initMsg = (s = snap()) => ({ type: 'init', snapshot: s, agents, selectedAgent: 'claude', connection: { state: 'running' }, env: { workspaceRoot: root, tabSize: 2 } });
let seq = 0;
const ev = (event) => ({ type: 'event', params: { conversationId: 'C1', turnId: 'A1', messageId: 'A1', agent: 'codex', event: { seq: ++seq, ...event } } });

test('text, tool and file change in the order they happened, each text run its own paragraph; readable input', async () => {
  seq = 0;
  const { page, errors } = await open(browser, { width: 420 });
  await host(page, initMsg());
  await host(page, ev({ type: 'content.delta', delta: "I'll create the file." }));
  await host(page, ev({ type: 'activity.upsert', segment: { type: 'tool', id: 'call_1', name: `Write ${root}/a.txt`, status: 'completed', providerKind: 'edit',
    input: { path: `${root}/a.txt`, call_id: 'call_1', turn_id: 'turn_9', started_at_ms: 1764496000123, content: 'one\ntwo' } } }));
  await host(page, ev({ type: 'activity.upsert', segment: { type: 'tool', id: 'call_2', name: 'Run ls', status: 'completed', providerKind: 'execute',
    input: JSON.stringify({ command: ['/bin/bash', '-lc', 'ls -la src'], cwd: root, call_id: 'call_2' }) } }));
  await host(page, ev({ type: 'activity.upsert', segment: { type: 'fileChange', path: `${root}/a.txt`, additions: 2, deletions: 0, oldText: null, newText: 'one\ntwo', toolCallId: 'call_1', status: 'applied' } }));
  await host(page, ev({ type: 'content.delta', delta: 'Done: created a.txt.' }));
  await host(page, ev({ type: 'turn.completed', stopReason: 'end_turn' }));
  const a1 = page.locator('.msg[data-id="A1"]');
  await page.waitForFunction(() => document.querySelectorAll('.msg[data-id="A1"] .msg-body > .content').length === 2);
  // In order: text, the activity, text — not the activity pulled above one glued answer.
  assert.deepEqual(await a1.locator('.msg-body > *').evaluateAll((els) => els.map((e) => e.className.split(' ')[0])), ['content', 'activity', 'content']);
  const texts = await a1.locator('.msg-body > .content').allInnerTexts();
  assert.deepEqual(texts.map((t) => t.trim()), ["I'll create the file.", 'Done: created a.txt.']);
  assert.doesNotMatch(await a1.innerText(), /file\.Done/);
  // Titles and paths relative to the workspace; the path opens the file.
  // Open while it streamed, it stays open after the turn.
  assert.equal(await a1.locator('details.activity').evaluate((d) => d.open), true);
  assert.equal((await a1.locator('.tool[data-tool="call_1"] .tool-name').innerText()).trim(), 'Write a.txt');
  await a1.locator('.tool[data-tool="call_1"] .tool-name .file-link').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'openFile', path: `${root}/a.txt` });
  assert.equal(await a1.locator('.tool[data-tool="call_1"]').evaluate((d) => d.open), false, 'the link does not toggle the row');
  assert.equal(await a1.locator('details.activity').evaluate((d) => d.open), true);
  await a1.locator('.tool[data-tool="call_1"] > summary').click();
  await a1.locator('.tool[data-tool="call_2"] > summary').click();
  const write = await a1.locator('.tool[data-tool="call_1"] .io pre').first().innerText();
  assert.equal(write, 'path: a.txt\ncontent:\n  one\n  two');
  const run = await a1.locator('.tool[data-tool="call_2"] .io pre').first().innerText();
  assert.equal(run, '$ ls -la src', 'the command only: no argv wrapper, no cwd equal to the workspace, no call_id');
  assert.doesNotMatch(await a1.innerText(), /call_id|turn_id|started_at_ms|\\\//);
  // A row button acts on the file without closing the section (nor toggling the row).
  await a1.locator('.filechange .fc-diff').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'openDiff', path: `${root}/a.txt`, messageId: 'A1' });
  await a1.locator('.filechange .fc-revert').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'applyChange', messageId: 'A1', path: `${root}/a.txt`, action: 'revert' });
  assert.equal(await a1.locator('details.activity').evaluate((d) => d.open), true, 'the section stays open');
  assert.equal(await a1.locator('.filechange').evaluate((d) => d.open), false);
  assert.equal((await a1.locator('.filechange .path').innerText()).trim(), 'a.txt');
  assert.equal(await page.evaluate(() => getComputedStyle(document.querySelector('.tool pre')).tabSize), '2', "the editor's tab size");
  await page.screenshot({ path: join(artifacts, 'webview-order.png') });
  assert.deepEqual(errors, []);
  await page.close();
});

test('a write whose permission was rejected shows as not applied, not as a red error', async () => {
  seq = 0;
  const { page, errors } = await open(browser);
  await host(page, initMsg());
  await host(page, ev({ type: 'activity.upsert', segment: { type: 'tool', id: 'w', name: 'Write b.txt', status: 'error', providerKind: 'edit', error: 'rejected by the user' } }));
  await host(page, ev({ type: 'activity.upsert', segment: { type: 'fileChange', path: `${root}/b.txt`, additions: 1, deletions: 0, newText: 'x', toolCallId: 'w', status: 'rejected' } }));
  await host(page, ev({ type: 'content.delta', delta: 'Not written.' }));
  await host(page, ev({ type: 'turn.completed', stopReason: 'end_turn' }));
  const a1 = page.locator('.msg[data-id="A1"]');
  await page.waitForSelector('.msg[data-id="A1"] .tool-not-applied');
  assert.equal(await a1.locator('.tool .badge.error, .tool-error').count(), 0);
  assert.match((await a1.locator('.activity-summary').innerText()).replace(/\s+/g, ' '), /1 tool call \(1 not applied\)/);
  assert.deepEqual(errors, []);
  await page.close();
});

test('Enter while a turn runs sends (the daemon queues); the queue can be edited, removed, sent now', async () => {
  seq = 0;
  const { page, errors } = await open(browser);
  await host(page, initMsg());
  const input = page.locator('textarea.input');
  assert.match(await page.locator('button.send').innerText(), /Queue/);
  await input.fill('and then add tests');
  await input.press('Enter');
  assert.deepEqual((await posted(page)).at(-1), { type: 'send', text: 'and then add tests', agent: 'claude', attachments: [], id: 1 });
  await host(page, { type: 'sendResult', id: 1, ok: true, queued: true });
  await host(page, { type: 'queue', items: [{ id: 'q1', text: 'and then add tests', agent: 'claude', createdAt: t0 }, { id: 'q2', text: 'second', createdAt: t0 }] });
  await page.waitForSelector('.queued[data-queue="q2"]');
  assert.equal(await input.inputValue(), '');
  assert.match(await page.locator('.queue-head').innerText(), /2 queued/);
  await page.screenshot({ path: join(artifacts, 'webview-queue.png') });
  await page.locator('.queued[data-queue="q1"] .q-edit').click();
  const box = page.locator('.queued[data-queue="q1"] textarea');
  await box.fill('and then add unit tests');
  await box.press('Enter');
  assert.deepEqual((await posted(page)).at(-1), { type: 'queueUpdate', id: 'q1', text: 'and then add unit tests' });
  await page.locator('.queued[data-queue="q2"] .q-remove').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'queueRemove', id: 'q2' });
  await page.locator('.queued[data-queue="q1"] .q-send-now').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'queueSendNow', id: 'q1' });
  await host(page, { type: 'queue', items: [] });
  await page.waitForSelector('.queue.hidden', { state: 'attached' });
  assert.deepEqual(errors, []);
  await page.close();
});

test('a send that fails (ochatd unreachable) keeps the text in the composer with a readable error', async () => {
  const s = snap({ running: undefined });
  s.messages = s.messages.slice(0, 1);
  const { page } = await open(browser);
  await host(page, initMsg(s));
  const input = page.locator('textarea.input');
  await input.fill('do not lose me');
  await input.press('Enter');
  await host(page, { type: 'sendResult', id: 1, ok: false, error: 'Request ochat/chat/send failed with message: connection to ochatd closed' });
  await page.waitForSelector('.error:not(.hidden)');
  assert.equal(await input.inputValue(), 'do not lose me');
  assert.equal(await page.locator('.error').innerText(), 'Not sent: connection to ochatd closed. Your message is still in the box.');
  await page.close();
});

test('a permission request takes the focus only when the user is not typing, and gives it back', async () => {
  const s = snap();
  const { page, errors } = await open(browser);
  await host(page, initMsg(s));
  const input = page.locator('textarea.input');
  // Typing: the request is shown, the keys keep going into the composer.
  await input.click();
  await page.keyboard.type('half a sen');
  await host(page, { type: 'permission', params: { ...permission, toolCall: { ...permission.toolCall, name: `Write ${root}/README.md` } } });
  await page.waitForSelector('.permission');
  await page.keyboard.type('tence');
  assert.equal(await input.inputValue(), 'half a sentence');
  assert.equal(await page.evaluate(() => document.activeElement.matches('textarea.input')), true);
  assert.match(await page.locator('.perm-head').innerText(), /Write README\.md/);
  await host(page, { type: 'permissionResolved', params: { permissionId: 'P1', conversationId: 'C1', optionId: 'allow', outcome: 'selected' } });
  // Not typing (empty composer): the card takes the focus — the card, so Enter answers nothing.
  await input.fill('');
  await host(page, { type: 'permission', params: { ...permission, permissionId: 'P2' } });
  await page.waitForFunction(() => document.activeElement?.dataset?.permission === 'P2');
  const n = (await posted(page)).length;
  await page.keyboard.press('Enter');
  await page.keyboard.press('1');
  assert.equal((await posted(page)).length, n, 'no key answers the request');
  // Tab reaches Allow (first), which answers; once resolved, the focus is back in the composer.
  await page.keyboard.press('Tab');
  let focused = await page.evaluate(() => document.activeElement.className);
  while (!/perm-option/.test(focused)) { await page.keyboard.press('Tab'); focused = await page.evaluate(() => document.activeElement.className); }
  assert.match(focused, /primary/);
  await page.keyboard.press('Enter');
  assert.deepEqual((await posted(page)).at(-1), { type: 'respondPermission', permissionId: 'P2', optionId: 'allow' });
  await host(page, { type: 'permissionResolved', params: { permissionId: 'P2', conversationId: 'C1', optionId: 'allow', outcome: 'selected' } });
  await page.waitForFunction(() => document.activeElement?.matches('textarea.input'));
  assert.deepEqual(errors, []);
  await page.close();
});

test('code blocks: the language, Copy and Insert at cursor on hover', async () => {
  const s = snap({ running: undefined });
  s.messages[1] = { id: 'A1', role: 'assistant', agent: 'codex', timestamp: t0 + 1, status: 'completed', segments: [{ type: 'content', content: 'Here:\n\n```python\ndef f():\n\treturn 1\n```\n' }] };
  const { page, errors } = await open(browser);
  await host(page, initMsg(s));
  const pre = page.locator('.content pre');
  await pre.waitFor();
  await pre.hover();
  await page.waitForSelector('.code-bar:not(.hidden)');
  assert.equal(await page.locator('.code-lang').innerText(), 'python');
  await page.locator('.code-copy').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'copyCode', text: 'def f():\n\treturn 1\n' });
  await page.locator('.code-insert').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'insertCode', text: 'def f():\n\treturn 1\n' });
  assert.equal(await pre.evaluate((p) => getComputedStyle(p).tabSize), '2');
  assert.deepEqual(await pre.evaluate((p) => [...new Set([...p.querySelectorAll('code, code span')].map((e) => getComputedStyle(e).backgroundColor))]), ['rgba(0, 0, 0, 0)'], 'one background, no stripes');
  await page.screenshot({ path: join(artifacts, 'webview-code-bar.png') });
  assert.deepEqual(errors, []);
  await page.close();
});

test('first run: an agent that needs a login says so and how; the empty state offers actions', async () => {
  const s = snap({ running: undefined, conversation: undefined, messages: [] });
  const { page } = await open(browser);
  await host(page, { ...initMsg(s), agents: [{ name: 'claude', available: false, state: 'needs_login', reason: 'claude is not logged in', install: 'claude /login' }], selectedAgent: 'claude' });
  await page.waitForSelector('.unavail[data-agent="claude"]');
  assert.equal(await page.locator('select.agent option').innerText(), 'claude (needs login)');
  assert.match(await page.locator('.unavail[data-agent="claude"]').innerText(), /needs login[\s\S]*claude is not logged in[\s\S]*To log in:\s*claude \/login/);
  assert.match(await page.locator('.empty').innerText(), /No agent can run yet/);
  await page.locator('.empty-history').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'openHistory' });
  await page.screenshot({ path: join(artifacts, 'webview-first-run.png') });
  await page.close();
});
