/**
 * What a person reads instead of wire data: tool input as the command and
 * workspace-relative paths (no JSON escapes, no agent-internal bookkeeping
 * fields), and error messages without JSON-RPC framing. Pure: no I/O, no
 * vscode; used by the webview and the extension host.
 */

/** Fields agents put in tool input for their own bookkeeping (Codex: call_id, turn_id, started_at_ms …). */
const internalKeys = new Set([
  'call_id', 'callId', 'turn_id', 'turnId', 'started_at_ms', 'startedAtMs', 'submission_id', 'sub_id', 'parsed_cmd',
  'process_id', 'conversation_id', 'session_id', 'sessionId', 'toolCallId', 'tool_call_id',
]);

/** relPath returns p relative to the workspace root when it lies inside it, else p. */
export function relPath(p: string, root?: string): string {
  if (!root || !p) return p;
  const r = root.replace(/\/+$/, '');
  if (p === r) return '.';
  if (p.startsWith(r + '/')) return p.slice(r.length + 1);
  return p;
}

/** relInText rewrites every absolute path under the workspace root in text (a tool title) to its relative form. */
export function relInText(text: string, root?: string): string {
  if (!root || !text) return text;
  const r = root.replace(/\/+$/, '');
  return text.split(r + '/').join('');
}

/** shellCommand turns an argv into what a person would type; `bash -lc "…"` shows just the script. */
export function shellCommand(argv: unknown[]): string {
  const a = argv.map(String);
  if (a.length === 3 && /(^|\/)(ba|z|da)?sh$/.test(a[0]) && /^-l?c$/.test(a[1])) return a[2];
  return a.map((x) => (/^[\w@%+=:,./-]+$/.test(x) ? x : `'${x.replace(/'/g, `'\\''`)}'`)).join(' ');
}

function parseJSONObject(s: string): Record<string, unknown> | undefined {
  const t = s.trim();
  if (!t.startsWith('{') || !t.endsWith('}')) return undefined;
  try {
    const v = JSON.parse(t);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

const pathKeys = new Set(['path', 'file_path', 'filePath', 'abs_path', 'absPath', 'notebook_path', 'cwd', 'dir', 'directory']);

/** inputPath returns the file a tool's input names (path, file_path …), if any. */
export function inputPath(input: unknown): string | undefined {
  const o = typeof input === 'string' ? parseJSONObject(input) : input;
  if (!o || typeof o !== 'object') return undefined;
  for (const k of ['file_path', 'path', 'filePath', 'abs_path', 'absPath', 'notebook_path']) {
    const v = (o as Record<string, unknown>)[k];
    if (typeof v === 'string' && v) return v;
  }
  return undefined;
}

/**
 * toolInputText renders a tool call's input for reading: the command first
 * (`$ …`), then one `key: value` line per remaining field, strings as they are
 * (multi-line ones indented below their key), paths relative to the workspace,
 * and the agent's bookkeeping fields left out. A cwd equal to the workspace is
 * left out too.
 */
export function toolInputText(input: unknown, root?: string): string {
  if (input === undefined || input === null) return '';
  let o: unknown = input;
  if (typeof input === 'string') {
    o = parseJSONObject(input);
    if (!o) return input;
  }
  if (typeof o !== 'object' || Array.isArray(o)) return JSON.stringify(o, null, 2);
  const obj = o as Record<string, unknown>;
  const lines: string[] = [];
  const cmd = obj.command ?? obj.cmd;
  if (Array.isArray(cmd)) lines.push('$ ' + shellCommand(cmd));
  else if (typeof cmd === 'string') lines.push('$ ' + cmd);
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'command' || k === 'cmd' || internalKeys.has(k) || v === undefined || v === null || v === '') continue;
    if (k === 'cwd' && typeof v === 'string' && relPath(v, root) === '.') continue;
    if (typeof v === 'string') {
      const val = pathKeys.has(k) ? relPath(v, root) : v;
      if (val.includes('\n')) lines.push(`${k}:`, ...val.replace(/\n$/, '').split('\n').map((l) => '  ' + l));
      else lines.push(`${k}: ${val}`);
    } else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) {
      lines.push(`${k}: ${v.map((x) => relPath(x as string, root)).join(', ')}`);
    } else if (typeof v === 'object') {
      lines.push(`${k}: ${JSON.stringify(v)}`);
    } else lines.push(`${k}: ${String(v)}`);
  }
  return lines.join('\n');
}

/**
 * readableError turns an error as it reached the editor into the sentence a
 * person needs: without the JSON-RPC client's "Request … failed with message:"
 * frame, without "jsonrpc2: code N message:" prefixes, and with an embedded
 * JSON error object reduced to its message.
 */
export function readableError(text: string): string {
  let t = String(text ?? '').trim();
  t = t.replace(/^Request \S+ failed with message: /, '');
  t = t.replace(/(jsonrpc2?: )?(code -?\d+ )?message: /g, (m, a, b) => (a || b ? '' : m));
  const i = t.indexOf('{');
  const j = t.lastIndexOf('}');
  if (i >= 0 && j > i) {
    const obj = parseJSONObject(t.slice(i, j + 1));
    const inner = obj && (typeof obj.message === 'string' ? obj.message : typeof (obj.error as { message?: unknown })?.message === 'string' ? (obj.error as { message: string }).message : undefined);
    if (inner) {
      const data = obj && typeof obj.data === 'object' && obj.data && typeof (obj.data as { message?: unknown }).message === 'string' ? (obj.data as { message: string }).message : '';
      t = (t.slice(0, i).replace(/[\s:]+$/, '') + (i > 0 ? ': ' : '') + inner + (data && data !== inner ? ` (${data})` : '') + t.slice(j + 1)).trim();
    }
  }
  return t;
}
