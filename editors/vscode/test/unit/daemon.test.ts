import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, chmodSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { DaemonClient } from '../../src/client/daemon';

function fakeDaemon(): { bin: string; log: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ochat-fake-'));
  const bin = join(dir, 'ochatd');
  const log = join(dir, 'starts.log');
  writeFileSync(bin, `#!/bin/sh\nFAKE_DAEMON_LOG='${log}' exec '${process.execPath}' '${join(__dirname, 'fixtures', 'fakeDaemon.js')}' "$@"\n`);
  chmodSync(bin, 0o755);
  return { bin, log, dir };
}

test('DaemonClient: spawns connect, initializes, routes notifications and requests, reconnects', async () => {
  const { bin, log, dir } = fakeDaemon();
  const c = new DaemonClient({ command: bin, workspace: '/tmp/ws', backoffMs: 20 });
  const events: unknown[] = [];
  c.onNotification('ochat/event', (p) => events.push(p));
  c.onRequest('workspace/applyEdit', () => ({ applied: true }));
  await c.start();
  assert.equal(c.state, 'running');
  assert.equal(c.info?.workspace, '/tmp/ws');
  assert.deepEqual((c.info as unknown as { echo: { clientInfo: { name: string }; capabilities: unknown } }).echo.capabilities, { workspace: { applyEdit: true }, window: { showDocument: { support: true } } });
  assert.deepEqual(await c.request('test/state'), { initialized: true });
  await c.request('test/notify');
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(events.length, 1);
  assert.deepEqual(await c.request('test/applyEdit'), { applied: true });

  const reconnected = once(c, 'connected');
  await c.request('test/exit');
  const [, first] = await reconnected;
  assert.equal(first, false, 'a reconnect is reported as not first');
  assert.equal(c.state, 'running');
  assert.deepEqual(await c.request('test/state'), { initialized: true });
  assert.equal(readFileSync(log, 'utf8').trim().split('\n').length, 2);
  assert.match(readFileSync(log, 'utf8'), /^start connect --workspace \/tmp\/ws/);
  await c.dispose();
  assert.equal(c.state, 'stopped');
  rmSync(dir, { recursive: true, force: true });
});

test('DaemonClient: a missing binary is reported with the fix', async () => {
  const c = new DaemonClient({ command: '/nonexistent/ochatd', workspace: '/tmp' });
  const states: string[] = [];
  c.on('state', (s) => states.push(s));
  await assert.rejects(c.start(), /Install ochatd or set "ochat.path"/);
  assert.equal(c.state, 'missing');
  assert.deepEqual(states, ['starting', 'missing']);
  await assert.rejects(c.request('ochat/conversations/list'), /ENOENT/);
});
