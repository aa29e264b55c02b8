/**
 * The messages between the extension host and the chat webview. The webview
 * only renders the transcript contract; every protocol call is made by the
 * host.
 */
import type { ChatSnapshot } from '../model/conversation';
import type {
  AgentInfo, AgentStateParams, Attachment, EventParams, PermissionParams, PermissionResolvedParams,
} from '../model/protocol';

/** Connection status shown in the panel. */
export interface ConnectionInfo {
  state: string;
  detail?: string;
}

/** Host → webview. */
export type HostMessage =
  | { type: 'init'; snapshot: ChatSnapshot; agents: AgentInfo[]; selectedAgent?: string; connection: ConnectionInfo }
  | { type: 'event'; params: EventParams }
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
