/**
 * The streaming reducer: applies live events to an assistant message by the
 * same rules as transcript.Apply (transcript/reduce.go), so that what an
 * editor shows live equals what the daemon stores. Pure: no I/O, no clock.
 */
import { isRejected, type Message, type PlanEntry, type Segment, type TranscriptEvent } from './protocol';

/** Segment fields an activity.upsert may overwrite (a present field wins). */
const mergeFields: Array<keyof Segment> = [
  'content', 'id', 'name', 'status', 'providerKind', 'input', 'output', 'error', 'durationMs', 'entries', 'path',
  'additions', 'deletions', 'diff', 'oldText', 'newText', 'toolCallId', 'files', 'errors',
];

function present(v: unknown): boolean {
  if (v === undefined || v === '' || v === 0) return false;
  return true;
}

/**
 * applyEvent applies one live event to the assistant message m in place:
 * deltas append to the last segment of that type or start one; activity.upsert
 * upserts a tool by id or a fileChange by path keeping its first position; a
 * plan replaces the single plan segment; turn.completed / turn.failed set the
 * status, stop reason or error and the duration. Unknown event types change
 * nothing. Returns m.
 */
export function applyEvent(m: Message, ev: TranscriptEvent): Message {
  const segs = (m.segments ??= []);
  switch (ev.type) {
    case 'content.delta':
    case 'reasoning.delta': {
      if (!ev.delta) return m;
      markStreaming(m);
      const type = ev.type === 'content.delta' ? 'content' : 'reasoning';
      const last = segs[segs.length - 1];
      if (last && last.type === type) last.content = (last.content ?? '') + ev.delta;
      else segs.push({ type, content: ev.delta });
      return m;
    }
    case 'activity.upsert': {
      const s = ev.segment;
      if (!s) return m;
      markStreaming(m);
      upsertSegment(m, s);
      return m;
    }
    case 'plan.updated':
      markStreaming(m);
      setPlan(m, ev.entries ?? []);
      return m;
    case 'turn.completed':
    case 'turn.failed':
      finishTurn(m, ev);
      return m;
    default:
      return m;
  }
}

function markStreaming(m: Message): void {
  if (!m.role) m.role = 'assistant';
  if (!m.status) m.status = 'streaming';
}

function upsertSegment(m: Message, s: Segment): void {
  const segs = m.segments!;
  switch (s.type) {
    case 'tool':
    case 'fileChange': {
      const i = segs.findIndex((x) => x.type === s.type && (s.type === 'tool' ? x.id === s.id : x.path === s.path));
      if (i >= 0) {
        const dst = segs[i] as unknown as Record<string, unknown>;
        for (const k of mergeFields) {
          const v = (s as unknown as Record<string, unknown>)[k];
          if (k === 'oldText' || k === 'newText' || k === 'additions' || k === 'deletions') {
            if (v !== undefined && v !== null) dst[k] = v;
          } else if (present(v)) dst[k] = v;
        }
      } else segs.push(structuredCloneSafe(s));
      return;
    }
    case 'plan':
      setPlan(m, s.entries ?? []);
      return;
    case 'content':
    case 'reasoning':
      applyEvent(m, { type: s.type === 'content' ? 'content.delta' : 'reasoning.delta', delta: s.content });
      return;
    default:
      segs.push(structuredCloneSafe(s));
  }
}

function setPlan(m: Message, entries: PlanEntry[]): void {
  const copy = entries.map((e) => ({ ...e }));
  const p = m.segments!.find((x) => x.type === 'plan');
  if (p) p.entries = copy;
  else m.segments!.push({ type: 'plan', entries: copy });
}

function finishTurn(m: Message, ev: TranscriptEvent): void {
  if (!m.role) m.role = 'assistant';
  if (ev.type === 'turn.failed') {
    m.status = 'failed';
    m.error = ev.message;
  } else {
    m.status = ev.stopReason === 'cancelled' ? 'cancelled' : 'completed';
    m.stopReason = ev.stopReason;
  }
  if (!m.durationMs && ev.timestamp && m.timestamp && ev.timestamp > m.timestamp) {
    m.durationMs = ev.timestamp - m.timestamp;
  }
}

function structuredCloneSafe<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** Counts of a turn's activity, for the collapsed summary line. */
export interface ActivitySummary {
  reasoning: boolean;
  tools: Record<string, number>;
  toolCount: number;
  planDone: number;
  planTotal: number;
  /** fileChange segments the turn wrote, and their line counts; rejected ones are left out (transcript.Summarize). */
  files: number;
  additions: number;
  deletions: number;
  /** fileChange segments whose write did not happen (status "rejected"). */
  notApplied: number;
}

/**
 * summarize counts the activity segments of an assistant message. Like
 * transcript.Summarize, a rejected fileChange does not count as a file nor in
 * the +adds/−dels totals; it is counted in notApplied instead.
 */
export function summarize(m: Message): ActivitySummary {
  const s: ActivitySummary = { reasoning: false, tools: {}, toolCount: 0, planDone: 0, planTotal: 0, files: 0, additions: 0, deletions: 0, notApplied: 0 };
  for (const seg of m.segments ?? []) {
    switch (seg.type) {
      case 'reasoning':
        s.reasoning = true;
        break;
      case 'tool': {
        const st = seg.status || 'pending';
        s.tools[st] = (s.tools[st] ?? 0) + 1;
        s.toolCount++;
        break;
      }
      case 'plan':
        s.planTotal = seg.entries?.length ?? 0;
        s.planDone = seg.entries?.filter((e) => e.status === 'completed').length ?? 0;
        break;
      case 'fileChange':
        if (isRejected(seg)) {
          s.notApplied++;
          break;
        }
        s.files++;
        s.additions += seg.additions ?? 0;
        s.deletions += seg.deletions ?? 0;
        break;
    }
  }
  return s;
}
