import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { saveWorkspaceAttachment, GITIGNORE } from '../../src/ui/attachments';

test('pasted images go to .ochat/attachments, content-addressed, with a .ochat/.gitignore written once', async (t) => {
  const ws = mkdtempSync(join(tmpdir(), 'ochat-att-'));
  t.after(() => rmSync(ws, { recursive: true, force: true }));
  const png = Buffer.from('89504e470d0a1a0a', 'hex');
  const a = await saveWorkspaceAttachment(ws, png, 'image/png');
  assert.match(a, new RegExp(`^${ws}/\\.ochat/attachments/[0-9a-f]{32}\\.png$`));
  assert.deepEqual(readFileSync(a), png);
  assert.equal(readFileSync(join(ws, '.ochat/.gitignore'), 'utf8'), GITIGNORE);
  assert.equal(await saveWorkspaceAttachment(ws, png, 'image/png'), a, 'the same image is one file');
  const b = await saveWorkspaceAttachment(ws, Buffer.from('<svg/>'), 'image/svg+xml');
  assert.match(b, /\.svg$/);
  assert.equal(readdirSync(join(ws, '.ochat/attachments')).length, 2);
});

test('an existing .ochat/.gitignore is left alone; an unwritable workspace says where it failed', async (t) => {
  const ws = mkdtempSync(join(tmpdir(), 'ochat-att-'));
  t.after(() => rmSync(ws, { recursive: true, force: true }));
  mkdirSync(join(ws, '.ochat'));
  writeFileSync(join(ws, '.ochat/.gitignore'), 'mine\n');
  await saveWorkspaceAttachment(ws, Buffer.from('x'), 'image/gif');
  assert.equal(readFileSync(join(ws, '.ochat/.gitignore'), 'utf8'), 'mine\n');
  writeFileSync(join(ws, 'file'), '');
  await assert.rejects(saveWorkspaceAttachment(join(ws, 'file'), Buffer.from('x'), 'image/png'), /save pasted image to .*file\/\.ochat\/attachments/);
});
