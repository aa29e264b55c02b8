// Bench: runs the 5,000-line stream (stream.mjs) RUNS times (default 5) in
// headless Chromium, each in a fresh page, and prints one line per run and
// the ranges. PROFILE=1 also records a CPU profile of the last run and prints
// the functions with the most self time (build with NODE_ENV=development for
// readable names). IDLE_MS (default 500) is how long the panel is idle
// between getting the conversation and the first streamed event; 0 streams
// into a cold panel; KIND=list streams long lists instead; CHUNK=16 sends
// 16-character pieces instead of whole lines (frames end mid-line). Usage: node test/webview/stream-bench.mjs
import { launch, open } from './harness.mjs';
import { runStream, listLine } from './stream.mjs';

const runs = Number(process.env.RUNS ?? 5);
const browser = await launch();
const all = [];
for (let i = 0; i < runs; i++) {
  const { page, errors } = await open(browser);
  const profile = process.env.PROFILE === '1' && i === runs - 1;
  let cdp;
  if (profile) {
    cdp = await page.context().newCDPSession(page);
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
    await cdp.send('Profiler.start');
  }
  const r = await runStream(page, { idleMs: Number(process.env.IDLE_MS ?? 500), chunk: Number(process.env.CHUNK ?? 0), ...(process.env.KIND === 'list' ? { lines: listLine, marker: (n) => `continued ${n}` } : {}) });
  all.push(r);
  console.log(`run ${i + 1}: done ${r.done.toFixed(0)} ms, ${r.frames} render frames (${r.rafFrames} rAF), longest frame ${r.maxFrame.toFixed(1)} ms, p95 ${r.p95Frame.toFixed(1)} ms, worst lag ${r.maxLag.toFixed(0)} ms, final ${r.final.toFixed(0)} ms${errors.length ? ', errors: ' + errors.join('; ') : ''}`);
  if (process.env.VERBOSE === '1') for (const f of r.longFrames) console.log('  long frame', JSON.stringify(f));
  if (profile) {
    const { profile: p } = await cdp.send('Profiler.stop');
    const self = new Map();
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    const dt = new Map();
    p.samples.forEach((id, k) => dt.set(id, (dt.get(id) ?? 0) + (p.timeDeltas[k] ?? 0)));
    for (const [id, us] of dt) {
      const n = byId.get(id);
      const cf = n.callFrame;
      const key = `${cf.functionName || '(anon)'} ${cf.url.split('/').pop()}:${cf.lineNumber + 1}`;
      self.set(key, (self.get(key) ?? 0) + us);
    }
    for (const [k, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`  ${(us / 1000).toFixed(1).padStart(8)} ms  ${k}`);
  }
  await page.close();
}
await browser.close();
const range = (k, d = 0) => { const v = all.map((r) => r[k]); return `${Math.min(...v).toFixed(d)}–${Math.max(...v).toFixed(d)}`; };
console.log(`ranges over ${runs} runs: done ${range('done')} ms, render frames ${range('frames')}, longest frame ${range('maxFrame')} ms, p95 frame ${range('p95Frame')} ms, worst lag ${range('maxLag')} ms, final ${range('final')} ms`);
