import './fakeVscode';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { FakeRpc } from './fakeRpc';
import { buildHistory, relativeTime } from '../../src/model/historyTree';
import { HistoryProvider } from '../../src/ui/historyView';
import type { TreeItem } from './fakeVscode';

const convs = [
  { id: 'a', title: 'older', agents: ['claude'], createdAt: 1, updatedAt: 10 },
  { id: 'b', title: 'newer', agents: ['codex'], createdAt: 2, updatedAt: 20, running: true },
];
const sessions = [
  { agent: 'codex', sessionId: 's1', title: 'codex old', updatedAt: 5 },
  { agent: 'claude', sessionId: 's2', title: 'claude done', updatedAt: 50 },
  { agent: 'claude', sessionId: 's3', title: 'claude live', updatedAt: 40, live: true },
];

test('buildHistory: conversations flat when the daemon has no session list', () => {
  const roots = buildHistory(convs);
  assert.deepEqual(roots.map((n) => n.id), ['c:b', 'c:a']);
});

test('buildHistory: conversations group, then one group per agent, live sessions first', () => {
  const roots = buildHistory(convs, sessions);
  assert.deepEqual(roots.map((n) => n.kind === 'group' && [n.label, n.description]), [
    ['Conversations', '2'], ['claude terminal sessions', '2 · 1 live'], ['codex terminal sessions', '1'],
  ]);
  const claude = roots[1];
  assert.ok(claude.kind === 'group');
  assert.deepEqual(claude.children.map((n) => n.id), ['s:claude:s3', 's:claude:s2']);
});

test('relativeTime', () => {
  const now = 1_000_000_000;
  assert.equal(relativeTime(now - 5_000, now), 'just now');
  assert.equal(relativeTime(now - 5 * 60_000, now), '5 min ago');
  assert.equal(relativeTime(now - 3 * 3600_000, now), '3 h ago');
  assert.equal(relativeTime(now - 2 * 86400_000, now), '2 d ago');
  assert.equal(relativeTime(undefined, now), '');
});

test('HistoryProvider: items carry context values and commands; sessions list optional', async () => {
  const rpc = new FakeRpc();
  rpc.handlers.set('ochat/conversations/list', () => ({ conversations: convs }));
  const p = new HistoryProvider(rpc, () => 100);
  await p.refresh();
  let roots = await p.getChildren();
  assert.equal(roots.length, 2, 'no ochat/sessions/list: flat');
  const it = p.getTreeItem(roots[0]) as unknown as TreeItem;
  assert.equal(it.label, 'newer');
  assert.equal(it.contextValue, 'conversation');
  assert.equal((it.iconPath as { id: string }).id, 'loading~spin', 'running conversation spins');
  assert.equal(it.command?.command, 'ochat.history.continue');
  // -32601 is remembered: the list is not asked again.
  await p.refresh();
  assert.equal(rpc.methods().filter((m) => m === 'ochat/sessions/list').length, 1);

  const rpc2 = new FakeRpc();
  rpc2.handlers.set('ochat/conversations/list', () => ({ conversations: convs }));
  rpc2.handlers.set('ochat/sessions/list', () => ({ sessions }));
  const p2 = new HistoryProvider(rpc2, () => 100);
  await p2.refresh();
  roots = await p2.getChildren();
  assert.equal(roots.length, 3);
  const kids = await p2.getChildren(roots[1]);
  const live = p2.getTreeItem(kids[0]) as unknown as TreeItem;
  assert.equal(live.contextValue, 'session-live');
  assert.match(live.description!, /● live/);
  assert.equal(live.command?.command, 'ochat.history.open');
});

test('HistoryProvider: a daemon error empties the tree and keeps the message', async () => {
  const rpc = new FakeRpc();
  rpc.handlers.set('ochat/conversations/list', () => { throw new Error('ochatd is not connected'); });
  const p = new HistoryProvider(rpc);
  await p.refresh();
  assert.deepEqual(await p.getChildren(), []);
  assert.equal(p.error, 'ochatd is not connected');
});

test('buildHistory: sessions that are the daemon\'s own conversations are shown once; store field names normalised', () => {
  const roots = buildHistory(convs, [
    { agent: 'claude', sessionId: 'x1', conversationId: 'a' },
    { agent: 'claude', id: 'b' },
    { kind: 'conversation', agent: 'codex', id: 'zzz' },
    { provider: 'pi', sessionId: 'p1', summary: 'from pi', modifiedAt: 7 } as never,
  ]);
  assert.deepEqual(roots.map((n) => n.id), ['g:conversations', 'g:agent:pi']);
  const pi = roots[1];
  assert.ok(pi.kind === 'group' && pi.children[0].kind === 'session');
  const s = pi.children[0].kind === 'session' ? pi.children[0].session : undefined;
  assert.deepEqual([s?.agent, s?.title, s?.updatedAt], ['pi', 'from pi', 7]);
});
