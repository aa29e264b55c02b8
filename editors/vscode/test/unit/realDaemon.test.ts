// The extension's client plumbing (DaemonClient + ChatController) against a
// real ochatd and the scripted ACP test agent (including a rejected write the
// daemon marks "rejected"). Runs when OCHATD_BIN and
// TESTAGENT_BIN name the built binaries (scripts/ci.sh builds them), else skips.
import './fakeVscode';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { DaemonClient } from '../../src/client/daemon';
import { ChatController } from '../../src/ui/chatController';
import type { HostMessage } from '../../src/ui/messages';
import { summarize } from '../../src/model/reduce';
import { DiffDocuments, reviewTurn } from '../../src/ui/diffs';
import { recorded, reset as resetVscode } from './fakeVscode';

const ochatd = process.env.OCHATD_BIN;
const testagent = process.env.TESTAGENT_BIN;

async function until(cond: () => boolean, what: string, ms = 15000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('real ochatd + testagent: stream, permission, stored equals live, reconnect, a rejected write', { skip: !ochatd || !testagent ? 'set OCHATD_BIN and TESTAGENT_BIN' : false }, async () => {
  const root = mkdtempSync(join(tmpdir(), 'ochat-vscode-it-'));
  const ws = join(root, 'ws');
  mkdirSync(ws, { recursive: true });
  // User-level agent settings: workspace ones would need `ochatd trust` first.
  mkdirSync(join(root, 'config', 'ochat'), { recursive: true });
  writeFileSync(join(root, 'config', 'ochat', 'settings.json'), JSON.stringify({ agent_servers: { test: { command: testagent } } }));
  const env = { ...process.env, XDG_RUNTIME_DIR: join(root, 'run'), XDG_STATE_HOME: join(root, 'state'), XDG_CONFIG_HOME: join(root, 'config'), TESTAGENT_STATE: join(root, 'agent'), OCHATD_IDLE: '5s' };
  for (const d of ['run', 'state', 'config', 'agent']) mkdirSync(join(root, d), { recursive: true, mode: 0o700 });
  // Our own daemon with a short idle exit, so that the test leaves nothing running.
  const serve = (): ChildProcess => spawn(ochatd!, ['serve', '--workspace', ws, '--idle', '3s'], { env, stdio: 'ignore' });
  let daemon = serve();
  await new Promise((r) => setTimeout(r, 300));
  const client = new DaemonClient({ command: ochatd!, workspace: ws, env, backoffMs: 600 });
  client.on('connected', (_i, first: boolean) => { if (!first) void c.reconnected(); });
  const posted: HostMessage[] = [];
  const c = new ChatController(client, {});
  c.attach({ post: (m) => posted.push(m), visible: () => true, reveal: () => undefined });
  try {
    await client.start();
    await c.refreshAgents();
    assert.ok(c.agents.some((a) => a.name === 'test' && a.available), JSON.stringify(c.agents));
    await c.send('PLAIN hello from vscode', 'test');
    await until(() => !c.model.running, 'turn end');
    const answer = c.model.messages.find((m) => m.role === 'assistant')!;
    assert.equal(answer.status, 'completed');
    assert.equal(answer.segments?.filter((s) => s.type === 'content').map((s) => s.content).join(''), 'hello from vscode');

    await c.send('WRITE notes.txt hi\\nthere', 'test');
    await until(() => c.model.permissions.size === 1, 'permission');
    const perm = [...c.model.permissions.values()][0];
    assert.deepEqual(perm.options.map((o) => o.optionId).sort(), ['allow', 'always', 'reject']);
    assert.ok(posted.some((m) => m.type === 'permission'));
    await c.handle({ type: 'respondPermission', permissionId: perm.permissionId, optionId: 'allow' });
    await until(() => !c.model.running, 'turn end after permission');
    assert.equal(c.model.permissions.size, 0);
    assert.ok(posted.some((m) => m.type === 'permissionResolved'));
    assert.equal(readFileSync(join(ws, 'notes.txt'), 'utf8'), 'hi\nthere');
    const changes = c.model.fileChanges();
    assert.equal(changes.length, 1, JSON.stringify(c.model.messages.at(-1)));
    assert.match(changes[0].segment.path ?? '', /notes\.txt$/);

    // The stored conversation equals what was shown live.
    const id = c.model.conversation!.id;
    const live = JSON.stringify(c.model.messages.map((m) => [m.role, m.status, m.segments?.map((s) => s.type)]));
    await c.open(id);
    assert.equal(JSON.stringify(c.model.messages.map((m) => [m.role, m.status, m.segments?.map((s) => s.type)])), live);

    // The daemon restarts: the client reconnects and re-subscribes the open conversation.
    const reconnected = once(client, 'connected');
    daemon.kill('SIGTERM');
    await once(daemon, 'exit');
    daemon = serve();
    await reconnected;
    await until(() => c.model.conversation?.id === id && c.model.messages.length === 4, 're-subscribe');
    await c.send('PLAIN again', 'test');
    await until(() => !c.model.running, 'turn after reconnect');
    assert.equal(c.model.messages.length, 6);

    // A rejected write: the daemon marks the proposed change "rejected" at turn end, live and stored; it is left
    // out of the file counts and of the review, and the last turn that changed files is still the first write.
    const written = c.model.lastTurnWithChanges();
    await c.send('WRITE never.txt no', 'test');
    await until(() => c.model.permissions.size === 1, 'permission for the rejected write');
    const perm2 = [...c.model.permissions.values()][0];
    await c.handle({ type: 'respondPermission', permissionId: perm2.permissionId, optionId: 'reject' });
    await until(() => !c.model.running, 'turn end after reject');
    assert.equal(existsSync(join(ws, 'never.txt')), false);
    const rejectedTurn = c.model.messages.at(-1)!;
    const seg = rejectedTurn.segments?.find((s) => s.type === 'fileChange');
    assert.ok(seg, JSON.stringify(rejectedTurn));
    assert.equal(seg.status, 'rejected', 'live: the extra activity.upsert before turn.completed');
    assert.deepEqual([summarize(rejectedTurn).files, summarize(rejectedTurn).additions, summarize(rejectedTurn).notApplied], [0, 0, 1]);
    assert.equal(c.model.lastTurnWithChanges(), written);
    resetVscode();
    assert.equal(await reviewTurn(new DiffDocuments(), c.model, rejectedTurn.id), 0);
    assert.match(recorded.messages[0].text, /changed no files \(1 proposed change was not applied\)/);
    await c.open(id);
    const stored = c.model.messages.find((m) => m.id === rejectedTurn.id)!;
    assert.equal(stored.segments?.find((s) => s.type === 'fileChange')?.status, 'rejected', 'stored');
  } finally {
    await client.dispose();
    daemon.kill('SIGTERM');
    await once(daemon, 'exit');
    rmSync(root, { recursive: true, force: true });
  }
});
