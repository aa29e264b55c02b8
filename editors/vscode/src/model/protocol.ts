/**
 * The ochat editor protocol as TypeScript types: the canonical transcript
 * shapes (transcript/types.go) and the params/results of the `ochat/…`
 * methods (docs/protocol.md, daemon/wire.go). Plain data, no logic; shared by
 * the extension host and the webview.
 */

/** Who wrote a message. */
export type Role = 'user' | 'assistant';

/** Lifecycle of an assistant message (transcript.MessageStatus). */
export type MessageStatus = 'streaming' | 'completed' | 'failed' | 'cancelled' | 'interrupted';

/** A file or image referenced by a user message (transcript.Attachment). */
export interface Attachment {
  kind: 'file' | 'image' | string;
  name?: string;
  path?: string;
  mimeType?: string;
  hash?: string;
  size?: number;
  /** Base64 data of an image pasted in the composer (client → daemon only). */
  data?: string;
}

/** One line of an agent's plan (ACP PlanEntry). */
export interface PlanEntry {
  content: string;
  status: 'pending' | 'in_progress' | 'completed' | string;
  priority?: string;
}

/** One piece of an assistant turn, a tagged union on `type` (transcript.Segment). */
export interface Segment {
  type: 'reasoning' | 'content' | 'tool' | 'plan' | 'fileChange' | 'workspace' | string;
  content?: string;
  id?: string;
  name?: string;
  /**
   * Tool: pending|running|completed|error. fileChange: applied|reverted|proposed|rejected
   * (rejected: the write did not happen — the tool failed or its permission was rejected or
   * cancelled; set by the daemon at turn end, docs/protocol.md "fileChange").
   */
  status?: string;
  providerKind?: string;
  input?: unknown;
  output?: string;
  error?: string;
  durationMs?: number;
  entries?: PlanEntry[];
  path?: string;
  additions?: number;
  deletions?: number;
  diff?: string;
  oldText?: string | null;
  newText?: string | null;
  toolCallId?: string;
  files?: string[];
  errors?: string[];
}

/**
 * isRejected reports whether a fileChange segment was never written (status
 * "rejected", transcript.Segment): such a change is shown as not applied,
 * left out of file counts, and offers no apply, revert or review.
 */
export function isRejected(seg: Segment): boolean {
  return seg.type === 'fileChange' && seg.status === 'rejected';
}

/** One user message or one assistant turn (transcript.Message). Times are Unix ms. */
export interface Message {
  id: string;
  timestamp: number;
  role: Role;
  content?: string;
  attachments?: Attachment[];
  hidden?: boolean;
  agent?: string;
  segments?: Segment[];
  status?: MessageStatus | string;
  durationMs?: number;
  stopReason?: string;
  error?: string;
}

/** A live event of a prompt turn (transcript.Event). */
export interface TranscriptEvent {
  type: 'content.delta' | 'reasoning.delta' | 'activity.upsert' | 'plan.updated' | 'turn.completed' | 'turn.failed' | string;
  seq?: number;
  timestamp?: number;
  delta?: string;
  segment?: Segment;
  entries?: PlanEntry[];
  stopReason?: string;
  message?: string;
}

/** A stored conversation (history.Conversation plus `running` in lists). */
export interface Conversation {
  id: string;
  title: string;
  agents?: string[];
  createdAt: number;
  updatedAt: number;
  running?: boolean;
  native?: { agent: string; sessionId: string; path?: string };
}

/** A terminal-started session of the workspace (ochat/sessions/list). */
export interface NativeSession {
  id?: string;
  /** "native" (a CLI's session; id = the CLI's own id) or "conversation" (one of the daemon's own). */
  kind?: 'native' | 'conversation' | string;
  cwd?: string;
  gitBranch?: string;
  model?: string;
  toolCount?: number;
  resumeCommand?: string[];
  sessionId?: string;
  agent: string;
  title?: string;
  createdAt?: number;
  updatedAt?: number;
  live?: boolean;
  messageCount?: number;
  path?: string;
  conversationId?: string;
}

/** The turn in flight in an ochat/subscribe answer. */
export interface RunningTurn {
  turnId: string;
  assistantMessageId: string;
  agent: string;
  events: TranscriptEvent[];
  truncated?: boolean;
  message?: Message;
  lastSeq?: number;
}

/** ochat/event params. */
export interface EventParams {
  conversationId: string;
  turnId: string;
  messageId: string;
  agent: string;
  event: TranscriptEvent;
}

/** A permission option as the agent phrased it (ACP PermissionOption). */
export interface PermissionOption {
  optionId: string;
  name: string;
  kind: 'allow_once' | 'allow_always' | 'reject_once' | 'reject_always' | string;
}

/** ochat/permission params (and SubscribeResult.permissions entries). */
export interface PermissionParams {
  permissionId: string;
  conversationId: string;
  turnId: string;
  agent: string;
  toolCall: Segment;
  fileChanges?: Segment[] | null;
  options: PermissionOption[];
}

/** ochat/permissionResolved params. */
export interface PermissionResolvedParams {
  permissionId: string;
  conversationId: string;
  optionId?: string;
  outcome: 'selected' | 'cancelled' | string;
}

/** ochat/subscribe result. */
export interface SubscribeResult {
  conversation: Conversation;
  messages: Message[];
  running?: RunningTurn | null;
  permissions?: PermissionParams[] | null;
  /** Per agent live in the conversation, the ochat/agentState fields merged so far. */
  agentStates?: AgentStateParams[] | null;
  /** The conversation's queued messages, oldest first (absent from a daemon without the queue). */
  queue?: QueueItem[] | null;
}

/** A message waiting for the running turn to end (ochat/queue). */
export interface QueueItem {
  id: string;
  text: string;
  agent?: string;
  createdAt?: number;
}

/** ochat/queue params: the whole queue after a change. */
export interface QueueParams {
  conversationId: string;
  items: QueueItem[];
  /** Set when the change is the daemon sending a queued message: the turn it became (before its first ochat/event). */
  sent?: { id: string; userMessageId: string; assistantMessageId: string; turnId: string };
}

/** ochat/chat/send result. */
export interface SendResult {
  conversationId: string;
  userMessageId: string;
  assistantMessageId: string;
  turnId: string;
  /** The conversation was busy: the message waits in its queue (no turn started yet). */
  queued?: boolean;
  queueId?: string;
}

/** An entry of ochat/agents/list. */
export interface AgentInfo {
  name: string;
  command?: string;
  source?: string;
  available: boolean;
  reason?: string;
  install?: string;
  /** Held back until the workspace's .ochat/settings.json is trusted (ochatd trust). */
  untrusted?: boolean;
  note?: string;
  /** Readiness beyond "installed" when the daemon reports it (e.g. "ready", "needs_login"); shown with reason and install. */
  state?: string;
}

/** A slash command the agent advertised (ACP AvailableCommand). */
export interface AgentCommand {
  name: string;
  description?: string;
  input?: { hint?: string } | null;
}

/** A value of a select config option (ACP SessionConfigSelectOption). */
export interface ConfigValue {
  value: string;
  name: string;
  description?: string;
}

/** An agent config option (ACP SessionConfigOption; select or boolean). */
export interface ConfigOption {
  id: string;
  name: string;
  description?: string;
  category?: string;
  type?: 'select' | 'boolean' | string;
  currentValue?: string | boolean;
  options?: Array<ConfigValue | { group?: string; name?: string; options: ConfigValue[] }>;
}

/** ochat/agentState params: what the agent reported over ACP, per conversation and agent. */
export interface AgentStateParams {
  conversationId: string;
  agent: string;
  commands?: AgentCommand[] | null;
  configOptions?: ConfigOption[] | null;
  modes?: { currentModeId?: string; availableModes?: Array<{ id: string; name: string; description?: string }> } | null;
  usage?: { used?: number; size?: number } | null;
  title?: string;
}

/** ochat/agent/setConfig result: applied to a live session (then state is its merged state) or only remembered. */
export interface SetConfigResult {
  applied: boolean;
  state?: Partial<AgentStateParams>;
  config?: Record<string, string | boolean>;
}

/** A marker between transcript messages of a native session (compaction, interruption, …). */
export interface SessionMarker {
  afterId?: string;
  kind: string;
  text?: string;
  timestamp?: number;
}

/** ochat/sessions/follow result: the native session as the daemon has it now. */
export interface FollowResult {
  sessionId: string;
  agent: string;
  path: string;
  session?: NativeSession;
  messages?: Message[];
  markers?: SessionMarker[];
}

/** ochat/sessionAppended params: messages to upsert by id (reset: the whole transcript, replacing). seenAt is Unix ms. */
export interface SessionAppendedParams {
  sessionId: string;
  agent: string;
  path: string;
  reset?: boolean;
  messages?: Message[];
  markers?: SessionMarker[];
  session?: NativeSession;
  seenAt?: number;
}

/** ochat/resync params. */
export interface ResyncParams {
  conversationId: string;
  reason?: string;
}

/** Method and notification names of docs/protocol.md. */
export const Methods = {
  initialize: 'initialize',
  initialized: 'initialized',
  shutdown: 'shutdown',
  exit: 'exit',
  conversationsList: 'ochat/conversations/list',
  conversationsCreate: 'ochat/conversations/create',
  conversationsGet: 'ochat/conversations/get',
  conversationsRename: 'ochat/conversations/rename',
  conversationsDelete: 'ochat/conversations/delete',
  history: 'ochat/history',
  chatSend: 'ochat/chat/send',
  chatCancel: 'ochat/chat/cancel',
  chatEdit: 'ochat/chat/edit',
  chatRetry: 'ochat/chat/retry',
  subscribe: 'ochat/subscribe',
  unsubscribe: 'ochat/unsubscribe',
  permissionRespond: 'ochat/permission/respond',
  agentsList: 'ochat/agents/list',
  agentSetConfig: 'ochat/agent/setConfig',
  sessionsList: 'ochat/sessions/list',
  sessionsOpen: 'ochat/sessions/open',
  sessionsFollow: 'ochat/sessions/follow',
  sessionsUnfollow: 'ochat/sessions/unfollow',
  exportConversation: 'ochat/export',
  applyEdit: 'workspace/applyEdit',
  showDocument: 'window/showDocument',
  showMessage: 'window/showMessage',
  event: 'ochat/event',
  permission: 'ochat/permission',
  permissionResolved: 'ochat/permissionResolved',
  agentState: 'ochat/agentState',
  resync: 'ochat/resync',
  sessionsChanged: 'ochat/sessions/changed',
  sessionAppended: 'ochat/sessionAppended',
  conversationsChanged: 'ochat/conversations/changed',
  queue: 'ochat/queue',
  queueUpdate: 'ochat/queue/update',
  queueRemove: 'ochat/queue/remove',
  queueSendNow: 'ochat/queue/sendNow',
} as const;

/** JSON-RPC error codes of docs/protocol.md. */
export const ErrorCodes = {
  methodNotFound: -32601,
  invalidParams: -32602,
  notFound: -32001,
  notInitialized: -32002,
  conflict: -32003,
  agentUnavailable: -32004,
} as const;
