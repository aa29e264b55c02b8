// The chat webview alone in headless Chromium (stub host): the hover toolbar
// that edits a prompt or retries an answer, the list of unavailable agents
// with why and how to fix, and a followed terminal session growing by upserts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { launch, open, host, posted, artifacts } from './harness.mjs';
import { init, snapshot, agents } from './fixture.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const completed = { conversationId: 'C1', turnId: 'A2', messageId: 'A2', agent: 'claude', event: { type: 'turn.completed', seq: 5, stopReason: 'end_turn' } };

test('edit a prompt inline and retry an answer from the hover toolbar; both off while a turn runs', async () => {
  const snap = snapshot();
  snap.permissions = [];
  const { page, errors } = await open(browser);
  await host(page, init(snap));
  await page.waitForSelector('.msg[data-id="U1"] .msg-action[data-action="edit"]');
  // While A2 runs: every action is disabled, and the streaming answer has no retry.
  assert.equal(await page.locator('.msg-action:not([disabled])').count(), 0);
  assert.equal(await page.locator('.msg[data-id="A2"] .msg-action').count(), 0);
  await page.locator('.msg[data-id="U1"] .msg-action[data-action="edit"]').click({ force: true });
  assert.equal(await page.locator('.edit-box').count(), 0, 'a disabled edit does nothing');
  await host(page, { type: 'event', params: completed });
  await page.waitForSelector('.msg[data-id="A2"] .msg-action[data-action="refresh"]:not([disabled])');
  assert.equal(await page.locator('.msg-action[disabled]').count(), 0);
  // The toolbar shows on hover.
  const u1 = page.locator('.msg[data-id="U1"]');
  await page.locator('.composer').hover();
  await page.waitForFunction(() => getComputedStyle(document.querySelector('.msg[data-id="U1"] .msg-actions')).opacity === '0');
  assert.equal(await u1.locator('.msg-actions').evaluate((e) => getComputedStyle(e).opacity), '0');
  await u1.hover();
  await page.waitForFunction(() => getComputedStyle(document.querySelector('.msg[data-id="U1"] .msg-actions')).opacity === '1');
  // Edit: the message becomes an editable box with its text; Enter resends.
  await u1.locator('.msg-action[data-action="edit"]').click();
  const box = u1.locator('textarea.edit-box');
  assert.equal(await box.inputValue(), 'The parser drops the last token. Fix it.');
  assert.equal(await u1.locator('.user-text.hidden').count(), 1);
  await page.screenshot({ path: join(artifacts, 'webview-edit.png') });
  await box.fill('The parser drops the first token. Fix it.');
  await box.press('Shift+Enter');
  assert.match(await box.inputValue(), /\n$/, 'Shift+Enter is a new line');
  await box.press('Enter');
  assert.deepEqual((await posted(page)).at(-1), { type: 'edit', messageId: 'U1', text: 'The parser drops the first token. Fix it.', agent: 'claude' });
  assert.equal(await u1.locator('.edit-box').count(), 0);
  // Escape gives up without posting.
  const n = (await posted(page)).length;
  await u1.hover();
  await u1.locator('.msg-action[data-action="edit"]').click();
  await u1.locator('textarea.edit-box').press('Escape');
  assert.equal(await u1.locator('.edit-box').count(), 0);
  assert.equal(await u1.locator('.user-text:not(.hidden)').count(), 1);
  assert.equal((await posted(page)).length, n);
  // Retry an answer.
  const a1 = page.locator('.msg[data-id="A1"]');
  await a1.hover();
  await a1.locator('.msg-action[data-action="refresh"]').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'retry', messageId: 'A1', agent: 'claude' });
  // A read-only transcript has no actions.
  await host(page, init({ ...snap, running: undefined, readOnly: true }));
  await page.waitForSelector('.msg[data-id="A1"]');
  assert.equal(await page.locator('.msg-actions').first().evaluate((e) => getComputedStyle(e).display), 'none');
  assert.deepEqual(errors, []);
  await page.close();
});

test('unavailable agents are listed with their reason and install text; untrusted ones offer Trust', async () => {
  const snap = snapshot();
  snap.running = undefined;
  snap.permissions = [];
  const { page, errors } = await open(browser);
  const list = [...agents, { name: 'local', command: 'my-agent', available: false, untrusted: true,
    reason: 'workspace settings /ws/.ochat/settings.json are not trusted: run `ochatd trust` (or review the file first)',
    install: 'review /ws/.ochat/settings.json, then run: ochatd trust --workspace /ws' }];
  list[2] = { ...list[2], install: 'npm i -g @google/gemini-cli' };
  await host(page, { ...init(snap), agents: list });
  const box = page.locator('details.unavailable');
  await page.waitForSelector('details.unavailable:not(.hidden)');
  assert.equal(await box.evaluate((d) => d.open), true, 'shown, not only a tooltip');
  assert.match(await box.locator('summary').innerText(), /2 agents unavailable/);
  const gemini = box.locator('.unavail[data-agent="gemini"]');
  assert.match(await gemini.innerText(), /gemini not found on PATH/);
  assert.equal(await gemini.locator('.unavail-install code').innerText(), 'npm i -g @google/gemini-cli');
  assert.equal(await gemini.locator('button').count(), 0);
  const local = box.locator('.unavail[data-agent="local"]');
  assert.match(await local.innerText(), /untrusted/);
  assert.match(await local.locator('.unavail-reason').innerText(), /are not trusted/);
  assert.match(await local.locator('.unavail-install').innerText(), /To trust:\s*review \/ws\/\.ochat\/settings\.json, then run: ochatd trust --workspace \/ws/);
  await page.locator('.composer').screenshot({ path: join(artifacts, 'webview-unavailable-agents.png') });
  await local.locator('button.unavail-trust').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'trustWorkspace' });
  // Folding it is remembered; with every agent available it goes away.
  await box.locator('summary').click();
  await page.waitForFunction(() => window.__state.unavailableFolded === true);
  await host(page, { type: 'agents', agents: agents.slice(0, 2), selectedAgent: 'claude' });
  await page.waitForSelector('details.unavailable.hidden', { state: 'attached' });
  assert.deepEqual(errors, []);
  await page.close();
});

test('a followed terminal session grows by upsert (same id replaced, new ones appended, reset replaces all)', async () => {
  const { page, errors } = await open(browser);
  const t = 1764496000000;
  const msgs = [
    { id: 'm1', role: 'user', timestamp: t, content: 'hello from the terminal' },
    { id: 'm2', role: 'assistant', agent: 'claude', timestamp: t + 1, status: 'completed', segments: [{ type: 'content', content: 'Hi' }] },
  ];
  await host(page, { type: 'init', agents, selectedAgent: 'claude', connection: { state: 'running' },
    following: { sessionId: 'S1', agent: 'claude', path: '/h/.claude/projects/p/S1.jsonl' },
    snapshot: { conversation: { id: '', title: 'terminal session', createdAt: t, updatedAt: t }, messages: msgs, permissions: [], agentState: {}, readOnly: true } });
  await page.waitForSelector('.msg[data-id="m2"] .md-block');
  assert.match(await page.locator('.readonly').innerText(), /Terminal session \(claude\), following live/);
  assert.equal(await page.locator('.header.live').count(), 1);
  await host(page, { type: 'upsert', reset: false, title: 'terminal session', messages: [
    { ...msgs[1], segments: [{ type: 'content', content: 'Hi there, **grown**' }] },
    { id: 'm3', role: 'user', timestamp: t + 2, content: 'typed in the terminal' }] });
  await page.waitForSelector('.msg[data-id="m3"]');
  assert.deepEqual(await page.locator('.msg').evaluateAll((els) => els.map((e) => e.dataset.id)), ['m1', 'm2', 'm3']);
  await page.waitForFunction(() => document.querySelector('.msg[data-id="m2"] .content strong')?.textContent === 'grown');
  await host(page, { type: 'upsert', reset: true, title: 'rewound', messages: [msgs[0]] });
  await page.waitForFunction(() => document.querySelectorAll('.msg').length === 1);
  assert.match(await page.locator('.header .title').innerText(), /rewound/);
  assert.deepEqual(errors, []);
  await page.close();
});
