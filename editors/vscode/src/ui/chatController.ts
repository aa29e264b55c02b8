/**
 * ChatController is the hub between the daemon client and the UI: it keeps
 * the open conversation's ConversationModel, turns webview actions into
 * `ochat/…` requests, routes daemon notifications to the chat view, the
 * permission notifications and the history view, and re-subscribes after a
 * reconnect or an ochat/resync. A terminal-started session opened in the
 * panel is followed live (ochat/sessions/follow) until the panel shows
 * something else or closes.
 */
import * as vscode from 'vscode';
import { ConversationModel } from '../model/conversation';
import {
  Methods, type AgentInfo, type AgentStateParams, type EventParams, type PermissionParams, type PermissionResolvedParams,
  type SendResult, type SubscribeResult, type Attachment, type Conversation, type SetConfigResult, type FollowResult,
  type SessionAppendedParams, type ResyncParams, type QueueParams,
} from '../model/protocol';
import { readableError, relInText, relPath } from '../model/readable';
import type { HostMessage, WebviewMessage, ConnectionInfo, FollowInfo, ViewEnv } from './messages';

/** The part of DaemonClient the controller uses (a fake in unit tests). */
export interface Rpc {
  request<R = any>(method: string, params?: unknown): Promise<R>;
  onNotification(method: string, h: (params: any) => void): () => void;
}

/** Where the controller posts webview messages. */
export interface ChatSink {
  post(msg: HostMessage): void;
  /** visible reports whether the chat view is on screen. */
  visible(): boolean;
  reveal(): void;
}

/** Hooks into the rest of the UI. */
export interface ChatHooks {
  historyChanged?(): void;
  openDiff?(model: ConversationModel, msg: Extract<WebviewMessage, { type: 'openDiff' }>): void;
  reviewTurn?(model: ConversationModel, messageId: string): void;
  applyChange?(model: ConversationModel, messageId: string, path: string, action: 'apply' | 'revert'): void;
  setConversationId?(id: string | undefined): void;
  /** agentStateStore keeps the last agent state per conversation across window reloads. */
  agentStateStore?: { get(conversationId: string): Record<string, AgentStateParams> | undefined; set(conversationId: string, s: Record<string, AgentStateParams>): void };
  /** saveAttachment stores a pasted image (base64 data) and returns its file path; the daemon takes paths only. */
  saveAttachment?(data: Buffer, name: string, mimeType: string): Promise<string>;
  /** configStore keeps the config values the user picked last, per agent, for the next new conversation. */
  configStore?: { get(): Record<string, Record<string, string | boolean>> | undefined; set(v: Record<string, Record<string, string | boolean>>): void };
  /** pendingChanged reports every permission request still waiting for an answer, in any conversation seen (badge, status bar). */
  pendingChanged?(pending: PermissionParams[]): void;
  /** env is what the webview needs from the editor (workspace folder, tab size). */
  env?(): ViewEnv;
  /** insertText inserts a code block at the cursor of the last active editor. */
  insertText?(text: string): Promise<void>;
  copyText?(text: string): Promise<void>;
  openHistory?(): void;
  now?(): number;
}

export class ChatController implements vscode.Disposable {
  model = new ConversationModel();
  agents: AgentInfo[] = [];
  selectedAgent?: string;
  connection: ConnectionInfo = { state: 'starting' };
  private sink?: ChatSink;
  private readonly disposables: Array<() => void> = [];
  private pendingSend = false;
  private readonly notified = new Set<string>();
  /** Permission requests waiting for an answer, by id, in every conversation this window saw them in. */
  readonly pending = new Map<string, PermissionParams>();
  /** A re-subscribe to show a turn another client started is under way. */
  private catchingUp?: Promise<void>;
  /** The native session shown and followed live; undefined for a conversation. */
  following?: FollowInfo;
  /** A follow ended because the panel closed; resumed when it comes back. */
  private detachedFollow?: FollowInfo;
  /** The last agent state seen per agent in any conversation: a new conversation shows its pickers before a session exists. */
  private readonly lastAgentState: Record<string, AgentStateParams> = {};
  /** Config values the user picked last, per agent; applied to a new conversation before its first prompt. */
  private readonly sticky: Record<string, Record<string, string | boolean>>;

  constructor(private readonly rpc: Rpc, private readonly hooks: ChatHooks = {}) {
    this.disposables.push(
      rpc.onNotification(Methods.event, (p: EventParams) => this.onEvent(p)),
      rpc.onNotification(Methods.permission, (p: PermissionParams) => this.onPermission(p)),
      rpc.onNotification(Methods.permissionResolved, (p: PermissionResolvedParams) => this.onPermissionResolved(p)),
      rpc.onNotification(Methods.agentState, (p: AgentStateParams) => this.onAgentState(p)),
      // After a slow-client drop or another client's edit/retry: the snapshot replaces what is shown.
      rpc.onNotification(Methods.resync, (p: ResyncParams) => {
        if (p.conversationId && p.conversationId === this.model.conversation?.id) void this.open(p.conversationId, { readOnly: this.model.readOnly }).catch(() => undefined);
      }),
      rpc.onNotification(Methods.sessionAppended, (p: SessionAppendedParams) => this.onSessionAppended(p)),
      rpc.onNotification(Methods.queue, (p: QueueParams) => this.onQueue(p)),
    );
    this.sticky = structuredClone(hooks.configStore?.get() ?? {});
  }

  private now(): number {
    return this.hooks.now?.() ?? Date.now();
  }

  /** attach connects the chat view; the view gets a full snapshot at once. */
  attach(sink: ChatSink | undefined): void {
    this.sink = sink;
    if (!sink && this.following) {
      // The panel closed: stop the live tail; it resumes when the panel comes back.
      this.detachedFollow = this.following;
      this.stopFollowing();
    } else if (sink && this.detachedFollow && !this.following && this.model.readOnly && !this.model.conversation?.id) {
      const f = this.detachedFollow;
      this.detachedFollow = undefined;
      void this.followSession({ sessionId: f.sessionId }).catch(() => this.postInit());
    }
    if (sink) this.postInit();
  }

  private post(msg: HostMessage): void {
    this.sink?.post(msg);
  }

  /** postInit sends the whole state to the view. */
  postInit(): void {
    this.post({ type: 'init', snapshot: this.model.snapshot(), agents: this.agents, selectedAgent: this.selectedAgent, connection: this.connection, following: this.following, env: this.hooks.env?.() });
  }

  /** setConnection reports the daemon connection state to the view. */
  setConnection(c: ConnectionInfo): void {
    this.connection = c;
    this.post({ type: 'connection', connection: c });
  }

  /** refreshAgents reloads ochat/agents/list and picks the default agent. */
  async refreshAgents(preferred?: string): Promise<void> {
    const res = await this.rpc.request<{ agents: AgentInfo[] }>(Methods.agentsList, {});
    this.agents = res.agents ?? [];
    // The first run picks an agent that can run: the preferred one only when it can.
    const ready = this.agents.filter((a) => a.available).map((a) => a.name);
    if (!this.selectedAgent || !ready.includes(this.selectedAgent)) {
      this.selectedAgent = (preferred && ready.includes(preferred) ? preferred : undefined) ?? ready[0] ?? this.agents[0]?.name;
    }
    this.post({ type: 'agents', agents: this.agents, selectedAgent: this.selectedAgent });
  }

  /** open subscribes to a conversation and shows it; readOnly hides the composer (transcript view). */
  async open(conversationId: string, opts: { readOnly?: boolean } = {}): Promise<void> {
    this.stopFollowing();
    const prev = this.model.conversation?.id;
    if (prev && prev !== conversationId) {
      this.rpc.request(Methods.unsubscribe, { conversationId: prev }).catch(() => undefined);
    }
    const res = await this.rpc.request<SubscribeResult>(Methods.subscribe, { conversationId });
    this.model = ConversationModel.fromSubscribe(res, this.now());
    this.model.readOnly = !!opts.readOnly;
    const live = { ...this.model.agentState };
    for (const st of Object.values(this.hooks.agentStateStore?.get(conversationId) ?? {})) this.model.setAgentState(st);
    // What the daemon says now (subscribe's agentStates) wins over what this window kept.
    for (const st of Object.values(live)) this.model.setAgentState(st);
    for (const st of Object.values(this.model.agentState)) this.lastAgentState[st.agent] ??= st;
    const lastAgent = [...this.model.messages].reverse().find((m) => m.agent)?.agent;
    if (lastAgent && this.agents.some((a) => a.name === lastAgent)) this.selectedAgent = lastAgent;
    this.hooks.setConversationId?.(conversationId);
    this.postInit();
    // Only a subscribed conversation's requests are kept: of any other, this window would not hear the answer.
    for (const [id, p] of this.pending) if (p.conversationId !== conversationId || !this.model.permissions.has(id)) this.pending.delete(id);
    for (const p of this.model.permissions.values()) {
      this.pending.set(p.permissionId, p);
      this.notifyPermission(p);
    }
    this.pendingChanged();
  }

  private pendingChanged(): void {
    this.hooks.pendingChanged?.([...this.pending.values()]);
  }

  /** showPending shows the oldest waiting permission request in the panel (status bar item, notification). */
  async showPending(): Promise<void> {
    const p = [...this.pending.values()][0];
    if (p && this.model.conversation?.id !== p.conversationId) await this.open(p.conversationId);
    this.sink?.reveal();
  }

  /** showSnapshot shows a read-only transcript the daemon did not store as a conversation (ochat/sessions/open). */
  showSnapshot(res: { conversation?: SubscribeResult['conversation']; messages?: SubscribeResult['messages']; title?: string }): void {
    this.stopFollowing();
    const prev = this.model.conversation?.id;
    if (prev) this.rpc.request(Methods.unsubscribe, { conversationId: prev }).catch(() => undefined);
    this.model = ConversationModel.fromSubscribe({ conversation: res.conversation as SubscribeResult['conversation'], messages: res.messages ?? [] }, this.now());
    this.model.readOnly = true;
    this.postInit();
  }

  /** newConversation clears the panel; the next send creates the conversation. */
  newConversation(): void {
    this.stopFollowing();
    const prev = this.model.conversation?.id;
    if (prev) this.rpc.request(Methods.unsubscribe, { conversationId: prev }).catch(() => undefined);
    this.model = new ConversationModel();
    if (this.pending.size) {
      this.pending.clear();
      this.pendingChanged();
    }
    this.seedAgentState();
    this.hooks.setConversationId?.(undefined);
    this.postInit();
  }

  /**
   * seedAgentState shows, in a conversation without a session yet, each
   * agent's pickers as last seen, with the values the user picked last
   * (applied on the first send, see applySticky).
   */
  private seedAgentState(): void {
    for (const [agent, st] of Object.entries(this.lastAgentState)) {
      this.model.agentState[agent] = this.withSticky({ conversationId: '', agent, commands: st.commands, configOptions: st.configOptions, modes: st.modes });
    }
  }

  /** withSticky returns st with the user's remembered picks as current values. */
  private withSticky(st: AgentStateParams): AgentStateParams {
    const picks = this.sticky[st.agent];
    if (!picks) return st;
    const configOptions = st.configOptions?.map((o) => (o.id in picks ? { ...o, currentValue: picks[o.id] } : o));
    const modes = st.modes && 'mode' in picks && !st.configOptions?.some((o) => o.id === 'mode') ? { ...st.modes, currentModeId: String(picks.mode) } : st.modes;
    return { ...st, configOptions, modes };
  }

  /** followSession shows a terminal-started session read-only and keeps it growing from ochat/sessionAppended. */
  async followSession(ref: { sessionId?: string; path?: string }, title?: string): Promise<void> {
    this.stopFollowing();
    const prev = this.model.conversation?.id;
    if (prev) this.rpc.request(Methods.unsubscribe, { conversationId: prev }).catch(() => undefined);
    // sessionId and path exclude each other (docs/protocol.md "Terminal sessions").
    const res = await this.rpc.request<FollowResult>(Methods.sessionsFollow, ref.sessionId ? { sessionId: ref.sessionId } : { path: ref.path });
    const now = this.now();
    const m = new ConversationModel();
    // No conversation id: the panel's send, cancel and reload restore do not apply to a native session.
    m.conversation = {
      id: '', title: res.session?.title || title || res.sessionId, agents: [res.agent],
      createdAt: res.session?.createdAt ?? now, updatedAt: res.session?.updatedAt ?? now,
    };
    for (const msg of res.messages ?? []) m.upsert(msg);
    m.readOnly = true;
    this.model = m;
    this.following = { sessionId: res.sessionId, agent: res.agent, path: res.path };
    this.detachedFollow = undefined;
    this.postInit();
  }

  /** stopFollowing unfollows the followed session, if any (best effort: a disconnected daemon ends follows itself). */
  stopFollowing(): void {
    const f = this.following;
    if (!f) return;
    this.following = undefined;
    this.rpc.request(Methods.sessionsUnfollow, { sessionId: f.sessionId }).catch(() => undefined);
  }

  private onSessionAppended(p: SessionAppendedParams): void {
    const f = this.following;
    if (!f || (p.sessionId !== f.sessionId && p.path !== f.path)) return;
    if (p.path) f.path = p.path; // a Codex rollout compressed while followed keeps its updates coming under the .zst path
    if (p.reset) this.model.clearMessages();
    for (const m of p.messages ?? []) this.model.upsert(m);
    if (p.session?.title && this.model.conversation) this.model.conversation.title = p.session.title;
    this.post({ type: 'upsert', messages: p.messages ?? [], reset: !!p.reset, title: this.model.conversation?.title });
  }

  /** reconnected re-subscribes after the daemon came back (snapshot + replay, no gap). */
  async reconnected(): Promise<void> {
    await this.refreshAgents().catch(() => undefined);
    const id = this.model.conversation?.id;
    const f = this.following;
    if (f) {
      // The daemon ended the follow with the old connection: follow again (reset view).
      this.following = undefined;
      await this.followSession({ sessionId: f.sessionId }).catch(() => this.postInit());
    } else if (id) await this.open(id, { readOnly: this.model.readOnly });
    else this.postInit();
  }

  /** send starts a prompt turn in the open conversation (or a new one). */
  async send(text: string, agent = this.selectedAgent, attachments?: Attachment[]): Promise<SendResult> {
    if (this.following) throw new Error('a terminal session is read-only here: Continue it first');
    if (this.model.readOnly) this.model.readOnly = false;
    attachments = await this.storeAttachments(attachments);
    const conversationId = this.model.conversation?.id || (await this.applySticky(agent, text));
    this.pendingSend = true;
    let res: SendResult;
    try {
      res = await this.rpc.request<SendResult>(Methods.chatSend, { conversationId, agent, text, attachments: attachments?.length ? attachments : undefined });
    } finally {
      this.pendingSend = false;
    }
    const now = this.now();
    if (!this.model.conversation) {
      this.model.conversation = { id: res.conversationId, title: text.slice(0, 80), createdAt: now, updatedAt: now, agents: agent ? [agent] : [] };
      this.hooks.setConversationId?.(res.conversationId);
    }
    if (res.queued) {
      // The turn running now keeps going; the daemon sends this one after it (ochat/queue shows it meanwhile).
      if (res.queueId && !this.model.queue.some((q) => q.id === res.queueId)) {
        this.model.queue = [...this.model.queue, { id: res.queueId, text, agent, createdAt: now }];
        this.post({ type: 'queue', items: this.model.queue });
      }
      return res;
    }
    this.model.startTurn(
      { id: res.userMessageId, role: 'user', content: text, timestamp: now, attachments },
      { id: res.assistantMessageId, turnId: res.turnId, agent: agent ?? '' },
      now,
    );
    this.postInit();
    this.hooks.historyChanged?.();
    return res;
  }

  /**
   * applySticky creates the conversation before its first prompt when the user
   * picked config values for agent (now or in an earlier conversation), and
   * sets them, so that the session the prompt starts has them from its first
   * turn (the daemon replays remembered values into a new session). Returns
   * the conversation id, or undefined when nothing was picked (send creates it).
   */
  private async applySticky(agent: string | undefined, prompt: string): Promise<string | undefined> {
    const picks = agent ? this.sticky[agent] : undefined;
    if (!agent || !picks || !Object.keys(picks).length) return undefined;
    const id = await this.createConversation(titleFrom(prompt));
    for (const [configId, value] of Object.entries(picks)) {
      try {
        await this.rpc.request<SetConfigResult>(Methods.agentSetConfig, { conversationId: id, agent, configId, value });
      } catch (err) {
        // A value the agent no longer offers must not block the prompt.
        delete picks[configId];
        this.post({ type: 'error', message: `${agent}: ${configId} = ${value}: ${(err as Error).message}` });
      }
    }
    this.hooks.configStore?.set(this.sticky);
    return id;
  }

  /** createConversation creates an empty conversation (ochat/conversations/create) titled title, shows it and subscribes to it. */
  private async createConversation(title: string): Promise<string> {
    const res = await this.rpc.request<{ conversation: Conversation }>(Methods.conversationsCreate, { title });
    const conv = res.conversation;
    await this.rpc.request(Methods.subscribe, { conversationId: conv.id });
    this.model.conversation = conv;
    this.hooks.setConversationId?.(conv.id);
    return conv.id;
  }

  /**
   * setConfig sets one agent option (ochat/agent/setConfig) and remembers it
   * as the user's pick for the next conversations. Without a conversation it
   * is only remembered and shown; the first send applies it (applySticky),
   * since the daemon answers -32602 to setConfig without a conversation.
   */
  async setConfig(agent: string, configId: string, value: string | boolean): Promise<void> {
    (this.sticky[agent] ??= {})[configId] = value;
    this.hooks.configStore?.set(this.sticky);
    const conversationId = this.model.conversation?.id;
    let state: Partial<AgentStateParams> | undefined;
    if (conversationId) {
      const res = await this.rpc.request<SetConfigResult>(Methods.agentSetConfig, { conversationId, agent, configId, value });
      state = res.applied ? res.state : undefined;
    }
    const cur = this.model.agentState[agent] ?? this.lastAgentState[agent] ?? { conversationId: conversationId ?? '', agent };
    const next: AgentStateParams = state ? { ...cur, ...state, conversationId: conversationId ?? '', agent } : this.withSticky({ ...cur, conversationId: conversationId ?? '', agent });
    this.model.setAgentState(next);
    if (conversationId) this.hooks.agentStateStore?.set(conversationId, this.model.agentState);
    this.post({ type: 'agentState', params: next });
  }

  /**
   * edit replaces a user message with text and starts a new turn
   * (ochat/chat/edit): that message and every later one are dropped, the edited
   * prompt (with the message's attachments) and its answer take their place.
   */
  async edit(messageId: string, text: string, agent?: string): Promise<SendResult> {
    const old = this.model.message(messageId);
    return this.replaceTurn(Methods.chatEdit, { messageId, text, agent }, messageId, text, old?.attachments, agent ?? this.answerAgent(messageId));
  }

  /**
   * retry regenerates an answer (ochat/chat/retry): messageId is the assistant
   * message (or the user message it answers); the user message is sent again.
   */
  async retry(messageId: string, agent?: string): Promise<SendResult> {
    const user = this.model.userMessageOf(messageId);
    if (!user) throw new Error(`no user message before ${messageId}`);
    return this.replaceTurn(Methods.chatRetry, { messageId, agent }, user.id, user.content ?? '', user.attachments, agent ?? this.answerAgent(messageId));
  }

  /** answerAgent is the agent that answered messageId (the message itself or the next assistant message). */
  private answerAgent(messageId: string): string | undefined {
    const i = this.model.messages.findIndex((m) => m.id === messageId);
    return this.model.messages.slice(Math.max(0, i)).find((m) => m.role === 'assistant' && m.agent)?.agent;
  }

  private async replaceTurn(method: string, params: Record<string, unknown>, dropFrom: string, text: string, attachments: Attachment[] | undefined, agent: string | undefined): Promise<SendResult> {
    const conversationId = this.model.conversation?.id;
    if (!conversationId) throw new Error('no conversation is open');
    if (this.model.running) throw new Error('a turn is running: cancel it first');
    this.pendingSend = true;
    let res: SendResult;
    try {
      res = await this.rpc.request<SendResult>(method, { conversationId, ...params });
    } finally {
      this.pendingSend = false;
    }
    // Events of the new turn may have arrived before the answer (appended after the dropped messages).
    const early = this.model.message(res.assistantMessageId);
    this.model.truncateFrom(dropFrom);
    if (early) this.model.put(early);
    const now = this.now();
    this.model.startTurn(
      { id: res.userMessageId, role: 'user', content: text, timestamp: now, attachments },
      { id: res.assistantMessageId, turnId: res.turnId, agent: agent ?? early?.agent ?? '' },
      now,
    );
    this.postInit();
    this.hooks.historyChanged?.();
    return res;
  }

  /** storeAttachments turns pasted images (inline data) into files via hooks.saveAttachment. */
  private async storeAttachments(list?: Attachment[]): Promise<Attachment[] | undefined> {
    if (!list?.length) return list;
    const out: Attachment[] = [];
    for (const a of list) {
      if (!a.data) {
        out.push(a);
        continue;
      }
      if (!this.hooks.saveAttachment) throw new Error('image attachments need a storage folder');
      const { data, ...rest } = a;
      const bytes = Buffer.from(data, 'base64');
      const path = await this.hooks.saveAttachment(bytes, a.name ?? 'image', a.mimeType ?? 'image/png');
      out.push({ ...rest, path, size: bytes.length });
    }
    return out;
  }

  /** cancel cancels the turn in flight. */
  async cancel(): Promise<boolean> {
    const id = this.model.conversation?.id;
    if (!id) return false;
    const res = await this.rpc.request<{ cancelled: boolean }>(Methods.chatCancel, { conversationId: id });
    return res.cancelled;
  }

  /** respond answers a permission request with an option (or cancels it). */
  async respond(permissionId: string, optionId?: string): Promise<void> {
    await this.rpc.request(Methods.permissionRespond, optionId ? { permissionId, optionId } : { permissionId, cancelled: true });
  }

  private onEvent(p: EventParams): void {
    if (p.event.type === 'turn.completed' || p.event.type === 'turn.failed') this.dropPendingOfTurn(p.conversationId, p.turnId);
    if (!this.model.conversation && this.pendingSend) {
      const now = this.now();
      this.model.conversation = { id: p.conversationId, title: '', createdAt: now, updatedAt: now };
    }
    const conv = this.model.conversation?.id;
    if (conv && p.conversationId === conv && !this.pendingSend && !this.model.message(p.messageId) && !this.following) {
      // A turn this window did not start (another window, the CLI, the daemon's queue): its prompt is only in the
      // store, so subscribe again — the snapshot has the prompt and the turn so far, live events continue after it.
      // Shown meanwhile as it comes; the snapshot replaces it (seq dedupe keeps later events single).
      this.catchUp(conv);
    }
    const msg = this.model.applyEvent(p, this.now());
    if (!msg) return;
    this.post({ type: 'event', params: p });
    if (p.event.type === 'turn.completed' || p.event.type === 'turn.failed') this.hooks.historyChanged?.();
  }

  /** catchUp re-subscribes to the open conversation once, however many events arrive meanwhile. */
  private catchUp(conversationId: string): void {
    if (this.catchingUp) return;
    this.catchingUp = this.open(conversationId, { readOnly: this.model.readOnly })
      .catch(() => undefined)
      .finally(() => {
        this.catchingUp = undefined;
        this.hooks.historyChanged?.();
      });
  }

  private dropPendingOfTurn(conversationId: string, turnId: string): void {
    let changed = false;
    for (const [id, perm] of this.pending) {
      if (perm.conversationId === conversationId && perm.turnId === turnId) {
        this.pending.delete(id);
        this.notified.delete(id);
        changed = true;
      }
    }
    if (changed) this.pendingChanged();
  }

  private onQueue(p: QueueParams): void {
    if (p.conversationId !== this.model.conversation?.id) return;
    const was = this.model.queue.find((q) => q.id === p.sent?.id);
    this.model.queue = [...(p.items ?? [])];
    const sent = p.sent;
    if (sent && was && !this.model.message(sent.assistantMessageId)) {
      // The daemon sent a queued message: it becomes the prompt of the next turn, shown before its first event.
      const now = this.now();
      this.model.startTurn({ id: sent.userMessageId, role: 'user', content: was.text, timestamp: now }, { id: sent.assistantMessageId, turnId: sent.turnId, agent: was.agent ?? '' }, now);
      this.postInit();
      this.hooks.historyChanged?.();
      return;
    }
    this.post({ type: 'queue', items: this.model.queue });
  }

  /** queueAction edits, removes or sends now one queued message (ochat/queue/update|remove|sendNow). */
  async queueAction(method: string, params: { id: string; text?: string }): Promise<void> {
    const conversationId = this.model.conversation?.id;
    if (!conversationId) throw new Error('no conversation is open');
    await this.rpc.request(method, { conversationId, ...params });
  }

  private onPermission(p: PermissionParams): void {
    if (this.model.addPermission(p)) this.post({ type: 'permission', params: p });
    this.pending.set(p.permissionId, p);
    this.pendingChanged();
    this.notifyPermission(p);
  }

  private onPermissionResolved(p: PermissionResolvedParams): void {
    this.notified.delete(p.permissionId);
    if (this.pending.delete(p.permissionId)) this.pendingChanged();
    if (this.model.resolvePermission(p)) this.post({ type: 'permissionResolved', params: p });
  }

  private onAgentState(p: AgentStateParams): void {
    this.lastAgentState[p.agent] = { ...this.lastAgentState[p.agent], ...p };
    if (this.model.conversation && p.conversationId !== this.model.conversation.id) return;
    this.model.setAgentState(p);
    if (this.model.conversation) this.hooks.agentStateStore?.set(this.model.conversation.id, this.model.agentState);
    this.post({ type: 'agentState', params: p });
  }

  /**
   * notifyPermission shows the request as a notification with one button per
   * option when the chat view is not visible. A click after the request was
   * answered elsewhere does nothing (VS Code cannot close a notification).
   */
  notifyPermission(p: PermissionParams): void {
    if (this.sink?.visible() || this.notified.has(p.permissionId)) return;
    this.notified.add(p.permissionId);
    const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const files = (p.fileChanges ?? []).map((f) => relPath(f.path ?? '', root)).filter(Boolean);
    const detail = files.length ? ` (${files.length} file${files.length > 1 ? 's' : ''}: ${files.join(', ')})` : '';
    // Allow once first (the default a person expects), "Always" choices after it.
    const order: Record<string, number> = { allow_once: 0, allow_always: 1, reject_once: 2, reject_always: 3 };
    const options = [...p.options].sort((a, b) => (order[a.kind] ?? 9) - (order[b.kind] ?? 9));
    const buttons = [...options.map((o) => o.name), 'Show in Chat'];
    const title = relInText(p.toolCall?.name ?? 'tool call', root);
    void vscode.window.showWarningMessage(`ochat: ${p.agent} waits for permission: ${title}${detail}`, ...buttons).then(async (choice) => {
      if (!choice) return;
      if (choice === 'Show in Chat') {
        if (this.model.conversation?.id !== p.conversationId) await this.open(p.conversationId);
        this.sink?.reveal();
        return;
      }
      if (!this.notified.has(p.permissionId)) return; // resolved meanwhile
      const opt = p.options.find((o) => o.name === choice);
      if (opt) await this.respond(p.permissionId, opt.optionId).catch((err) => vscode.window.showWarningMessage(`ochat: ${err.message}`));
    });
  }

  /** handle processes one message from the webview. */
  async handle(msg: WebviewMessage): Promise<void> {
    try {
      switch (msg.type) {
        case 'ready':
          if (msg.conversationId && msg.conversationId !== this.model.conversation?.id) {
            await this.open(msg.conversationId).catch(() => this.postInit());
          } else this.postInit();
          return;
        case 'send': {
          if (msg.agent) this.selectedAgent = msg.agent;
          try {
            const res = await this.send(msg.text, msg.agent ?? this.selectedAgent, msg.attachments);
            if (msg.id !== undefined) this.post({ type: 'sendResult', id: msg.id, ok: true, queued: !!res.queued });
          } catch (err) {
            const text = readableError((err as Error).message ?? String(err));
            // The composer keeps the text: nothing was sent.
            if (msg.id !== undefined) this.post({ type: 'sendResult', id: msg.id, ok: false, error: text });
            else this.post({ type: 'error', message: text });
            // The panel says so next to the kept text; a toast only when the panel is not in sight.
            if (!this.sink?.visible()) void vscode.window.showErrorMessage(`ochat: message not sent: ${text}`);
          }
          return;
        }
        case 'queueUpdate':
          await this.queueAction(Methods.queueUpdate, { id: msg.id, text: msg.text });
          return;
        case 'queueRemove':
          await this.queueAction(Methods.queueRemove, { id: msg.id });
          return;
        case 'queueSendNow':
          await this.queueAction(Methods.queueSendNow, { id: msg.id });
          return;
        case 'insertCode':
          await this.hooks.insertText?.(msg.text);
          return;
        case 'copyCode':
          await this.hooks.copyText?.(msg.text);
          return;
        case 'openHistory':
          this.hooks.openHistory?.();
          return;
        case 'cancel':
          await this.cancel();
          return;
        case 'edit':
          if (msg.agent) this.selectedAgent = msg.agent;
          await this.edit(msg.messageId, msg.text, msg.agent);
          return;
        case 'retry':
          if (msg.agent) this.selectedAgent = msg.agent;
          await this.retry(msg.messageId, msg.agent);
          return;
        case 'respondPermission':
          await this.respond(msg.permissionId, msg.cancelled ? undefined : msg.optionId);
          return;
        case 'selectAgent':
          this.selectedAgent = msg.agent;
          return;
        case 'setConfig':
          try {
            await this.setConfig(msg.agent, msg.configId, msg.value);
          } catch (err) {
            // The picker shows the value the agent has, not the refused one.
            this.postInit();
            throw err;
          }
          return;
        case 'newConversation':
          this.newConversation();
          return;
        case 'trustWorkspace':
          await vscode.commands.executeCommand('ochat.trustWorkspace');
          return;
        case 'continue': {
          const f = this.following;
          if (f) {
            // A terminal session becomes a conversation (ochat/sessions/open) that the panel then continues.
            const res = await this.rpc.request<{ conversationId?: string; conversation?: { id?: string } }>(Methods.sessionsOpen, { sessionId: f.sessionId });
            const id = res.conversationId ?? res.conversation?.id;
            if (!id) throw new Error(`ochat/sessions/open answered no conversation for ${f.sessionId}`);
            await this.open(id, { readOnly: false });
            this.hooks.historyChanged?.();
            return;
          }
          this.model.readOnly = false;
          this.postInit();
          return;
        }
        case 'openDiff':
          this.hooks.openDiff?.(this.model, msg);
          return;
        case 'reviewTurn':
          this.hooks.reviewTurn?.(this.model, msg.messageId);
          return;
        case 'applyChange':
          this.hooks.applyChange?.(this.model, msg.messageId, msg.path, msg.action);
          return;
        case 'mention': {
          const files = await findWorkspaceFiles(msg.query);
          this.post({ type: 'mentionResults', query: msg.query, files });
          return;
        }
        case 'openFile': {
          const root = vscode.workspace.workspaceFolders?.[0]?.uri;
          const uri = msg.path.startsWith('/') ? vscode.Uri.file(msg.path) : root ? vscode.Uri.joinPath(root, msg.path) : undefined;
          if (uri) await vscode.window.showTextDocument(uri, { preview: true });
          return;
        }
        case 'openLink':
          if (/^https?:/i.test(msg.href)) await vscode.env.openExternal(vscode.Uri.parse(msg.href));
          return;
      }
    } catch (err) {
      const text = readableError((err as Error).message ?? String(err));
      this.post({ type: 'error', message: text });
      if (msg.type === 'send' || msg.type === 'setConfig' || msg.type === 'edit' || msg.type === 'retry' || msg.type === 'continue') void vscode.window.showErrorMessage(`ochat: ${text}`);
    }
  }

  dispose(): void {
    this.stopFollowing();
    for (const d of this.disposables) d();
  }
}

/** findWorkspaceFiles returns up to 50 workspace-relative paths matching query (for `@` mentions). */
async function findWorkspaceFiles(query: string): Promise<string[]> {
  const q = query.replace(/[\\[\]{}*?]/g, '');
  const uris = await vscode.workspace.findFiles(q ? `**/*${q}*` : '**/*', '**/{node_modules,.git}/**', 50);
  return uris.map((u) => vscode.workspace.asRelativePath(u, false)).sort((a, b) => a.length - b.length);
}

/**
 * titleFrom is the title the daemon gives a conversation created by a send
 * (daemon/methods.go titleFrom): the prompt's first non-blank line, spaces
 * collapsed, at most 60 characters (cut at a word after the 30th, then "…").
 */
export function titleFrom(text: string): string {
  const line = (text.split('\n').map((l) => l.trim()).find((l) => l !== '') ?? '').split(/\s+/).filter(Boolean).join(' ');
  const chars = [...line];
  if (chars.length <= 60) return line;
  let cut = chars.slice(0, 60).join('');
  const i = cut.lastIndexOf(' ');
  if (i > 30) cut = cut.slice(0, i);
  return cut + '…';
}
