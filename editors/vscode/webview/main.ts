/**
 * The chat webview: renders the transcript contract it receives from the
 * extension host (snapshot + live events), batches streamed updates per
 * animation frame, and posts user actions back. It makes no protocol call.
 */
import { ConversationModel } from '../src/model/conversation';
import { summarize } from '../src/model/reduce';
import { lineDiff, parseUnifiedDiff, type DiffLine } from '../src/model/diffText';
import { isRejected, type AgentInfo, type AgentStateParams, type Attachment, type ConfigOption, type ConfigValue, type EventParams, type Message, type PermissionParams, type QueueItem, type Segment } from '../src/model/protocol';
import type { HostMessage, WebviewMessage, ConnectionInfo, FollowInfo, ViewEnv } from '../src/ui/messages';
import { inputPath, readableError, relInText, relPath, toolInputText } from '../src/model/readable';
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
let env: ViewEnv = {};
/** Sends posted and not yet answered (sendResult), by id: the composer keeps the text until the host says it went out. */
const pendingSends = new Map<number, string>();
let sendSeq = 0;
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
const emptyHint = h('p', { class: 'empty-hint', text: 'Ask any coding agent. Type / for commands, @ to mention a file.' });
const empty = h('div', { class: 'empty' }, icon('comment-discussion'), emptyHint,
  h('div', { class: 'empty-actions' },
    h('button', { class: 'empty-focus', onclick: () => input.focus() }, icon('edit'), ' Write a message'),
    h('button', { class: 'empty-history', onclick: () => post({ type: 'openHistory' }) }, icon('history'), ' Open a past conversation')));
const queueEl = h('div', { class: 'queue hidden', role: 'list', 'aria-label': 'Queued messages' });
const codeBar = h('div', { class: 'code-bar hidden' },
  h('span', { class: 'code-lang' }),
  h('button', { class: 'icon-btn code-copy', title: 'Copy', 'aria-label': 'Copy code' }, icon('copy')),
  h('button', { class: 'icon-btn code-insert', title: 'Insert at cursor', 'aria-label': 'Insert code at cursor' }, icon('insert')));
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
append(app, header, transcript, permissionsEl, working, errorEl, trustBar, readonlyBar, queueEl, composer, codeBar);
input.value = saved.draft ?? '';

function save(patch: Partial<SavedState>): void {
  Object.assign(saved, patch);
  vscode.setState(saved);
}

// ---------- messages ----------
/**
 * One part of an assistant message, in the order the agent produced it: a
 * run of text (Markdown), or a group of consecutive activity (reasoning,
 * tools, plan, file changes) shown as one collapsible block where it happened.
 */
interface Part {
  kind: 'text' | 'group';
  el: HTMLElement;
  renderer?: BlockRenderer;
  key?: string;
}
interface MessageView {
  el: HTMLElement;
  head: HTMLElement;
  body: HTMLElement;
  parts: Part[];
}
type Run = { kind: 'text'; text: string } | { kind: 'group'; segs: Segment[] };

/** runsOf splits a message's segments into text runs and activity groups, in order; blank text does not split a group. */
function runsOf(m: Message): Run[] {
  const out: Run[] = [];
  for (const s of m.segments ?? []) {
    const last = out[out.length - 1];
    if (s.type === 'content') {
      if (last?.kind === 'text') last.text += s.content ?? '';
      else if ((s.content ?? '').trim() !== '') out.push({ kind: 'text', text: s.content ?? '' });
    } else if (last?.kind === 'group') last.segs.push(s);
    else out.push({ kind: 'group', segs: [s] });
  }
  return out;
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
    views.set(m.id, { el, head: el, body: el, parts: [] });
    return;
  }
  if (!v) {
    const head = h('div', { class: 'msg-head' });
    const body = h('div', { class: 'msg-body' });
    const el = h('div', { class: 'msg assistant', 'data-id': m.id }, head, body);
    transcript.appendChild(el);
    v = { el, head, body, parts: [] };
    views.set(m.id, v);
  }
  const streaming = m.status === 'streaming';
  v.el.classList.toggle('streaming', streaming);
  v.head.textContent = '';
  append(v.head, icon('hubot'), h('span', { class: 'agent-name', text: m.agent || 'agent' }), statusBadge(m),
    streaming ? null : msgActions(actionButton('refresh', 'Retry: regenerate this answer', () => post({ type: 'retry', messageId: m.id, agent: selectedAgent }))));
  renderParts(m, v, streaming, deadline);
  renderTurnError(m, v);
}

/**
 * renderParts brings the message's parts in line with its runs: parts only
 * grow at the end (a segment keeps its place), so the ones before stay as
 * they are and only the last text run streams.
 */
function renderParts(m: Message, v: MessageView, streaming: boolean, deadline: number): void {
  const runs = runsOf(m);
  let i = 0;
  while (i < v.parts.length && i < runs.length && v.parts[i].kind === runs[i].kind) i++;
  for (const p of v.parts.splice(i)) p.el.remove();
  let done = true;
  const filesGroup = lastGroupWithFiles(runs);
  let gi = 0;
  runs.forEach((r, j) => {
    let p = v.parts[j];
    if (r.kind === 'text') {
      if (!p) {
        const el = h('div', { class: 'content' });
        p = { kind: 'text', el, renderer: new BlockRenderer(el) };
        v.parts.push(p);
        v.body.appendChild(el);
      }
      if (!p.renderer!.update(r.text, streaming && j === runs.length - 1, deadline)) done = false;
      return;
    }
    if (!p) {
      const el = h('details', { class: 'activity' });
      p = { kind: 'group', el, key: '' };
      v.parts.push(p);
      v.body.appendChild(el);
      const key = groupKey(m.id, gi);
      el.addEventListener('toggle', () => {
        // Only a user's toggle is remembered, not the renderer's own open/close.
        const d = el as HTMLDetailsElement;
        if (d.open !== expectedOpen.get(key)) save({ collapsed: { ...saved.collapsed, [key]: !d.open } });
      });
    }
    renderGroup(m, p, r.segs, gi, j === filesGroup);
    gi++;
  });
  if (done) unfinished.delete(m.id);
  else unfinished.add(m.id);
}

/** groupKey names an activity group for the remembered open/closed state (the first keeps the message id). */
function groupKey(messageId: string, gi: number): string {
  return gi === 0 ? messageId : `${messageId}#${gi}`;
}

function lastGroupWithFiles(runs: Run[]): number {
  for (let j = runs.length - 1; j >= 0; j--) {
    const r = runs[j];
    if (r.kind === 'group' && r.segs.some((s) => s.type === 'fileChange')) return j;
  }
  return -1;
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
  const readable = readableError(m.error);
  if (text.textContent !== readable) text.textContent = readable;
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

/** toolRejected: the tool's write did not happen (its file change is marked rejected: permission refused, or it failed). */
function toolRejected(m: Message, s: Segment): boolean {
  return !!s.id && (m.segments ?? []).some((f) => f.type === 'fileChange' && f.toolCallId === s.id && isRejected(f));
}

function renderGroup(m: Message, part: Part, segs: Segment[], gi: number, withReview: boolean): void {
  const activity = part.el as HTMLDetailsElement;
  const reasoning = segs.filter((s) => s.type === 'reasoning').map((s) => s.content ?? '').join('');
  const others = segs.filter((s) => s.type !== 'reasoning');
  const rejectedTools = others.filter((s) => s.type === 'tool' && toolRejected(m, s)).map((s) => s.id);
  const key = JSON.stringify(others) + '|' + reasoning.length + '|' + withReview + '|' + rejectedTools.join(',') + '|' + (env.workspaceRoot ?? '');
  if (key === part.key) return;
  part.key = key;
  const wasOpen = activity.open;
  // Keep the tools and files the user expanded open across the rebuild.
  const openInside = new Set<string>();
  activity.querySelectorAll('details[open]').forEach((d) => openInside.add((d as HTMLElement).dataset.tool ?? (d as HTMLElement).dataset.path ?? ''));
  activity.textContent = '';
  const sum = summarize({ ...m, segments: segs });
  // A tool whose change was not applied is counted as such, not as an error.
  for (const id of rejectedTools) {
    const st = others.find((s) => s.id === id)?.status || 'pending';
    if (sum.tools[st] && --sum.tools[st] === 0) delete sum.tools[st];
    sum.tools['not applied'] = (sum.tools['not applied'] ?? 0) + 1;
  }
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
  activity.appendChild(summary);
  // Reasoning and the other activity in the order they happened.
  let reasoningShown = false;
  for (const s of segs) {
    if (s.type === 'reasoning') {
      if (!reasoningShown) activity.appendChild(h('div', { class: 'reasoning' }, h('div', { class: 'label' }, icon('lightbulb'), ' Reasoning'), h('div', { class: 'reasoning-text', text: reasoning })));
      reasoningShown = true;
    } else activity.appendChild(renderActivitySegment(m, s));
  }
  const allFiles = summarize(m).files;
  if (withReview && allFiles) {
    activity.appendChild(h('div', { class: 'actions' }, h('button', { onclick: (e: Event) => { e.preventDefault(); post({ type: 'reviewTurn', messageId: m.id }); } }, icon('diff'), ' Review all changes')));
  }
  activity.querySelectorAll('details').forEach((d) => {
    const k = (d as HTMLElement).dataset.tool ?? (d as HTMLElement).dataset.path ?? '';
    if (k && openInside.has(k)) (d as HTMLDetailsElement).open = true;
  });
  const gk = groupKey(m.id, gi);
  const collapsed = saved.collapsed?.[gk];
  const open = collapsed === undefined ? wasOpen || m.status === 'streaming' : !collapsed;
  expectedOpen.set(gk, open);
  activity.open = open;
}

/** fileLink is a workspace-relative path that opens the file (absolute path posted to the host). */
function fileLink(abs: string, label = relPath(abs, env.workspaceRoot)): HTMLElement {
  return h('a', { class: 'file-link', href: '#', title: `Open ${label}`, 'data-file': abs, onclick: (e: Event) => { e.preventDefault(); e.stopPropagation(); post({ type: 'openFile', path: abs }); } }, label);
}

/** toolTitle shows a tool's title with workspace paths relative, the file it names as a link. */
function toolTitle(s: Segment): HTMLElement {
  const name = relInText(s.name || s.id || 'tool', env.workspaceRoot);
  const el = h('span', { class: 'tool-name', title: name });
  const abs = inputPath(s.input);
  const rel = abs ? relPath(abs, env.workspaceRoot) : undefined;
  const at = rel ? name.indexOf(rel) : -1;
  if (abs && rel && at >= 0) append(el, name.slice(0, at), fileLink(abs, rel), name.slice(at + rel.length));
  else {
    el.textContent = name;
    if (abs) append(el, ' ', fileLink(abs));
  }
  return el;
}

const toolIcons: Record<string, string> = { pending: 'circle-large-outline', running: 'loading', completed: 'pass', error: 'error' };
const planIcons: Record<string, string> = { pending: 'circle-large-outline', in_progress: 'arrow-circle-right', completed: 'pass-filled' };

function renderActivitySegment(m: Message, s: Segment): HTMLElement {
  switch (s.type) {
    case 'tool': {
      const rejected = toolRejected(m, s);
      const st = rejected ? 'not-applied' : s.status || 'pending';
      const body = h('div', { class: 'tool-body' });
      const inputText = toolInputText(s.input, env.workspaceRoot);
      if (inputText) body.appendChild(h('div', { class: 'io' }, h('div', { class: 'label', text: 'Input' }), h('pre', { text: inputText })));
      if (s.output) body.appendChild(h('div', { class: 'io' }, h('div', { class: 'label', text: 'Output' }), h('pre', { text: s.output.length > 20000 ? s.output.slice(0, 20000) + '\n…' : s.output })));
      if (s.error) body.appendChild(h('div', { class: rejected ? 'io' : 'io err' }, h('div', { class: 'label', text: rejected ? 'Not applied' : 'Error' }), h('pre', { text: s.error })));
      return h('details', { class: `tool tool-${st}`, 'data-tool': s.id ?? '' },
        h('summary', {}, icon(rejected ? 'circle-slash' : toolIcons[st] ?? 'circle-large-outline', st === 'running' ? 'codicon-modifier-spin' : ''), ' ', toolTitle(s),
          s.providerKind ? h('span', { class: 'kind', text: s.providerKind }) : null,
          rejected ? h('span', { class: 'badge not-applied', title: 'The change did not happen: its permission was rejected or the tool failed' }, 'not applied') : h('span', { class: `badge ${st}`, text: st }),
          s.durationMs ? h('span', { class: 'dur', text: formatDuration(s.durationMs) }) : null),
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
    h('button', { class: 'icon-btn fc-diff', title: diffLabel, 'aria-label': diffLabel, onclick: (e: Event) => { e.preventDefault(); e.stopPropagation(); post({ type: 'openDiff', path, ...ref }); } }, icon('diff')));
  // A row button acts on the file; it never opens or closes the row or the section around it.
  if (ref.messageId && !rejected && (s.oldText !== undefined || s.newText != null) && s.status !== 'reverted') actions.appendChild(h('button', { class: 'icon-btn fc-revert', title: 'Revert this file', onclick: (e: Event) => { e.preventDefault(); e.stopPropagation(); post({ type: 'applyChange', messageId: ref.messageId!, path, action: 'revert' }); } }, icon('discard')));
  if (ref.messageId && !rejected && s.newText !== undefined && s.status === 'reverted') actions.appendChild(h('button', { class: 'icon-btn fc-apply', title: 'Apply again', onclick: (e: Event) => { e.preventDefault(); e.stopPropagation(); post({ type: 'applyChange', messageId: ref.messageId!, path, action: 'apply' }); } }, icon('check')));
  const badge = rejected
    ? h('span', { class: 'badge not-applied', title: 'The write did not happen: the tool failed or its permission was rejected or cancelled' }, icon('circle-slash'), ' not applied')
    : s.status ? h('span', { class: 'badge', text: s.status }) : null;
  const d = h('details', { class: rejected ? 'filechange rejected' : 'filechange', 'data-path': path },
    h('summary', {}, icon(rejected ? 'circle-slash' : 'file-code'), ' ', h('span', { class: 'path', title: path }, fileLink(path)), ' ',
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
/**
 * renderPermissions shows the pending requests. A new one takes the focus
 * only when the chat has it and the user is not typing in the composer
 * (the card itself, not a button, so a stray key answers nothing); once it
 * is answered, focus that was in a card goes back to the composer.
 */
function renderPermissions(): void {
  const before = new Set(Array.from(permissionsEl.querySelectorAll<HTMLElement>('.permission')).map((e) => e.dataset.permission));
  const hadFocus = permissionsEl.contains(document.activeElement);
  permissionsEl.textContent = '';
  let fresh: HTMLElement | undefined;
  for (const p of model.permissions.values()) {
    const el = renderPermission(p);
    permissionsEl.appendChild(el);
    if (!before.has(p.permissionId)) fresh ??= el;
  }
  const typing = document.activeElement === input && input.value.trim() !== '';
  if (fresh && document.hasFocus() && !typing && !model.readOnly) fresh.focus({ preventScroll: true });
  else if (hadFocus && !permissionsEl.contains(document.activeElement)) {
    const next = permissionsEl.querySelector<HTMLElement>('.permission');
    if (next) next.focus({ preventScroll: true });
    else input.focus();
  }
}

const optionIcons: Record<string, string> = { allow_once: 'check', allow_always: 'check-all', reject_once: 'close', reject_always: 'circle-slash' };

/** The order of a request's buttons: allow once first (the primary, default one), the lasting choices after. */
const optionOrder: Record<string, number> = { allow_once: 0, allow_always: 1, reject_once: 2, reject_always: 3 };

function renderPermission(p: PermissionParams): HTMLElement {
  const t = p.toolCall ?? ({} as Segment);
  const text = toolInputText(t.input, env.workspaceRoot);
  // With file diffs below, the input only repeats the path and contents.
  const inputEl = text && !(p.fileChanges ?? []).length ? h('pre', { class: 'perm-input', text }) : null;
  const options = [...p.options].sort((a, b) => (optionOrder[a.kind] ?? 9) - (optionOrder[b.kind] ?? 9));
  const primary = options.find((o) => o.kind === 'allow_once') ?? options.find((o) => o.kind.startsWith('allow'));
  return h('div', { class: 'permission', 'data-permission': p.permissionId, role: 'group', tabindex: '-1', 'aria-label': `${p.agent} asks permission: ${relInText(t.name ?? 'tool call', env.workspaceRoot)}` },
    h('div', { class: 'perm-head' }, icon('shield'), h('strong', { text: ` ${p.agent} wants to run: ` }), toolTitle(t), t.providerKind ? h('span', { class: 'kind', text: t.providerKind }) : null),
    inputEl,
    ...(p.fileChanges ?? []).map((f) => renderFileChange(f, { permissionId: p.permissionId }, true)),
    h('div', { class: 'perm-options' }, ...options.map((o) =>
      h('button', { class: `perm-option ${o === primary ? 'primary' : 'secondary'} ${o.kind.startsWith('allow') ? 'allow' : 'reject'}`, 'data-option': o.optionId, 'data-kind': o.kind, title: o.kind.replace('_', ' '), onclick: () => post({ type: 'respondPermission', permissionId: p.permissionId, optionId: o.optionId }) }, icon(optionIcons[o.kind] ?? 'circle'), ' ' + o.name))));
}

// ---------- chrome: header, working, composer ----------
let workingTimer: ReturnType<typeof setInterval> | undefined;

function renderChrome(): void {
  title.textContent = model.conversation?.title || (model.conversation ? 'Untitled conversation' : 'New conversation');
  conn.textContent = '';
  if (connection.state !== 'running') append(conn, h('span', { class: `badge conn-${connection.state}`, title: connection.detail ?? '', text: connection.state === 'missing' ? 'ochatd not found' : connection.state }));
  empty.remove();
  if (!model.messages.length) {
    const ready = agents.filter((a) => a.available);
    emptyHint.textContent = agents.length && !ready.length
      ? 'No agent can run yet: see below why and how to fix it.'
      : 'Ask any coding agent. Type / for commands, @ to mention a file.';
    transcript.appendChild(empty);
  }
  renderQueue();
  readonlyBar.classList.toggle('hidden', !model.readOnly);
  readonlyText.textContent = following ? ` Terminal session (${following.agent}), following live ` : ' Read-only transcript ';
  header.classList.toggle('live', !!following);
  updateActions();
  composer.classList.toggle('hidden', model.readOnly);
  const running = !!model.running;
  // While a turn runs, Send queues the message behind it.
  sendBtn.replaceChildren(icon(running ? 'list-ordered' : 'send'), running ? ' Queue' : ' Send');
  sendBtn.title = running ? 'Queue: sent when the running turn ends (Enter)' : 'Send (Enter)';
  input.placeholder = running
    ? 'Enter queues your message until the agent finishes — Escape cancels the turn'
    : 'Message the agent — Enter to send, Shift+Enter for a new line';
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
    const why = a.untrusted ? 'untrusted' : a.state && a.state !== 'ready' ? a.state.replace(/_/g, ' ') : 'unavailable';
    const o = h('option', { value: a.name, text: a.available ? a.name : `${a.name} (${why})`, title: [a.reason, a.install].filter(Boolean).join('\n') || a.command || '' });
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
        h('div', { class: 'unavail-head' }, h('strong', { text: a.name }), a.untrusted ? h('span', { class: 'badge', text: 'untrusted' }) : a.state && a.state !== 'ready' ? h('span', { class: 'badge unavail-state', text: a.state.replace(/_/g, ' ') }) : null,
          h('span', { class: 'unavail-reason', text: a.reason ?? 'cannot start' })),
        a.install ? h('div', { class: 'unavail-install' }, h('span', { class: 'label', text: a.untrusted ? 'To trust:' : /login/.test(a.state ?? '') ? 'To log in:' : 'To install:' }), h('code', { text: a.install })) : null,
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

/**
 * send posts the composer's text; while a turn runs the daemon queues it.
 * The text stays in the composer until the host answers that it went out
 * (sendResult), so a send that fails (ochatd unreachable) loses nothing.
 */
function send(): void {
  const text = input.value.trim();
  if (!text || model.readOnly || pendingSends.size) return;
  const mentioned = attachments.filter((a) => a.kind !== 'file' || text.includes('@' + a.path));
  const id = ++sendSeq;
  pendingSends.set(id, input.value);
  composer.classList.add('sending');
  post({ type: 'send', text, agent: selectedAgent, attachments: mentioned, id });
  hidePopup();
}

function onSendResult(msg: Extract<HostMessage, { type: 'sendResult' }>): void {
  const sent = pendingSends.get(msg.id);
  pendingSends.delete(msg.id);
  composer.classList.toggle('sending', pendingSends.size > 0);
  if (sent === undefined) return;
  if (!msg.ok) {
    showError(`Not sent: ${readableError(msg.error ?? 'unknown error')}. Your message is still in the box.`);
    return;
  }
  // Clear only what was sent: text typed meanwhile stays.
  if (input.value === sent) input.value = '';
  attachments = [];
  renderChips();
  save({ draft: input.value });
  errorEl.classList.add('hidden');
}

let errorTimer: ReturnType<typeof setTimeout> | undefined;
function showError(text: string): void {
  errorEl.textContent = text;
  errorEl.classList.remove('hidden');
  clearTimeout(errorTimer);
  errorTimer = setTimeout(() => errorEl.classList.add('hidden'), 15000);
}

// ---------- the message queue: messages sent while a turn runs ----------
/** renderQueue lists the queued messages above the composer: each can be edited, removed or sent now (steer). */
function renderQueue(): void {
  const items: QueueItem[] = model.queue ?? [];
  const editing = queueEl.querySelector<HTMLElement>('.queued.editing')?.dataset.queue;
  if (editing && items.some((q) => q.id === editing)) return; // do not pull an edit box from under the user
  queueEl.textContent = '';
  queueEl.classList.toggle('hidden', !items.length || model.readOnly);
  if (!items.length) return;
  queueEl.appendChild(h('div', { class: 'queue-head' }, icon('list-ordered'), ` ${items.length} queued — sent when the running turn ends`));
  for (const q of items) {
    const textEl = h('span', { class: 'queued-text', text: q.text, title: q.text });
    const row = h('div', { class: 'queued', role: 'listitem', 'data-queue': q.id }, icon('clock'), textEl,
      q.agent && q.agent !== model.running?.agent ? h('span', { class: 'kind', text: q.agent }) : null,
      h('span', { class: 'queued-actions' },
        h('button', { class: 'icon-btn q-send-now', title: 'Send now: stop the running turn and send this next', 'aria-label': 'Send now', onclick: () => post({ type: 'queueSendNow', id: q.id }) }, icon('run-above')),
        h('button', { class: 'icon-btn q-edit', title: 'Edit', 'aria-label': 'Edit queued message', onclick: () => editQueued(q, row, textEl) }, icon('edit')),
        h('button', { class: 'icon-btn q-remove', title: 'Remove from the queue', 'aria-label': 'Remove queued message', onclick: () => post({ type: 'queueRemove', id: q.id }) }, icon('trash'))));
    queueEl.appendChild(row);
  }
}

function editQueued(q: QueueItem, row: HTMLElement, textEl: HTMLElement): void {
  if (row.classList.contains('editing')) return;
  row.classList.add('editing');
  const box = h('textarea', { class: 'input edit-box q-edit-box', rows: Math.min(8, q.text.split('\n').length + 1), 'aria-label': 'Edit queued message' });
  box.value = q.text;
  const done = () => { row.classList.remove('editing'); box.remove(); textEl.classList.remove('hidden'); renderQueue(); };
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      const text = box.value.trim();
      if (text && text !== q.text) post({ type: 'queueUpdate', id: q.id, text });
      done();
    } else if (e.key === 'Escape') { e.preventDefault(); done(); }
  });
  textEl.classList.add('hidden');
  textEl.after(box);
  box.focus();
}

input.addEventListener('keydown', (e) => {
  if (popupItems.length) {
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') { e.preventDefault(); movePopup(e.key === 'ArrowDown' ? 1 : -1); return; }
    if (e.key === 'Enter' || e.key === 'Tab') { e.preventDefault(); popupItems[popupIndex]?.apply(); hidePopup(); return; }
    if (e.key === 'Escape') { e.preventDefault(); hidePopup(); return; }
  }
  // Enter sends; while a turn runs the message is queued (Claude Code, Codex).
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
      if (msg.env) applyEnv(msg.env);
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
      showError(readableError(msg.message));
      break;
    case 'sendResult':
      onSendResult(msg);
      break;
    case 'queue':
      model.queue = msg.items;
      renderQueue();
      break;
    case 'focusInput':
      input.focus();
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
  m.queue = [...(s.queue ?? [])];
  return m;
}

function applyEnv(e: ViewEnv): void {
  env = e;
  if (e.tabSize) document.documentElement.style.setProperty('--ochat-tab-size', String(e.tabSize));
}

// ---------- code blocks: language, Copy, Insert at cursor ----------
// One bar for all blocks, placed over the block under the pointer: the
// rendered Markdown stays exactly what markdown-it gives (render.test.mjs).
let codeTarget: HTMLElement | undefined;
function codeOf(pre: HTMLElement): string {
  return pre.querySelector('code')?.textContent ?? pre.textContent ?? '';
}
transcript.addEventListener('mouseover', (e) => {
  const target = e.target as HTMLElement;
  if (codeBar.contains(target)) return;
  const pre = target.closest<HTMLElement>('.content pre');
  if (!pre) { if (!target.closest('.code-bar')) { codeBar.classList.add('hidden'); codeTarget = undefined; } return; }
  if (pre === codeTarget && !codeBar.classList.contains('hidden')) return;
  codeTarget = pre;
  (codeBar.querySelector('.code-lang') as HTMLElement).textContent = pre.dataset.lang && pre.dataset.lang !== 'text' ? pre.dataset.lang : '';
  const tr = transcript.getBoundingClientRect();
  const r = pre.getBoundingClientRect();
  codeBar.style.top = `${Math.max(r.top, tr.top) + 2}px`;
  codeBar.style.right = `${document.documentElement.clientWidth - r.right + 4}px`;
  codeBar.classList.remove('hidden');
});
transcript.addEventListener('mouseleave', (e) => { if (!codeBar.contains(e.relatedTarget as Node)) codeBar.classList.add('hidden'); });
transcript.addEventListener('scroll', () => { codeBar.classList.add('hidden'); codeTarget = undefined; });
codeBar.querySelector('.code-copy')!.addEventListener('click', () => {
  if (!codeTarget) return;
  const text = codeOf(codeTarget);
  // The webview may not reach the clipboard (focus, permissions): the host copies.
  post({ type: 'copyCode', text });
  const b = codeBar.querySelector('.code-copy') as HTMLElement;
  b.replaceChildren(icon('check'));
  setTimeout(() => b.replaceChildren(icon('copy')), 1200);
});
codeBar.querySelector('.code-insert')!.addEventListener('click', () => {
  if (codeTarget) post({ type: 'insertCode', text: codeOf(codeTarget) });
});

renderChrome();
post({ type: 'ready', conversationId: saved.conversationId });
// Once the panel is idle, run the Markdown path once off-screen so the first streamed frames stay short.
(window.requestIdleCallback ?? ((f: () => void) => setTimeout(f, 200)))(() => warmUp());
// keep the renderer reachable for tests that measure it
(window as unknown as { __ochatRenderMarkdown?: typeof renderMarkdown }).__ochatRenderMarkdown = renderMarkdown;
(window as unknown as { __ochatBlockRenderer?: typeof BlockRenderer }).__ochatBlockRenderer = BlockRenderer;
