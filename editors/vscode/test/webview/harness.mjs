// Serves the built webview (dist/) alone in headless Chromium with a stub
// host: acquireVsCodeApi records posts and getState/setState, and the test
// posts host messages with window.postMessage. Used by render.test.mjs.
import { chromium } from 'playwright-core';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const artifacts = join(root, 'artifacts');
mkdirSync(artifacts, { recursive: true });

export const chromiumPath = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(existsSync);
export const chromiumArgs = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

const NONCE = 'testnonce123';
const html = `<!DOCTYPE html><html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src http://webview.test data:; font-src http://webview.test; style-src http://webview.test; script-src 'nonce-${NONCE}'">
<link href="http://webview.test/theme.css" rel="stylesheet">
<link href="http://webview.test/dist/codicon.css" rel="stylesheet">
<link href="http://webview.test/dist/webview.css" rel="stylesheet">
</head><body><div id="app"></div><script nonce="${NONCE}" src="http://webview.test/dist/webview.js"></script></body></html>`;

const types = { '.js': 'text/javascript', '.css': 'text/css', '.ttf': 'font/ttf' };

export async function launch() {
  if (!chromiumPath) throw new Error('chromium not found: apt-get install chromium (or set CHROMIUM_PATH)');
  return chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
}

/** open loads the webview in a fresh page; state is the webview's saved state (getState). */
export async function open(browser, { state, width = 480, height = 900 } = {}) {
  const page = await browser.newPage({ viewport: { width, height } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.addInitScript((saved) => {
    window.__posted = [];
    window.__state = saved;
    window.acquireVsCodeApi = () => ({
      postMessage: (m) => window.__posted.push(m),
      getState: () => window.__state,
      setState: (s) => { window.__state = s; },
    });
  }, state ?? null);
  await page.route('http://webview.test/**', (route) => {
    const url = new URL(route.request().url());
    if (url.pathname === '/index.html') return route.fulfill({ contentType: 'text/html', body: html });
    const file = url.pathname === '/theme.css' ? join(root, 'test/webview/theme-dark.css') : join(root, url.pathname);
    const ext = file.slice(file.lastIndexOf('.'));
    return route.fulfill({ contentType: types[ext] ?? 'application/octet-stream', body: readFileSync(file) });
  });
  await page.goto('http://webview.test/index.html');
  return { page, errors };
}

/** host posts one host → webview message. */
export function host(page, msg) {
  return page.evaluate((m) => window.postMessage(m, '*'), msg);
}

export function posted(page) {
  return page.evaluate(() => window.__posted);
}
