// The 5,000-line streaming scenario shared by render.test.mjs (figures) and
// stream-bench.mjs (repeated runs, attribution): a streaming assistant
// message receives 5,000 content.delta events, 100 lines per 4 ms macrotask
// like a fast agent (paragraphs and 400-line Go code blocks), while a
// requestAnimationFrame loop records frame lengths and a 10 ms interval
// records main-thread lag. Nothing here asserts a time.
import { snapshot, init } from './fixture.mjs';
import { host } from './harness.mjs';

/** streamInit is the init message with an empty streaming answer S. */
export function streamInit() {
  const snap = snapshot();
  snap.messages = [snap.messages[0], { id: 'S', role: 'assistant', agent: 'claude', timestamp: Date.now(), status: 'streaming', segments: [] }];
  snap.running = { turnId: 'S', messageId: 'S', agent: 'claude', startedAt: Date.now() };
  snap.permissions = [];
  return init(snap);
}

/** listLine is line j of an answer that is one long list (1-based): 1,000-item lists, each item with a nested line. */
export function listLine(j) {
  const k = j % 2000;
  if (k === 0) return `\nDone with part ${j / 2000}.\n\n`;
  return k % 2 ? `- item ${j} with **bold** and \`code\`\n` : `  continued ${j}\n`;
}

/** streamLine is line j of the streamed answer (1-based), with the fences around it. */
export function streamLine(j) {
  const k = j % 500;
  let s = '';
  if (k === 1) s += '```go\n';
  s += k >= 1 && k <= 400 ? `\tx := compute(${j}) // line ${j}\n` : `Paragraph line ${j} with **bold** and \`code\`.\n\n`;
  if (k === 400) s += '```\n\n';
  return s;
}

/**
 * runStream gives an opened page the conversation, waits idleMs (the panel is
 * idle a moment before an answer streams while the user types; it warms its
 * renderer then), streams the answer (each line an event, or chunk-character
 * pieces when chunk is set) and returns the figures:
 * events, posted (ms to post them all), done (ms until line 5000 is on
 * screen), final (ms for the turn end's render), frames (render frames the
 * webview counted), maxFrame / p95Frame (ms between animation frames while
 * streaming), maxLag (ms), longFrames (long-animation-frame entries, when
 * Chromium reports them: duration, script and style/layout ms).
 */
export async function runStream(page, { N = 5000, idleMs = 500, lines = streamLine, marker = (n) => `line ${n} with`, chunk = 0 } = {}) {
  await host(page, streamInit());
  if (idleMs) await page.waitForTimeout(idleMs);
  return page.evaluate(async ({ N, lineSrc, markerSrc, chunk }) => {
    const line = new Function('j', lineSrc);
    const marker = new Function('n', markerSrc);
    let seq = 0;
    const send = (delta) => window.postMessage({ type: 'event', params: { conversationId: 'C1', turnId: 'S', messageId: 'S', agent: 'claude', event: { type: 'content.delta', seq: ++seq, delta } } }, '*');
    const loaf = [];
    let po;
    try {
      po = new PerformanceObserver((l) => { for (const e of l.getEntries()) loaf.push(e); });
      po.observe({ type: 'long-animation-frame' });
    } catch { /* not supported */ }
    let maxLag = 0;
    let last = performance.now();
    const probe = setInterval(() => { const now = performance.now(); maxLag = Math.max(maxLag, now - last - 10); last = now; }, 10);
    const gaps = [];
    let lf = performance.now();
    let stop = false;
    const raf = () => { const now = performance.now(); gaps.push(now - lf); lf = now; if (!stop) requestAnimationFrame(raf); };
    requestAnimationFrame(raf);
    const frames0 = window.__ochatFrames ?? 0;
    const start = performance.now();
    for (let i = 1; i <= N; i += 100) {
      if (!chunk) for (let j = i; j < i + 100 && j <= N; j++) send(line(j));
      else {
        // token-sized pieces: most frames then end mid-line
        let s = '';
        for (let j = i; j < i + 100 && j <= N; j++) s += line(j);
        for (let p = 0; p < s.length; p += chunk) send(s.slice(p, p + chunk));
      }
      await new Promise((res) => setTimeout(res, 4));
    }
    const posted = performance.now() - start;
    const last1 = marker(N);
    while (!document.querySelector('.msg[data-id="S"] .content')?.textContent?.includes(last1)) {
      if (performance.now() - start > 60000) throw new Error(`line ${N} not rendered after 60 s`);
      await new Promise((res) => requestAnimationFrame(res));
    }
    const done = performance.now() - start;
    stop = true;
    clearInterval(probe);
    const t2 = performance.now();
    window.postMessage({ type: 'event', params: { conversationId: 'C1', turnId: 'S', messageId: 'S', agent: 'claude', event: { type: 'turn.completed', seq: ++seq, stopReason: 'end_turn' } } }, '*');
    await new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(res)));
    const final = performance.now() - t2;
    await new Promise((res) => setTimeout(res, 50));
    po?.disconnect();
    const sorted = gaps.slice(1).sort((a, b) => a - b);
    return {
      events: N, posted, done, final, frames: (window.__ochatFrames ?? 0) - frames0,
      maxFrame: sorted.at(-1) ?? 0, p95Frame: sorted[Math.floor(sorted.length * 0.95)] ?? 0, rafFrames: sorted.length,
      maxLag,
      longFrames: loaf.filter((e) => e.startTime >= start).map((e) => ({
        at: Math.round(e.startTime - start), duration: Math.round(e.duration),
        script: Math.round(e.scripts.reduce((s, x) => s + x.duration, 0)),
        styleLayout: Math.round(e.duration - (e.styleAndLayoutStart - e.startTime)),
        scripts: e.scripts.map((x) => `${x.invoker}:${Math.round(x.duration)}ms(layout ${Math.round(x.forcedStyleAndLayoutDuration)})`).join(' '),
      })),
    };
  }, { N, lineSrc: `return (${lines.toString()})(j);`, markerSrc: `return (${marker.toString()})(n);`, chunk });
}
