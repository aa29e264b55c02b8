/** A scripted stand-in for DaemonClient: records requests, answers from handlers, emits notifications. */
export class FakeRpc {
  readonly requests: Array<{ method: string; params: any }> = [];
  readonly handlers = new Map<string, (params: any) => any>();
  private readonly subs = new Map<string, Set<(p: any) => void>>();

  async request<R = any>(method: string, params: unknown = {}): Promise<R> {
    this.requests.push({ method, params });
    const h = this.handlers.get(method);
    if (!h) throw Object.assign(new Error(`unknown method "${method}"`), { code: -32601 });
    return (await h(params)) as R;
  }

  onNotification(method: string, h: (p: any) => void): () => void {
    let s = this.subs.get(method);
    if (!s) this.subs.set(method, (s = new Set()));
    s.add(h);
    return () => s!.delete(h);
  }

  notify(method: string, params: unknown): void {
    for (const h of this.subs.get(method) ?? []) h(params);
  }

  methods(): string[] {
    return this.requests.map((r) => r.method);
  }
}
