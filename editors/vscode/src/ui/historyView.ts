/**
 * HistoryProvider: the "Conversations" tree view — ochat conversations and,
 * when the daemon offers ochat/sessions/list, the workspace's terminal-started
 * sessions grouped by agent with live ones marked. Items carry context values
 * (`conversation`, `session`) for the open/continue/rename/delete/export menus.
 */
import * as vscode from 'vscode';
import { buildHistory, relativeTime, type HistoryNode } from '../model/historyTree';
import { Methods, ErrorCodes, type Conversation, type NativeSession } from '../model/protocol';
import type { Rpc } from './chatController';

export class HistoryProvider implements vscode.TreeDataProvider<HistoryNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<HistoryNode | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  private roots: HistoryNode[] = [];
  private sessionsSupported = true;
  private timer?: ReturnType<typeof setTimeout>;
  private loaded?: Promise<void>;
  error?: string;

  constructor(private readonly rpc: Rpc, private readonly now: () => number = Date.now) {}

  /** refresh reloads the lists now. */
  refresh(): Promise<void> {
    this.loaded = this.load();
    return this.loaded;
  }

  /** refreshSoon coalesces bursts of changes into one reload (ms). */
  refreshSoon(delayMs = 300): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refresh(), delayMs);
  }

  private async load(): Promise<void> {
    try {
      const convs = await this.rpc.request<{ conversations: Conversation[] }>(Methods.conversationsList, {});
      let sessions: NativeSession[] | undefined;
      if (this.sessionsSupported) {
        try {
          const res = await this.rpc.request<{ sessions: NativeSession[] }>(Methods.sessionsList, {});
          sessions = res.sessions ?? [];
        } catch (err) {
          if ((err as { code?: number }).code === ErrorCodes.methodNotFound) this.sessionsSupported = false;
        }
      }
      this.roots = buildHistory(convs.conversations ?? [], sessions);
      this.error = undefined;
    } catch (err) {
      this.error = (err as Error).message;
      this.roots = [];
    }
    this.changed.fire();
  }

  getChildren(node?: HistoryNode): HistoryNode[] | Promise<HistoryNode[]> {
    if (node) return node.kind === 'group' ? node.children : [];
    if (!this.loaded) this.loaded = this.load();
    return this.roots;
  }

  getTreeItem(node: HistoryNode): vscode.TreeItem {
    const now = this.now();
    switch (node.kind) {
      case 'group': {
        const it = new vscode.TreeItem(node.label, node.id === 'g:conversations' ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
        it.id = node.id;
        it.description = node.description;
        it.contextValue = 'group';
        it.iconPath = new vscode.ThemeIcon(node.id === 'g:conversations' ? 'comment-discussion' : 'terminal');
        return it;
      }
      case 'conversation': {
        const c = node.conversation;
        const it = new vscode.TreeItem(c.title || 'Untitled conversation', vscode.TreeItemCollapsibleState.None);
        it.id = node.id;
        it.description = [c.agents?.join(', '), relativeTime(c.updatedAt, now)].filter(Boolean).join(' · ');
        it.tooltip = `${c.title || 'Untitled'}\n${c.agents?.join(', ') ?? ''}\nupdated ${new Date(c.updatedAt).toLocaleString()}`;
        it.iconPath = new vscode.ThemeIcon(c.running ? 'loading~spin' : 'comment');
        it.contextValue = 'conversation';
        it.command = { command: 'ochat.history.continue', title: 'Continue', arguments: [node] };
        return it;
      }
      case 'session': {
        const s = node.session;
        const it = new vscode.TreeItem(s.title || s.sessionId || s.id || 'session', vscode.TreeItemCollapsibleState.None);
        it.id = node.id;
        it.description = [s.live ? '● live' : '', s.messageCount ? `${s.messageCount} msgs` : '', relativeTime(s.updatedAt, now)].filter(Boolean).join(' · ');
        it.tooltip = [
          `${s.agent} session ${s.sessionId ?? s.id ?? ''}`,
          s.gitBranch ? `branch ${s.gitBranch}` : '', s.model ? `model ${s.model}` : '',
          s.resumeCommand?.length ? `resume in a terminal: ${s.resumeCommand.join(' ')}` : '',
          s.path ?? '', s.live ? 'live: still being written' : '',
        ].filter(Boolean).join('\n');
        it.iconPath = new vscode.ThemeIcon(s.live ? 'loading~spin' : 'history');
        it.contextValue = s.live ? 'session-live' : 'session';
        it.command = { command: 'ochat.history.open', title: 'Open', arguments: [node] };
        return it;
      }
    }
  }

  /** nodes returns the current roots (for tests and benchmarks). */
  nodes(): HistoryNode[] {
    return this.roots;
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.changed.dispose();
  }
}
