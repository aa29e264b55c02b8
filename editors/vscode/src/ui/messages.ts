/**
 * The messages between the extension host and the chat webview. The webview
 * only renders the transcript contract; every protocol call is made by the
 * host.
 */
import type { ChatSnapshot } from '../model/conversation';
import type {
  AgentInfo, AgentStateParams, Attachment, EventParams, Message, PermissionParams, PermissionResolvedParams, QueueItem,
} from '../model/protocol';

/** Connection status shown in the panel. */
export interface ConnectionInfo {
  state: string;
  detail?: string;
}

/** The native session the panel follows live (ochat/sessions/follow). */
export interface FollowInfo {
  sessionId: string;
  agent: string;
  path: string;
}

/** Host → webview. */
export type HostMessage =
  | { type: 'init'; snapshot: ChatSnapshot; agents: AgentInfo[]; selectedAgent?: string; connection: ConnectionInfo; following?: FollowInfo; env?: ViewEnv }
  | { type: 'event'; params: EventParams }
  /** Messages of a followed session to upsert by id; reset: they are the whole transcript. */
  | { type: 'upsert'; messages: Message[]; reset: boolean; title?: string }
  | { type: 'permission'; params: PermissionParams }
  | { type: 'permissionResolved'; params: PermissionResolvedParams }
  | { type: 'agentState'; params: AgentStateParams }
  | { type: 'agents'; agents: AgentInfo[]; selectedAgent?: string }
  | { type: 'connection'; connection: ConnectionInfo }
  | { type: 'mentionResults'; query: string; files: string[] }
  | { type: 'error'; message: string }
  /** The answer to a 'send' with the same id: ok (sent or queued) clears the composer; an error keeps the text. */
  | { type: 'sendResult'; id: number; ok: boolean; queued?: boolean; error?: string }
  /** The conversation's message queue (ochat/queue), oldest first. */
  | { type: 'queue'; items: QueueItem[] }
  /** Move the keyboard focus to the composer (ochat.focusChat). */
  | { type: 'focusInput' };

/** What the webview needs from the editor: the workspace folder (for relative paths) and the editor's tab size. */
export interface ViewEnv {
  workspaceRoot?: string;
  tabSize?: number;
}

/** Webview → host. */
export type WebviewMessage =
  | { type: 'ready'; conversationId?: string }
  | { type: 'send'; text: string; agent?: string; attachments?: Attachment[]; id?: number }
  | { type: 'cancel' }
  | { type: 'edit'; messageId: string; text: string; agent?: string }
  | { type: 'retry'; messageId: string; agent?: string }
  | { type: 'respondPermission'; permissionId: string; optionId?: string; cancelled?: boolean }
  | { type: 'openDiff'; messageId?: string; permissionId?: string; path: string }
  | { type: 'reviewTurn'; messageId: string }
  | { type: 'applyChange'; messageId: string; path: string; action: 'apply' | 'revert' }
  | { type: 'selectAgent'; agent: string }
  | { type: 'setConfig'; agent: string; configId: string; value: string | boolean }
  | { type: 'mention'; query: string }
  | { type: 'openFile'; path: string }
  | { type: 'openLink'; href: string }
  | { type: 'trustWorkspace' }
  | { type: 'newConversation' }
  | { type: 'continue' }
  | { type: 'queueUpdate'; id: string; text: string }
  | { type: 'queueRemove'; id: string }
  | { type: 'queueSendNow'; id: string }
  /** Insert a code block's text at the cursor of the last active text editor. */
  | { type: 'insertCode'; text: string }
  | { type: 'copyCode'; text: string }
  | { type: 'openHistory' };
