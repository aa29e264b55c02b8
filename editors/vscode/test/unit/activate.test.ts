import './fakeVscode';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { recorded, reset, registeredCommands, Uri } from './fakeVscode';
import { activate } from '../../src/extension';

function context() {
  const state = new Map<string, unknown>();
  return {
    subscriptions: [] as Array<{ dispose(): unknown }>,
    extensionUri: Uri.file('/ext'),
    globalStorageUri: Uri.file('/tmp/ochat-global'),
    extension: { packageJSON: { version: '0.1.0' } },
    workspaceState: { get: (k: string) => state.get(k), update: async (k: string, v: unknown) => void state.set(k, v) },
    globalState: { get: (k: string) => state.get(`global:${k}`), update: async (k: string, v: unknown) => void state.set(`global:${k}`, v) },
  };
}

test('activate registers every contributed command and reports a missing ochatd with the fix', async () => {
  reset();
  recorded.config = { path: '/nonexistent/ochatd' };
  const ctx = context();
  const { client } = await activate(ctx as never);
  const pkg = JSON.parse(readFileSync(join(__dirname, '../../../package.json'), 'utf8'));
  const contributed = pkg.contributes.commands.map((c: { command: string }) => c.command).sort();
  assert.deepEqual(registeredCommands().filter((c) => c.startsWith('ochat.')).sort(), contributed);
  for (let i = 0; i < 50 && !recorded.messages.some((m) => m.level === 'error'); i++) await new Promise((r) => setTimeout(r, 10));
  const err = recorded.messages.find((m) => m.level === 'error');
  assert.match(err!.text, /cannot run "\/nonexistent\/ochatd" \(ENOENT\)\. Install ochatd .* or set "ochat\.path"/);
  assert.deepEqual(err!.items, ['Open Settings', 'Retry']);
  assert.equal(client.state, 'missing');
  for (const d of ctx.subscriptions) d.dispose();
});
