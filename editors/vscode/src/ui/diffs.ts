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

/** openDiff opens the diff editor for one file change. */
export async function openDiff(docs: DiffDocuments, seg: Segment, label?: string): Promise<void> {
  const p = seg.path ?? 'file';
  const s = sides(seg);
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
 * Returns false when the edit was refused, declined or the texts are unknown.
 */
export async function applyChange(seg: Segment, action: 'apply' | 'revert'): Promise<boolean> {
  const uri = fileUri(seg.path ?? '');
  const rel = vscode.workspace.asRelativePath(seg.path ?? '', false);
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
 * reviewTurn walks every file change of one turn: it opens each diff in turn
 * and asks Next / Revert / Stop.
 */
export async function reviewTurn(docs: DiffDocuments, model: ConversationModel, messageId?: string): Promise<number> {
  const id = messageId || model.lastTurnWithChanges();
  const changes = id ? model.fileChanges(id) : [];
  if (!changes.length) {
    void vscode.window.showInformationMessage('ochat: this turn changed no files.');
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
      await applyChange(seg, 'revert');
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
