/**
 * Diff review of file changes: before/after virtual documents (scheme
 * `ochat-diff`) opened in VS Code's diff editor, apply/revert of a change as a
 * WorkspaceEdit (so open editors update and undo works), the "review this turn"
 * walk, and the daemon's LSP `workspace/applyEdit` request.
 */
import * as vscode from 'vscode';
import * as path from 'node:path';
import type { ConversationModel } from '../model/conversation';
import type { Segment } from '../model/protocol';
import { sidesFromUnifiedDiff } from '../model/diffText';
import { ErrorCodes, isRejected } from '../model/protocol';
import type { Rpc } from './chatController';

export const DIFF_SCHEME = 'ochat-diff';

/** DiffDocuments serves the before/after texts registered for diff editors. */
export class DiffDocuments implements vscode.TextDocumentContentProvider {
  private readonly docs = new Map<string, string>();
  private seq = 0;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.docs.get(uri.query) ?? '';
  }

  /** register stores one text and returns its virtual URI (the file name keeps the language). */
  register(filePath: string, side: 'before' | 'after', text: string): vscode.Uri {
    const key = `${++this.seq}-${side}`;
    this.docs.set(key, text);
    return vscode.Uri.from({ scheme: DIFF_SCHEME, path: '/' + filePath.replace(/^\/+/, ''), query: key });
  }
}

/** sides returns the before/after texts of a fileChange (from oldText/newText, else from its unified diff). */
export function sides(seg: Segment): { before: string; after: string; partial: boolean } {
  if (seg.newText != null || seg.oldText != null) {
    return { before: seg.oldText ?? '', after: seg.newText ?? '', partial: false };
  }
  if (seg.diff) return { ...sidesFromUnifiedDiff(seg.diff), partial: true };
  return { before: '', after: '', partial: true };
}

function workspaceRoot(): vscode.Uri | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri;
}

/** fileUri resolves a fileChange path (absolute, or relative to the workspace). */
export function fileUri(p: string): vscode.Uri {
  if (path.isAbsolute(p)) return vscode.Uri.file(p);
  const root = workspaceRoot();
  return root ? vscode.Uri.joinPath(root, p) : vscode.Uri.file(p);
}

/** once returns the index of the only occurrence of part in text, or -1. */
function once(text: string, part: string): number {
  if (!part) return -1;
  const i = text.indexOf(part);
  return i >= 0 && text.indexOf(part, i + 1) < 0 ? i : -1;
}

/**
 * fileSides widens an excerpt change (an Edit's old/new string) to the whole
 * file as it is on disk: after the edit (the file holds newText once) or
 * before it (a proposed edit: the file holds oldText once). Whole-file changes
 * and unknown texts are returned as sides() gives them.
 */
export async function fileSides(seg: Segment): Promise<{ before: string; after: string; partial: boolean }> {
  const s = sides(seg);
  if (seg.newText == null || seg.oldText == null) return s;
  let disk: string;
  try {
    disk = (await vscode.workspace.openTextDocument(fileUri(seg.path ?? ''))).getText();
  } catch {
    return s;
  }
  if (disk === seg.newText || disk === seg.oldText) return s;
  let i = once(disk, seg.newText);
  if (i >= 0) return { before: disk.slice(0, i) + seg.oldText + disk.slice(i + seg.newText.length), after: disk, partial: false };
  i = once(disk, seg.oldText);
  if (i >= 0) return { before: disk, after: disk.slice(0, i) + seg.newText + disk.slice(i + seg.oldText.length), partial: false };
  return s;
}

/**
 * openDiff opens the diff editor for one file change. A rejected change (its
 * write never happened) is labelled "proposed, not applied" whatever label
 * the caller gives.
 */
export async function openDiff(docs: DiffDocuments, seg: Segment, label?: string): Promise<void> {
  const p = seg.path ?? 'file';
  if (isRejected(seg)) label = 'proposed, not applied';
  const s = await fileSides(seg);
  const rel = vscode.workspace.asRelativePath(p, false);
  const left = docs.register(rel, 'before', s.before);
  const right = docs.register(rel, 'after', s.after);
  const stats = `+${seg.additions ?? 0} −${seg.deletions ?? 0}`;
  const title = `${path.basename(p)} (${label ?? 'ochat'} ${stats}${s.partial ? ', hunks only' : ''})`;
  await vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: true });
}

/**
 * createdByChange reports whether a fileChange created its file: the old text
 * is null, or absent (the wire omits a nil oldText) with a known new text and
 * no deleted line.
 */
export function createdByChange(seg: Segment): boolean {
  if (seg.oldText === null) return true;
  return seg.oldText === undefined && seg.newText != null && (seg.deletions ?? 0) === 0 && !seg.diff?.includes('\n-');
}

/**
 * applyChange writes the change's new text ('apply') or its old text
 * ('revert'; reverting a change that created the file deletes it) through a
 * WorkspaceEdit, so open editors update and undo works, then saves the
 * document if it was saved before. When the file no longer holds the text
 * the change left (reverting) or started from (applying), it asks first.
 * Returns false when the edit was refused, declined or the texts are unknown,
 * and for a rejected change (never written), which it leaves alone.
 */
export async function applyChange(seg: Segment, action: 'apply' | 'revert'): Promise<boolean> {
  const uri = fileUri(seg.path ?? '');
  const rel = vscode.workspace.asRelativePath(seg.path ?? '', false);
  if (isRejected(seg)) return notApplied(rel, action);
  const created = createdByChange(seg);
  const target = action === 'apply' ? seg.newText : created ? null : seg.oldText;
  const expected = action === 'apply' ? (created ? null : seg.oldText) : seg.newText;
  if (target === undefined) {
    void vscode.window.showWarningMessage(`ochat: the ${action === 'apply' ? 'new' : 'old'} text of ${rel} is unknown; cannot ${action}.`);
    return false;
  }
  let doc: vscode.TextDocument | undefined;
  try {
    doc = await vscode.workspace.openTextDocument(uri);
  } catch {
    doc = undefined;
  }
  const current = doc ? doc.getText() : null;
  if (expected !== undefined && current !== expected) {
    const go = await vscode.window.showWarningMessage(
      `ochat: ${rel} has changed since this turn. ${action === 'revert' ? 'Revert' : 'Apply'} anyway and lose those changes?`, { modal: true }, 'Overwrite');
    if (go !== 'Overwrite') return false;
  }
  const edit = new vscode.WorkspaceEdit();
  if (target === null) {
    edit.deleteFile(uri, { ignoreIfNotExists: true });
    return vscode.workspace.applyEdit(edit);
  }
  if (!doc) {
    edit.createFile(uri, { overwrite: true, contents: new TextEncoder().encode(target) });
    return vscode.workspace.applyEdit(edit);
  }
  const wasDirty = doc.isDirty;
  const full = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
  edit.replace(uri, full, target);
  const ok = await vscode.workspace.applyEdit(edit);
  if (ok && !wasDirty) await doc.save();
  return ok;
}

/**
 * reviewTurn walks every file change of one turn (the last turn that changed
 * files when messageId is empty): it opens each diff in turn and asks Next /
 * Revert / Stop. Rejected changes (never written) are skipped. Returns the
 * number of diffs shown.
 */
export async function reviewTurn(
  docs: DiffDocuments, model: ConversationModel, messageId?: string,
  revert: (messageId: string, seg: Segment) => Promise<boolean> = (_m, seg) => applyChange(seg, 'revert'),
): Promise<number> {
  const id = messageId || model.lastTurnWithChanges();
  const all = id ? model.fileChanges(id) : [];
  const changes = all.filter((c) => !isRejected(c.segment));
  if (!changes.length) {
    const skipped = all.length ? ` (${all.length} proposed change${all.length > 1 ? 's were' : ' was'} not applied)` : '';
    void vscode.window.showInformationMessage(`ochat: this turn changed no files${skipped}.`);
    return 0;
  }
  let shown = 0;
  for (let i = 0; i < changes.length; i++) {
    const seg = changes[i].segment;
    await openDiff(docs, seg, `${i + 1}/${changes.length}`);
    shown++;
    const last = i === changes.length - 1;
    const choice = await vscode.window.showInformationMessage(
      `Review ${i + 1}/${changes.length}: ${vscode.workspace.asRelativePath(seg.path ?? '', false)} (+${seg.additions ?? 0} −${seg.deletions ?? 0})`,
      ...(last ? ['Done'] : ['Next']), 'Revert This File', 'Stop',
    );
    if (choice === 'Revert This File') {
      await revert(changes[i].messageId, seg);
      if (last) break;
    } else if (choice !== 'Next') break;
  }
  return shown;
}

/** LSP WorkspaceEdit shapes the daemon may send in workspace/applyEdit. */
interface LspPosition { line: number; character: number }
interface LspRange { start: LspPosition; end: LspPosition }
interface LspTextEdit { range: LspRange; newText: string }
interface LspWorkspaceEdit {
  changes?: Record<string, LspTextEdit[]>;
  documentChanges?: Array<
    | { textDocument: { uri: string; version?: number | null }; edits: LspTextEdit[] }
    | { kind: 'create'; uri: string; options?: { overwrite?: boolean; ignoreIfExists?: boolean } }
    | { kind: 'rename'; oldUri: string; newUri: string; options?: { overwrite?: boolean; ignoreIfExists?: boolean } }
    | { kind: 'delete'; uri: string; options?: { recursive?: boolean; ignoreIfNotExists?: boolean } }
  >;
}

function range(r: LspRange): vscode.Range {
  return new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
}

/** toWorkspaceEdit converts an LSP WorkspaceEdit into a vscode.WorkspaceEdit. */
export function toWorkspaceEdit(e: LspWorkspaceEdit): vscode.WorkspaceEdit {
  const out = new vscode.WorkspaceEdit();
  for (const [uri, edits] of Object.entries(e.changes ?? {})) {
    for (const te of edits) out.replace(vscode.Uri.parse(uri), range(te.range), te.newText);
  }
  for (const dc of e.documentChanges ?? []) {
    if ('textDocument' in dc) {
      for (const te of dc.edits) out.replace(vscode.Uri.parse(dc.textDocument.uri), range(te.range), te.newText);
    } else if (dc.kind === 'create') out.createFile(vscode.Uri.parse(dc.uri), dc.options);
    else if (dc.kind === 'rename') out.renameFile(vscode.Uri.parse(dc.oldUri), vscode.Uri.parse(dc.newUri), dc.options);
    else if (dc.kind === 'delete') out.deleteFile(vscode.Uri.parse(dc.uri), dc.options);
  }
  return out;
}

/** handleApplyEdit answers the daemon's workspace/applyEdit request (LSP ApplyWorkspaceEditResult). */
export async function handleApplyEdit(params: { label?: string; edit: LspWorkspaceEdit }): Promise<{ applied: boolean; failureReason?: string }> {
  try {
    const applied = await vscode.workspace.applyEdit(toWorkspaceEdit(params.edit ?? {}));
    return applied ? { applied } : { applied, failureReason: 'the editor refused the edit' };
  } catch (err) {
    return { applied: false, failureReason: (err as Error).message };
  }
}

/** notApplied refuses to apply or revert a rejected change (its write never happened) and says so; returns false. */
function notApplied(rel: string, action: 'apply' | 'revert'): false {
  void vscode.window.showInformationMessage(`ochat: ${rel} was proposed but not applied; there is nothing to ${action}.`);
  return false;
}

/**
 * changeFile applies or reverts one fileChange through the daemon
 * (ochat/fileChange/apply|revert), which computes the edit from what the file
 * holds now — also for excerpt edits — and sends it back as a
 * workspace/applyEdit that VS Code applies (undoable). A conflict
 * (-32003, the file changed since) asks before retrying with force; a daemon
 * without the methods (-32601) falls back to applyChange. A rejected change
 * (never written) is refused without a request. Returns whether the file now
 * holds the target.
 */
export async function changeFile(rpc: Rpc, conversationId: string | undefined, messageId: string, seg: Segment, action: 'apply' | 'revert'): Promise<boolean> {
  if (isRejected(seg)) return notApplied(vscode.workspace.asRelativePath(seg.path ?? '', false), action);
  if (!conversationId) return applyChange(seg, action);
  const method = action === 'apply' ? 'ochat/fileChange/apply' : 'ochat/fileChange/revert';
  const params = { conversationId, messageId, path: seg.path };
  const rel = vscode.workspace.asRelativePath(seg.path ?? '', false);
  type Result = { applied: boolean; reason?: string; status?: string };
  const done = (res: Result): boolean => {
    if (res.status) seg.status = res.status;
    if (!res.applied && res.reason) void vscode.window.showInformationMessage(`ochat: ${rel}: ${res.reason}`);
    return res.applied || /^already/.test(res.reason ?? '');
  };
  try {
    return done(await rpc.request<Result>(method, params));
  } catch (err) {
    const code = (err as { code?: number }).code;
    const message = (err as Error).message;
    if (code === ErrorCodes.methodNotFound) return applyChange(seg, action);
    if (code === ErrorCodes.conflict && /changed since/.test(message)) {
      const go = await vscode.window.showWarningMessage(`ochat: ${message}`, { modal: true }, 'Overwrite');
      if (go !== 'Overwrite') return false;
      return done(await rpc.request<Result>(method, { ...params, force: true }));
    }
    void vscode.window.showErrorMessage(`ochat: ${action} ${rel}: ${message}`);
    return false;
  }
}
