/** Tiny DOM helpers for the chat webview (no framework). */

type Child = Node | string | null | undefined | false;

/** h creates an element with attributes (on* keys become listeners) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, unknown> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
    else if (k === 'class') el.className = String(v);
    else if (k === 'text') el.textContent = String(v);
    else if (k in el && k !== 'list' && typeof v !== 'string') (el as unknown as Record<string, unknown>)[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, ...children);
  return el;
}

/** append appends children, skipping empty ones. */
export function append(el: Element, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
}

/** icon returns a codicon element. */
export function icon(name: string, extra = ''): HTMLElement {
  const el = document.createElement('i');
  el.className = `codicon codicon-${name}${extra ? ' ' + extra : ''}`;
  el.setAttribute('aria-hidden', 'true');
  return el;
}

/** formatDuration formats ms as "850 ms", "12 s", "3 m 05 s". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  return `${Math.floor(s / 60)} m ${String(s % 60).padStart(2, '0')} s`;
}
