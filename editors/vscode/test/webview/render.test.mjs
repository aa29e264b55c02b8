// The chat webview rendered alone in headless Chromium with a stub host:
// DOM assertions on a scripted conversation, a screenshot, and the figures
// for first paint and a 5,000-line stream (printed, not asserted).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { launch, open, host, posted, artifacts } from './harness.mjs';
import { init, snapshot, permission } from './fixture.mjs';
import { runStream } from './stream.mjs';
import { texts } from './texts.mjs';
import { markdownDoc } from './gen.mjs';

let browser;
/** norm returns an element's visible text with whitespace runs as one space (flex items break lines in innerText). */
const norm = async (loc) => (await loc.innerText()).replace(/\s+/g, ' ').trim();
const figures = {};
before(async () => { browser = await launch(); });
after(async () => {
  await browser?.close();
  writeFileSync(join(artifacts, 'webview-figures.json'), JSON.stringify(figures, null, 2));
  for (const [k, v] of Object.entries(figures)) console.log(`# figure ${k}: ${v}`);
});

test('renders a conversation: activity summary, markdown, highlighting, sanitising, permission', async () => {
  const { page, errors } = await open(browser, { height: 1400 });
  assert.deepEqual(await posted(page), [{ type: 'ready', conversationId: undefined }]);
  await host(page, init());
  await page.waitForSelector('.msg.assistant[data-id="A1"] .content .md-block');
  const a1 = page.locator('.msg[data-id="A1"]');
  const summary = (await a1.locator('.activity-summary').innerText()).replace(/\s+/g, ' ');
  assert.match(summary, /thought/);
  assert.match(summary, /3 tool calls \(2 completed, 1 error\)/);
  assert.match(summary, /plan 2\/3/);
  assert.match(summary, /1 file \+2 −1/);
  assert.equal(await a1.locator('.tool').count(), 3);
  assert.equal(await a1.locator('.tool-error').count(), 1);
  assert.equal(await a1.locator('.plan li').count(), 3);
  assert.ok(await a1.locator('.content .hljs-keyword').count() > 0, 'go code is highlighted');
  assert.equal(await a1.locator('.content table td').count(), 2);
  assert.equal(await a1.locator('.content img').count(), 0, 'raw HTML is not rendered');
  assert.match(await a1.locator('.content').innerText(), /<img src=x onerror=/);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  // the finished turn's summary is collapsed; open it, then the file change: diff computed from old/new text
  assert.equal(await a1.locator('details.activity').evaluate((d) => d.open), false);
  await a1.locator('.activity-summary').click();
  await a1.locator('.filechange summary').first().click();
  assert.match(await a1.locator('.filechange .diff').innerText(), /-for i := 0; i < n-1; i\+\+ \{\n\+for i := 0; i < n; i\+\+ \{/);
  // permission: tool, input, both files' diffs, one button per option
  const perm = page.locator('.permission[data-permission="P1"]');
  assert.match(await norm(perm.locator('.perm-head')), /claude wants to run: Write README\.md, docs\/a\.md/);
  assert.equal(await perm.locator('.perm-input').count(), 0, 'with diffs shown, the raw input only repeats them');
  assert.equal(await perm.locator('.filechange .diff').count(), 2, 'every file of the request shows its diff');
  // Allow once comes first and is the only primary button; "Always Allow" is a secondary choice.
  assert.deepEqual((await perm.locator('.perm-option').allInnerTexts()).map((s) => s.trim()), ['Allow', 'Always Allow', 'Reject']);
  assert.deepEqual(await perm.locator('.perm-option.primary').evaluateAll((b) => b.map((x) => x.dataset.option)), ['allow']);
  // working indicator, cancel button, composer config options from agentState
  assert.match(await norm(page.locator('.working')), /claude is working… \d+ s/);
  assert.equal(await page.locator('.cancel:not(.hidden)').count(), 1);
  assert.deepEqual(await page.locator('select.cfg[data-config="model"] option').allInnerTexts(), ['Sonnet', 'Opus']);
  assert.match(await page.locator('.usage').innerText(), /26% context/);
  assert.equal(await page.locator('select.agent option[disabled]').innerText(), 'gemini (unavailable)');
  assert.equal(await page.locator('.trust.hidden').count(), 1, 'no trust notice without untrusted agents');
  await host(page, { type: 'agents', agents: [...init().agents, { name: 'local', available: false, untrusted: true, reason: 'workspace settings are not trusted' }], selectedAgent: 'claude' });
  await page.waitForSelector('.trust:not(.hidden)');
  assert.equal(await page.locator('select.agent option[value="local"]').innerText(), 'local (untrusted)');
  await page.locator('.trust button').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'trustWorkspace' });
  await page.screenshot({ path: join(artifacts, 'webview.png'), fullPage: false });
  // answering posts the option; the resolution removes the card
  await perm.locator('.perm-option[data-option="allow"]').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'respondPermission', permissionId: 'P1', optionId: 'allow' });
  await host(page, { type: 'permissionResolved', params: { permissionId: 'P1', conversationId: 'C1', optionId: 'allow', outcome: 'selected' } });
  await page.waitForSelector('.permission', { state: 'detached' });
  // a tool the user expanded stays expanded while the turn streams on
  const a2 = page.locator('.msg[data-id="A2"]');
  await a2.locator('.tool[data-tool="w1"] > summary').click();
  await host(page, { type: 'event', params: { conversationId: 'C1', turnId: 'A2', messageId: 'A2', agent: 'claude', event: { type: 'activity.upsert', seq: 1, segment: { type: 'tool', id: 'w1', status: 'running' } } } });
  await page.waitForSelector('.msg[data-id="A2"] .tool-running');
  assert.equal(await a2.locator('.tool[data-tool="w1"]').evaluate((d) => d.open), true);
  // open diff posts to the host
  await a1.locator('.filechange .fc-actions button[title="Open diff"]').click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'openDiff', path: '/repo/parser.go', messageId: 'A1' });
  assert.deepEqual(errors, []);
  await page.close();
});

test('composer: slash commands, @ mentions, send, and state restored after reload', async () => {
  const snap = snapshot();
  snap.running = undefined;
  snap.permissions = [];
  snap.messages = snap.messages.slice(0, 2);
  const { page, errors } = await open(browser);
  await host(page, init(snap));
  const input = page.locator('textarea.input');
  await input.fill('/');
  await input.press('End');
  await input.dispatchEvent('input');
  await page.waitForSelector('.popup:not(.hidden) .popup-item');
  assert.deepEqual(await page.locator('.popup-label').allInnerTexts(), ['/review', '/compact']);
  await input.press('ArrowDown');
  await input.press('Enter');
  assert.equal(await input.inputValue(), '/compact ');
  await input.fill('look at @pars');
  await input.dispatchEvent('input');
  assert.deepEqual((await posted(page)).at(-1), { type: 'mention', query: 'pars' });
  await host(page, { type: 'mentionResults', query: 'pars', files: ['src/parser.go', 'src/parser_test.go'] });
  await page.waitForSelector('.popup:not(.hidden)');
  await input.press('Enter');
  assert.equal(await input.inputValue(), 'look at @src/parser.go ');
  assert.equal(await page.locator('.composer .chips .chip').count(), 1);
  await input.press('Enter');
  assert.deepEqual((await posted(page)).at(-1), {
    type: 'send', text: 'look at @src/parser.go', agent: 'claude', attachments: [{ kind: 'file', path: 'src/parser.go', name: 'parser.go' }], id: 1,
  });
  // The text stays until the host says it went out.
  assert.equal(await input.inputValue(), 'look at @src/parser.go ');
  await host(page, { type: 'sendResult', id: 1, ok: true });
  await page.waitForFunction(() => document.querySelector('textarea.input').value === '');
  // a pasted image becomes an image attachment with its data (the host stores it as a file)
  await input.fill('what is in this picture?');
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array([137, 80, 78, 71])], 'shot.png', { type: 'image/png' }));
    document.querySelector('textarea.input').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
  });
  await page.waitForSelector('.composer .chips .chip');
  assert.match(await page.locator('.composer .chips .chip').innerText(), /shot\.png/);
  await input.press('Enter');
  assert.deepEqual((await posted(page)).at(-1), {
    type: 'send', text: 'what is in this picture?', agent: 'claude', attachments: [{ kind: 'image', name: 'shot.png', mimeType: 'image/png', size: 4, data: 'iVBORw==' }], id: 2,
  });
  await host(page, { type: 'sendResult', id: 2, ok: true });
  // a reload keeps the conversation id, the draft and the agent in getState
  await input.fill('half-written');
  await input.dispatchEvent('input');
  const state = await page.evaluate(() => window.__state);
  assert.equal(state.conversationId, 'C1');
  assert.equal(state.draft, 'half-written');
  const again = await open(browser, { state });
  assert.deepEqual(await posted(again.page), [{ type: 'ready', conversationId: 'C1' }]);
  assert.equal(await again.page.locator('textarea.input').inputValue(), 'half-written');
  assert.deepEqual([...errors, ...again.errors], []);
  await page.close();
  await again.page.close();
});

test('first paint of the panel with a stored conversation', async () => {
  const { page } = await open(browser);
  // time from the host answering "ready" to the transcript painted (next frame)
  const ms = await page.evaluate(async (msg) => {
    const t = performance.now();
    window.postMessage(msg, '*');
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    if (!document.querySelector('.msg.assistant .md-block')) throw new Error('not rendered');
    return performance.now() - t;
  }, init());
  const nav = await page.evaluate(() => {
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    return fcp ? fcp.startTime : -1;
  });
  figures['panel first contentful paint (ms from navigation)'] = nav.toFixed(0);
  figures['transcript paint after init (ms)'] = ms.toFixed(0);
  await page.close();
});

test('a 5,000-line streamed answer is batched per animation frame and stays responsive', async () => {
  const { page, errors } = await open(browser);
  const r = await runStream(page);
  assert.ok(r.frames < r.events / 5, `events are batched: ${r.frames} render frames for ${r.events} events`);
  assert.equal(await page.locator('.msg[data-id="S"] .content pre').count(), 10, '10 code blocks of 400 lines');
  assert.equal(await page.locator('.cancel.hidden').count(), 1, 'turn end hides cancel');
  // every code block ends up highlighted in full: 400 lines, each with its comment highlighted
  await page.waitForFunction(() => [...document.querySelectorAll('.msg[data-id="S"] .content pre code')].every((c) => c.querySelectorAll('.hljs-comment').length === 400), null, { timeout: 30000 });
  figures['stream 5000 lines: all rendered after (ms)'] = r.done.toFixed(0);
  figures['stream 5000 lines: render frames'] = r.frames;
  figures['stream 5000 lines: longest frame (ms)'] = r.maxFrame.toFixed(0);
  figures['stream 5000 lines: 95th percentile frame (ms)'] = r.p95Frame.toFixed(0);
  figures['stream 5000 lines: worst main-thread lag (ms)'] = r.maxLag.toFixed(0);
  figures['stream 5000 lines: final markdown render on turn end (ms)'] = r.final.toFixed(0);
  await page.screenshot({ path: join(artifacts, 'webview-stream.png') });
  assert.deepEqual(errors, []);
  await page.close();
});

/**
 * incremental feeds text to a fresh BlockRenderer in chunks (streaming), then
 * finishes it, and returns its HTML and whether its DOM equals the DOM of the
 * same text rendered in one go; also the blocks' HTML joined, which must equal
 * markdown-it + DOMPurify over the whole text. chunk: 'lines' or the largest
 * random chunk (chars); tight: a deadline of now, so each call does one step.
 */
function incremental({ text, seed, chunk, tight }) {
  const Renderer = window.__ochatBlockRenderer;
  let x = seed >>> 0;
  const rand = () => { x = (x + 0x6d2b79f5) >>> 0; let t = x; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
  const streamed = document.createElement('div');
  streamed.className = 'content';
  document.body.appendChild(streamed);
  const r = new Renderer(streamed);
  const deadline = () => (tight ? performance.now() : Infinity);
  for (let pos = 0; pos < text.length;) {
    pos = chunk === 'lines' ? (text.indexOf('\n', pos) + 1 || text.length) : Math.min(text.length, pos + 1 + Math.floor(rand() * chunk));
    r.update(text.slice(0, pos), true, deadline());
  }
  let calls = 1;
  while (!r.update(text, false, deadline())) if (++calls > 100000) throw new Error('renderer never finished');
  const once = document.createElement('div');
  once.className = 'content';
  document.body.appendChild(once);
  new Renderer(once).update(text, false, Infinity);
  const out = {
    html: streamed.innerHTML, onceHtml: once.innerHTML, sameDom: streamed.isEqualNode(once), calls,
    joined: [...streamed.children].map((e) => e.innerHTML).join(''), whole: window.__ochatRenderMarkdown(text),
  };
  streamed.remove();
  once.remove();
  return out;
}

test('a streamed message renders to the same DOM as the whole text in one go (fences, lists, tables, refs, sanitised HTML)', async () => {
  const { page, errors } = await open(browser);
  for (const [name, text] of Object.entries(texts)) {
    for (const mode of [{ chunk: 'lines', tight: false }, { chunk: 3, tight: true, seed: 1 }, { chunk: 40, tight: true, seed: 2 }, { chunk: 40, tight: false, seed: 3 }, { chunk: 400, tight: true, seed: 4 }]) {
      const r = await page.evaluate(incremental, { text, seed: 0, ...mode });
      const what = `${name} ${JSON.stringify(mode)}`;
      assert.equal(r.html, r.onceHtml, `${what}: streamed HTML equals the one-go HTML`);
      assert.ok(r.sameDom, `${what}: streamed DOM equals the one-go DOM (text nodes included)`);
      assert.equal(r.joined, r.whole, `${what}: the blocks together equal markdown-it over the whole text`);
    }
  }
  // the checks above can fail: sanity of what was rendered
  const fences = await page.evaluate(incremental, { text: texts.fences, seed: 5, chunk: 7, tight: true });
  assert.match(fences.html, /<span class="hljs-comment">\/\* a block comment\n \* spanning line 0/, 'a comment spanning pieces is one token');
  assert.match(fences.html, /<code class="language-python">/);
  assert.match(fences.html, /<code class="language-text">plain &lt;b&gt;text&lt;\/b&gt;/);
  const html = await page.evaluate(incremental, { text: texts.html, seed: 6, chunk: 5, tight: true });
  const unsafe = await page.evaluate((html) => {
    const d = document.createElement('div');
    d.innerHTML = html;
    return [...d.querySelectorAll('*')].flatMap((e) => [
      ...(/^(script|style|form|input|iframe)$/i.test(e.tagName) ? [e.tagName] : []),
      ...[...e.attributes].filter((a) => /^on/i.test(a.name) || /^\s*javascript:/i.test(a.value) || a.name === 'style').map((a) => `${e.tagName} ${a.name}`),
    ]);
  }, html.html);
  assert.deepEqual(unsafe, [], 'no script, style, form or input element, no handler, style or javascript: attribute');
  assert.match(html.html, /&lt;script&gt;/, 'raw HTML is shown as text');
  const refs = await page.evaluate(incremental, { text: texts.refs, seed: 7, chunk: 4, tight: true });
  assert.equal((refs.html.match(/href="https:\/\/example.com\/docs"/g) ?? []).length, 4, 'a link defined after its use resolves everywhere');
  const lists = await page.evaluate(incremental, { text: texts.lists, seed: 8, chunk: 2, tight: true });
  assert.match(lists.html, /<ul>\n<li>\n<p>a<\/p>/, 'a list made loose by a later item renders loose from its first item');
  assert.match(lists.html, /<ol start="3">/);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.deepEqual(errors, []);
  await page.close();
});

test('random Markdown documents stream to the same DOM as in one go', async () => {
  const { page, errors } = await open(browser);
  for (let seed = 1; seed <= 60; seed++) {
    const text = markdownDoc(seed);
    for (const mode of [{ chunk: 3, tight: true, seed }, { chunk: 25, tight: false, seed: seed + 1000 }]) {
      const r = await page.evaluate(incremental, { text, ...mode });
      const what = `document ${seed} ${JSON.stringify(mode)}: ${JSON.stringify(text)}`;
      assert.ok(r.html === r.onceHtml && r.sameDom, `${what}: streamed DOM equals the one-go DOM`);
      assert.equal(r.joined, r.whole, `${what}: the blocks together equal markdown-it over the whole text`);
    }
  }
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.deepEqual(errors, []);
  await page.close();
});

test('the chat panel renders a streamed answer like the stored one (events split mid-fence and mid-line)', async () => {
  const text = Object.values(texts).slice(0, -1).join('\n\n');
  const streamedPage = await open(browser);
  const { page } = streamedPage;
  const snap = snapshot();
  snap.messages = [snap.messages[0], { id: 'S', role: 'assistant', agent: 'claude', timestamp: Date.now(), status: 'streaming', segments: [] }];
  snap.running = { turnId: 'S', messageId: 'S', agent: 'claude', startedAt: Date.now() };
  snap.permissions = [];
  await host(page, init(snap));
  await page.evaluate(async (text) => {
    let seq = 0;
    const send = (event) => window.postMessage({ type: 'event', params: { conversationId: 'C1', turnId: 'S', messageId: 'S', agent: 'claude', event: { seq: ++seq, ...event } } }, '*');
    for (let pos = 0, k = 0; pos < text.length; k++) {
      const next = Math.min(text.length, pos + 1 + ((k * 37) % 90));
      send({ type: 'content.delta', delta: text.slice(pos, next) });
      pos = next;
      if (k % 3 === 0) await new Promise((r) => requestAnimationFrame(r));
    }
    send({ type: 'turn.completed', stopReason: 'end_turn' });
  }, text);
  const stored = await open(browser);
  const done = { ...snap.messages[1], status: 'completed', stopReason: 'end_turn', segments: [{ type: 'content', content: text }] };
  await host(stored.page, init({ ...snap, messages: [snap.messages[0], done], running: undefined }));
  await stored.page.waitForSelector('.msg[data-id="S"] .content .md-block');
  const want = await stored.page.locator('.msg[data-id="S"] .content').innerHTML();
  await page.waitForFunction((want) => document.querySelector('.msg[data-id="S"] .content')?.innerHTML === want, want, { timeout: 20000 })
    .catch(() => {});
  assert.equal(await page.locator('.msg[data-id="S"] .content').innerHTML(), want);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.deepEqual([...streamedPage.errors, ...stored.errors], []);
  await page.close();
  await stored.page.close();
});
