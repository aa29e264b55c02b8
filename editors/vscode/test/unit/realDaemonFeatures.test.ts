// Edit/retry, config pickers, pasted images and followed terminal sessions
// through the extension's controller against a real ochatd and the scripted
// ACP test agent (internal/testagent). Runs when OCHATD_BIN and TESTAGENT_BIN
// name the built binaries (scripts/ci.sh builds them), else skips.
import './fakeVscode';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, appendFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { DaemonClient } from '../../src/client/daemon';
import { ChatController, type ChatHooks } from '../../src/ui/chatController';
import { saveWorkspaceAttachment } from '../../src/ui/attachments';
import type { HostMessage } from '../../src/ui/messages';
import type { Message } from '../../src/model/protocol';

const ochatd = process.env.OCHATD_BIN;
const testagent = process.env.TESTAGENT_BIN;
const skip = !ochatd || !testagent ? 'set OCHATD_BIN and TESTAGENT_BIN' : false;
// The recorded Claude Code session of the e2e test (test/e2e/testdata/SOURCES.md); out/test/unit → the package root.
const claudeFixture = join(__dirname, '..', '..', '..', 'test/e2e/testdata/claude/24cb974b-077a-4ab3-bdf4-622ee8278cca.jsonl');
const claudeSession = '24cb974b-077a-4ab3-bdf4-622ee8278cca';

async function until(cond: () => boolean, what: string, ms = 15000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** world starts a private ochatd (short idle) for a temporary workspace with the test agent configured. */
async function world(t: { after(f: () => Promise<void> | void): void }, extraEnv: (root: string) => Record<string, string> = () => ({})) {
  const root = mkdtempSync(join(tmpdir(), 'ochat-vscode-it-'));
  const ws = join(root, 'ws');
  for (const d of ['ws', 'run', 'state', 'config/ochat', 'agent']) mkdirSync(join(root, d), { recursive: true, mode: 0o700 });
  // User-level agent settings: workspace ones would need `ochatd trust` first.
  writeFileSync(join(root, 'config/ochat/settings.json'), JSON.stringify({ agent_servers: { test: { command: testagent } } }));
  const env = { ...process.env, XDG_RUNTIME_DIR: join(root, 'run'), XDG_STATE_HOME: join(root, 'state'), XDG_CONFIG_HOME: join(root, 'config'),
    TESTAGENT_STATE: join(root, 'agent'), HOME: root, ...extraEnv(root) };
  const daemon: ChildProcess = spawn(ochatd!, ['serve', '--workspace', ws, '--idle', '3s'], { env, stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 300));
  const clients: DaemonClient[] = [];
  const connect = async (hooks: ChatHooks = {}) => {
    const client = new DaemonClient({ command: ochatd!, workspace: ws, env });
    clients.push(client);
    const posted: HostMessage[] = [];
    const c = new ChatController(client, hooks);
    c.attach({ post: (m) => posted.push(m), visible: () => true, reveal: () => undefined });
    await client.start();
    await c.refreshAgents();
    return { client, c, posted };
  };
  t.after(async () => {
    for (const cl of clients) await cl.dispose();
    daemon.kill('SIGTERM');
    await once(daemon, 'exit');
    rmSync(root, { recursive: true, force: true });
  });
  return { root, ws, env, connect };
}

const text = (m?: Message) => (m?.segments ?? []).filter((s) => s.type === 'content').map((s) => s.content).join('');

test('real ochatd: a config pick before the first prompt sticks; a pick in the conversation applies live', { skip }, async (t) => {
  const w = await world(t);
  const { c, posted, client } = await w.connect();
  await c.handle({ type: 'setConfig', agent: 'test', configId: 'model', value: 'smart' });
  assert.ok(!posted.some((m) => m.type === 'error'), JSON.stringify(posted.filter((m) => m.type === 'error')));
  await c.send('CONFIG', 'test');
  await until(() => !c.model.running, 'turn end');
  assert.equal(text(c.model.messages.at(-1)), 'mode=default model=smart', 'the first session starts with the pick');
  const conv = await client.request<{ conversation: { title: string } }>('ochat/conversations/get', { conversationId: c.model.conversation!.id });
  assert.equal(conv.conversation.title, 'CONFIG', 'titled like a conversation created by send');
  // The open conversation: the agent's pickers arrived (ochat/agentState) and a change applies to the live session.
  await until(() => !!c.model.agentState.test?.configOptions?.length, 'agent state');
  assert.deepEqual(c.model.agentState.test.configOptions!.map((o) => [o.id, o.currentValue]), [['mode', 'default'], ['model', 'smart']]);
  await c.handle({ type: 'setConfig', agent: 'test', configId: 'mode', value: 'plan' });
  assert.equal(c.model.agentState.test.configOptions!.find((o) => o.id === 'mode')!.currentValue, 'plan');
  await c.send('CONFIG', 'test');
  await until(() => !c.model.running, 'turn end');
  assert.equal(text(c.model.messages.at(-1)), 'mode=plan model=smart');
  // A new conversation keeps both picks (shown, and applied before its first prompt).
  c.newConversation();
  assert.deepEqual(c.model.agentState.test.configOptions!.map((o) => [o.id, o.currentValue]), [['mode', 'plan'], ['model', 'smart']]);
  await c.send('CONFIG', 'test');
  await until(() => !c.model.running, 'turn end');
  assert.equal(text(c.model.messages.at(-1)), 'mode=plan model=smart');
});

test('real ochatd: edit and retry replace the turn; another client is told to resync', { skip }, async (t) => {
  const w = await world(t);
  const a = await w.connect();
  const b = await w.connect();
  await a.c.send('PLAIN one', 'test');
  await until(() => !a.c.model.running, 'turn 1');
  await a.c.send('PLAIN two', 'test');
  await until(() => !a.c.model.running, 'turn 2');
  const id = a.c.model.conversation!.id;
  await b.c.open(id);
  assert.equal(b.c.model.messages.length, 4);
  const first = a.c.model.messages[0].id;
  await a.c.handle({ type: 'edit', messageId: first, text: 'PLAIN edited' });
  await until(() => !a.c.model.running, 'edited turn');
  assert.deepEqual(a.c.model.messages.map((m) => [m.role, m.content ?? text(m)]), [['user', 'PLAIN edited'], ['assistant', 'edited']]);
  // The other client got ochat/resync and re-subscribed: the same two messages.
  await until(() => b.c.model.messages.length === 2 && !b.c.model.running && text(b.c.model.messages[1]) === 'edited', 'resync in the other client');
  assert.deepEqual(b.c.model.messages.map((m) => m.id), a.c.model.messages.map((m) => m.id));
  const answer = a.c.model.messages[1].id;
  await a.c.handle({ type: 'retry', messageId: answer });
  await until(() => !a.c.model.running, 'retried turn');
  assert.equal(a.c.model.messages.length, 2);
  assert.notEqual(a.c.model.messages[1].id, answer);
  assert.equal(text(a.c.model.messages[1]), 'edited');
  // What the daemon stored is what the panel shows.
  const stored = await a.client.request<{ messages: Message[] }>('ochat/conversations/get', { conversationId: id });
  assert.deepEqual(stored.messages.map((m) => m.id), a.c.model.messages.map((m) => m.id));
});

test('real ochatd: a pasted image reaches the agent as a link into the workspace, which the agent can read', { skip }, async (t) => {
  const w = await world(t);
  const { c } = await w.connect({ saveAttachment: (data, _name, mime) => saveWorkspaceAttachment(w.ws, data, mime) });
  const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
  await c.send('ECHOALL', 'test', [{ kind: 'image', name: 'shot.png', mimeType: 'image/png', data: png.toString('base64') }]);
  await until(() => !c.model.running, 'turn end');
  const path = c.model.messages[0].attachments![0].path!;
  assert.ok(path.startsWith(join(w.ws, '.ochat/attachments/')), path);
  assert.deepEqual(readFileSync(path), png);
  assert.match(readFileSync(join(w.ws, '.ochat/.gitignore'), 'utf8'), /^attachments\/$/m);
  assert.ok(text(c.model.messages[1]).includes(`file://${path}`), text(c.model.messages[1]));
  // The agent reads it through fs/read_text_file, which the daemon confines to the workspace:
  // a file outside (where the extension kept images before) is refused.
  await c.send(`FSREAD ${path}`, 'test');
  await until(() => !c.model.running, 'read turn');
  assert.doesNotMatch(text(c.model.messages.at(-1)), /^error/, text(c.model.messages.at(-1)));
  assert.match(text(c.model.messages.at(-1)), /PNG/);
  const outside = join(w.root, 'outside.png');
  writeFileSync(outside, png);
  await c.send(`FSREAD ${outside}`, 'test');
  await until(() => !c.model.running, 'refused read');
  assert.match(text(c.model.messages.at(-1)), /^error .*outside the workspace/);
});

test('real ochatd: a followed Claude Code session grows in the panel as the terminal appends to it', { skip }, async (t) => {
  const w = await world(t, (root) => ({ CLAUDE_CONFIG_DIR: join(root, 'claude') }));
  const dir = join(w.root, 'claude/projects', w.ws.replace(/[^a-zA-Z0-9]/g, '-'));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${claudeSession}.jsonl`);
  const lines = readFileSync(claudeFixture, 'utf8').replaceAll('/home/dev/project', w.ws);
  writeFileSync(file, lines);
  const { c, posted, client } = await w.connect();
  const wire: string[] = [];
  client.onNotification('ochat/sessionAppended', (p: { messages?: Message[] }) => { for (const m of p.messages ?? []) wire.push(m.content ?? ''); });
  await c.followSession({ sessionId: claudeSession });
  const n = c.model.messages.length;
  assert.ok(n > 0, 'the transcript as of now');
  assert.equal(c.model.readOnly, true);
  assert.equal(c.following?.sessionId, claudeSession);
  // The terminal appends a prompt (a line shaped like Claude Code's own).
  const last = lines.trim().split('\n').map((l) => JSON.parse(l)).filter((r) => r.uuid).at(-1);
  const uuid = randomUUID();
  appendFileSync(file, JSON.stringify({ ...last, type: 'user', parentUuid: last.uuid, uuid, isMeta: undefined, message: { role: 'user', content: 'typed in the terminal' }, timestamp: new Date().toISOString() }) + '\n');
  await until(() => c.model.messages.some((m) => m.content === 'typed in the terminal'), 'the appended prompt in the panel');
  assert.ok(posted.some((m) => m.type === 'upsert' && m.messages.some((x) => x.content === 'typed in the terminal')));
  assert.equal(new Set(c.model.messages.map((m) => m.id)).size, c.model.messages.length, 'no duplicate ids');
  // Switching away unfollows (ochat/sessions/unfollow): the daemon sends no more lines.
  c.newConversation();
  await new Promise((r) => setTimeout(r, 300));
  appendFileSync(file, JSON.stringify({ ...last, type: 'user', parentUuid: uuid, uuid: randomUUID(), isMeta: undefined, message: { role: 'user', content: 'after unfollow' }, timestamp: new Date().toISOString() }) + '\n');
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(wire.includes('typed in the terminal'));
  assert.ok(!wire.includes('after unfollow'), 'unfollowed');
});
