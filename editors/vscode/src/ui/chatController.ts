/**
 * ChatController is the hub between the daemon client and the UI: it keeps
 * the open conversation's ConversationModel, turns webview actions into
 * `ochat/…` requests, routes daemon notifications to the chat view, the
 * permission notifications and the history view, and re-subscribes after a
 * reconnect or an ochat/resync.
 */
import * as vscode from 'vscode';
import { ConversationModel } from '../model/conversation';
import {
  Methods, ErrorCodes, type AgentInfo, type AgentStateParams, type EventParams, type PermissionParams, type PermissionResolvedParams,
  type SendResult, type SubscribeResult, type Attachment,
} from '../model/protocol';
import type { HostMessage, WebviewMessage, ConnectionInfo } from './messages';

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

  constructor(private readonly rpc: Rpc, private readonly hooks: ChatHooks = {}) {
    this.disposables.push(
      rpc.onNotification(Methods.event, (p: EventParams) => this.onEvent(p)),
      rpc.onNotification(Methods.permission, (p: PermissionParams) => this.onPermission(p)),
      rpc.onNotification(Methods.permissionResolved, (p: PermissionResolvedParams) => this.onPermissionResolved(p)),
      rpc.onNotification(Methods.agentState, (p: AgentStateParams) => this.onAgentState(p)),
      rpc.onNotification(Methods.resync, (p: { conversationId: string }) => {
        if (p.conversationId === this.model.conversation?.id) void this.open(p.conversationId, { readOnly: this.model.readOnly });
      }),
    );
  }

  private now(): number {
    return this.hooks.now?.() ?? Date.now();
  }

  /** attach connects the chat view; the view gets a full snapshot at once. */
  attach(sink: ChatSink | undefined): void {
    this.sink = sink;
    if (sink) this.postInit();
  }

  private post(msg: HostMessage): void {
    this.sink?.post(msg);
  }

  /** postInit sends the whole state to the view. */
  postInit(): void {
    this.post({ type: 'init', snapshot: this.model.snapshot(), agents: this.agents, selectedAgent: this.selectedAgent, connection: this.connection });
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
    const names = this.agents.map((a) => a.name);
    if (!this.selectedAgent || !names.includes(this.selectedAgent)) {
      this.selectedAgent = (preferred && names.includes(preferred) ? preferred : undefined) ?? this.agents.find((a) => a.available)?.name ?? names[0];
    }
    this.post({ type: 'agents', agents: this.agents, selectedAgent: this.selectedAgent });
  }

  /** open subscribes to a conversation and shows it; readOnly hides the composer (transcript view). */
  async open(conversationId: string, opts: { readOnly?: boolean } = {}): Promise<void> {
    const prev = this.model.conversation?.id;
    if (prev && prev !== conversationId) {
      this.rpc.request(Methods.unsubscribe, { conversationId: prev }).catch(() => undefined);
    }
    const res = await this.rpc.request<SubscribeResult>(Methods.subscribe, { conversationId });
    this.model = ConversationModel.fromSubscribe(res, this.now());
    this.model.readOnly = !!opts.readOnly;
    for (const st of Object.values(this.hooks.agentStateStore?.get(conversationId) ?? {})) this.model.setAgentState(st);
    const lastAgent = [...this.model.messages].reverse().find((m) => m.agent)?.agent;
    if (lastAgent && this.agents.some((a) => a.name === lastAgent)) this.selectedAgent = lastAgent;
    this.hooks.setConversationId?.(conversationId);
    this.postInit();
    for (const p of this.model.permissions.values()) this.notifyPermission(p);
  }

  /** showSnapshot shows a read-only transcript the daemon did not store as a conversation (ochat/sessions/open). */
  showSnapshot(res: { conversation?: SubscribeResult['conversation']; messages?: SubscribeResult['messages']; title?: string }): void {
    const prev = this.model.conversation?.id;
    if (prev) this.rpc.request(Methods.unsubscribe, { conversationId: prev }).catch(() => undefined);
    this.model = ConversationModel.fromSubscribe({ conversation: res.conversation as SubscribeResult['conversation'], messages: res.messages ?? [] }, this.now());
    this.model.readOnly = true;
    this.postInit();
  }

  /** newConversation clears the panel; the next send creates the conversation. */
  newConversation(): void {
    const prev = this.model.conversation?.id;
    if (prev) this.rpc.request(Methods.unsubscribe, { conversationId: prev }).catch(() => undefined);
    this.model = new ConversationModel();
    this.hooks.setConversationId?.(undefined);
    this.postInit();
  }

  /** reconnected re-subscribes after the daemon came back (snapshot + replay, no gap). */
  async reconnected(): Promise<void> {
    await this.refreshAgents().catch(() => undefined);
    const id = this.model.conversation?.id;
    if (id) await this.open(id, { readOnly: this.model.readOnly });
    else this.postInit();
  }

  /** send starts a prompt turn in the open conversation (or a new one). */
  async send(text: string, agent = this.selectedAgent, attachments?: Attachment[]): Promise<SendResult> {
    if (this.model.readOnly) this.model.readOnly = false;
    const conversationId = this.model.conversation?.id;
    attachments = await this.storeAttachments(attachments);
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
    this.model.startTurn(
      { id: res.userMessageId, role: 'user', content: text, timestamp: now, attachments },
      { id: res.assistantMessageId, turnId: res.turnId, agent: agent ?? '' },
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
    if (!this.model.conversation && this.pendingSend) {
      const now = this.now();
      this.model.conversation = { id: p.conversationId, title: '', createdAt: now, updatedAt: now };
    }
    const msg = this.model.applyEvent(p, this.now());
    if (!msg) return;
    this.post({ type: 'event', params: p });
    if (p.event.type === 'turn.completed' || p.event.type === 'turn.failed') this.hooks.historyChanged?.();
  }

  private onPermission(p: PermissionParams): void {
    if (this.model.addPermission(p)) this.post({ type: 'permission', params: p });
    this.notifyPermission(p);
  }

  private onPermissionResolved(p: PermissionResolvedParams): void {
    this.notified.delete(p.permissionId);
    if (this.model.resolvePermission(p)) this.post({ type: 'permissionResolved', params: p });
  }

  private onAgentState(p: AgentStateParams): void {
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
    const files = (p.fileChanges ?? []).map((f) => f.path).filter(Boolean);
    const detail = files.length ? ` (${files.length} file${files.length > 1 ? 's' : ''}: ${files.join(', ')})` : '';
    const buttons = [...p.options.map((o) => o.name), 'Show in Chat'];
    void vscode.window.showInformationMessage(`${p.agent} asks permission: ${p.toolCall?.name ?? 'tool call'}${detail}`, ...buttons).then(async (choice) => {
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
        case 'send':
          if (msg.agent) this.selectedAgent = msg.agent;
          await this.send(msg.text, msg.agent ?? this.selectedAgent, msg.attachments);
          return;
        case 'cancel':
          await this.cancel();
          return;
        case 'respondPermission':
          await this.respond(msg.permissionId, msg.cancelled ? undefined : msg.optionId);
          return;
        case 'selectAgent':
          this.selectedAgent = msg.agent;
          return;
        case 'setConfig': {
          const params = { conversationId: this.model.conversation?.id, agent: msg.agent, configId: msg.configId, value: msg.value };
          const notFound = (err: unknown) => (err as { code?: number }).code === ErrorCodes.methodNotFound;
          try {
            await this.rpc.request(Methods.agentSetConfig, params);
          } catch (err) {
            if (!notFound(err)) throw err;
            try {
              await this.rpc.request(Methods.agentsSetConfigOption, params);
            } catch (err2) {
              if (!notFound(err2)) throw err2;
              throw new Error(`this ochatd cannot change agent options yet (${Methods.agentSetConfig}); update ochatd`);
            }
          }
          return;
        }
        case 'newConversation':
          this.newConversation();
          return;
        case 'trustWorkspace':
          await vscode.commands.executeCommand('ochat.trustWorkspace');
          return;
        case 'continue':
          this.model.readOnly = false;
          this.postInit();
          return;
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
      const text = (err as Error).message ?? String(err);
      this.post({ type: 'error', message: text });
      if (msg.type === 'send' || msg.type === 'setConfig') void vscode.window.showErrorMessage(`ochat: ${text}`);
    }
  }

  dispose(): void {
    for (const d of this.disposables) d();
  }
}

/** findWorkspaceFiles returns up to 50 workspace-relative paths matching query (for `@` mentions). */
async function findWorkspaceFiles(query: string): Promise<string[]> {
  const q = query.replace(/[\\[\]{}*?]/g, '');
  const uris = await vscode.workspace.findFiles(q ? `**/*${q}*` : '**/*', '**/{node_modules,.git}/**', 50);
  return uris.map((u) => vscode.workspace.asRelativePath(u, false)).sort((a, b) => a.length - b.length);
}
