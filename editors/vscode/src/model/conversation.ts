/**
 * ConversationModel: the state of one open conversation as an editor shows
 * it — stored messages, the turn in flight, pending permissions and agent
 * state — built from an ochat/subscribe answer and kept current by live
 * notifications. Pure (no I/O, no vscode); used by the extension host and,
 * for the same rules, by the webview.
 */
import { applyEvent } from './reduce';
import { isRejected } from './protocol';
import type {
  AgentStateParams, Conversation, EventParams, Message, PermissionParams, PermissionResolvedParams, QueueItem, Segment, SubscribeResult,
} from './protocol';

/** The turn in flight as the UI needs it. startedAt is Unix ms. */
export interface RunningInfo {
  turnId: string;
  messageId: string;
  agent: string;
  startedAt: number;
}

/** What the webview renders: a plain, serialisable copy of the model. */
export interface ChatSnapshot {
  conversation?: Conversation;
  messages: Message[];
  running?: RunningInfo;
  permissions: PermissionParams[];
  agentState: Record<string, AgentStateParams>;
  readOnly: boolean;
  /** Messages queued behind the running turn (ochat/queue), oldest first. */
  queue?: QueueItem[];
}

/** A file change of a turn with where it came from. */
export interface TurnFileChange {
  messageId: string;
  index: number;
  segment: Segment;
}

export class ConversationModel {
  conversation?: Conversation;
  readonly messages: Message[] = [];
  private readonly byId = new Map<string, Message>();
  running?: RunningInfo;
  readonly permissions = new Map<string, PermissionParams>();
  readonly agentState: Record<string, AgentStateParams> = {};
  /** Highest event seq applied per turn id: replays and duplicates are dropped. */
  private readonly lastSeq = new Map<string, number>();
  readOnly = false;
  /** Messages queued behind the running turn, oldest first (ochat/queue). */
  queue: QueueItem[] = [];

  /** fromSubscribe builds the model from an ochat/subscribe answer; now is Unix ms. */
  static fromSubscribe(res: SubscribeResult, now: number): ConversationModel {
    const m = new ConversationModel();
    m.conversation = res.conversation;
    for (const msg of res.messages ?? []) m.put(msg);
    const r = res.running;
    if (r) {
      let msg = m.byId.get(r.assistantMessageId);
      if (r.truncated && r.message) {
        msg = m.put(r.message);
        m.lastSeq.set(r.turnId, r.lastSeq ?? 0);
      } else {
        if (!msg) msg = m.put({ id: r.assistantMessageId, role: 'assistant', timestamp: now, agent: r.agent, segments: [] });
        // The stored placeholder may hold part of the turn: the replayed events are the whole of it.
        msg.segments = [];
        msg.status = 'streaming';
        for (const ev of r.events ?? []) m.applyTurnEvent(r.turnId, msg, ev);
        // Live events continue at lastSeq + 1 (docs/protocol.md, ochat/subscribe).
        m.lastSeq.set(r.turnId, Math.max(m.lastSeq.get(r.turnId) ?? 0, r.lastSeq ?? 0));
      }
      m.running = { turnId: r.turnId, messageId: r.assistantMessageId, agent: r.agent, startedAt: msg.timestamp || now };
    }
    for (const p of res.permissions ?? []) m.permissions.set(p.permissionId, p);
    for (const st of res.agentStates ?? []) m.setAgentState(st);
    m.queue = [...(res.queue ?? [])];
    return m;
  }

  /** put inserts or replaces a message, keeping order of first arrival. */
  put(msg: Message): Message {
    const old = this.byId.get(msg.id);
    if (old) {
      Object.assign(old, msg);
      return old;
    }
    this.byId.set(msg.id, msg);
    this.messages.push(msg);
    return msg;
  }

  /** upsert inserts a message or replaces the one with its id wholesale (a followed session resends a growing turn). */
  upsert(msg: Message): Message {
    const i = this.byId.has(msg.id) ? this.messages.findIndex((m) => m.id === msg.id) : -1;
    this.byId.set(msg.id, msg);
    if (i >= 0) this.messages[i] = msg;
    else this.messages.push(msg);
    return msg;
  }

  /** clearMessages drops every message (a followed session was reset). */
  clearMessages(): void {
    this.messages.length = 0;
    this.byId.clear();
  }

  /**
   * truncateFrom drops the message with id and every later one (ochat/chat/edit
   * and retry replace them); it returns the dropped messages, empty when id is unknown.
   */
  truncateFrom(id: string): Message[] {
    const i = this.messages.findIndex((m) => m.id === id);
    if (i < 0) return [];
    const dropped = this.messages.splice(i);
    for (const m of dropped) this.byId.delete(m.id);
    return dropped;
  }

  /** userMessageOf returns the user message an assistant message answers (the nearest earlier one), or the message itself when it is a user message. */
  userMessageOf(id: string): Message | undefined {
    const i = this.messages.findIndex((m) => m.id === id);
    for (let j = i; j >= 0; j--) if (this.messages[j].role === 'user') return this.messages[j];
    return undefined;
  }

  /** message returns the message with id, if any. */
  message(id: string): Message | undefined {
    return this.byId.get(id);
  }

  /**
   * applyEvent applies an ochat/event to its message (created if missing) and
   * returns the message, or undefined when the event belongs to another
   * conversation or was already applied (seq not above the last one).
   */
  applyEvent(p: EventParams, now: number): Message | undefined {
    if (this.conversation && p.conversationId !== this.conversation.id) return undefined;
    let msg = this.byId.get(p.messageId);
    if (!msg) msg = this.put({ id: p.messageId, role: 'assistant', agent: p.agent, timestamp: p.event.timestamp ?? now, segments: [] });
    if (!this.applyTurnEvent(p.turnId, msg, p.event)) return undefined;
    if (p.event.type === 'turn.completed' || p.event.type === 'turn.failed') {
      if (this.running?.turnId === p.turnId) {
        // The turn lasted from its start, not from its first event (an agent that took seconds to answer and was
        // then cancelled is not "cancelled · 217 ms").
        const d = (p.event.timestamp ?? 0) - this.running.startedAt;
        if (p.event.timestamp && d > (msg.durationMs ?? 0)) msg.durationMs = d;
        this.running = undefined;
      }
      for (const [id, perm] of this.permissions) if (perm.turnId === p.turnId) this.permissions.delete(id);
    } else if (!this.running) {
      this.running = { turnId: p.turnId, messageId: p.messageId, agent: p.agent, startedAt: msg.timestamp || now };
    }
    return msg;
  }

  private applyTurnEvent(turnId: string, msg: Message, ev: EventParams['event']): boolean {
    if (ev.seq) {
      const last = this.lastSeq.get(turnId) ?? 0;
      if (ev.seq <= last) return false;
      this.lastSeq.set(turnId, ev.seq);
    }
    applyEvent(msg, ev);
    return true;
  }

  /** startTurn records a just-sent prompt: the user message and the empty assistant turn. */
  startTurn(user: Message, assistant: { id: string; turnId: string; agent: string }, now: number): void {
    const early = this.byId.get(assistant.id);
    if (early && !this.byId.has(user.id)) {
      // Events of the turn arrived before the send answer: keep the prompt above its answer.
      this.byId.set(user.id, user);
      this.messages.splice(this.messages.indexOf(early), 0, user);
    } else this.put(user);
    if (!this.byId.has(assistant.id)) {
      this.put({ id: assistant.id, role: 'assistant', agent: assistant.agent, timestamp: now, status: 'streaming', segments: [] });
    }
    this.running = { turnId: assistant.turnId, messageId: assistant.id, agent: assistant.agent, startedAt: now };
  }

  /** addPermission records a pending permission request of this conversation. */
  addPermission(p: PermissionParams): boolean {
    if (this.conversation && p.conversationId !== this.conversation.id) return false;
    this.permissions.set(p.permissionId, p);
    return true;
  }

  /** resolvePermission drops a resolved permission; true when it was pending. */
  resolvePermission(p: PermissionResolvedParams): boolean {
    return this.permissions.delete(p.permissionId);
  }

  /** setAgentState stores the latest agent state of one agent. */
  setAgentState(p: AgentStateParams): void {
    this.agentState[p.agent] = { ...this.agentState[p.agent], ...p };
  }

  /** fileChanges lists the fileChange segments of one turn, or of every turn when messageId is empty. */
  fileChanges(messageId?: string): TurnFileChange[] {
    const out: TurnFileChange[] = [];
    for (const m of this.messages) {
      if (messageId && m.id !== messageId) continue;
      (m.segments ?? []).forEach((segment, index) => {
        if (segment.type === 'fileChange') out.push({ messageId: m.id, index, segment });
      });
    }
    return out;
  }

  /** lastTurnWithChanges returns the id of the newest assistant turn that changed files (a rejected change changed nothing). */
  lastTurnWithChanges(): string | undefined {
    for (let i = this.messages.length - 1; i >= 0; i--) {
      const m = this.messages[i];
      if (m.segments?.some((s) => s.type === 'fileChange' && !isRejected(s))) return m.id;
    }
    return undefined;
  }

  /** snapshot returns a serialisable copy for the webview. */
  snapshot(): ChatSnapshot {
    return {
      conversation: this.conversation,
      messages: this.messages,
      running: this.running,
      permissions: [...this.permissions.values()],
      agentState: this.agentState,
      readOnly: this.readOnly,
      queue: this.queue,
    };
  }
}
