/**
 * The messages between the extension host and the chat webview. The webview
 * only renders the transcript contract; every protocol call is made by the
 * host.
 */
import type { ChatSnapshot } from '../model/conversation';
import type {
  AgentInfo, AgentStateParams, Attachment, EventParams, Message, PermissionParams, PermissionResolvedParams,
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
  | { type: 'init'; snapshot: ChatSnapshot; agents: AgentInfo[]; selectedAgent?: string; connection: ConnectionInfo; following?: FollowInfo }
  | { type: 'event'; params: EventParams }
  /** Messages of a followed session to upsert by id; reset: they are the whole transcript. */
  | { type: 'upsert'; messages: Message[]; reset: boolean; title?: string }
  | { type: 'permission'; params: PermissionParams }
  | { type: 'permissionResolved'; params: PermissionResolvedParams }
  | { type: 'agentState'; params: AgentStateParams }
  | { type: 'agents'; agents: AgentInfo[]; selectedAgent?: string }
  | { type: 'connection'; connection: ConnectionInfo }
  | { type: 'mentionResults'; query: string; files: string[] }
  | { type: 'error'; message: string };

/** Webview → host. */
export type WebviewMessage =
  | { type: 'ready'; conversationId?: string }
  | { type: 'send'; text: string; agent?: string; attachments?: Attachment[] }
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
  | { type: 'continue' };
