/**
 * A fake `vscode` module for unit tests: the small part of the API the
 * extension uses, recording what it is asked to do. install() makes
 * `require('vscode')` resolve to it.
 */
import Module = require('node:module');
import * as nodePath from 'node:path';

export class EventEmitter<T> {
  private listeners: Array<(e: T) => void> = [];
  event = (l: (e: T) => void) => {
    this.listeners.push(l);
    return { dispose: () => (this.listeners = this.listeners.filter((x) => x !== l)) };
  };
  fire(e: T): void {
    for (const l of this.listeners) l(e);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class Uri {
  constructor(readonly scheme: string, readonly path: string, readonly query = '') {}
  get fsPath(): string {
    return this.path;
  }
  static file(p: string): Uri {
    return new Uri('file', p);
  }
  static parse(s: string): Uri {
    const m = /^([a-z-]+):(?:\/\/)?([^?]*)(?:\?(.*))?$/.exec(s);
    return m ? new Uri(m[1], m[2], m[3] ?? '') : new Uri('file', s);
  }
  static joinPath(u: Uri, ...parts: string[]): Uri {
    return new Uri(u.scheme, nodePath.posix.join(u.path, ...parts), u.query);
  }
  static from(c: { scheme: string; path: string; query?: string }): Uri {
    return new Uri(c.scheme, c.path, c.query ?? '');
  }
  toString(): string {
    return `${this.scheme}://${this.path}${this.query ? '?' + this.query : ''}`;
  }
}

export class Position {
  constructor(readonly line: number, readonly character: number) {}
}
export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(a: number | Position, b: number | Position, c?: number, d?: number) {
    this.start = typeof a === 'number' ? new Position(a, b as number) : a;
    this.end = typeof a === 'number' ? new Position(c!, d!) : (b as Position);
  }
}

export type EditOp =
  | { op: 'replace'; uri: string; range: Range; text: string }
  | { op: 'create'; uri: string; options?: unknown }
  | { op: 'delete'; uri: string; options?: unknown }
  | { op: 'rename'; from: string; to: string };
export class WorkspaceEdit {
  readonly ops: EditOp[] = [];
  replace(uri: Uri, range: Range, text: string): void {
    this.ops.push({ op: 'replace', uri: uri.toString(), range, text });
  }
  createFile(uri: Uri, options?: unknown): void {
    this.ops.push({ op: 'create', uri: uri.toString(), options });
  }
  deleteFile(uri: Uri, options?: unknown): void {
    this.ops.push({ op: 'delete', uri: uri.toString(), options });
  }
  renameFile(from: Uri, to: Uri): void {
    this.ops.push({ op: 'rename', from: from.toString(), to: to.toString() });
  }
}

export enum TreeItemCollapsibleState { None = 0, Collapsed = 1, Expanded = 2 }
export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: string;
  iconPath?: unknown;
  contextValue?: string;
  command?: { command: string; title: string; arguments?: unknown[] };
  constructor(readonly label: string, readonly collapsibleState: TreeItemCollapsibleState) {}
}
export class ThemeColor {
  constructor(readonly id: string) {}
}

export class ThemeIcon {
  constructor(readonly id: string) {}
}
export enum StatusBarAlignment { Left = 1, Right = 2 }

/** Everything the fake recorded, and answers to script. */
export const recorded = {
  messages: [] as Array<{ level: string; text: string; items: string[]; resolve: (v?: string) => void }>,
  commands: [] as Array<{ id: string; args: unknown[] }>,
  edits: [] as WorkspaceEdit[],
  opened: [] as string[],
  /** next answers for showInformationMessage & co; undefined means dismissed. */
  answers: [] as Array<string | undefined>,
  /** when true, messages wait for resolve() instead of taking answers. */
  manual: false,
  files: [] as string[],
  /** documents that exist, by URI string → text */
  docs: new Map<string, string>(),
  saved: [] as string[],
  config: {} as Record<string, unknown>,
};

export function reset(): void {
  recorded.messages.length = 0;
  recorded.commands.length = 0;
  recorded.edits.length = 0;
  recorded.opened.length = 0;
  recorded.answers.length = 0;
  recorded.manual = false;
  recorded.docs.clear();
  recorded.saved.length = 0;
}

function message(level: string) {
  return (text: string, ...items: unknown[]): Promise<string | undefined> => {
    const labels = items.filter((i): i is string => typeof i === 'string');
    return new Promise((resolve) => {
      recorded.messages.push({ level, text, items: labels, resolve });
      if (!recorded.manual) resolve(recorded.answers.shift());
    });
  };
}

const commandHandlers = new Map<string, (...a: unknown[]) => unknown>();

export const window = {
  showInformationMessage: message('info'),
  showWarningMessage: message('warning'),
  showErrorMessage: message('error'),
  showInputBox: async () => recorded.answers.shift(),
  showSaveDialog: async () => undefined,
  showTextDocument: async (u: Uri) => {
    recorded.opened.push(u.toString());
  },
  createOutputChannel: () => ({ appendLine: () => undefined, show: () => undefined, dispose: () => undefined }),
  registerWebviewViewProvider: () => ({ dispose: () => undefined }),
  createTreeView: () => ({ dispose: () => undefined }),
  createStatusBarItem: () => ({ show: () => undefined, hide: () => undefined, dispose: () => undefined }),
  onDidChangeActiveTextEditor: () => ({ dispose: () => undefined }),
  activeTextEditor: undefined,
  visibleTextEditors: [],
  setStatusBarMessage: () => ({ dispose: () => undefined }),
};

export const registeredCommands = () => [...commandHandlers.keys()];

export const commands = {
  registerCommand(id: string, f: (...a: unknown[]) => unknown) {
    commandHandlers.set(id, f);
    return { dispose: () => commandHandlers.delete(id) };
  },
  async executeCommand(id: string, ...args: unknown[]) {
    recorded.commands.push({ id, args });
    return commandHandlers.get(id)?.(...args);
  },
};

export const workspace = {
  workspaceFolders: [{ uri: Uri.file('/ws'), name: 'ws', index: 0 }],
  asRelativePath(p: string | Uri): string {
    const s = typeof p === 'string' ? p : p.path;
    return s.startsWith('/ws/') ? s.slice(4) : s;
  },
  async findFiles(glob: string, _exclude?: string, max = 50): Promise<Uri[]> {
    const q = glob.replace(/^\*\*\/\*?/, '').replace(/\*$/, '');
    return recorded.files.filter((f) => f.includes(q)).slice(0, max).map((f) => Uri.file('/ws/' + f));
  },
  async applyEdit(e: WorkspaceEdit): Promise<boolean> {
    recorded.edits.push(e);
    return true;
  },
  async openTextDocument(u: Uri) {
    const text = recorded.docs.get(u.toString());
    if (text === undefined) throw new Error(`no document ${u.toString()}`);
    return {
      uri: u, isDirty: false, getText: () => text,
      positionAt: (off: number) => { const before = text.slice(0, off).split('\n'); return new Position(before.length - 1, before[before.length - 1].length); },
      save: async () => { recorded.saved.push(u.toString()); return true; },
    };
  },
  getConfiguration: () => ({ get: (k: string) => recorded.config[k] }),
  registerTextDocumentContentProvider: () => ({ dispose: () => undefined }),
  onDidChangeConfiguration: () => ({ dispose: () => undefined }),
  fs: { writeFile: async () => undefined },
};

export const env = { openExternal: async () => true };

/** install makes require('vscode') return this module. */
export function install(): void {
  const M = Module as unknown as { _resolveFilename: (req: string, ...rest: unknown[]) => string };
  const orig = M._resolveFilename;
  M._resolveFilename = function (req: string, ...rest: unknown[]) {
    if (req === 'vscode') return 'vscode';
    return orig.call(this, req, ...rest);
  };
  require.cache['vscode'] = { id: 'vscode', filename: 'vscode', loaded: true, exports: module.exports } as NodeModule;
}
install();
