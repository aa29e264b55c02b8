/**
 * ChatViewProvider: the chat panel, a webview view with a strict content
 * security policy (nonce scripts only, no inline styles or scripts, resources
 * from the extension only). It relays messages between the webview and the
 * ChatController and renders nothing itself.
 */
import * as vscode from 'vscode';
import { randomBytes } from 'node:crypto';
import type { ChatController, ChatSink } from './chatController';
import type { HostMessage, WebviewMessage } from './messages';

export class ChatViewProvider implements vscode.WebviewViewProvider, ChatSink {
  static readonly viewId = 'ochat.chat';
  private view?: vscode.WebviewView;

  constructor(private readonly extensionUri: vscode.Uri, private readonly controller: ChatController) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, 'dist');
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = renderHtml(view.webview, media, nonce());
    view.webview.onDidReceiveMessage((m: WebviewMessage) => void this.controller.handle(m));
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
        this.controller.attach(undefined);
      }
    });
    this.controller.attach(this);
    view.badge = this.badge;
  }

  private badge?: vscode.ViewBadge;

  /** setBadge shows on the view's icon how many permission requests wait (visible while the chat is hidden). */
  setBadge(count: number, tooltip: string): void {
    this.badge = count ? { value: count, tooltip } : undefined;
    if (this.view) this.view.badge = this.badge;
  }

  /** focusInput reveals the chat and puts the cursor in the composer. */
  async focusInput(): Promise<void> {
    await vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
    this.post({ type: 'focusInput' });
  }

  post(msg: HostMessage): void {
    void this.view?.webview.postMessage(msg);
  }

  visible(): boolean {
    return !!this.view?.visible;
  }

  reveal(): void {
    if (this.view) this.view.show(false);
    else void vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
  }
}

function nonce(): string {
  return randomBytes(18).toString('base64').replace(/[+/=]/g, '');
}

/** renderHtml returns the webview document: CSP, codicons, styles and the bundled script. */
export function renderHtml(webview: vscode.Webview, media: vscode.Uri, n: string): string {
  const uri = (f: string) => webview.asWebviewUri(vscode.Uri.joinPath(media, f)).toString();
  const csp = [
    `default-src 'none'`,
    `img-src ${webview.cspSource} data:`,
    `font-src ${webview.cspSource}`,
    `style-src ${webview.cspSource}`,
    `script-src 'nonce-${n}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link href="${uri('codicon.css')}" rel="stylesheet">
<link href="${uri('webview.css')}" rel="stylesheet">
<title>ochat</title>
</head>
<body>
<div id="app"></div>
<script nonce="${n}" src="${uri('webview.js')}"></script>
</body>
</html>`;
}
