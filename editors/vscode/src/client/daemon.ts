/**
 * DaemonClient: the transport to ochatd. It spawns `ochatd connect
 * --workspace ROOT` (the stdio forwarder of docs/protocol.md "Transport"),
 * speaks JSON-RPC 2.0 with Content-Length framing through vscode-jsonrpc,
 * runs the LSP lifecycle (initialize → initialized … shutdown → exit) and
 * reconnects with backoff when the forwarder exits (daemon restart). It knows
 * nothing about vscode or the UI.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import {
  createMessageConnection, StreamMessageReader, StreamMessageWriter, ResponseError, type MessageConnection,
} from 'vscode-jsonrpc/node';
import { Methods } from '../model/protocol';

/** Connection states; `missing` means the ochatd binary was not found. */
export type DaemonState = 'stopped' | 'starting' | 'running' | 'reconnecting' | 'missing' | 'failed';

export interface DaemonOptions {
  /** ochatd binary (a path or a name on PATH). */
  command: string;
  /** Workspace root passed as --workspace. */
  workspace: string;
  /** Extra arguments after --workspace ROOT. */
  extraArgs?: string[];
  env?: NodeJS.ProcessEnv;
  clientName?: string;
  clientVersion?: string;
  log?: (line: string) => void;
  trace?: boolean;
  /** Backoff between reconnect attempts in ms, grows ×2 up to maxBackoffMs. */
  backoffMs?: number;
  maxBackoffMs?: number;
}

/** The initialize answer (daemon.InitializeResult). */
export interface InitializeResult {
  capabilities: Record<string, unknown>;
  serverInfo?: { name: string; version: string };
  workspace?: string;
  protocolVersion?: number;
}

type NotificationHandler = (params: any) => void;
type RequestHandler = (params: any) => Promise<unknown> | unknown;

/**
 * Events: 'state' (DaemonState, detail?: string), 'connected' (InitializeResult,
 * first: boolean) after every successful initialize — subscribers must
 * re-subscribe on a reconnect.
 */
export class DaemonClient extends EventEmitter {
  state: DaemonState = 'stopped';
  detail = '';
  info?: InitializeResult;
  private proc?: ChildProcess;
  private conn?: MessageConnection;
  private disposed = false;
  private connectedOnce = false;
  private backoff: number;
  private timer?: NodeJS.Timeout;
  private readonly notificationHandlers = new Map<string, Set<NotificationHandler>>();
  private readonly requestHandlers = new Map<string, RequestHandler>();
  private ready?: Promise<void>;

  constructor(private opts: DaemonOptions) {
    super();
    this.backoff = opts.backoffMs ?? 500;
  }

  /** setOptions changes the command or arguments used by the next (re)connect. */
  setOptions(opts: DaemonOptions): void {
    this.opts = opts;
  }

  /** onNotification registers a handler for a daemon notification; returns an unregister function. */
  onNotification(method: string, h: NotificationHandler): () => void {
    let set = this.notificationHandlers.get(method);
    if (!set) this.notificationHandlers.set(method, (set = new Set()));
    set.add(h);
    return () => set!.delete(h);
  }

  /** onRequest registers the handler of a daemon → client request (e.g. workspace/applyEdit). */
  onRequest(method: string, h: RequestHandler): void {
    this.requestHandlers.set(method, h);
  }

  /** start connects (once); resolves after initialize, rejects when the daemon cannot be started. */
  start(): Promise<void> {
    if (!this.ready) {
      this.ready = this.connect().catch((err) => {
        this.ready = undefined;
        throw err;
      });
    }
    return this.ready;
  }

  /** restart drops the current connection and connects again now (e.g. after ochat.path changed). */
  async restart(): Promise<void> {
    clearTimeout(this.timer);
    this.teardown();
    this.ready = undefined;
    this.backoff = this.opts.backoffMs ?? 500;
    return this.start();
  }

  /** request sends a request after the connection is up; JSON-RPC errors reject with a ResponseError. */
  async request<R = any>(method: string, params: unknown = {}): Promise<R> {
    await this.start();
    if (!this.conn) throw new Error(`ochatd is not connected (${this.state}${this.detail ? ': ' + this.detail : ''})`);
    return this.conn.sendRequest(method, params) as Promise<R>;
  }

  private setState(s: DaemonState, detail = ''): void {
    this.state = s;
    this.detail = detail;
    this.emit('state', s, detail);
  }

  private log(line: string): void {
    this.opts.log?.(line);
  }

  private connect(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.setState(this.connectedOnce ? 'reconnecting' : 'starting');
      const args = ['connect', '--workspace', this.opts.workspace, ...(this.opts.extraArgs ?? [])];
      this.log(`spawn ${this.opts.command} ${args.join(' ')}`);
      let proc: ChildProcess;
      try {
        // A missing cwd would fail the spawn with ENOENT, which reads as a missing binary.
        const cwd = existsSync(this.opts.workspace) ? this.opts.workspace : undefined;
        proc = spawn(this.opts.command, args, { cwd, env: this.opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
      } catch (err) {
        this.failSpawn(err as NodeJS.ErrnoException, reject);
        return;
      }
      this.proc = proc;
      let settled = false;
      proc.on('error', (err: NodeJS.ErrnoException) => {
        if (this.proc !== proc) return;
        if (!settled) {
          settled = true;
          this.failSpawn(err, reject);
        }
      });
      proc.stderr?.on('data', (d: Buffer) => this.log(`[ochatd] ${d.toString().trimEnd()}`));
      proc.on('exit', (code, signal) => {
        if (this.proc !== proc) return;
        this.log(`ochatd connect exited (code ${code}, signal ${signal})`);
        this.teardown();
        if (!settled) {
          settled = true;
          this.setState('failed', `ochatd connect exited with code ${code}`);
          reject(new Error(`ochatd connect exited with code ${code} before initialize; see the ochat output channel`));
        }
        if (!this.disposed && this.connectedOnce) this.scheduleReconnect();
      });
      proc.once('spawn', () => {
        if (this.proc === proc) this.initialize(proc, () => settled, (v) => (settled = v), resolve, reject);
      });
    });
  }

  private initialize(proc: ChildProcess, isSettled: () => boolean, setSettled: (v: boolean) => void, resolve: () => void, reject: (e: Error) => void): void {
    {
      const conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
      this.conn = conn;
      conn.onNotification((method: string, params: unknown) => {
        if (this.opts.trace) this.log(`← ${method} ${JSON.stringify(params)}`);
        for (const h of this.notificationHandlers.get(method) ?? []) {
          try {
            h(params);
          } catch (err) {
            this.log(`handler of ${method} failed: ${(err as Error).stack ?? err}`);
          }
        }
      });
      conn.onRequest(async (method: string, params: unknown) => {
        const h = this.requestHandlers.get(method);
        if (!h) return new ResponseError(-32601, `unknown method "${method}"`);
        return h(params);
      });
      conn.onError(([err]) => this.log(`jsonrpc error: ${err.message}`));
      conn.listen();
      conn
        .sendRequest(Methods.initialize, {
          processId: process.pid,
          clientInfo: { name: this.opts.clientName ?? 'ochat.vscode', version: this.opts.clientVersion ?? '0.0.0' },
          rootUri: 'file://' + this.opts.workspace,
          capabilities: { workspace: { applyEdit: true }, window: { showDocument: { support: true } } },
        })
        .then((res) => {
          this.info = res as InitializeResult;
          conn.sendNotification(Methods.initialized, {}).catch(() => undefined);
          const first = !this.connectedOnce;
          this.connectedOnce = true;
          this.backoff = this.opts.backoffMs ?? 500;
          setSettled(true);
          this.setState('running');
          this.emit('connected', this.info, first);
          resolve();
        })
        .catch((err) => {
          if (isSettled()) return;
          setSettled(true);
          this.setState('failed', String(err?.message ?? err));
          this.teardown();
          reject(new Error(`initialize ochatd: ${err?.message ?? err}`));
        });
    }
  }

  private failSpawn(err: NodeJS.ErrnoException, reject: (e: Error) => void): void {
    this.teardown();
    if (err.code === 'ENOENT' || err.code === 'EACCES') {
      this.setState('missing', this.opts.command);
      reject(Object.assign(new Error(`cannot run ochatd (${this.opts.command}): ${err.code}. Install ochatd or set "ochat.path" to its full path.`), { code: err.code }));
    } else {
      this.setState('failed', err.message);
      reject(new Error(`start ochatd: ${err.message}`));
    }
  }

  private scheduleReconnect(): void {
    clearTimeout(this.timer);
    this.ready = undefined;
    this.setState('reconnecting', `retry in ${this.backoff} ms`);
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, this.opts.maxBackoffMs ?? 10_000);
    this.timer = setTimeout(() => {
      if (this.disposed) return;
      this.start().catch((err) => {
        this.log(`reconnect failed: ${err.message}`);
        if (this.state !== 'missing') this.scheduleReconnect();
      });
    }, wait);
  }

  private teardown(): void {
    const conn = this.conn;
    const proc = this.proc;
    this.conn = undefined;
    this.proc = undefined;
    conn?.dispose();
    if (proc && proc.exitCode === null) proc.kill();
  }

  /** dispose sends shutdown + exit when connected, then stops the forwarder; no reconnect afterwards. */
  async dispose(): Promise<void> {
    this.disposed = true;
    clearTimeout(this.timer);
    const conn = this.conn;
    if (conn && this.state === 'running') {
      try {
        await Promise.race([conn.sendRequest(Methods.shutdown), new Promise((r) => setTimeout(r, 500))]);
        await conn.sendNotification(Methods.exit).catch(() => undefined);
      } catch {
        /* the daemon may already be gone */
      }
    }
    this.teardown();
    this.setState('stopped');
  }
}

/** errorCode returns the JSON-RPC error code of err, if it is a ResponseError. */
export function errorCode(err: unknown): number | undefined {
  return err instanceof ResponseError ? err.code : (err as { code?: number })?.code;
}
