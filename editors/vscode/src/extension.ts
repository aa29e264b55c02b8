/**
 * Entry point of the ochat VS Code extension: wires the daemon client
 * (client/), the chat view, the history view, diff review and commands (ui/).
 * UI code never speaks JSON-RPC itself; the DaemonClient never touches vscode.
 */
import * as vscode from 'vscode';
import { execFile } from 'node:child_process';
import { DaemonClient } from './client/daemon';
import { ChatController } from './ui/chatController';
import { ChatViewProvider } from './ui/chatView';
import { HistoryProvider } from './ui/historyView';
import { DIFF_SCHEME, DiffDocuments, changeFile, handleApplyEdit, openDiff, reviewTurn } from './ui/diffs';
import { saveWorkspaceAttachment } from './ui/attachments';
import { Methods, type NativeSession } from './model/protocol';
import type { HistoryNode } from './model/historyTree';

const LAST_CONVERSATION = 'ochat.lastConversation';

export async function activate(context: vscode.ExtensionContext): Promise<{ client: DaemonClient; controller: ChatController; history: HistoryProvider }> {
  const out = vscode.window.createOutputChannel('ochat');
  context.subscriptions.push(out);
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd();
  const cfg = () => vscode.workspace.getConfiguration('ochat');
  const options = () => ({
    command: cfg().get<string>('path') || 'ochatd',
    workspace: folder,
    extraArgs: cfg().get<string[]>('connectArgs') ?? [],
    clientName: 'ochat.vscode',
    clientVersion: String(context.extension?.packageJSON?.version ?? '0.0.0'),
    trace: cfg().get<boolean>('trace') ?? false,
    log: (l: string) => out.appendLine(l),
  });
  const client = new DaemonClient(options());
  client.onRequest(Methods.applyEdit, handleApplyEdit);
  client.onRequest(Methods.showDocument, async (p: { uri: string; takeFocus?: boolean }) => {
    await vscode.window.showTextDocument(vscode.Uri.parse(p.uri), { preserveFocus: !p.takeFocus });
    return { success: true };
  });
  client.onNotification(Methods.showMessage, (p: { type: number; message: string }) => {
    const show = p.type === 1 ? vscode.window.showErrorMessage : p.type === 2 ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    void show(`ochat: ${p.message}`);
  });

  const docs = new DiffDocuments();
  context.subscriptions.push(vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, docs));

  const history = new HistoryProvider(client);
  // Set once the views exist (below); the controller reports pending permissions from its first subscribe.
  let onPending: (pending: import('./model/protocol').PermissionParams[]) => void = () => undefined;
  let lastEditor: vscode.TextEditor | undefined = vscode.window.activeTextEditor;
  context.subscriptions.push(vscode.window.onDidChangeActiveTextEditor((e) => { if (e) lastEditor = e; }));
  const controller = new ChatController(client, {
    env: () => ({ workspaceRoot: folder, tabSize: Number(vscode.workspace.getConfiguration('editor').get('tabSize')) || 4 }),
    pendingChanged: (p) => onPending(p),
    insertText: async (text) => {
      const ed = vscode.window.activeTextEditor ?? (lastEditor && vscode.window.visibleTextEditors.includes(lastEditor) ? lastEditor : vscode.window.visibleTextEditors[0]);
      if (!ed) {
        void vscode.window.showWarningMessage('ochat: open a file to insert the code into.');
        return;
      }
      await vscode.window.showTextDocument(ed.document, { viewColumn: ed.viewColumn, preserveFocus: false });
      await ed.edit((b) => { for (const sel of ed.selections) b.replace(sel, text); });
    },
    copyText: async (text) => {
      await vscode.env.clipboard.writeText(text);
      vscode.window.setStatusBarMessage('ochat: code copied', 2000);
    },
    openHistory: () => void vscode.commands.executeCommand('workbench.view.extension.ochat-history'),
    historyChanged: () => history.refreshSoon(),
    setConversationId: (id) => void context.workspaceState.update(LAST_CONVERSATION, id),
    agentStateStore: {
      get: (id) => context.workspaceState.get(`ochat.agentState.${id}`),
      set: (id, st) => void context.workspaceState.update(`ochat.agentState.${id}`, st),
    },
    configStore: {
      get: () => context.globalState.get('ochat.configPicks'),
      set: (v) => void context.globalState.update('ochat.configPicks', v),
    },
    saveAttachment: async (data, name, mimeType) => {
      // In the workspace: the agent reads attachments through fs/read_text_file, confined to the workspace.
      const file = await saveWorkspaceAttachment(folder, data, mimeType);
      out.appendLine(`stored pasted image ${name} (${data.length} bytes) at ${file}`);
      return file;
    },
    openDiff: (model, msg) => {
      const seg = msg.permissionId
        ? model.permissions.get(msg.permissionId)?.fileChanges?.find((f) => f.path === msg.path)
        : model.fileChanges(msg.messageId).find((c) => c.segment.path === msg.path)?.segment;
      if (seg) void openDiff(docs, seg, msg.permissionId ? 'proposed' : undefined);
    },
    // A revert during the walk shows in the panel at once (the row turns "reverted").
    reviewTurn: (model, id) => void reviewTurn(docs, model, id, (mid, seg) => changeFile(client, model.conversation?.id, mid, seg, 'revert').finally(() => controller.postInit())),
    applyChange: (model, id, p, action) => {
      const seg = model.fileChanges(id).find((c) => c.segment.path === p)?.segment;
      if (seg) void changeFile(client, model.conversation?.id, id, seg, action).then(() => controller.postInit());
    },
  });
  context.subscriptions.push(controller, history);
  // Sessions written in a terminal (and conversations changed by other clients) update the tree live.
  client.onNotification(Methods.sessionsChanged, () => history.refreshSoon());
  client.onNotification(Methods.conversationsChanged, () => history.refreshSoon());
  const chatView = new ChatViewProvider(context.extensionUri, controller);
  context.subscriptions.push(vscode.window.registerWebviewViewProvider(ChatViewProvider.viewId, chatView));
  const tree = vscode.window.createTreeView('ochat.history', { treeDataProvider: history, showCollapseAll: true });
  context.subscriptions.push(tree);

  // A permission request stays in sight until answered anywhere: the view's badge and a status bar item (which
  // shows it again), whether or not the chat is visible; VS Code's notification alone can slide away.
  const permStatus = vscode.window.createStatusBarItem('ochat.permission', vscode.StatusBarAlignment.Left, 1000);
  permStatus.name = 'ochat permission request';
  permStatus.command = 'ochat.showPermission';
  permStatus.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
  context.subscriptions.push(permStatus);
  onPending = (pending) => {
    const first = pending[0];
    const tip = first ? `${first.agent} waits for permission: ${(first.toolCall?.name ?? 'tool call').split(folder + '/').join('')}` : '';
    chatView.setBadge(pending.length, pending.length > 1 ? `${pending.length} permission requests wait` : tip);
    if (!first) {
      permStatus.hide();
      return;
    }
    permStatus.text = `$(shield) ${first.agent} waits${pending.length > 1 ? ` (+${pending.length - 1})` : ''}`;
    permStatus.tooltip = `${tip} — click to answer in the chat`;
    permStatus.show();
  };

  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  status.command = 'ochat.openChat';
  context.subscriptions.push(status);
  const showState = (state: string, detail: string) => {
    controller.setConnection({ state, detail });
    status.text = state === 'running' ? '$(comment-discussion) ochat' : state === 'missing' ? '$(error) ochat' : `$(sync~spin) ochat`;
    status.tooltip = state === 'running' ? `ochatd ${client.info?.serverInfo?.version ?? ''} — ${folder}` : `ochatd ${state} ${detail}`;
    status.show();
  };
  client.on('state', showState);
  client.on('connected', (_info, first: boolean) => {
    if (first) {
      void controller.refreshAgents(cfg().get<string>('defaultAgent')).catch((e) => out.appendLine(`agents/list: ${e.message}`));
      const last = context.workspaceState.get<string>(LAST_CONVERSATION);
      if (last) void controller.open(last).catch(() => context.workspaceState.update(LAST_CONVERSATION, undefined));
    } else void controller.reconnected();
    void history.refresh();
  });
  context.subscriptions.push({ dispose: () => void client.dispose() });

  const start = () =>
    client.start().catch((err: Error & { code?: string }) => {
      out.appendLine(err.message);
      if (client.state === 'missing') {
        void vscode.window
          .showErrorMessage(`ochat: cannot run "${cfg().get('path')}" (${err.code}). Install ochatd (in a clone of the ochat repository: go install ./cmd/ochatd, with $(go env GOPATH)/bin on PATH) or set "ochat.path" to its full path.`, 'Open Settings', 'Retry')
          .then((c) => {
            if (c === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'ochat.path');
            if (c === 'Retry') void client.restart().catch(() => undefined);
          });
      } else {
        void vscode.window.showErrorMessage(`ochat: ${err.message}`, 'Show Log').then((c) => c && out.show());
      }
    });
  void start();
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('ochat.path') || e.affectsConfiguration('ochat.connectArgs') || e.affectsConfiguration('ochat.trace')) {
        client.setOptions(options());
        void client.restart().catch(() => start());
      }
    }),
  );

  const nodeConversation = async (node?: HistoryNode): Promise<string | undefined> => {
    if (!node) return controller.model.conversation?.id;
    if (node.kind === 'conversation') return node.conversation.id;
    if (node.kind === 'session') return openSession(node.session);
    return undefined;
  };
  const openSession = async (s: NativeSession): Promise<string | undefined> => {
    if (s.conversationId) return s.conversationId;
    // sessionId and path exclude each other (docs/protocol.md "Terminal sessions").
    const sessionId = s.sessionId ?? s.id;
    const res = await client.request<{ conversationId?: string; conversation?: { id?: string }; messages?: [] }>(
      Methods.sessionsOpen, sessionId ? { sessionId } : { path: s.path },
    );
    const id = res.conversationId ?? res.conversation?.id;
    if (!id && res.messages) {
      // A read-only view of a native session that the daemon did not import.
      controller.showSnapshot(res as never);
      chatView.reveal();
    }
    return id;
  };
  const guard = (f: (...a: any[]) => Promise<unknown>) => async (...a: any[]) => {
    try {
      await f(...a);
    } catch (err) {
      void vscode.window.showErrorMessage(`ochat: ${(err as Error).message}`);
    }
  };
  const reg = (id: string, f: (...a: any[]) => Promise<unknown>) => context.subscriptions.push(vscode.commands.registerCommand(id, guard(f)));

  reg('ochat.openChat', async () => chatView.reveal());
  reg('ochat.focusChat', () => chatView.focusInput());
  reg('ochat.showPermission', () => controller.showPending());
  reg('ochat.newConversation', async () => {
    controller.newConversation();
    chatView.reveal();
  });
  reg('ochat.cancel', () => controller.cancel());
  reg('ochat.reviewTurn', async (messageId?: string) =>
    reviewTurn(docs, controller.model, typeof messageId === 'string' ? messageId : undefined,
      (mid, seg) => changeFile(client, controller.model.conversation?.id, mid, seg, 'revert').finally(() => controller.postInit())));
  reg('ochat.reconnect', () => client.restart());
  reg('ochat.showLog', async () => out.show());
  reg('ochat.history.refresh', () => history.refresh());
  reg('ochat.history.open', async (node?: HistoryNode) => {
    if (node?.kind === 'session' && (node.session.kind ?? 'native') === 'native') {
      // A terminal session is shown as the CLI writes it, growing live (ochat/sessions/follow).
      const s = node.session;
      const sessionId = s.sessionId ?? s.id;
      await controller.followSession(sessionId ? { sessionId } : { path: s.path }, s.title);
      chatView.reveal();
      return;
    }
    const id = await nodeConversation(node);
    if (!id) return;
    await controller.open(id, { readOnly: true });
    chatView.reveal();
  });
  reg('ochat.history.continue', async (node?: HistoryNode) => {
    const id = await nodeConversation(node);
    if (!id) return;
    await controller.open(id, { readOnly: false });
    chatView.reveal();
  });
  reg('ochat.history.rename', async (node?: HistoryNode) => {
    if (node?.kind !== 'conversation') return;
    const title = await vscode.window.showInputBox({ prompt: 'Conversation title', value: node.conversation.title });
    if (title === undefined) return;
    await client.request(Methods.conversationsRename, { conversationId: node.conversation.id, title });
    await history.refresh();
  });
  reg('ochat.history.delete', async (node?: HistoryNode) => {
    if (node?.kind !== 'conversation') return;
    const ok = await vscode.window.showWarningMessage(`Delete "${node.conversation.title || 'Untitled'}"? This cannot be undone.`, { modal: true }, 'Delete');
    if (ok !== 'Delete') return;
    await client.request(Methods.conversationsDelete, { conversationId: node.conversation.id });
    if (controller.model.conversation?.id === node.conversation.id) controller.newConversation();
    await history.refresh();
  });
  reg('ochat.history.export', async (node?: HistoryNode) => {
    const id = await nodeConversation(node);
    if (!id) return;
    const pick = await vscode.window.showQuickPick(
      [
        { label: 'Markdown', format: 'markdown', ext: 'md' },
        { label: 'Session event log (JSON Lines)', format: 'events', ext: 'jsonl' },
        { label: 'JSON', format: 'json', ext: 'json' },
      ],
      { placeHolder: 'Export format' },
    );
    if (!pick) return;
    let text: string;
    let ext = pick.ext;
    try {
      const res = await client.request<{ content: string; degradations?: unknown[] }>(Methods.exportConversation, { conversationId: id, format: pick.format });
      text = res.content;
      if (res.degradations?.length) out.appendLine(`export ${id}: ${res.degradations.length} degradation(s): ${JSON.stringify(res.degradations)}`);
    } catch (err) {
      if ((err as { code?: number }).code !== -32601) throw err;
      // An ochatd without ochat/export: the stored conversation as JSON.
      text = JSON.stringify(await client.request(Methods.conversationsGet, { conversationId: id }), null, 2);
      ext = 'json';
    }
    const target = await vscode.window.showSaveDialog({
      defaultUri: vscode.Uri.joinPath(vscode.workspace.workspaceFolders?.[0]?.uri ?? vscode.Uri.file(folder), `ochat-${id}.${ext}`),
    });
    if (!target) return;
    await vscode.workspace.fs.writeFile(target, new TextEncoder().encode(text));
    void vscode.window.showInformationMessage(`ochat: exported to ${vscode.workspace.asRelativePath(target)}`);
  });
  reg('ochat.trustWorkspace', async () => {
    // Workspace agent settings run programs: the daemon ignores them until the user trusts the file (ochatd trust).
    const settings = vscode.Uri.joinPath(vscode.Uri.file(folder), '.ochat', 'settings.json');
    await vscode.window.showTextDocument(settings, { preview: true }).then(undefined, () => undefined);
    const ok = await vscode.window.showWarningMessage(
      'Trust the agent settings of this workspace (.ochat/settings.json)? The agents it names will run with your permissions.',
      { modal: true }, 'Trust');
    if (ok !== 'Trust') return;
    const bin = cfg().get<string>('path') || 'ochatd';
    await new Promise<void>((resolve, reject) =>
      execFile(bin, ['trust', '--workspace', folder], (err, _stdout, stderr) => (err ? reject(new Error(`ochatd trust: ${stderr || err.message}`)) : resolve())));
    await controller.refreshAgents();
    void vscode.window.showInformationMessage('ochat: workspace agent settings trusted.');
  });
  return { client, controller, history };
}

export function deactivate(): void {
  /* disposables stop the client (shutdown + exit) */
}
