/**
 * The chat webview: renders the transcript contract it receives from the
 * extension host (snapshot + live events), batches streamed updates per
 * animation frame, and posts user actions back. It makes no protocol call.
 */
import { ConversationModel } from '../src/model/conversation';
import { summarize } from '../src/model/reduce';
import { lineDiff, parseUnifiedDiff, type DiffLine } from '../src/model/diffText';
import { isRejected, type AgentInfo, type AgentStateParams, type Attachment, type ConfigOption, type ConfigValue, type EventParams, type Message, type PermissionParams, type Segment } from '../src/model/protocol';
import type { HostMessage, WebviewMessage, ConnectionInfo, FollowInfo } from '../src/ui/messages';
import { BlockRenderer, renderMarkdown, warmUp } from './markdown';
import { h, icon, append, formatDuration } from './dom';

interface VsCodeApi {
  postMessage(msg: unknown): void;
  getState(): unknown;
  setState(s: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

interface SavedState {
  conversationId?: string;
  draft?: string;
  agent?: string;
  collapsed?: Record<string, boolean>;
  /** The unavailable-agents list was folded by the user. */
  unavailableFolded?: boolean;
}

const vscode = acquireVsCodeApi();
const saved: SavedState = (vscode.getState() as SavedState) ?? {};
const post = (m: WebviewMessage) => vscode.postMessage(m);

let model = new ConversationModel();
let agents: AgentInfo[] = [];
let selectedAgent = saved.agent;
let connection: ConnectionInfo = { state: 'starting' };
/** The terminal session followed live, if the panel shows one. */
let following: FollowInfo | undefined;
let attachments: Attachment[] = [];
const queue: EventParams[] = [];
let frameRequested = false;

// ---------- layout ----------
const app = document.getElementById('app')!;
const title = h('span', { class: 'title' });
const conn = h('span', { class: 'conn' });
const header = h('div', { class: 'header' }, title, conn,
  h('button', { class: 'icon-btn', title: 'Review changes of the last turn', onclick: () => post({ type: 'reviewTurn', messageId: model.lastTurnWithChanges() ?? '' }) }, icon('diff')),
  h('button', { class: 'icon-btn', title: 'New conversation', onclick: () => post({ type: 'newConversation' }) }, icon('add')));
const transcript = h('div', { class: 'transcript', role: 'log', 'aria-live': 'polite' });
const empty = h('div', { class: 'empty' }, icon('comment-discussion'), h('p', { text: 'Ask any coding agent. Type / for commands, @ to mention a file.' }));
const permissionsEl = h('div', { class: 'permissions' });
const working = h('div', { class: 'working hidden' }, icon('loading', 'codicon-modifier-spin'), h('span', { class: 'working-text' }));
const errorEl = h('div', { class: 'error hidden', role: 'alert' });
const input = h('textarea', { class: 'input', rows: 3, placeholder: 'Message the agent — Enter to send, Shift+Enter for a new line', 'aria-label': 'Message' });
const popup = h('div', { class: 'popup hidden', role: 'listbox' });
const chips = h('div', { class: 'chips' });
const agentSelect = h('select', { class: 'agent', title: 'Agent', 'aria-label': 'Agent' });
const configEl = h('span', { class: 'config' });
const sendBtn = h('button', { class: 'send', title: 'Send (Enter)' }, icon('send'), ' Send');
const cancelBtn = h('button', { class: 'cancel hidden', title: 'Cancel the turn' }, icon('debug-stop'), ' Cancel');
const usageEl = h('span', { class: 'usage' });
const unavailableEl = h('details', { class: 'unavailable hidden' });
unavailableEl.addEventListener('toggle', () => { if (unavailableEl.dataset.rendering !== '1') save({ unavailableFolded: !unavailableEl.open }); });
const composer = h('div', { class: 'composer' }, popup, chips, input,
  h('div', { class: 'toolbar' }, agentSelect, configEl, usageEl, h('span', { class: 'spacer' }), cancelBtn, sendBtn), unavailableEl);
const trustBar = h('div', { class: 'trust hidden' }, icon('shield'),
  h('span', { text: " This workspace's .ochat/settings.json names agents that stay off until you trust it. " }),
  h('button', { onclick: () => post({ type: 'trustWorkspace' }) }, 'Review and trust'));
const readonlyText = h('span', { text: ' Read-only transcript ' });
const readonlyBar = h('div', { class: 'readonly hidden' }, icon('lock'), readonlyText,
  h('button', { onclick: () => post({ type: 'continue' }) }, icon('debug-continue'), ' Continue this conversation'));
append(app, header, transcript, permissionsEl, working, errorEl, trustBar, readonlyBar, composer);
input.value = saved.draft ?? '';

function save(patch: Partial<SavedState>): void {
  Object.assign(saved, patch);
  vscode.setState(saved);
}

// ---------- messages ----------
interface MessageView {
  el: HTMLElement;
  head: HTMLElement;
  activity: HTMLDetailsElement;
  activityKey: string;
  reasoning?: HTMLElement;
  content: BlockRenderer;
}
const views = new Map<string, MessageView>();
/** The open state the renderer last gave each activity summary. */
const expectedOpen = new Map<string, boolean>();

function renderAll(): void {
  transcript.textContent = '';
  views.clear();
  for (const m of model.messages) renderMessage(m);
  renderPermissions();
  renderChrome();
  // Lay every block out for one frame (style.css, .measure) so off-screen blocks keep their real size.
  transcript.classList.add('measure');
  scrollToEnd(true);
  requestAnimationFrame(() => requestAnimationFrame(() => {
    transcript.classList.remove('measure');
    scrollToEnd();
  }));
}

/** Messages whose Markdown did not fit in the last frame's budget. */
const unfinished = new Set<string>();

function renderMessage(m: Message, deadline = Infinity): void {
  if (m.hidden) return;
  let v = views.get(m.id);
  if (m.role === 'user') {
    if (v) return;
    const textEl = h('div', { class: 'user-text', text: m.content ?? '' });
    const el = h('div', { class: 'msg user', 'data-id': m.id },
      h('div', { class: 'msg-head' }, icon('account'), h('span', { text: 'You' }),
        msgActions(actionButton('edit', 'Edit and resend', () => startEdit(m, el, textEl)))),
      textEl,
      m.attachments?.length ? h('div', { class: 'chips' }, ...m.attachments.map((a) => h('span', { class: 'chip' }, icon(a.kind === 'image' ? 'file-media' : 'file'), ' ' + (a.name ?? a.path ?? a.kind)))) : null);
    transcript.appendChild(el);
    views.set(m.id, { el, head: el, activity: h('details'), activityKey: '', content: new BlockRenderer(h('div')) });
    return;
  }
  if (!v) {
    const head = h('div', { class: 'msg-head' });
    const activity = h('details', { class: 'activity hidden' });
    activity.addEventListener('toggle', () => {
      // Only a user's toggle is remembered, not the renderer's own open/close.
      if (activity.open !== expectedOpen.get(m.id)) save({ collapsed: { ...saved.collapsed, [m.id]: !activity.open } });
    });
    const contentEl = h('div', { class: 'content' });
    const el = h('div', { class: 'msg assistant', 'data-id': m.id }, head, activity, contentEl);
    transcript.appendChild(el);
    v = { el, head, activity, activityKey: '', content: new BlockRenderer(contentEl) };
    views.set(m.id, v);
  }
  const streaming = m.status === 'streaming';
  v.el.classList.toggle('streaming', streaming);
  v.head.textContent = '';
  append(v.head, icon('hubot'), h('span', { class: 'agent-name', text: m.agent || 'agent' }), statusBadge(m),
    streaming ? null : msgActions(actionButton('refresh', 'Retry: regenerate this answer', () => post({ type: 'retry', messageId: m.id, agent: selectedAgent }))));
  const text = (m.segments ?? []).filter((s) => s.type === 'content').map((s) => s.content ?? '').join('');
  if (v.content.update(text, streaming, deadline)) unfinished.delete(m.id);
  else unfinished.add(m.id);
  renderActivity(m, v);
  renderTurnError(m, v);
}

/**
 * renderTurnError shows why a turn failed: the whole message, wrapped (a
 * daemon error may end with "; <hint>", e.g. "run `codex login` …; see
 * `ochatd doctor`", and the hint is the part the user needs).
 */
function renderTurnError(m: Message, v: MessageView): void {
  // Among the message's own children: a query over the whole (possibly huge) answer would run every frame.
  let el = Array.from(v.el.children).find((c) => c.classList.contains('turn-error')) as HTMLElement | undefined;
  if (m.status !== 'failed' || !m.error) {
    el?.remove();
    return;
  }
  if (!el) {
    el = h('div', { class: 'turn-error', role: 'alert' }, icon('error'), h('span', { class: 'turn-error-text' }));
    v.el.appendChild(el);
  }
  const text = el.querySelector<HTMLElement>('.turn-error-text')!;
  if (text.textContent !== m.error) text.textContent = m.error;
}

// ---------- message actions: edit a prompt, retry an answer ----------
/** busy is true while the actions cannot run: a turn is running, or the transcript is read-only. */
function busy(): boolean {
  return !!model.running || model.readOnly;
}

function actionButton(name: string, label: string, run: () => void): HTMLButtonElement {
  const b = h('button', { class: 'icon-btn msg-action', 'data-action': name, title: label, 'aria-label': label, onclick: () => { if (!busy()) run(); } }, icon(name));
  b.disabled = busy();
  return b;
}

/** msgActions is the hover toolbar of a message. */
function msgActions(...buttons: HTMLElement[]): HTMLElement {
  return h('span', { class: 'msg-actions' }, ...buttons);
}

/** updateActions enables the message actions when no turn runs (called on every chrome render). */
function updateActions(): void {
  const off = busy();
  transcript.classList.toggle('readonly-transcript', model.readOnly);
  transcript.querySelectorAll<HTMLButtonElement>('.msg-action').forEach((b) => { b.disabled = off; });
}

/** startEdit turns a user message into an editable box: Enter resends it (ochat/chat/edit), Escape gives up. */
function startEdit(m: Message, el: HTMLElement, textEl: HTMLElement): void {
  if (el.querySelector('.edit-box')) return;
  const box = h('textarea', { class: 'input edit-box', rows: Math.min(12, (m.content ?? '').split('\n').length + 1), 'aria-label': 'Edit message' });
  box.value = m.content ?? '';
  const done = () => { wrap.remove(); textEl.classList.remove('hidden'); };
  const submit = () => {
    const text = box.value.trim();
    if (!text || busy()) return;
    post({ type: 'edit', messageId: m.id, text, agent: selectedAgent });
    done();
  };
  const wrap = h('div', { class: 'edit-wrap' }, box,
    h('div', { class: 'edit-bar' }, h('span', { class: 'hint', text: 'Enter to resend, Shift+Enter for a new line, Escape to cancel. Later messages are replaced.' }),
      h('span', { class: 'spacer' }),
      h('button', { class: 'edit-cancel', onclick: done }, 'Cancel'),
      h('button', { class: 'send edit-send', onclick: submit }, icon('send'), ' Send')));
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
    else if (e.key === 'Escape') { e.preventDefault(); done(); }
  });
  textEl.classList.add('hidden');
  textEl.after(wrap);
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
}

function statusBadge(m: Message): HTMLElement | null {
  const st = m.status ?? '';
  if (st === 'streaming') return h('span', { class: 'badge running' }, 'working');
  const parts: string[] = [];
  if (st && st !== 'completed') parts.push(st);
  if (m.stopReason && m.stopReason !== 'end_turn' && m.stopReason !== 'cancelled') parts.push(m.stopReason);
  if (m.durationMs) parts.push(formatDuration(m.durationMs));
  return parts.length ? h('span', { class: `badge ${st}` }, parts.join(' · ')) : null;
}

function renderActivity(m: Message, v: MessageView): void {
  const segs = (m.segments ?? []).filter((s) => s.type !== 'content');
  const reasoning = segs.filter((s) => s.type === 'reasoning').map((s) => s.content ?? '').join('');
  const others = segs.filter((s) => s.type !== 'reasoning');
  const key = JSON.stringify(others) + '|' + reasoning.length;
  if (key === v.activityKey) return;
  v.activityKey = key;
  if (!segs.length) return;
  v.activity.classList.remove('hidden');
  const wasOpen = v.activity.open;
  // Keep the tools and files the user expanded open across the rebuild.
  const openInside = new Set<string>();
  v.activity.querySelectorAll('details[open]').forEach((d) => openInside.add((d as HTMLElement).dataset.tool ?? (d as HTMLElement).dataset.path ?? ''));
  v.activity.textContent = '';
  const sum = summarize(m);
  const bits: Array<Node | string> = [];
  if (sum.reasoning) bits.push(h('span', { class: 'sum' }, icon('lightbulb'), ' thought'));
  if (sum.toolCount) {
    const by = Object.entries(sum.tools).map(([st, n]) => `${n} ${st}`).join(', ');
    bits.push(h('span', { class: 'sum' }, icon('tools'), ` ${sum.toolCount} tool call${sum.toolCount > 1 ? 's' : ''} (${by})`));
  }
  if (sum.planTotal) bits.push(h('span', { class: 'sum' }, icon('checklist'), ` plan ${sum.planDone}/${sum.planTotal}`));
  if (sum.files) bits.push(h('span', { class: 'sum' }, icon('files'), ` ${sum.files} file${sum.files > 1 ? 's' : ''} `, h('span', { class: 'add', text: `+${sum.additions}` }), ' ', h('span', { class: 'del', text: `−${sum.deletions}` })));
  if (sum.notApplied) bits.push(h('span', { class: 'sum not-applied', title: 'Proposed changes whose write did not happen (tool failed or permission rejected)' }, icon('circle-slash'), ` ${sum.notApplied} not applied`));
  const summary = h('summary', { class: 'activity-summary' }, ...bits);
  v.activity.appendChild(summary);
  if (reasoning) v.activity.appendChild(h('div', { class: 'reasoning' }, h('div', { class: 'label' }, icon('lightbulb'), ' Reasoning'), h('div', { class: 'reasoning-text', text: reasoning })));
  for (const s of others) v.activity.appendChild(renderActivitySegment(m, s));
  if (sum.files) {
    v.activity.appendChild(h('div', { class: 'actions' }, h('button', { onclick: () => post({ type: 'reviewTurn', messageId: m.id }) }, icon('diff'), ' Review all changes')));
  }
  v.activity.querySelectorAll('details').forEach((d) => {
    const key = (d as HTMLElement).dataset.tool ?? (d as HTMLElement).dataset.path ?? '';
    if (key && openInside.has(key)) (d as HTMLDetailsElement).open = true;
  });
  const collapsed = saved.collapsed?.[m.id];
  const open = collapsed === undefined ? wasOpen || m.status === 'streaming' : !collapsed;
  expectedOpen.set(m.id, open);
  v.activity.open = open;
}

const toolIcons: Record<string, string> = { pending: 'circle-large-outline', running: 'loading', completed: 'pass', error: 'error' };
const planIcons: Record<string, string> = { pending: 'circle-large-outline', in_progress: 'arrow-circle-right', completed: 'pass-filled' };

function renderActivitySegment(m: Message, s: Segment): HTMLElement {
  switch (s.type) {
    case 'tool': {
      const st = s.status || 'pending';
      const body = h('div', { class: 'tool-body' });
      if (s.input !== undefined && s.input !== null) body.appendChild(h('div', { class: 'io' }, h('div', { class: 'label', text: 'Input' }), h('pre', { text: typeof s.input === 'string' ? s.input : JSON.stringify(s.input, null, 2) })));
      if (s.output) body.appendChild(h('div', { class: 'io' }, h('div', { class: 'label', text: 'Output' }), h('pre', { text: s.output.length > 20000 ? s.output.slice(0, 20000) + '\n…' : s.output })));
      if (s.error) body.appendChild(h('div', { class: 'io err' }, h('div', { class: 'label', text: 'Error' }), h('pre', { text: s.error })));
      return h('details', { class: `tool tool-${st}`, 'data-tool': s.id ?? '' },
        h('summary', {}, icon(toolIcons[st] ?? 'circle-large-outline', st === 'running' ? 'codicon-modifier-spin' : ''), ' ', h('span', { class: 'tool-name', text: s.name || s.id || 'tool' }),
          s.providerKind ? h('span', { class: 'kind', text: s.providerKind }) : null, h('span', { class: `badge ${st}`, text: st }), s.durationMs ? h('span', { class: 'dur', text: formatDuration(s.durationMs) }) : null),
        body);
    }
    case 'plan':
      return h('div', { class: 'plan' }, h('div', { class: 'label' }, icon('checklist'), ' Plan'),
        h('ul', {}, ...(s.entries ?? []).map((e) => h('li', { class: `plan-${e.status}` }, icon(planIcons[e.status] ?? 'circle-large-outline'), ' ', h('span', { text: e.content }), e.priority ? h('span', { class: 'prio', text: e.priority }) : null))));
    case 'fileChange':
      return renderFileChange(s, { messageId: m.id });
    case 'workspace':
      return h('div', { class: 'workspace' }, icon('folder'), ' ', (s.files ?? []).join(', '), ...(s.errors ?? []).map((e) => h('div', { class: 'err', text: e })));
    default:
      return h('div', { class: 'unknown', text: `${s.type}` });
  }
}

function diffLines(s: Segment): DiffLine[] {
  if (s.diff) return parseUnifiedDiff(s.diff);
  if (s.oldText != null || s.newText != null) return lineDiff(s.oldText ?? '', s.newText ?? '');
  return [];
}

function renderDiff(s: Segment): HTMLElement {
  const lines = diffLines(s);
  const pre = h('pre', { class: 'diff' });
  for (const l of lines.slice(0, 2000)) pre.appendChild(h('span', { class: `dl ${l.kind}`, text: l.text || ' ' }));
  if (lines.length > 2000) pre.appendChild(h('span', { class: 'dl meta', text: `… ${lines.length - 2000} more lines (open the diff editor)` }));
  return pre;
}

/**
 * renderFileChange draws one file change: path, +adds −dels, status and its
 * buttons (diff; revert; apply again once reverted). A rejected change (the
 * write never happened) is muted and marked "not applied", and offers only
 * the proposed diff.
 */
function renderFileChange(s: Segment, ref: { messageId?: string; permissionId?: string }, open = false): HTMLElement {
  const path = s.path ?? '';
  const rejected = isRejected(s);
  const diffLabel = rejected ? 'Open proposed diff (not applied)' : 'Open diff';
  const actions = h('span', { class: 'fc-actions' },
    h('button', { class: 'icon-btn fc-diff', title: diffLabel, 'aria-label': diffLabel, onclick: (e: Event) => { e.preventDefault(); post({ type: 'openDiff', path, ...ref }); } }, icon('diff')));
  if (ref.messageId && !rejected && (s.oldText !== undefined || s.newText != null)) actions.appendChild(h('button', { class: 'icon-btn fc-revert', title: 'Revert this file', onclick: (e: Event) => { e.preventDefault(); post({ type: 'applyChange', messageId: ref.messageId!, path, action: 'revert' }); } }, icon('discard')));
  if (ref.messageId && !rejected && s.newText !== undefined && s.status === 'reverted') actions.appendChild(h('button', { class: 'icon-btn fc-apply', title: 'Apply again', onclick: (e: Event) => { e.preventDefault(); post({ type: 'applyChange', messageId: ref.messageId!, path, action: 'apply' }); } }, icon('check')));
  const badge = rejected
    ? h('span', { class: 'badge not-applied', title: 'The write did not happen: the tool failed or its permission was rejected or cancelled' }, icon('circle-slash'), ' not applied')
    : s.status ? h('span', { class: 'badge', text: s.status }) : null;
  const d = h('details', { class: rejected ? 'filechange rejected' : 'filechange', 'data-path': path },
    h('summary', {}, icon(rejected ? 'circle-slash' : 'file-code'), ' ', h('span', { class: 'path', text: path }), ' ',
      h('span', { class: 'add', text: `+${s.additions ?? 0}` }), ' ', h('span', { class: 'del', text: `−${s.deletions ?? 0}` }),
      badge, actions));
  d.open = open;
  let filled = false;
  const fill = () => {
    if (filled) return;
    filled = true;
    d.appendChild(renderDiff(s));
  };
  if (open) fill();
  else d.addEventListener('toggle', fill);
  return d;
}

// ---------- permissions ----------
function renderPermissions(): void {
  permissionsEl.textContent = '';
  for (const p of model.permissions.values()) permissionsEl.appendChild(renderPermission(p));
}

const optionIcons: Record<string, string> = { allow_once: 'check', allow_always: 'check-all', reject_once: 'close', reject_always: 'circle-slash' };

function renderPermission(p: PermissionParams): HTMLElement {
  const t = p.toolCall ?? ({} as Segment);
  const input = t.input !== undefined && t.input !== null ? h('pre', { class: 'perm-input', text: typeof t.input === 'string' ? t.input : JSON.stringify(t.input, null, 2) }) : null;
  return h('div', { class: 'permission', 'data-permission': p.permissionId, role: 'group', 'aria-label': 'Permission request' },
    h('div', { class: 'perm-head' }, icon('shield'), h('strong', { text: ` ${p.agent} wants to run: ` }), h('span', { class: 'tool-name', text: t.name ?? t.id ?? 'tool' }), t.providerKind ? h('span', { class: 'kind', text: t.providerKind }) : null),
    input,
    ...(p.fileChanges ?? []).map((f) => renderFileChange(f, { permissionId: p.permissionId }, true)),
    h('div', { class: 'perm-options' }, ...p.options.map((o) =>
      h('button', { class: `perm-option ${o.kind.startsWith('allow') ? 'allow' : 'reject'}`, 'data-option': o.optionId, title: o.kind, onclick: () => post({ type: 'respondPermission', permissionId: p.permissionId, optionId: o.optionId }) }, icon(optionIcons[o.kind] ?? 'circle'), ' ' + o.name))));
}

// ---------- chrome: header, working, composer ----------
let workingTimer: ReturnType<typeof setInterval> | undefined;

function renderChrome(): void {
  title.textContent = model.conversation?.title || (model.conversation ? 'Untitled conversation' : 'New conversation');
  conn.textContent = '';
  if (connection.state !== 'running') append(conn, h('span', { class: `badge conn-${connection.state}`, title: connection.detail ?? '', text: connection.state === 'missing' ? 'ochatd not found' : connection.state }));
  empty.remove();
  if (!model.messages.length) transcript.appendChild(empty);
  readonlyBar.classList.toggle('hidden', !model.readOnly);
  readonlyText.textContent = following ? ` Terminal session (${following.agent}), following live ` : ' Read-only transcript ';
  header.classList.toggle('live', !!following);
  updateActions();
  composer.classList.toggle('hidden', model.readOnly);
  const running = !!model.running;
  sendBtn.classList.toggle('hidden', running);
  cancelBtn.classList.toggle('hidden', !running);
  working.classList.toggle('hidden', !running);
  clearInterval(workingTimer);
  if (running) {
    const tick = () => {
      const r = model.running;
      if (!r) return;
      (working.querySelector('.working-text') as HTMLElement).textContent = ` ${r.agent || 'agent'} is working… ${formatDuration(Math.max(0, Date.now() - r.startedAt))}`;
    };
    tick();
    workingTimer = setInterval(tick, 1000);
  }
  renderAgents();
}

function renderAgents(): void {
  agentSelect.textContent = '';
  for (const a of agents) {
    const o = h('option', { value: a.name, text: a.available ? a.name : `${a.name} (${a.untrusted ? 'untrusted' : 'unavailable'})`, title: [a.reason, a.install].filter(Boolean).join('\n') || a.command || '' });
    if (!a.available) o.disabled = true;
    agentSelect.appendChild(o);
  }
  if (selectedAgent) agentSelect.value = selectedAgent;
  trustBar.classList.toggle('hidden', !agents.some((a) => a.untrusted));
  renderUnavailable();
  renderConfig();
}

/** renderUnavailable lists the agents that cannot start, each with why and how to fix it (the Trust action for untrusted ones). */
function renderUnavailable(): void {
  const off = agents.filter((a) => !a.available);
  unavailableEl.dataset.rendering = '1';
  unavailableEl.textContent = '';
  unavailableEl.classList.toggle('hidden', !off.length);
  if (off.length) {
    unavailableEl.appendChild(h('summary', {}, icon('warning'), ` ${off.length} agent${off.length > 1 ? 's' : ''} unavailable`));
    for (const a of off) {
      unavailableEl.appendChild(h('div', { class: 'unavail', 'data-agent': a.name },
        h('div', { class: 'unavail-head' }, h('strong', { text: a.name }), a.untrusted ? h('span', { class: 'badge', text: 'untrusted' }) : null,
          h('span', { class: 'unavail-reason', text: a.reason ?? 'cannot start' })),
        a.install ? h('div', { class: 'unavail-install' }, h('span', { class: 'label', text: a.untrusted ? 'To trust:' : 'To install:' }), h('code', { text: a.install })) : null,
        a.untrusted ? h('button', { class: 'unavail-trust', onclick: () => post({ type: 'trustWorkspace' }) }, icon('shield'), ' Review and trust') : null));
    }
  }
  unavailableEl.open = !saved.unavailableFolded;
  // The toggle event fires asynchronously: only a user's toggle after this render is remembered.
  setTimeout(() => { delete unavailableEl.dataset.rendering; }, 0);
}

function currentState(): AgentStateParams | undefined {
  return selectedAgent ? model.agentState[selectedAgent] : undefined;
}

function flatValues(o: ConfigOption): ConfigValue[] {
  const out: ConfigValue[] = [];
  for (const v of o.options ?? []) {
    if ('value' in v) out.push(v);
    else out.push(...(v.options ?? []));
  }
  return out;
}

function renderConfig(): void {
  configEl.textContent = '';
  usageEl.textContent = '';
  const st = currentState();
  if (!st || !selectedAgent) return;
  const agent = selectedAgent;
  for (const o of st.configOptions ?? []) {
    if (o.type === 'boolean') {
      const cb = h('input', { type: 'checkbox', title: o.description ?? o.name, 'aria-label': o.name });
      cb.checked = o.currentValue === true;
      cb.addEventListener('change', () => post({ type: 'setConfig', agent, configId: o.id, value: cb.checked }));
      configEl.appendChild(h('label', { class: 'cfg' }, cb, ' ' + o.name));
      continue;
    }
    const sel = h('select', { class: 'cfg', title: o.description ?? o.name, 'aria-label': o.name, 'data-config': o.id });
    for (const v of flatValues(o)) sel.appendChild(h('option', { value: v.value, text: v.name, title: v.description ?? '' }));
    sel.value = String(o.currentValue ?? '');
    sel.addEventListener('change', () => post({ type: 'setConfig', agent, configId: o.id, value: sel.value }));
    configEl.appendChild(sel);
  }
  const modes = st.modes;
  if (modes?.availableModes?.length && !(st.configOptions ?? []).some((o) => o.category === 'mode')) {
    const sel = h('select', { class: 'cfg', title: 'Mode', 'aria-label': 'Mode', 'data-config': 'mode' });
    for (const m of modes.availableModes) sel.appendChild(h('option', { value: m.id, text: m.name }));
    sel.value = modes.currentModeId ?? '';
    sel.addEventListener('change', () => post({ type: 'setConfig', agent, configId: 'mode', value: sel.value }));
    configEl.appendChild(sel);
  }
  if (st.usage?.size) usageEl.textContent = `${Math.round(((st.usage.used ?? 0) / st.usage.size) * 100)}% context`;
}

// ---------- composer: send, slash commands, @ mentions, images ----------
interface PopupItem { label: string; detail?: string; apply(): void }
let popupItems: PopupItem[] = [];
let popupIndex = 0;

function showPopup(items: PopupItem[]): void {
  popupItems = items.slice(0, 50);
  popupIndex = 0;
  popup.textContent = '';
  popup.classList.toggle('hidden', !popupItems.length);
  popupItems.forEach((it, i) => {
    const row = h('div', { class: 'popup-item' + (i === 0 ? ' selected' : ''), role: 'option', onmousedown: (e: Event) => { e.preventDefault(); it.apply(); hidePopup(); } },
      h('span', { class: 'popup-label', text: it.label }), it.detail ? h('span', { class: 'popup-detail', text: it.detail }) : null);
    popup.appendChild(row);
  });
}
function hidePopup(): void {
  popupItems = [];
  popup.classList.add('hidden');
}
function movePopup(d: number): void {
  const rows = popup.querySelectorAll('.popup-item');
  rows[popupIndex]?.classList.remove('selected');
  popupIndex = (popupIndex + d + popupItems.length) % popupItems.length;
  rows[popupIndex]?.classList.add('selected');
  rows[popupIndex]?.scrollIntoView({ block: 'nearest' });
}

function mentionQuery(): { start: number; query: string } | undefined {
  const pos = input.selectionStart ?? input.value.length;
  const before = input.value.slice(0, pos);
  const m = /(^|\s)@([^\s@]*)$/.exec(before);
  return m ? { start: pos - m[2].length - 1, query: m[2] } : undefined;
}

function updateCompletions(): void {
  const v = input.value;
  const slash = /^\/(\S*)$/.exec(v);
  if (slash) {
    const cmds = currentState()?.commands ?? [];
    showPopup(cmds.filter((c) => c.name.startsWith(slash[1])).map((c) => ({
      label: '/' + c.name, detail: c.description ?? c.input?.hint,
      apply: () => { input.value = `/${c.name} `; input.focus(); },
    })));
    return;
  }
  const mq = mentionQuery();
  if (mq) {
    post({ type: 'mention', query: mq.query });
    return;
  }
  hidePopup();
}

function onMentionResults(query: string, files: string[]): void {
  const mq = mentionQuery();
  if (!mq || mq.query !== query) return;
  showPopup(files.map((f) => ({
    label: f,
    apply: () => {
      const pos = input.selectionStart ?? input.value.length;
      input.value = input.value.slice(0, mq.start) + '@' + f + ' ' + input.value.slice(pos);
      if (!attachments.some((a) => a.path === f)) attachments.push({ kind: 'file', path: f, name: f.split('/').pop() });
      renderChips();
      input.focus();
    },
  })));
}

function renderChips(): void {
  chips.textContent = '';
  attachments.forEach((a, i) => chips.appendChild(h('span', { class: 'chip' }, icon(a.kind === 'image' ? 'file-media' : 'file'), ' ' + (a.name ?? a.path ?? a.kind) + ' ',
    h('button', { class: 'icon-btn', title: 'Remove', onclick: () => { attachments.splice(i, 1); renderChips(); } }, icon('close')))));
}

function addImage(file: File): void {
  if (!file.type.startsWith('image/')) return;
  const reader = new FileReader();
  reader.onload = () => {
    const data = String(reader.result).replace(/^data:[^,]*,/, '');
    attachments.push({ kind: 'image', name: file.name || 'pasted image', mimeType: file.type, size: file.size, data });
    renderChips();
  };
  reader.readAsDataURL(file);
}

function send(): void {
  const text = input.value.trim();
  if (!text || model.running || model.readOnly) return;
  const mentioned = attachments.filter((a) => a.kind !== 'file' || text.includes('@' + a.path));
  post({ type: 'send', text, agent: selectedAgent, attachments: mentioned });
  input.value = '';
  attachments = [];
  renderChips();
  save({ draft: '' });
  hidePopup();
}

input.addEventListener('keydown', (e) => {
  if (popupItems.length) {
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') { e.preventDefault(); movePopup(e.key === 'ArrowDown' ? 1 : -1); return; }
    if (e.key === 'Enter' || e.key === 'Tab') { e.preventDefault(); popupItems[popupIndex]?.apply(); hidePopup(); return; }
    if (e.key === 'Escape') { e.preventDefault(); hidePopup(); return; }
  }
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  else if (e.key === 'Escape' && model.running) post({ type: 'cancel' });
});
input.addEventListener('input', () => { save({ draft: input.value }); updateCompletions(); });
input.addEventListener('blur', () => setTimeout(hidePopup, 150));
input.addEventListener('paste', (e) => {
  for (const item of e.clipboardData?.items ?? []) {
    if (item.kind === 'file') { const f = item.getAsFile(); if (f && f.type.startsWith('image/')) { e.preventDefault(); addImage(f); } }
  }
});
composer.addEventListener('dragover', (e) => e.preventDefault());
composer.addEventListener('drop', (e) => {
  e.preventDefault();
  for (const f of e.dataTransfer?.files ?? []) addImage(f);
  const uri = e.dataTransfer?.getData('text/uri-list');
  if (uri) for (const u of uri.split(/\r?\n/).filter(Boolean)) { const path = decodeURIComponent(u.replace(/^file:\/\//, '')); attachments.push({ kind: 'file', path, name: path.split('/').pop() }); }
  renderChips();
});
sendBtn.addEventListener('click', send);
cancelBtn.addEventListener('click', () => post({ type: 'cancel' }));
agentSelect.addEventListener('change', () => { selectedAgent = agentSelect.value; save({ agent: selectedAgent }); post({ type: 'selectAgent', agent: selectedAgent }); renderConfig(); });
document.addEventListener('click', (e) => {
  const a = (e.target as HTMLElement).closest('a');
  if (a && a.getAttribute('href')) { e.preventDefault(); post({ type: 'openLink', href: a.getAttribute('href')! }); }
});

// ---------- streaming: one DOM update per animation frame ----------
function nearBottom(): boolean {
  return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
}
function scrollToEnd(force = false): void {
  if (force || stick) transcript.scrollTop = transcript.scrollHeight;
}
let stick = true;
transcript.addEventListener('scroll', () => { stick = nearBottom(); });

function flush(): void {
  const start = performance.now();
  frameRequested = false;
  const dirty = new Set<string>();
  let ended = false;
  const wasRunning = !!model.running;
  for (const p of queue.splice(0)) {
    const m = model.applyEvent(p, Date.now());
    if (!m) continue;
    dirty.add(m.id);
    if (p.event.type === 'turn.completed' || p.event.type === 'turn.failed') ended = true;
  }
  // Script gets about 6 ms of a frame (style, layout and paint need the rest);
  // Markdown left over continues on the next frame.
  const deadline = start + 6;
  for (const id of unfinished) dirty.add(id);
  for (const id of dirty) { const m = model.message(id); if (m) renderMessage(m, deadline); }
  if (unfinished.size) schedule();
  if (ended) renderPermissions();
  if (ended || wasRunning !== !!model.running) renderChrome();
  scrollToEnd();
  (window as unknown as { __ochatFrames?: number }).__ochatFrames = ((window as unknown as { __ochatFrames?: number }).__ochatFrames ?? 0) + 1;
}

function schedule(): void {
  if (!frameRequested) {
    frameRequested = true;
    requestAnimationFrame(flush);
  }
}

window.addEventListener('message', (e: MessageEvent<HostMessage>) => {
  const msg = e.data;
  switch (msg.type) {
    case 'init':
      queue.length = 0;
      model = rebuild(msg.snapshot);
      following = msg.following;
      agents = msg.agents;
      selectedAgent = msg.selectedAgent ?? selectedAgent;
      connection = msg.connection;
      save({ conversationId: model.conversation?.id, agent: selectedAgent });
      renderAll();
      break;
    case 'event':
      queue.push(msg.params);
      schedule();
      break;
    case 'upsert': {
      // A followed terminal session grew: upsert by id; reset replaces the whole transcript.
      if (msg.reset) {
        const conv = model.conversation;
        model = rebuild({ ...model.snapshot(), conversation: conv, messages: msg.messages });
        if (msg.title && model.conversation) model.conversation.title = msg.title;
        renderAll();
        break;
      }
      for (const m of msg.messages) {
        const old = views.get(m.id);
        model.upsert(m);
        const text = old?.el.querySelector('.user-text');
        if (old && m.role === 'user' && text) text.textContent = m.content ?? '';
        else renderMessage(model.message(m.id)!);
      }
      if (msg.title && model.conversation) model.conversation.title = msg.title;
      renderChrome();
      scrollToEnd();
      break;
    }
    case 'permission':
      model.addPermission(msg.params);
      renderPermissions();
      scrollToEnd(true);
      break;
    case 'permissionResolved':
      model.resolvePermission(msg.params);
      renderPermissions();
      break;
    case 'agentState':
      model.setAgentState(msg.params);
      renderConfig();
      break;
    case 'agents':
      agents = msg.agents;
      selectedAgent = msg.selectedAgent ?? selectedAgent;
      renderAgents();
      break;
    case 'connection':
      connection = msg.connection;
      renderChrome();
      break;
    case 'mentionResults':
      onMentionResults(msg.query, msg.files);
      break;
    case 'error':
      errorEl.textContent = msg.message;
      errorEl.classList.remove('hidden');
      setTimeout(() => errorEl.classList.add('hidden'), 8000);
      break;
  }
});

function rebuild(s: import('../src/model/conversation').ChatSnapshot): ConversationModel {
  const m = new ConversationModel();
  m.conversation = s.conversation;
  for (const msg of s.messages) m.put(msg);
  m.running = s.running;
  for (const p of s.permissions) m.permissions.set(p.permissionId, p);
  Object.assign(m.agentState, s.agentState);
  m.readOnly = s.readOnly;
  return m;
}

renderChrome();
post({ type: 'ready', conversationId: saved.conversationId });
// Once the panel is idle, run the Markdown path once off-screen so the first streamed frames stay short.
(window.requestIdleCallback ?? ((f: () => void) => setTimeout(f, 200)))(() => warmUp());
// keep the renderer reachable for tests that measure it
(window as unknown as { __ochatRenderMarkdown?: typeof renderMarkdown }).__ochatRenderMarkdown = renderMarkdown;
(window as unknown as { __ochatBlockRenderer?: typeof BlockRenderer }).__ochatBlockRenderer = BlockRenderer;
