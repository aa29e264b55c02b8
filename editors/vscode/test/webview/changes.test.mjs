// The chat webview alone in headless Chromium (stub host): file changes the
// daemon marks "rejected" at turn end (the write never happened) shown as not
// applied and left out of the turn's counts, and a failed turn whose message
// ends with a hint shown whole and wrapped in a narrow panel.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { launch, open, host, posted, artifacts } from './harness.mjs';
import { init, snapshot } from './fixture.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const norm = async (loc) => (await loc.innerText()).replace(/\s+/g, ' ').trim();
const ev = (seq, event) => ({ type: 'event', params: { conversationId: 'C1', turnId: 'A2', messageId: 'A2', agent: 'claude', event: { seq, ...event } } });
const hintMessage = 'agent codex: authentication required: the agent refused the session (401 Unauthorized from https://api.openai.com/v1/responses); run `codex login` or set OPENAI_API_KEY; see `ochatd doctor`';

test('a change rejected at turn end is muted, not applied, out of the counts, and offers only the proposed diff', async () => {
  const snap = snapshot();
  snap.permissions = [];
  const { page, errors } = await open(browser, { width: 340, height: 1100 });
  await host(page, init(snap));
  await page.waitForSelector('.msg[data-id="A2"]');
  // The running turn writes one file and proposes another; the daemon then marks the second rejected and the turn fails.
  await host(page, ev(1, { type: 'activity.upsert', segment: { type: 'fileChange', path: '/repo/README.md', additions: 3, deletions: 1, oldText: 'a\n', newText: 'b\nc\nd\n', toolCallId: 'w1' } }));
  await host(page, ev(2, { type: 'activity.upsert', segment: { type: 'fileChange', path: '/repo/docs/a.md', additions: 5, deletions: 2, oldText: 'x\ny\n', newText: '1\n2\n3\n4\n5\n', toolCallId: 'w2' } }));
  await page.waitForSelector('.msg[data-id="A2"] .filechange[data-path="/repo/docs/a.md"]');
  const a2 = page.locator('.msg[data-id="A2"]');
  assert.match(await norm(a2.locator('.activity-summary')), /2 files \+8 −3/, 'before the daemon says otherwise both count');
  await host(page, ev(3, { type: 'activity.upsert', segment: { type: 'fileChange', path: '/repo/docs/a.md', status: 'rejected' } }));
  await host(page, ev(4, { type: 'turn.failed', message: hintMessage }));
  await page.waitForSelector('.msg[data-id="A2"] .turn-error');

  const summary = await norm(a2.locator('.activity-summary'));
  assert.match(summary, /1 file \+3 −1/, 'the rejected change is out of the file count and the totals');
  assert.doesNotMatch(summary, /2 files/);
  assert.match(summary, /1 not applied/);
  assert.equal(await a2.locator('.activity-summary .not-applied .codicon-circle-slash').count(), 1);

  const rejected = a2.locator('.filechange[data-path="/repo/docs/a.md"]');
  assert.equal(await rejected.evaluate((d) => d.classList.contains('rejected')), true);
  assert.match(await norm(rejected.locator('summary')), /not applied/);
  assert.equal(await rejected.locator('summary > .codicon-circle-slash').count(), 1, 'codicon in place of the file icon');
  assert.equal(await rejected.locator('.badge.not-applied .codicon-circle-slash').count(), 1);
  assert.equal(await rejected.locator('.fc-revert, .fc-apply').count(), 0, 'no apply or revert for a write that never happened');
  const diffBtn = rejected.locator('.fc-diff');
  assert.equal(await diffBtn.getAttribute('title'), 'Open proposed diff (not applied)');
  // Muted: its summary is drawn in a different (dimmer) colour than the applied change's.
  const applied = a2.locator('.filechange[data-path="/repo/README.md"]');
  const colour = (loc) => loc.locator('summary').evaluate((s) => getComputedStyle(s).color);
  assert.notEqual(await colour(rejected), await colour(applied));
  assert.equal(await applied.locator('.fc-revert').count(), 1, 'the written change can still be reverted');
  assert.equal(await applied.locator('.not-applied').count(), 0);
  // The proposed diff still opens (the host labels it "proposed, not applied"); Review covers the written file.
  await diffBtn.click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'openDiff', path: '/repo/docs/a.md', messageId: 'A2' });
  assert.equal(await a2.locator('.activity .actions button', { hasText: 'Review all changes' }).count(), 1);

  // The failed turn: the whole message including the hint, wrapped inside the panel, not cut.
  const err = a2.locator('.turn-error');
  assert.equal((await err.locator('.turn-error-text').textContent()), hintMessage);
  const box = await err.locator('.turn-error-text').evaluate((e) => ({
    ws: getComputedStyle(e).whiteSpace, sw: e.scrollWidth, cw: e.clientWidth, h: e.getBoundingClientRect().height,
    line: parseFloat(getComputedStyle(e).lineHeight) || parseFloat(getComputedStyle(e).fontSize) * 1.2,
    right: e.getBoundingClientRect().right, panel: document.querySelector('.transcript').getBoundingClientRect().right,
  }));
  assert.equal(box.ws, 'pre-wrap');
  assert.ok(box.sw <= box.cw, `no horizontal overflow (${box.sw} > ${box.cw})`);
  assert.ok(box.h > 2 * box.line, `wrapped over several lines (${box.h} px)`);
  assert.ok(box.right <= box.panel, 'inside the panel');
  assert.equal(await a2.locator('.turn-error').count(), 1);
  await err.scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(artifacts, 'webview-rejected.png'), fullPage: false });
  assert.deepEqual(errors, []);
  await page.close();
});

test('a stored turn whose every change was rejected shows no file count and no Review', async () => {
  const snap = snapshot();
  snap.permissions = [];
  snap.running = undefined;
  snap.messages = [
    snap.messages[0],
    { id: 'A1', role: 'assistant', agent: 'codex', timestamp: 1764496000010, status: 'failed', error: 'write refused; see `ochatd doctor`', segments: [
      { type: 'tool', id: 't1', name: 'Write a.go', status: 'error', error: 'permission rejected' },
      { type: 'fileChange', path: '/repo/a.go', additions: 4, deletions: 0, oldText: null, newText: 'package a\n', status: 'rejected', toolCallId: 't1' },
    ] },
  ];
  const { page, errors } = await open(browser);
  await host(page, init(snap));
  await page.waitForSelector('.msg[data-id="A1"] .activity-summary');
  const a1 = page.locator('.msg[data-id="A1"]');
  const summary = await norm(a1.locator('.activity-summary'));
  assert.doesNotMatch(summary, /\bfiles?\b/);
  assert.doesNotMatch(summary, /\+4/);
  assert.match(summary, /1 not applied/);
  await a1.locator('.activity-summary').click();
  assert.equal(await a1.locator('.activity .actions').count(), 0, 'no Review all changes');
  assert.equal(await a1.locator('.filechange.rejected .fc-revert, .filechange.rejected .fc-apply').count(), 0);
  assert.equal(await a1.locator('.filechange.rejected .fc-diff').count(), 1);
  // Expanding it shows the proposed diff.
  await a1.locator('.filechange summary').click();
  assert.match(await a1.locator('.filechange .diff').innerText(), /\+package a/);
  assert.equal(await a1.locator('.turn-error-text').textContent(), 'write refused; see `ochatd doctor`');
  // The turn is retried elsewhere and the stored copy now succeeds: the error goes away.
  await host(page, { type: 'init', snapshot: { ...snap, messages: [snap.messages[0], { ...snap.messages[1], status: 'completed', error: undefined, segments: [] }] }, agents: init().agents, selectedAgent: 'claude', connection: { state: 'running' } });
  await page.waitForSelector('.msg[data-id="A1"] .turn-error', { state: 'detached' });
  assert.deepEqual(errors, []);
  await page.close();
});
