import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ConversationModel } from '../../src/model/conversation';
import type { EventParams, PermissionParams } from '../../src/model/protocol';

const conv = { id: 'C', title: 't', createdAt: 1, updatedAt: 2 };
const ev = (seq: number, delta: string, type = 'content.delta'): EventParams => ({
  conversationId: 'C', turnId: 'T', messageId: 'A', agent: 'claude', event: { type, seq, delta },
});
const perm: PermissionParams = {
  permissionId: 'P', conversationId: 'C', turnId: 'T', agent: 'claude',
  toolCall: { type: 'tool', id: 't1', name: 'Write a.txt' }, fileChanges: [{ type: 'fileChange', path: 'a.txt', diff: '+x' }],
  options: [{ optionId: 'allow', name: 'Allow', kind: 'allow_once' }],
};

test('fromSubscribe replays the running turn over the stored placeholder, then drops duplicates', () => {
  const m = ConversationModel.fromSubscribe({
    conversation: conv,
    messages: [
      { id: 'U', role: 'user', timestamp: 10, content: 'hi' },
      { id: 'A', role: 'assistant', timestamp: 11, status: 'streaming', segments: [{ type: 'content', content: 'stale' }] },
    ],
    running: { turnId: 'T', assistantMessageId: 'A', agent: 'claude', events: [{ type: 'content.delta', seq: 1, delta: 'Hel' }, { type: 'content.delta', seq: 2, delta: 'lo' }] },
    permissions: [perm],
  }, 100);
  assert.equal(m.message('A')!.segments![0].content, 'Hello');
  assert.deepEqual(m.running, { turnId: 'T', messageId: 'A', agent: 'claude', startedAt: 11 });
  assert.equal(m.permissions.size, 1);
  assert.equal(m.applyEvent(ev(2, 'lo'), 100), undefined, 'seq 2 already applied');
  assert.ok(m.applyEvent(ev(3, '!'), 100));
  assert.equal(m.message('A')!.segments![0].content, 'Hello!');
});

test('lastSeq of the answer covers events even when the replay holds fewer', () => {
  const m = ConversationModel.fromSubscribe({
    conversation: conv, messages: [{ id: 'A', role: 'assistant', timestamp: 1, status: 'streaming' }],
    running: { turnId: 'T', assistantMessageId: 'A', agent: 'claude', events: [{ type: 'content.delta', seq: 1, delta: 'a' }], lastSeq: 3 },
  }, 1);
  assert.equal(m.applyEvent(ev(3, 'x'), 1), undefined);
  m.applyEvent(ev(4, 'b'), 1);
  assert.equal(m.message('A')!.segments![0].content, 'ab');
});

test('a truncated replay starts from the partial message and lastSeq', () => {
  const m = ConversationModel.fromSubscribe({
    conversation: conv, messages: [],
    running: { turnId: 'T', assistantMessageId: 'A', agent: 'claude', events: [], truncated: true, lastSeq: 500,
      message: { id: 'A', role: 'assistant', timestamp: 5, segments: [{ type: 'content', content: 'long' }] } },
  }, 100);
  assert.equal(m.applyEvent(ev(500, 'dup'), 100), undefined);
  m.applyEvent(ev(501, ' tail'), 100);
  assert.equal(m.message('A')!.segments![0].content, 'long tail');
});

test('events of another conversation are ignored; turn end clears running and its permissions', () => {
  const m = ConversationModel.fromSubscribe({ conversation: conv, messages: [] }, 1);
  assert.equal(m.applyEvent({ ...ev(1, 'x'), conversationId: 'OTHER' }, 1), undefined);
  m.applyEvent(ev(1, 'x'), 50);
  assert.equal(m.running?.turnId, 'T');
  assert.ok(m.addPermission(perm));
  assert.equal(m.addPermission({ ...perm, permissionId: 'Q', conversationId: 'OTHER' }), false);
  m.applyEvent({ ...ev(2, ''), event: { type: 'turn.completed', seq: 2, stopReason: 'end_turn' } }, 60);
  assert.equal(m.running, undefined);
  assert.equal(m.permissions.size, 0);
  assert.equal(m.message('A')!.status, 'completed');
});

test('fileChanges and lastTurnWithChanges find the turn to review', () => {
  const m = new ConversationModel();
  m.put({ id: 'A1', role: 'assistant', timestamp: 1, segments: [{ type: 'fileChange', path: 'x' }] });
  m.put({ id: 'U', role: 'user', timestamp: 2, content: 'more' });
  m.put({ id: 'A2', role: 'assistant', timestamp: 3, segments: [{ type: 'content', content: 'ok' }, { type: 'fileChange', path: 'y' }, { type: 'fileChange', path: 'z' }] });
  assert.equal(m.lastTurnWithChanges(), 'A2');
  assert.deepEqual(m.fileChanges('A2').map((c) => [c.segment.path, c.index]), [['y', 1], ['z', 2]]);
  assert.equal(m.fileChanges().length, 3);
});

test('a turn lasts from its start, not from its first event', () => {
  const m = new ConversationModel();
  m.conversation = { id: 'C', title: '', createdAt: 0, updatedAt: 0 };
  m.startTurn({ id: 'U', role: 'user', content: 'hi', timestamp: 1000 }, { id: 'A', turnId: 'A', agent: 'x' }, 1000);
  // The agent's first words come 5 s after the send; the user cancels 217 ms later.
  m.applyEvent({ conversationId: 'C', turnId: 'A', messageId: 'A', agent: 'x', event: { type: 'content.delta', seq: 1, timestamp: 6000, delta: 'a' } }, 6000);
  m.message('A')!.timestamp = 6000; // as when the message was first seen at its first event
  m.applyEvent({ conversationId: 'C', turnId: 'A', messageId: 'A', agent: 'x', event: { type: 'turn.completed', seq: 2, timestamp: 6217, stopReason: 'cancelled' } }, 6217);
  assert.equal(m.message('A')!.durationMs, 5217);
  assert.equal(m.message('A')!.status, 'cancelled');
});
