import './fakeVscode';
import { test, beforeEach } from 'node:test';
import * as assert from 'node:assert/strict';
import { recorded, reset } from './fakeVscode';
import { FakeRpc } from './fakeRpc';
import { ChatController, titleFrom } from '../../src/ui/chatController';
import type { HostMessage } from '../../src/ui/messages';
import type { PermissionParams } from '../../src/model/protocol';

class Sink {
  posted: HostMessage[] = [];
  shown = true;
  revealed = 0;
  post(m: HostMessage) { this.posted.push(m); }
  visible() { return this.shown; }
  reveal() { this.revealed++; }
  types() { return this.posted.map((m) => m.type); }
}

const tick = () => new Promise((r) => setImmediate(r));

function setup() {
  const rpc = new FakeRpc();
  rpc.handlers.set('ochat/agents/list', () => ({ agents: [{ name: 'gemini', available: false, reason: 'not on PATH' }, { name: 'test', available: true }] }));
  rpc.handlers.set('ochat/chat/send', () => ({ conversationId: 'C1', userMessageId: 'U1', assistantMessageId: 'A1', turnId: 'A1' }));
  rpc.handlers.set('ochat/permission/respond', () => ({}));
  rpc.handlers.set('ochat/subscribe', (p) => ({ conversation: { id: p.conversationId, title: 'old', createdAt: 1, updatedAt: 2 }, messages: [{ id: 'U0', role: 'user', timestamp: 1, content: 'before' }], permissions: [] }));
  rpc.handlers.set('ochat/unsubscribe', () => ({}));
  let historyChanges = 0;
  const c = new ChatController(rpc, { historyChanged: () => historyChanges++, now: () => 5000 });
  const sink = new Sink();
  c.attach(sink);
  return { rpc, c, sink, history: () => historyChanges };
}

const perm: PermissionParams = {
  permissionId: 'P1', conversationId: 'C1', turnId: 'A1', agent: 'test',
  toolCall: { type: 'tool', id: 'w1', name: 'Write notes.txt', input: { path: 'notes.txt' } },
  fileChanges: [{ type: 'fileChange', path: '/ws/notes.txt', additions: 1, deletions: 0, diff: '--- a\n+++ b\n@@ -0,0 +1 @@\n+hello' }],
  options: [{ optionId: 'allow', name: 'Allow', kind: 'allow_once' }, { optionId: 'reject', name: 'Reject', kind: 'reject_once' }],
};

beforeEach(() => reset());

test('agents list picks the first available agent', async () => {
  const { c, sink } = setup();
  await c.refreshAgents();
  assert.equal(c.selectedAgent, 'test');
  assert.deepEqual(sink.posted.at(-1), { type: 'agents', agents: c.agents, selectedAgent: 'test' });
});

test('send without a conversation creates one and streams events into it', async () => {
  const { rpc, c, sink, history } = setup();
  await c.refreshAgents();
  // An event can arrive before the send answer: it must not be lost.
  rpc.handlers.set('ochat/chat/send', () => {
    rpc.notify('ochat/event', { conversationId: 'C1', turnId: 'A1', messageId: 'A1', agent: 'test', event: { type: 'content.delta', seq: 1, delta: 'Hi' } });
    return { conversationId: 'C1', userMessageId: 'U1', assistantMessageId: 'A1', turnId: 'A1' };
  });
  await c.handle({ type: 'send', text: 'PLAIN hi', agent: 'test' });
  assert.deepEqual(rpc.requests.find((r) => r.method === 'ochat/chat/send')!.params, { conversationId: undefined, agent: 'test', text: 'PLAIN hi', attachments: undefined });
  assert.equal(c.model.conversation?.id, 'C1');
  assert.deepEqual(c.model.messages.map((m) => m.id), ['U1', 'A1']);
  assert.equal(c.model.message('A1')!.segments![0].content, 'Hi');
  rpc.notify('ochat/event', { conversationId: 'C1', turnId: 'A1', messageId: 'A1', agent: 'test', event: { type: 'content.delta', seq: 2, delta: ' there' } });
  rpc.notify('ochat/event', { conversationId: 'C1', turnId: 'A1', messageId: 'A1', agent: 'test', event: { type: 'content.delta', seq: 2, delta: ' there' } });
  rpc.notify('ochat/event', { conversationId: 'C1', turnId: 'A1', messageId: 'A1', agent: 'test', event: { type: 'turn.completed', seq: 3, stopReason: 'end_turn' } });
  assert.equal(c.model.message('A1')!.segments![0].content, 'Hi there', 'duplicate seq dropped');
  assert.equal(c.model.running, undefined);
  assert.equal(sink.posted.filter((m) => m.type === 'event').length, 3);
  assert.ok(history() >= 2, 'history refreshed on send and on turn end');
});

test('permission: inline in the view, answered from the webview, closed on permissionResolved', async () => {
  const { rpc, c, sink } = setup();
  await c.send('WRITE notes.txt hello', 'test');
  rpc.notify('ochat/permission', perm);
  assert.equal(sink.posted.at(-1)!.type, 'permission');
  assert.equal(recorded.messages.length, 0, 'no notification while the chat is visible');
  await c.handle({ type: 'respondPermission', permissionId: 'P1', optionId: 'allow' });
  assert.deepEqual(rpc.requests.at(-1), { method: 'ochat/permission/respond', params: { permissionId: 'P1', optionId: 'allow' } });
  rpc.notify('ochat/permissionResolved', { permissionId: 'P1', conversationId: 'C1', optionId: 'allow', outcome: 'selected' });
  assert.equal(sink.posted.at(-1)!.type, 'permissionResolved');
  assert.equal(c.model.permissions.size, 0);
});

test('permission: a notification with one button per option when the chat is hidden', async () => {
  const { rpc, c, sink } = setup();
  await c.send('WRITE notes.txt hello', 'test');
  sink.shown = false;
  recorded.answers.push('Reject');
  rpc.notify('ochat/permission', perm);
  await tick();
  const n = recorded.messages[0];
  assert.match(n.text, /test waits for permission: Write notes\.txt \(1 file: notes\.txt\)/, 'paths relative to the workspace');
  assert.deepEqual(n.items, ['Allow', 'Reject', 'Show in Chat']);
  await tick();
  assert.deepEqual(rpc.requests.at(-1), { method: 'ochat/permission/respond', params: { permissionId: 'P1', optionId: 'reject' } });
});

test('permission: a late click after another client answered sends nothing', async () => {
  const { rpc, c, sink } = setup();
  await c.send('x', 'test');
  sink.shown = false;
  recorded.manual = true;
  rpc.notify('ochat/permission', perm);
  rpc.notify('ochat/permissionResolved', { permissionId: 'P1', conversationId: 'C1', optionId: 'allow', outcome: 'selected' });
  const before = rpc.requests.length;
  recorded.messages[0].resolve('Allow');
  await tick();
  await tick();
  assert.equal(rpc.requests.length, before);
});

test('open subscribes read-only, switching unsubscribes the previous conversation, reconnect re-subscribes', async () => {
  const { rpc, c, sink } = setup();
  await c.open('C7', { readOnly: true });
  assert.equal(c.model.readOnly, true);
  const init = sink.posted.at(-1) as Extract<HostMessage, { type: 'init' }>;
  assert.equal(init.type, 'init');
  assert.equal(init.snapshot.conversation?.id, 'C7');
  assert.equal(init.snapshot.readOnly, true);
  await c.open('C8');
  assert.deepEqual(rpc.requests.find((r) => r.method === 'ochat/unsubscribe')?.params, { conversationId: 'C7' });
  const n = rpc.requests.filter((r) => r.method === 'ochat/subscribe').length;
  await c.reconnected();
  assert.equal(rpc.requests.filter((r) => r.method === 'ochat/subscribe').length, n + 1);
  assert.equal(c.model.conversation?.id, 'C8');
  rpc.notify('ochat/resync', { conversationId: 'C8', reason: 'slow client' });
  await tick();
  assert.equal(rpc.requests.filter((r) => r.method === 'ochat/subscribe').length, n + 2);
});

test('ready from a reloaded webview restores its conversation', async () => {
  const { rpc, c } = setup();
  await c.handle({ type: 'ready', conversationId: 'C9' });
  assert.deepEqual(rpc.requests.at(-1), { method: 'ochat/subscribe', params: { conversationId: 'C9' } });
  assert.equal(c.model.conversation?.id, 'C9');
});

test('errors of a webview action are posted back, not thrown', async () => {
  const { rpc, c, sink } = setup();
  rpc.handlers.set('ochat/chat/send', () => { throw Object.assign(new Error('a turn is already running'), { code: -32003 }); });
  await c.handle({ type: 'send', text: 'x' });
  assert.deepEqual(sink.posted.at(-1), { type: 'error', message: 'a turn is already running' });
  assert.equal(recorded.messages.length, 0, 'the visible panel shows it: no toast over it');
  sink.shown = false;
  await c.handle({ type: 'send', text: 'x' });
  assert.equal(recorded.messages.at(-1)?.level, 'error');
});

test('agent state of the open conversation reaches the view; @ mentions search files', async () => {
  const { rpc, c, sink } = setup();
  await c.open('C1');
  rpc.notify('ochat/agentState', { conversationId: 'C1', agent: 'test', commands: [{ name: 'review' }] });
  rpc.notify('ochat/agentState', { conversationId: 'OTHER', agent: 'test', commands: [] });
  assert.deepEqual(c.model.agentState.test.commands, [{ name: 'review' }]);
  recorded.files = ['src/main.go', 'README.md', 'src/lib/mainlib.go'];
  await c.handle({ type: 'mention', query: 'main' });
  assert.deepEqual(sink.posted.at(-1), { type: 'mentionResults', query: 'main', files: ['src/main.go', 'src/lib/mainlib.go'] });
});

test('pasted images are stored as files before send; the daemon gets paths only', async () => {
  const rpc = new FakeRpc();
  rpc.handlers.set('ochat/chat/send', () => ({ conversationId: 'C1', userMessageId: 'U1', assistantMessageId: 'A1', turnId: 'A1' }));
  const saved: Array<[number, string, string]> = [];
  const c = new ChatController(rpc, { saveAttachment: async (d, n, m) => { saved.push([d.length, n, m]); return '/store/abc.png'; } });
  await c.handle({ type: 'send', text: 'what is this', agent: 'test', attachments: [
    { kind: 'image', name: 'shot.png', mimeType: 'image/png', data: Buffer.from('PNGDATA').toString('base64') },
    { kind: 'file', path: 'src/a.go', name: 'a.go' },
  ] });
  assert.deepEqual(saved, [[7, 'shot.png', 'image/png']]);
  assert.deepEqual(rpc.requests[0].params.attachments, [
    { kind: 'image', name: 'shot.png', mimeType: 'image/png', path: '/store/abc.png', size: 7 },
    { kind: 'file', path: 'src/a.go', name: 'a.go' },
  ]);
  assert.equal(c.model.message('U1')!.attachments![0].path, '/store/abc.png');
});

test('config options: set in the open conversation; before one, remembered and applied before the first prompt', async () => {
  const { rpc, c, sink } = setup();
  const picks: Array<Record<string, Record<string, string | boolean>>> = [];
  (c as unknown as { hooks: { configStore: unknown } }).hooks.configStore = { get: () => undefined, set: (v: Record<string, Record<string, string | boolean>>) => picks.push(structuredClone(v)) };
  const opts = [{ id: 'model', name: 'Model', type: 'select', currentValue: 'default', options: [{ value: 'default', name: 'Default' }, { value: 'fast', name: 'Fast' }] }];
  await c.open('C1');
  rpc.notify('ochat/agentState', { conversationId: 'C1', agent: 'test', configOptions: opts });
  rpc.handlers.set('ochat/agent/setConfig', (p) => ({ applied: true, state: { configOptions: [{ ...opts[0], currentValue: p.value }] }, config: { [p.configId]: p.value } }));
  await c.handle({ type: 'setConfig', agent: 'test', configId: 'model', value: 'fast' });
  assert.deepEqual(rpc.requests.at(-1), { method: 'ochat/agent/setConfig', params: { conversationId: 'C1', agent: 'test', configId: 'model', value: 'fast' } });
  assert.equal(c.model.agentState.test.configOptions![0].currentValue, 'fast');
  assert.equal((sink.posted.at(-1) as { type: string }).type, 'agentState');
  assert.ok(!rpc.methods().includes('ochat/agents/setConfigOption'), 'no fallback to a method the daemon never had');

  // A new conversation shows the pickers as last seen, with the user's pick; nothing is sent yet.
  c.newConversation();
  assert.equal(c.model.agentState.test.configOptions![0].currentValue, 'fast');
  await c.handle({ type: 'setConfig', agent: 'test', configId: 'mode', value: 'plan' });
  assert.equal(rpc.requests.at(-1)!.method, 'ochat/unsubscribe', 'no setConfig without a conversation (the daemon answers -32602)');
  assert.deepEqual(picks.at(-1), { test: { model: 'fast', mode: 'plan' } });
  // First send: create the conversation, set the picks, then send to it.
  rpc.handlers.set('ochat/conversations/create', () => ({ conversation: { id: 'C2', title: '', createdAt: 1, updatedAt: 1 } }));
  rpc.handlers.set('ochat/chat/send', (p) => ({ conversationId: p.conversationId, userMessageId: 'U2', assistantMessageId: 'A2', turnId: 'A2' }));
  const n = rpc.requests.length;
  await c.handle({ type: 'send', text: 'CONFIG', agent: 'test' });
  assert.deepEqual(rpc.requests[n].params, { title: 'CONFIG' }, 'titled like a conversation created by send');
  assert.deepEqual(rpc.requests.slice(n).map((r) => [r.method, r.params.conversationId, r.params.configId]), [
    ['ochat/conversations/create', undefined, undefined],
    ['ochat/subscribe', 'C2', undefined],
    ['ochat/agent/setConfig', 'C2', 'model'],
    ['ochat/agent/setConfig', 'C2', 'mode'],
    ['ochat/chat/send', 'C2', undefined],
  ]);
  assert.equal(c.model.conversation?.id, 'C2');

  // A refused value is reported and shown as the agent has it.
  rpc.handlers.set('ochat/agent/setConfig', () => { throw Object.assign(new Error('invalid params: value "x" is not an option of model'), { code: -32602 }); });
  await c.handle({ type: 'setConfig', agent: 'test', configId: 'model', value: 'x' });
  assert.match((sink.posted.at(-1) as { message: string }).message, /not an option/);
  assert.equal(sink.posted.at(-2)!.type, 'init');
});

test('edit and retry: the message and later ones are replaced by the new turn; refused while a turn runs', async () => {
  const { rpc, c, sink } = setup();
  rpc.handlers.set('ochat/subscribe', (p) => ({ conversation: { id: p.conversationId, title: 't', createdAt: 1, updatedAt: 2 }, messages: [
    { id: 'U0', role: 'user', timestamp: 1, content: 'first', attachments: [{ kind: 'file', path: 'a.go' }] },
    { id: 'A0', role: 'assistant', timestamp: 2, agent: 'claude', status: 'completed', segments: [{ type: 'content', content: 'one' }] },
    { id: 'U1', role: 'user', timestamp: 3, content: 'second' },
    { id: 'A1', role: 'assistant', timestamp: 4, agent: 'test', status: 'completed', segments: [{ type: 'content', content: 'two' }] },
  ] }));
  await c.open('C1');
  // The new turn's first event arrives before the edit answer.
  rpc.handlers.set('ochat/chat/edit', () => {
    rpc.notify('ochat/event', { conversationId: 'C1', turnId: 'A5', messageId: 'A5', agent: 'claude', event: { type: 'content.delta', seq: 1, delta: 'new' } });
    return { conversationId: 'C1', userMessageId: 'U5', assistantMessageId: 'A5', turnId: 'A5' };
  });
  await c.handle({ type: 'edit', messageId: 'U0', text: 'first, edited' });
  assert.deepEqual(rpc.requests.at(-1), { method: 'ochat/chat/edit', params: { conversationId: 'C1', messageId: 'U0', text: 'first, edited', agent: undefined } });
  assert.deepEqual(c.model.messages.map((m) => m.id), ['U5', 'A5']);
  assert.equal(c.model.message('U5')!.content, 'first, edited');
  assert.deepEqual(c.model.message('U5')!.attachments, [{ kind: 'file', path: 'a.go' }], 'an edit keeps the attachments');
  assert.equal(c.model.message('A5')!.segments![0].content, 'new');
  assert.equal(c.model.running?.agent, 'claude', 'the agent that answered the edited message');
  assert.equal(sink.posted.at(-1)!.type, 'init');

  // While the turn runs, retry is refused locally (the daemon would answer -32003).
  rpc.handlers.set('ochat/chat/retry', () => ({ conversationId: 'C1', userMessageId: 'U6', assistantMessageId: 'A6', turnId: 'A6' }));
  await c.handle({ type: 'retry', messageId: 'A5' });
  assert.match((sink.posted.at(-1) as { message: string }).message, /a turn is running/);
  assert.ok(!rpc.methods().includes('ochat/chat/retry'));
  rpc.notify('ochat/event', { conversationId: 'C1', turnId: 'A5', messageId: 'A5', agent: 'claude', event: { type: 'turn.completed', seq: 2, stopReason: 'end_turn' } });

  await c.handle({ type: 'retry', messageId: 'A5', agent: 'test' });
  assert.deepEqual(rpc.requests.at(-1), { method: 'ochat/chat/retry', params: { conversationId: 'C1', messageId: 'A5', agent: 'test' } });
  assert.deepEqual(c.model.messages.map((m) => [m.id, m.content ?? m.status]), [['U6', 'first, edited'], ['A6', 'streaming']]);
  assert.equal(c.selectedAgent, 'test');
});

test('ochat/resync after another client edited: re-subscribe and show the new snapshot', async () => {
  const { rpc, c, sink } = setup();
  await c.open('C1');
  rpc.handlers.set('ochat/subscribe', (p) => ({ conversation: { id: p.conversationId, title: 'old', createdAt: 1, updatedAt: 3 },
    messages: [{ id: 'U9', role: 'user', timestamp: 3, content: 'edited elsewhere' }, { id: 'A9', role: 'assistant', timestamp: 3, agent: 'test', status: 'streaming' }],
    running: { turnId: 'A9', assistantMessageId: 'A9', agent: 'test', events: [{ type: 'content.delta', seq: 1, delta: 'so far' }], lastSeq: 1 } }));
  rpc.notify('ochat/resync', { conversationId: 'C1', reason: 'conversation edited: U0 replaced' });
  await tick();
  assert.deepEqual(c.model.messages.map((m) => m.id), ['U9', 'A9']);
  assert.equal(c.model.message('A9')!.segments![0].content, 'so far');
  assert.equal(c.model.running?.turnId, 'A9');
  assert.equal(sink.posted.at(-1)!.type, 'init');
  rpc.notify('ochat/resync', { conversationId: 'OTHER', reason: 'x' });
  await tick();
  assert.equal(rpc.requests.filter((r) => r.method === 'ochat/subscribe').length, 2, 'another conversation is not re-subscribed');
});

test('a followed terminal session grows by id, resets, and is unfollowed on switch and panel close; Continue opens it', async () => {
  const { rpc, c, sink } = setup();
  await c.open('C1');
  const session = { id: 'S1', agent: 'claude', title: 'from the terminal', path: '/h/.claude/projects/p/S1.jsonl' };
  rpc.handlers.set('ochat/sessions/follow', () => ({ sessionId: 'S1', agent: 'claude', path: session.path, session,
    messages: [{ id: 'm1', role: 'user', timestamp: 1, content: 'hello' }, { id: 'm2', role: 'assistant', agent: 'claude', timestamp: 2, status: 'completed', segments: [{ type: 'content', content: 'Hi' }] }] }));
  rpc.handlers.set('ochat/sessions/unfollow', () => ({}));
  await c.followSession({ sessionId: 'S1' });
  assert.ok(rpc.requests.some((r) => r.method === 'ochat/unsubscribe' && r.params.conversationId === 'C1'), 'the previous conversation is left');
  const init = sink.posted.at(-1) as Extract<HostMessage, { type: 'init' }>;
  assert.equal(init.snapshot.readOnly, true);
  assert.equal(init.snapshot.conversation?.title, 'from the terminal');
  assert.deepEqual(init.following, { sessionId: 'S1', agent: 'claude', path: session.path });
  // The growing turn is sent again with the same id: replaced, not duplicated.
  rpc.notify('ochat/sessionAppended', { sessionId: 'S1', agent: 'claude', path: session.path, messages: [
    { id: 'm2', role: 'assistant', agent: 'claude', timestamp: 2, status: 'completed', segments: [{ type: 'content', content: 'Hi there' }] },
    { id: 'm3', role: 'user', timestamp: 3, content: 'typed in the terminal' }] });
  assert.deepEqual(c.model.messages.map((m) => m.id), ['m1', 'm2', 'm3']);
  assert.equal(c.model.message('m2')!.segments![0].content, 'Hi there');
  assert.deepEqual(sink.posted.at(-1), { type: 'upsert', reset: false, title: 'from the terminal', messages: [
    { id: 'm2', role: 'assistant', agent: 'claude', timestamp: 2, status: 'completed', segments: [{ type: 'content', content: 'Hi there' }] },
    { id: 'm3', role: 'user', timestamp: 3, content: 'typed in the terminal' }] });
  rpc.notify('ochat/sessionAppended', { sessionId: 'OTHER', agent: 'claude', path: '/x', messages: [{ id: 'z', role: 'user', timestamp: 1 }] });
  assert.equal(c.model.messages.length, 3, 'another session is ignored');
  rpc.notify('ochat/sessionAppended', { sessionId: 'S1', agent: 'claude', path: session.path, reset: true, messages: [{ id: 'm1', role: 'user', timestamp: 1, content: 'hello' }] });
  assert.deepEqual(c.model.messages.map((m) => m.id), ['m1'], 'reset replaces');
  await assert.rejects(c.send('x', 'test'), /read-only/);

  // The panel closes: unfollow; it comes back: follow again.
  c.attach(undefined);
  assert.deepEqual(rpc.requests.at(-1), { method: 'ochat/sessions/unfollow', params: { sessionId: 'S1' } });
  c.attach(sink);
  await tick();
  assert.equal(rpc.requests.filter((r) => r.method === 'ochat/sessions/follow').length, 2);
  assert.equal(c.following?.sessionId, 'S1');
  // Switching to a conversation unfollows.
  await c.open('C2');
  assert.equal(rpc.requests.filter((r) => r.method === 'ochat/sessions/unfollow').length, 2);
  assert.equal(c.following, undefined);
  rpc.notify('ochat/sessionAppended', { sessionId: 'S1', agent: 'claude', path: session.path, messages: [{ id: 'm9', role: 'user', timestamp: 9 }] });
  assert.ok(!c.model.message('m9'));

  // Continue on a followed session: ochat/sessions/open, then the conversation, editable.
  await c.followSession({ path: session.path });
  assert.deepEqual(rpc.requests.filter((r) => r.method === 'ochat/sessions/follow').at(-1)!.params, { path: session.path });
  rpc.handlers.set('ochat/sessions/open', () => ({ conversationId: 'C3', created: true }));
  await c.handle({ type: 'continue' });
  assert.deepEqual(rpc.requests.find((r) => r.method === 'ochat/sessions/open')!.params, { sessionId: 'S1' });
  assert.equal(c.model.conversation?.id, 'C3');
  assert.equal(c.model.readOnly, false);
  assert.equal(c.following, undefined);
});

test('a native session opened without a conversation is shown read-only', () => {
  const { c, sink } = setup();
  c.showSnapshot({ messages: [{ id: 'm1', role: 'user', timestamp: 1, content: 'from the terminal' }] });
  const init = sink.posted.at(-1) as Extract<HostMessage, { type: 'init' }>;
  assert.equal(init.snapshot.readOnly, true);
  assert.equal(init.snapshot.messages[0].content, 'from the terminal');
});

test('agent state is kept per conversation for the next window', async () => {
  const store = new Map<string, unknown>();
  const rpc = new FakeRpc();
  rpc.handlers.set('ochat/subscribe', (p) => ({ conversation: { id: p.conversationId, title: '', createdAt: 1, updatedAt: 1 }, messages: [] }));
  const hooks = { agentStateStore: { get: (id: string) => store.get(id) as never, set: (id: string, s: unknown) => void store.set(id, JSON.parse(JSON.stringify(s))) } };
  const c1 = new ChatController(rpc, hooks);
  await c1.open('C1');
  rpc.notify('ochat/agentState', { conversationId: 'C1', agent: 'test', commands: [{ name: 'review' }] });
  c1.dispose();
  const c2 = new ChatController(rpc, hooks); // a reloaded window
  await c2.open('C1');
  assert.deepEqual(c2.model.agentState.test.commands, [{ name: 'review' }]);
});

test('titleFrom gives a created conversation the title send would', () => {
  for (const [input, want] of [
    ['fix the parser', 'fix the parser'],
    ['\n  \n  first   line  \nsecond', 'first line'],
    ['a'.repeat(61), 'a'.repeat(60) + '…'],
    ['word '.repeat(20), 'word word word word word word word word word word word word…'],
    ['', ''],
  ]) assert.equal(titleFrom(input), want, JSON.stringify(input));
});

test('first run: a preferred agent that cannot run is not picked', async () => {
  const { c } = setup();
  await c.refreshAgents('gemini');
  assert.equal(c.selectedAgent, 'test');
});

test('a send while a turn runs is queued: no turn starts, the queue shows it, queue actions reach the daemon', async () => {
  const { rpc, c, sink } = setup();
  await c.open('C1');
  rpc.handlers.set('ochat/chat/send', () => ({ conversationId: 'C1', queued: true, queueId: 'q1' }));
  for (const m of ['ochat/queue/update', 'ochat/queue/remove', 'ochat/queue/sendNow']) rpc.handlers.set(m, () => ({}));
  await c.handle({ type: 'send', text: 'next please', agent: 'test', id: 7 });
  assert.deepEqual(sink.posted.filter((m) => m.type === 'sendResult'), [{ type: 'sendResult', id: 7, ok: true, queued: true }]);
  assert.equal(c.model.running, undefined, 'no turn started for a queued message');
  assert.deepEqual(c.model.queue.map((q) => q.id), ['q1']);
  rpc.notify('ochat/queue', { conversationId: 'C1', items: [{ id: 'q1', text: 'next please (edited)' }] });
  assert.deepEqual(sink.posted.at(-1), { type: 'queue', items: [{ id: 'q1', text: 'next please (edited)' }] });
  rpc.notify('ochat/queue', { conversationId: 'OTHER', items: [] });
  assert.equal(c.model.queue.length, 1, 'another conversation\'s queue is not shown');
  // The daemon sends it when the turn ends: the prompt shows at once, no re-subscribe.
  const subs = rpc.methods().filter((m) => m === 'ochat/subscribe').length;
  rpc.notify('ochat/queue', { conversationId: 'C1', items: [], sent: { id: 'q1', userMessageId: 'U5', assistantMessageId: 'A5', turnId: 'A5' } });
  assert.deepEqual(c.model.messages.slice(-2).map((m) => [m.id, m.role, m.content ?? '']), [['U5', 'user', 'next please (edited)'], ['A5', 'assistant', '']]);
  assert.equal((c.model.running as { turnId: string } | undefined)?.turnId, 'A5');
  rpc.notify('ochat/event', { conversationId: 'C1', turnId: 'A5', messageId: 'A5', agent: 'test', event: { type: 'content.delta', seq: 1, delta: 'ok' } });
  assert.equal(rpc.methods().filter((m) => m === 'ochat/subscribe').length, subs);
  assert.equal(c.model.message('A5')!.segments![0].content, 'ok');
  await c.handle({ type: 'queueUpdate', id: 'q1', text: 'x' });
  await c.handle({ type: 'queueRemove', id: 'q1' });
  await c.handle({ type: 'queueSendNow', id: 'q1' });
  assert.deepEqual(rpc.requests.slice(-3), [
    { method: 'ochat/queue/update', params: { conversationId: 'C1', id: 'q1', text: 'x' } },
    { method: 'ochat/queue/remove', params: { conversationId: 'C1', id: 'q1' } },
    { method: 'ochat/queue/sendNow', params: { conversationId: 'C1', id: 'q1' } },
  ]);
});

test('a failed send answers sendResult with a readable error (the composer keeps the text)', async () => {
  const { rpc, c, sink } = setup();
  rpc.handlers.set('ochat/chat/send', () => { throw new Error('Request ochat/chat/send failed with message: ochatd is not running'); });
  await c.handle({ type: 'send', text: 'keep me', agent: 'test', id: 3 });
  assert.deepEqual(sink.posted.filter((m) => m.type === 'sendResult'), [{ type: 'sendResult', id: 3, ok: false, error: 'ochatd is not running' }]);
});

test('a turn started by another client re-subscribes once, so its prompt shows', async () => {
  const { rpc, c, sink } = setup();
  await c.open('C1');
  let subs = 0;
  rpc.handlers.set('ochat/subscribe', (p) => {
    subs++;
    return {
      conversation: { id: p.conversationId, title: 'old', createdAt: 1, updatedAt: 2 },
      messages: [{ id: 'U0', role: 'user', timestamp: 1, content: 'before' }, { id: 'U9', role: 'user', timestamp: 3, content: 'from the CLI' }, { id: 'A9', role: 'assistant', timestamp: 4, agent: 'test' }],
      running: { turnId: 'A9', assistantMessageId: 'A9', agent: 'test', events: [{ type: 'content.delta', seq: 1, delta: 'Hi' }], lastSeq: 1 },
      permissions: [],
    };
  });
  const ev = (seq: number, delta: string) => ({ conversationId: 'C1', turnId: 'A9', messageId: 'A9', agent: 'test', event: { type: 'content.delta', seq, delta } });
  rpc.notify('ochat/event', ev(1, 'Hi'));
  rpc.notify('ochat/event', ev(2, ' there'));
  await tick();
  await tick();
  assert.equal(subs, 1, 'one re-subscribe for the burst');
  assert.deepEqual(c.model.messages.map((m) => m.id), ['U0', 'U9', 'A9']);
  rpc.notify('ochat/event', ev(3, '!'));
  const text = c.model.message('A9')!.segments!.map((s) => s.content).join('');
  assert.equal(text, 'Hi!', 'events the snapshot covers are not applied twice; later ones are');
  assert.ok(sink.posted.some((m) => m.type === 'init' && m.snapshot.messages.some((x) => x.id === 'U9')));
});

test('pending permissions are reported (badge, status bar) until answered anywhere or their turn ends', async () => {
  const rpc = new FakeRpc();
  rpc.handlers.set('ochat/subscribe', (p) => ({ conversation: { id: p.conversationId, title: 't', createdAt: 1, updatedAt: 2 }, messages: [], permissions: [] }));
  const reports: string[][] = [];
  const c = new ChatController(rpc, { pendingChanged: (p) => reports.push(p.map((x) => x.permissionId)) });
  const sink = new Sink();
  sink.shown = false;
  c.attach(sink);
  await c.open('C1');
  rpc.notify('ochat/permission', perm);
  rpc.notify('ochat/permission', { ...perm, permissionId: 'P2', turnId: 'A2' });
  assert.deepEqual(reports.at(-1), ['P1', 'P2']);
  rpc.notify('ochat/permissionResolved', { permissionId: 'P1', conversationId: 'C1', outcome: 'selected', optionId: 'allow' });
  assert.deepEqual(reports.at(-1), ['P2']);
  rpc.notify('ochat/event', { conversationId: 'C1', turnId: 'A2', messageId: 'A2', agent: 'test', event: { type: 'turn.completed', seq: 9, stopReason: 'cancelled' } });
  assert.deepEqual(reports.at(-1), []);
  await tick();
});
