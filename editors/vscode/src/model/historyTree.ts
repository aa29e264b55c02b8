/**
 * The history tree's shape, built from ochat/conversations/list and (when the
 * daemon offers it) ochat/sessions/list: ochat's own conversations first, then
 * the workspace's terminal-started sessions grouped by agent, newest first,
 * live ones marked. Pure: no I/O, no vscode.
 */
import type { Conversation, NativeSession } from './protocol';

export type HistoryNode =
  | { kind: 'group'; id: string; label: string; description?: string; children: HistoryNode[] }
  | { kind: 'conversation'; id: string; conversation: Conversation }
  | { kind: 'session'; id: string; session: NativeSession };

/** sessionKey is the stable id of a native session: agent + the CLI's own id. */
export function sessionKey(s: NativeSession): string {
  return `${s.agent}:${s.sessionId ?? s.id ?? s.path ?? ''}`;
}

/**
 * buildHistory returns the root nodes. Without sessions (undefined: the daemon
 * has no ochat/sessions/list) the conversations are the roots; with sessions,
 * one "Conversations" group and one group per agent.
 */
export function buildHistory(conversations: Conversation[], sessions?: NativeSession[]): HistoryNode[] {
  const convs = [...conversations].sort((a, b) => (b.updatedAt ?? 0) - (a.updatedAt ?? 0));
  const convNodes: HistoryNode[] = convs.map((c) => ({ kind: 'conversation', id: `c:${c.id}`, conversation: c }));
  if (sessions === undefined) return convNodes;
  // ochat/sessions/list may also list the daemon's own conversations: show each once.
  const seen = new Set(convs.map((c) => c.id));
  const byAgent = new Map<string, NativeSession[]>();
  for (const raw of sessions) {
    const s = normalizeSession(raw);
    if (s.kind === 'conversation') continue; // listed from ochat/conversations/list
    if ((s.id && seen.has(s.id)) || (s.sessionId && seen.has(s.sessionId)) || (s.conversationId && seen.has(s.conversationId))) continue;
    const list = byAgent.get(s.agent) ?? [];
    list.push(s);
    byAgent.set(s.agent, list);
  }
  const roots: HistoryNode[] = [
    { kind: 'group', id: 'g:conversations', label: 'Conversations', description: String(convs.length), children: convNodes },
  ];
  for (const agent of [...byAgent.keys()].sort()) {
    const list = byAgent.get(agent)!.sort((a, b) => Number(!!b.live) - Number(!!a.live) || (b.updatedAt ?? 0) - (a.updatedAt ?? 0));
    const live = list.filter((s) => s.live).length;
    roots.push({
      kind: 'group',
      id: `g:agent:${agent}`,
      label: `${agent} terminal sessions`,
      description: live ? `${list.length} · ${live} live` : String(list.length),
      children: list.map((s) => ({ kind: 'session', id: `s:${sessionKey(s)}`, session: s })),
    });
  }
  return roots;
}

/** relativeTime formats a Unix ms time relative to now (Unix ms): "just now", "5 min ago", "3 h ago", "2 d ago", or a date. */
export function relativeTime(t: number | undefined, now: number): string {
  if (!t) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  if (s < 86400 * 14) return `${Math.floor(s / 86400)} d ago`;
  return new Date(t).toISOString().slice(0, 10);
}

/** normalizeSession fills the fields the tree needs from the names stores use (summary, firstPrompt, modifiedAt, provider). */
export function normalizeSession(s: NativeSession & { summary?: string; firstPrompt?: string; modifiedAt?: number; provider?: string }): NativeSession {
  return {
    ...s,
    agent: s.agent || s.provider || 'agent',
    title: s.title || s.summary || s.firstPrompt || '',
    updatedAt: s.updatedAt || s.modifiedAt || s.createdAt || 0,
  };
}
