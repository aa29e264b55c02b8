import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { applyEvent, summarize } from '../../src/model/reduce';
import type { Message, TranscriptEvent } from '../../src/model/protocol';

function run(events: TranscriptEvent[], start: Partial<Message> = {}): Message {
  const m: Message = { id: 'a', role: 'assistant', timestamp: 1000, segments: [], ...start };
  for (const e of events) applyEvent(m, e);
  return m;
}

test('applyEvent follows transcript.Apply', async (t) => {
  const cases: Array<{ name: string; events: TranscriptEvent[]; want: Partial<Message> }> = [
    {
      name: 'deltas of one kind merge, kinds alternate into new segments',
      events: [
        { type: 'reasoning.delta', delta: 'think ' },
        { type: 'reasoning.delta', delta: 'more' },
        { type: 'content.delta', delta: 'Hel' },
        { type: 'content.delta', delta: 'lo' },
        { type: 'content.delta', delta: '' },
      ],
      want: { status: 'streaming', segments: [{ type: 'reasoning', content: 'think more' }, { type: 'content', content: 'Hello' }] },
    },
    {
      name: 'tool upserted by id keeps its position; present fields overwrite, missing keep',
      events: [
        { type: 'activity.upsert', segment: { type: 'tool', id: 't1', name: 'Read a.go', status: 'pending', input: { p: 'a.go' } } },
        { type: 'content.delta', delta: 'x' },
        { type: 'activity.upsert', segment: { type: 'tool', id: 't1', status: 'completed', output: 'ok' } },
      ],
      want: {
        segments: [
          { type: 'tool', id: 't1', name: 'Read a.go', status: 'completed', input: { p: 'a.go' }, output: 'ok' },
          { type: 'content', content: 'x' },
        ],
      },
    },
    {
      name: 'fileChange upserted by path; a null oldText does not erase a known one but zero counts are kept',
      events: [
        { type: 'activity.upsert', segment: { type: 'fileChange', path: '/ws/a.txt', additions: 1, deletions: 0, oldText: 'a', newText: 'b' } },
        { type: 'activity.upsert', segment: { type: 'fileChange', path: '/ws/a.txt', status: 'applied', additions: 2 } },
      ],
      want: { segments: [{ type: 'fileChange', path: '/ws/a.txt', additions: 2, deletions: 0, oldText: 'a', newText: 'b', status: 'applied' }] },
    },
    {
      name: 'plan.updated replaces the single plan segment',
      events: [
        { type: 'plan.updated', entries: [{ content: 'one', status: 'pending' }] },
        { type: 'plan.updated', entries: [{ content: 'one', status: 'completed' }, { content: 'two', status: 'in_progress' }] },
      ],
      want: { segments: [{ type: 'plan', entries: [{ content: 'one', status: 'completed' }, { content: 'two', status: 'in_progress' }] }] },
    },
    {
      name: 'turn.completed sets status, stop reason and duration',
      events: [{ type: 'content.delta', delta: 'x' }, { type: 'turn.completed', stopReason: 'end_turn', timestamp: 1812 }],
      want: { status: 'completed', stopReason: 'end_turn', durationMs: 812 },
    },
    {
      name: 'stop reason cancelled means status cancelled',
      events: [{ type: 'turn.completed', stopReason: 'cancelled' }],
      want: { status: 'cancelled', stopReason: 'cancelled' },
    },
    {
      name: 'turn.failed keeps the message',
      events: [{ type: 'content.delta', delta: 'partial' }, { type: 'turn.failed', message: 'agent exited with code 1' }],
      want: { status: 'failed', error: 'agent exited with code 1', segments: [{ type: 'content', content: 'partial' }] },
    },
    {
      name: 'unknown event types change nothing',
      events: [{ type: 'vendor.thing', delta: 'x' }],
      want: { segments: [] },
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const m = run(c.events);
      for (const [k, v] of Object.entries(c.want)) assert.deepEqual((m as unknown as Record<string, unknown>)[k], v, k);
    });
  }
});

test('summarize counts tools by status, plan progress and file stats', () => {
  const m = run([
    { type: 'reasoning.delta', delta: 'hmm' },
    { type: 'activity.upsert', segment: { type: 'tool', id: '1', status: 'completed' } },
    { type: 'activity.upsert', segment: { type: 'tool', id: '2', status: 'completed' } },
    { type: 'activity.upsert', segment: { type: 'tool', id: '3', status: 'error' } },
    { type: 'plan.updated', entries: [{ content: 'a', status: 'completed' }, { content: 'b', status: 'pending' }] },
    { type: 'activity.upsert', segment: { type: 'fileChange', path: 'a', additions: 3, deletions: 1 } },
    { type: 'activity.upsert', segment: { type: 'fileChange', path: 'b', additions: 2 } },
  ]);
  assert.deepEqual(summarize(m), {
    reasoning: true, tools: { completed: 2, error: 1 }, toolCount: 3, planDone: 1, planTotal: 2, files: 2, additions: 5, deletions: 1, notApplied: 0,
  });
});

test('a fileChange marked rejected at turn end leaves the file counts (transcript.Summarize)', async (t) => {
  const cases: Array<{ name: string; events: TranscriptEvent[]; want: { files: number; additions: number; deletions: number; notApplied: number }; status: string }> = [
    {
      name: 'rejected upsert before turn.failed: counted as not applied only',
      events: [
        { type: 'activity.upsert', segment: { type: 'fileChange', path: '/ws/a.go', additions: 3, deletions: 1, newText: 'x' } },
        { type: 'activity.upsert', segment: { type: 'fileChange', path: '/ws/b.go', additions: 7, deletions: 2, newText: 'y' } },
        { type: 'activity.upsert', segment: { type: 'fileChange', path: '/ws/b.go', status: 'rejected' } },
        { type: 'turn.failed', message: 'agent exited; see `ochatd doctor`' },
      ],
      want: { files: 1, additions: 3, deletions: 1, notApplied: 1 },
      status: 'failed',
    },
    {
      name: 'every change rejected: no file, no totals',
      events: [
        { type: 'activity.upsert', segment: { type: 'fileChange', path: '/ws/a.go', additions: 3, status: 'rejected' } },
        { type: 'turn.completed', stopReason: 'end_turn' },
      ],
      want: { files: 0, additions: 0, deletions: 0, notApplied: 1 },
      status: 'completed',
    },
    {
      name: 'applied and reverted changes still count',
      events: [
        { type: 'activity.upsert', segment: { type: 'fileChange', path: '/ws/a.go', additions: 1, status: 'applied' } },
        { type: 'activity.upsert', segment: { type: 'fileChange', path: '/ws/b.go', deletions: 2, status: 'reverted' } },
        { type: 'turn.completed', stopReason: 'end_turn' },
      ],
      want: { files: 2, additions: 1, deletions: 2, notApplied: 0 },
      status: 'completed',
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => {
      const m = run(c.events);
      const s = summarize(m);
      assert.deepEqual({ files: s.files, additions: s.additions, deletions: s.deletions, notApplied: s.notApplied }, c.want);
      assert.equal(m.status, c.status);
    });
  }
});
