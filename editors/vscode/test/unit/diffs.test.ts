import './fakeVscode';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { recorded, reset, type WorkspaceEdit } from './fakeVscode';
import { lineDiff, parseUnifiedDiff, sidesFromUnifiedDiff } from '../../src/model/diffText';
import { DiffDocuments, applyChange, changeFile, fileSides, handleApplyEdit, openDiff, reviewTurn, sides, toWorkspaceEdit } from '../../src/ui/diffs';
import { FakeRpc } from './fakeRpc';
import { ConversationModel } from '../../src/model/conversation';
import { splitBlocks } from '../../webview/blocks';

const diff = '--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n@@ -9,1 +9,2 @@\n nine\n+ten\n';

test('sidesFromUnifiedDiff keeps context, splits removed and added lines', () => {
  assert.deepEqual(sidesFromUnifiedDiff(diff), { before: 'one\ntwo\nthree\n…\nnine\n', after: 'one\nTWO\nthree\n…\nnine\nten\n' });
});

test('parseUnifiedDiff classifies lines', () => {
  assert.deepEqual(parseUnifiedDiff(diff).map((l) => l.kind), ['meta', 'meta', 'hunk', 'ctx', 'del', 'add', 'ctx', 'hunk', 'ctx', 'add']);
});

test('lineDiff is an LCS line diff', () => {
  assert.deepEqual(lineDiff('a\nb\nc', 'a\nc\nd').map((l) => l.text), [' a', '-b', ' c', '+d']);
  assert.deepEqual(lineDiff('', 'x').map((l) => l.text), ['+x']);
});

test('sides prefers texts, falls back to hunks', () => {
  assert.deepEqual(sides({ type: 'fileChange', oldText: null, newText: 'n' }), { before: '', after: 'n', partial: false });
  assert.equal(sides({ type: 'fileChange', diff }).partial, true);
});

test('openDiff opens vscode.diff on two virtual documents', async () => {
  reset();
  const docs = new DiffDocuments();
  await openDiff(docs, { type: 'fileChange', path: '/ws/src/a.ts', oldText: 'old', newText: 'new', additions: 1, deletions: 1 });
  const call = recorded.commands.at(-1)!;
  assert.equal(call.id, 'vscode.diff');
  const [left, right, title] = call.args as [{ scheme: string; path: string }, unknown, string];
  assert.equal(left.scheme, 'ochat-diff');
  assert.equal(left.path, '/src/a.ts');
  assert.equal(docs.provideTextDocumentContent(left as never), 'old');
  assert.equal(docs.provideTextDocumentContent(right as never), 'new');
  assert.equal(title, 'a.ts (ochat +1 −1)');
});

test('applyChange: revert of a created file deletes it (oldText null or omitted)', async () => {
  reset();
  recorded.docs.set('file:///ws/new.txt', 'x');
  assert.equal(await applyChange({ type: 'fileChange', path: '/ws/new.txt', oldText: null, newText: 'x' }, 'revert'), true);
  assert.equal(await applyChange({ type: 'fileChange', path: '/ws/new.txt', newText: 'x', additions: 1, deletions: 0 }, 'revert'), true);
  assert.deepEqual(recorded.edits.map((e) => (e as WorkspaceEdit).ops.map((o) => o.op).join()), ['delete', 'delete']);
  assert.equal(recorded.messages.length, 0, 'no question: the file still holds what the change wrote');
});

test('applyChange: revert restores the old text over the whole document and saves it', async () => {
  reset();
  recorded.docs.set('file:///ws/a.txt', 'new\ntext');
  assert.equal(await applyChange({ type: 'fileChange', path: 'a.txt', oldText: 'old', newText: 'new\ntext', additions: 2, deletions: 1 }, 'revert'), true);
  const op = (recorded.edits[0] as WorkspaceEdit).ops[0] as { op: string; text: string; range: { end: { line: number; character: number } } };
  assert.deepEqual([op.op, op.text, op.range.end.line, op.range.end.character], ['replace', 'old', 1, 4]);
  assert.deepEqual(recorded.saved, ['file:///ws/a.txt']);
});

test('applyChange: a file changed since the turn asks before overwriting; unknown texts refuse', async () => {
  reset();
  recorded.docs.set('file:///ws/a.txt', 'edited by the user');
  recorded.answers.push(undefined);
  assert.equal(await applyChange({ type: 'fileChange', path: 'a.txt', oldText: 'old', newText: 'new' }, 'revert'), false);
  assert.match(recorded.messages[0].text, /a\.txt has changed since this turn/);
  assert.equal(recorded.edits.length, 0);
  recorded.answers.push('Overwrite');
  assert.equal(await applyChange({ type: 'fileChange', path: 'a.txt', oldText: 'old', newText: 'new' }, 'revert'), true);
  assert.equal(await applyChange({ type: 'fileChange', path: 'rel.txt', diff }, 'revert'), false);
  assert.match(recorded.messages.at(-1)!.text, /unknown; cannot revert/);
});

test('reviewTurn walks every file of the turn until Stop', async () => {
  reset();
  const m = new ConversationModel();
  m.put({ id: 'A', role: 'assistant', timestamp: 1, segments: [
    { type: 'fileChange', path: '/ws/a', oldText: '1', newText: '2' },
    { type: 'fileChange', path: '/ws/b', oldText: '1', newText: '2' },
    { type: 'fileChange', path: '/ws/c', oldText: '1', newText: '2' },
  ] });
  recorded.answers.push('Next', 'Stop');
  const shown = await reviewTurn(new DiffDocuments(), m, 'A');
  assert.equal(shown, 2);
  assert.deepEqual(recorded.messages.map((x) => x.text), ['Review 1/3: a (+0 −0)', 'Review 2/3: b (+0 −0)']);
});

test('workspace/applyEdit: LSP WorkspaceEdit is converted and applied', async () => {
  reset();
  const e = toWorkspaceEdit({
    changes: { 'file:///ws/a.txt': [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 3 } }, newText: 'abc' }] },
    documentChanges: [
      { kind: 'create', uri: 'file:///ws/n.txt' },
      { textDocument: { uri: 'file:///ws/n.txt', version: null }, edits: [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: 'hi' }] },
      { kind: 'delete', uri: 'file:///ws/old.txt' },
    ],
  }) as unknown as WorkspaceEdit;
  assert.deepEqual(e.ops.map((o) => o.op), ['replace', 'create', 'replace', 'delete']);
  assert.deepEqual(await handleApplyEdit({ edit: { changes: {} } }), { applied: true });
});

test('splitBlocks splits at blank lines outside fences', () => {
  assert.deepEqual(splitBlocks('# T\n\npara one\nline\n\n```go\na\n\nb\n```\n\n- x\n- y\n'), ['# T', 'para one\nline', '```go\na\n\nb\n```', '- x\n- y']);
  assert.deepEqual(splitBlocks('~~~\nopen fence\n\nstill code'), ['~~~\nopen fence\n\nstill code']);
});

test('fileSides widens an excerpt edit to the whole file, after and before the edit', async () => {
  reset();
  recorded.docs.set('file:///ws/a.go', 'package a\n\nfunc f() int { return 2 }\n');
  const seg = { type: 'fileChange', path: '/ws/a.go', oldText: 'return 1', newText: 'return 2' };
  assert.deepEqual(await fileSides(seg), { before: 'package a\n\nfunc f() int { return 1 }\n', after: 'package a\n\nfunc f() int { return 2 }\n', partial: false });
  recorded.docs.set('file:///ws/a.go', 'package a\n\nfunc f() int { return 1 }\n');
  assert.equal((await fileSides(seg)).after, 'package a\n\nfunc f() int { return 2 }\n', 'a proposed edit');
  recorded.docs.set('file:///ws/a.go', 'return 2; return 2');
  assert.deepEqual(await fileSides(seg), { before: 'return 1', after: 'return 2', partial: false }, 'ambiguous: the excerpt itself');
});

test('changeFile goes through ochat/fileChange/*, asks on a conflict, falls back without the method', async () => {
  reset();
  const rpc = new FakeRpc();
  const seg: { type: string; path: string; oldText: string; newText: string; status?: string } = { type: 'fileChange', path: '/ws/a.txt', oldText: 'old', newText: 'new' };
  rpc.handlers.set('ochat/fileChange/revert', (p) => (p.force ? { applied: true, via: 'editor', status: 'reverted' }
    : (() => { throw Object.assign(new Error("/ws/a.txt changed since the agent's edit; review the diff"), { code: -32003 }); })()));
  recorded.answers.push('Overwrite');
  assert.equal(await changeFile(rpc, 'C1', 'A1', seg, 'revert'), true);
  assert.deepEqual(rpc.requests.map((r) => r.params), [
    { conversationId: 'C1', messageId: 'A1', path: '/ws/a.txt' },
    { conversationId: 'C1', messageId: 'A1', path: '/ws/a.txt', force: true },
  ]);
  assert.match(recorded.messages[0].text, /changed since the agent's edit/);
  assert.equal(seg.status, 'reverted');
  rpc.handlers.set('ochat/fileChange/apply', () => ({ applied: false, reason: 'already applied', status: 'applied' }));
  assert.equal(await changeFile(rpc, 'C1', 'A1', seg, 'apply'), true);
  const rpc2 = new FakeRpc(); // an older daemon
  recorded.docs.set('file:///ws/a.txt', 'new');
  assert.equal(await changeFile(rpc2, 'C1', 'A1', { ...seg }, 'revert'), true);
  assert.equal((recorded.edits.at(-1) as WorkspaceEdit).ops[0].op, 'replace');
});

test('reviewTurn skips rejected changes; a turn with only rejected ones changed no files', async () => {
  reset();
  const m = new ConversationModel();
  m.put({ id: 'A', role: 'assistant', timestamp: 1, segments: [
    { type: 'fileChange', path: '/ws/a', oldText: '1', newText: '2', additions: 1, deletions: 1 },
    { type: 'fileChange', path: '/ws/b', oldText: '1', newText: '2', status: 'rejected' },
    { type: 'fileChange', path: '/ws/c', oldText: '1', newText: '22', additions: 1, deletions: 1 },
  ] });
  m.put({ id: 'B', role: 'assistant', timestamp: 2, segments: [{ type: 'fileChange', path: '/ws/d', newText: 'x', status: 'rejected' }] });
  assert.equal(m.lastTurnWithChanges(), 'A', 'a turn whose only change was rejected changed nothing');
  recorded.answers.push('Next', 'Done');
  assert.equal(await reviewTurn(new DiffDocuments(), m), 2);
  assert.deepEqual(recorded.messages.map((x) => x.text), ['Review 1/2: a (+1 −1)', 'Review 2/2: c (+1 −1)']);
  assert.deepEqual(recorded.commands.filter((c) => c.id === 'vscode.diff').map((c) => c.args[2]), ['a (1/2 +1 −1)', 'c (2/2 +1 −1)']);
  reset();
  assert.equal(await reviewTurn(new DiffDocuments(), m, 'B'), 0);
  assert.deepEqual(recorded.messages.map((x) => x.text), ['ochat: this turn changed no files (1 proposed change was not applied).']);
  assert.equal(recorded.commands.length, 0);
});

test('a rejected change opens as "proposed, not applied" and is never applied or reverted', async () => {
  reset();
  const seg = { type: 'fileChange', path: '/ws/a.txt', oldText: 'old', newText: 'new', additions: 1, deletions: 1, status: 'rejected' };
  await openDiff(new DiffDocuments(), seg, '1/1');
  assert.equal(recorded.commands.at(-1)!.args[2], 'a.txt (proposed, not applied +1 −1)');
  const rpc = new FakeRpc();
  rpc.handlers.set('ochat/fileChange/revert', () => ({ applied: true, status: 'reverted' }));
  rpc.handlers.set('ochat/fileChange/apply', () => ({ applied: true, status: 'applied' }));
  recorded.docs.set('file:///ws/a.txt', 'old');
  assert.equal(await changeFile(rpc, 'C1', 'A1', seg, 'revert'), false);
  assert.equal(await changeFile(rpc, 'C1', 'A1', seg, 'apply'), false);
  assert.equal(await changeFile(rpc, undefined, 'A1', seg, 'apply'), false);
  assert.equal(await applyChange(seg, 'apply'), false);
  assert.deepEqual(rpc.requests, [], 'no request for a change that was never written');
  assert.equal(recorded.edits.length, 0);
  assert.equal(seg.status, 'rejected');
  assert.match(recorded.messages[0].text, /a\.txt was proposed but not applied; there is nothing to revert/);
});
