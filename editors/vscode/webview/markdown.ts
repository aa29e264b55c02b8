/**
 * Markdown rendering for the chat webview: markdown-it with raw HTML off,
 * highlight.js for fenced code, DOMPurify over the result.
 *
 * Streamed answers are rendered incrementally by BlockRenderer: markdown-it's
 * block parser finds the top-level blocks (blocks.ts); a block that later
 * text can no longer change is rendered once and kept as frozen DOM, and only
 * the blocks after it are parsed again on the next update. A fenced code block
 * still open grows by appending text and is highlighted piece by piece while
 * it streams (HighlightJob); an open list grows item by item. Work is bounded
 * by a deadline per call. The rendered DOM equals the DOM of the whole text
 * rendered in one go (render.test.mjs checks it node for node).
 */
import MarkdownIt from 'markdown-it';
import hljs from 'highlight.js/lib/common';
import DOMPurify from 'dompurify';
import { markdownOptions, normalizeSource, parseBlocks, type Block, type ListItem } from './blocks';

/** While true, fenced code renders as escaped text in the highlighter's markup; plainLanguage records the language. */
let plainCode = false;
let plainLanguage = '';

function codeLanguage(lang: string): string {
  return lang && hljs.getLanguage(lang) ? lang : '';
}

function codeHtml(language: string, inner: string, label = language): string {
  // data-lang: the language label of the block's toolbar (main.ts): the fence's info word as written.
  return `<pre class="hljs" data-lang="${escapeHtml(label.split(/\s/)[0] || 'text')}"><code class="language-${escapeHtml(language || 'text')}">${inner}</code></pre>`;
}

const md = new MarkdownIt({
  ...markdownOptions,
  highlight(code: string, lang: string): string {
    const language = codeLanguage(lang);
    if (plainCode) {
      plainLanguage = language;
      return codeHtml(language, escapeHtml(code), lang);
    }
    try {
      return codeHtml(language, language ? hljs.highlight(code, { language, ignoreIllegals: true }).value : escapeHtml(code), lang);
    } catch {
      return `<pre class="hljs"><code>${escapeHtml(code)}</code></pre>`;
    }
  },
});

/** escapeHtml escapes text for HTML. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const purifyConfig = { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input'], FORBID_ATTR: ['style'] };

/** A DOMPurify instance of its own, configured once: a sanitize call then skips parsing the configuration. */
const fragmentPurify = DOMPurify(window);
fragmentPurify.setConfig({ ...purifyConfig, RETURN_DOM_FRAGMENT: true });

function sanitizeFragment(html: string): DocumentFragment {
  return fragmentPurify.sanitize(html) as unknown as DocumentFragment;
}

/** renderMarkdown renders one Markdown text to sanitised HTML in one go. */
export function renderMarkdown(text: string): string {
  return DOMPurify.sanitize(md.render(text), purifyConfig) as string;
}

/** blockHtml renders one block's tokens (inline parsing included), wrapped in its div.md-block; '' for reference definitions. */
function blockHtml(b: Block, env: Record<string, unknown>, plain: boolean): string {
  if (b.refOnly) return '';
  const state = new md.core.State('', md, env);
  state.tokens = b.tokens;
  plainCode = plain;
  try {
    md.core.process(state);
    return `<div class="md-block">${md.renderer.render(state.tokens, md.options, env)}</div>`;
  } finally {
    plainCode = false;
  }
}

/** A fenced code block longer than this (characters) is highlighted over several frames when a deadline is set. */
const jobMinChars = 2000;
/** List items rendered per step when a long list is put on screen, or grows, with a deadline. */
const listStep = 16;
/** Marks the source of a block shown in part: never equal to a real source, so the next update continues it. */
const partial = '\u0000partial\u0000';

/** Lines of code highlighted, sanitised and inserted per step of a HighlightJob. */
const jobLines = 24;

interface Highlighted { value: string; _top?: { parent?: unknown } }

/** Languages whose grammar highlight.js has compiled already. */
const compiled = new Set<string>();

/**
 * HighlightJob highlights the code of one fenced block piece by piece while
 * its text arrives, so no frame pays for the whole block. A piece ends at a
 * line end where highlight.js is back in the language's top mode, and is
 * accepted only when highlighting it with the next line added gives the same
 * markup for it: the pieces then join to what one highlight call over the
 * whole code gives. The code not yet highlighted stays plain text after them.
 */
class HighlightJob {
  dead = false;
  private content = '';
  private closed = false;
  private done = 0;
  private span = jobLines;
  private readonly rest: Text;

  constructor(private readonly code: HTMLElement, private readonly language: string, content: string) {
    code.normalize();
    this.rest = (code.firstChild as Text | null) ?? code.appendChild(document.createTextNode(''));
    this.content = content;
  }

  /** grow records the block's code now (which extends the code given before); closed: it will not change again. */
  grow(content: string, closed: boolean): void {
    const added = content.slice(this.content.length);
    if (added) this.rest.appendData(added);
    this.content = content;
    this.closed = closed;
  }

  /**
   * step highlights pieces until done or past deadline (performance.now() ms),
   * at least one. Returns 'done' when the code is final and all highlighted,
   * 'wait' when the rest needs more text, 'more' when time ran out.
   */
  step(deadline: number): 'done' | 'wait' | 'more' {
    let out: 'wait' | 'more' = 'wait';
    if (!compiled.has(this.language)) {
      // The first use of a language compiles its grammar: a step of its own.
      compiled.add(this.language);
      try {
        this.highlight('');
      } catch {
        // reported by the next highlight call
      }
      if (performance.now() > deadline) return 'more';
    }
    while (!this.dead) {
      const text = this.content;
      const end = this.closed ? text.length : text.lastIndexOf('\n') + 1;
      if (this.done >= end) break;
      const b = Math.min(end, afterLines(text, this.done, this.span));
      let html: string | undefined;
      try {
        if (this.closed && b === text.length) {
          html = this.highlight(text.slice(this.done)).value;
        } else {
          const ctx = afterLines(text, b, 1);
          if (ctx > end || ctx === b) break; // the line after the piece has not arrived yet
          const piece = this.highlight(text.slice(this.done, b));
          if (piece._top && piece._top.parent === undefined && this.highlight(text.slice(this.done, ctx)).value.startsWith(piece.value)) html = piece.value;
        }
      } catch {
        // What the one-go renderer gives when highlight.js throws: plain code, no class.
        this.code.removeAttribute('class');
        this.code.textContent = text;
        this.done = text.length;
        this.dead = true;
        return 'done';
      }
      if (html === undefined) {
        // Inside a construct spanning lines (a comment, a raw string): try a longer piece.
        if (b >= end) break;
        this.span += jobLines;
      } else {
        const frag = sanitizeFragment(html);
        this.rest.deleteData(0, b - this.done);
        this.code.insertBefore(frag, this.rest);
        this.done = b;
        this.span = jobLines;
      }
      if (performance.now() > deadline) {
        out = 'more';
        break;
      }
    }
    if (this.dead) return 'done';
    if (!this.closed || this.done < this.content.length) return out;
    this.rest.remove();
    this.code.normalize();
    this.dead = true;
    return 'done';
  }

  private highlight(code: string): Highlighted {
    return hljs.highlight(code, { language: this.language, ignoreIllegals: true }) as unknown as Highlighted;
  }
}

/** afterLines returns the offset after the n-th newline at or after from, or text.length. */
function afterLines(text: string, from: number, n: number): number {
  let p = from;
  for (let k = 0; k < n; k++) {
    const nl = text.indexOf('\n', p);
    if (nl < 0) return text.length;
    p = nl + 1;
  }
  return p;
}

/** One top-level block on screen after the frozen part. */
interface Shown {
  /** Offset of the block in the (normalised) text. */
  start: number;
  /** The block's own source lines. */
  src: string;
  /** Rendered as final (code highlighted, or being highlighted by job) rather than streaming (plain code). */
  final: boolean;
  /** The reference definitions known when it was rendered (JSON). */
  refs: string;
  /** The block holds fenced code (its plain and final renderings differ). */
  hasCode: boolean;
  el?: HTMLElement;
  /** A top-level fence shown as plain text: its code element and the code shown. */
  fence?: { code: HTMLElement; info: string; content: string; language: string; closed: boolean };
  /** A list: what every item depends on besides its own lines (type, marker, start, tightness), its element and items. */
  list?: { key: string; el: HTMLElement; items: ShownItem[] };
  job?: HighlightJob;
}

/** One item of a list on screen. */
interface ShownItem {
  src: string;
  li: HTMLElement;
  final: boolean;
  hasCode: boolean;
}

/**
 * BlockRenderer keeps one container element in sync with a growing Markdown
 * text. Blocks that later text cannot change (every block but the last, a
 * closed code fence) are rendered once and frozen; each update parses only the
 * text after them. A block's end is decided on complete lines only, so a
 * half-received line never freezes the block before it. With a deadline
 * (performance.now() ms) it stops after the step that crosses it and reports
 * false; the caller continues on a later frame.
 */
export class BlockRenderer {
  /** Offset in the text where the not-yet-frozen part starts, and the text before it. */
  private frozen = 0;
  private prefix = '';
  /** Blocks on screen after the frozen part, in order. */
  private open: Shown[] = [];
  private jobs: HighlightJob[] = [];
  /** Reference definitions in the frozen part, and the reference sets frozen blocks were rendered with. */
  private refs: Record<string, unknown> = {};
  private refKeys = new Set<string>();
  /** Cost (ms) and time of the last re-render of a streaming block, to space out expensive ones. */
  private openCost = 0;
  private openAt = 0;
  /** During an update: the position in open, and the rendered blocks waiting for flush. */
  private cursor = 0;
  /** Set by show when it put only part of a long list on screen (the deadline came). */
  private incomplete = false;
  private batch: Array<{ s: Shown; html: string }> = [];

  constructor(readonly el: HTMLElement) {}

  /**
   * update renders text; streaming says more text may follow (open code
   * fences stay plain text until they close). Returns true when everything is
   * on screen, false when work is left for a later call (deadline reached).
   */
  update(raw: string, streaming = false, deadline = Infinity): boolean {
    const text = normalizeSource(raw);
    if (!text.startsWith(this.prefix)) this.reset();
    let worked = false;
    const late = () => worked && performance.now() > deadline;

    // 1. Blocks that became final: decided on complete lines, parsed in a window when behind.
    let tail = text.slice(this.frozen);
    const limit = streaming ? tail.lastIndexOf('\n') + 1 : tail.length;
    let win = deadline === Infinity ? limit : Math.min(limit, 65536);
    let env: Record<string, unknown>;
    let blocks: Block[];
    let end: number;
    for (;;) {
      end = win >= limit ? limit : tail.lastIndexOf('\n', win - 1) + 1 || limit;
      env = this.env();
      blocks = parseBlocks(md, tail.slice(0, end), env);
      if (end >= limit || blocks.length > 1) break;
      win *= 4;
    }
    const whole = end >= limit;
    if (!streaming && whole && [...this.refKeys].some((k) => k !== refsKey(env))) {
      // A reference definition arrived after blocks that could use it: render everything again with all of them.
      this.reset();
      return this.update(text, false, Infinity);
    }
    const last = blocks.at(-1);
    const finalCount = blocks.length ? blocks.length - 1 + (last!.closedFence ? 1 : 0) : 0;
    const base = this.frozen;
    this.cursor = 0;
    let committed = 0;
    for (; committed < finalCount; committed++) {
      if (late()) break;
      const b = blocks[committed];
      this.collectRefs(b, env);
      this.incomplete = false;
      const shown = this.show(b, base + b.start, tail.slice(b.start, b.end), true, env, deadline);
      if (this.batch.length >= 8 || this.incomplete) this.flush(deadline); // sanitise as we go, so the deadline sees the cost
      worked = true;
      if (this.incomplete) {
        // A long list shown in part: it stays open (not frozen) and grows on the next frame.
        if (this.open[this.cursor - 1] === shown) this.cursor--;
        else this.open.splice(this.cursor, 0, shown);
        break;
      }
      this.refKeys.add(refsKey(env));
      this.frozen = base + (committed + 1 < blocks.length ? blocks[committed + 1].start : end);
    }
    this.flush(deadline);
    // The old entries before the cursor are frozen DOM now (kept) or gone (dropped).
    this.open.splice(0, this.cursor);
    this.cursor = 0;
    if (committed < finalCount || !whole) {
      this.prefix = text.slice(0, this.frozen);
      this.runJobs(deadline);
      return false;
    }

    // 2. The blocks after the frozen part, shown as they are now (half a line included).
    tail = text.slice(this.frozen);
    const envOpen = this.env();
    const openBlocks = parseBlocks(md, tail, envOpen);
    let done = true;
    const changed = this.open.length !== openBlocks.length || openBlocks.some((b, k) => {
      const o = this.open[k];
      return o.start !== this.frozen + b.start || o.src !== tail.slice(b.start, b.end) || o.final !== !streaming;
    });
    const costly = streaming && this.openCost > 6 && performance.now() - this.openAt < this.openCost * 4;
    if (changed && (late() || (costly && !openBlocks.every(isFence)))) {
      done = false;
    } else if (changed) {
      const t0 = performance.now();
      this.incomplete = false;
      const shown = openBlocks.map((b) => this.show(b, this.frozen + b.start, tail.slice(b.start, b.end), !streaming, envOpen, deadline));
      this.flush(deadline);
      for (const o of this.open.slice(this.cursor)) this.drop(o);
      this.open = shown;
      if (this.incomplete) done = false;
      this.openCost = performance.now() - t0;
      this.openAt = performance.now();
    }
    this.prefix = text.slice(0, this.frozen);
    return this.runJobs(deadline) && done;
  }

  private env(): Record<string, unknown> {
    return Object.keys(this.refs).length ? { references: { ...this.refs } } : {};
  }

  private collectRefs(b: Block, env: Record<string, unknown>): void {
    const all = env.references as Record<string, unknown> | undefined;
    for (const t of b.tokens) {
      const label = t.type === 'reference_definition' ? (t.meta as { label?: string } | null)?.label : undefined;
      if (label && all && !(label in this.refs)) this.refs[label] = all[label];
    }
  }

  /**
   * show puts block b on screen at the cursor of the old open list: it keeps
   * an old entry that already shows it, grows an open code fence by the text
   * it gained, or renders it (queued in batch; flush sanitises and inserts the
   * batch in one DOMPurify pass).
   */
  private show(b: Block, start: number, src: string, final: boolean, env: Record<string, unknown>, deadline: number): Shown {
    while (this.cursor < this.open.length && this.open[this.cursor].start < start) this.drop(this.open[this.cursor++]);
    const key = refsKey(env);
    const o = this.open[this.cursor];
    const topFence = isFence(b) ? b.tokens[0] : undefined;
    if (o && o.start === start) {
      if (o.src === src && o.refs === key && (o.final === final || !o.hasCode)) {
        this.flush(deadline);
        this.cursor++;
        return o;
      }
      if (topFence && o.fence && !o.final && o.fence.info === topFence.info && o.refs === key && topFence.content.startsWith(o.fence.content)) {
        this.flush(deadline);
        const closed = final || b.closedFence;
        if (o.job) o.job.grow(topFence.content, closed);
        else {
          const grown = topFence.content.slice(o.fence.content.length);
          const t = o.fence.code.lastChild;
          if (t instanceof Text) t.appendData(grown);
          else if (grown) o.fence.code.appendChild(document.createTextNode(grown));
        }
        o.fence.content = topFence.content;
        o.src = src;
        o.final = final;
        if (o.job && deadline === Infinity) this.runJobs(deadline);
        this.cursor++;
        return o;
      }
      if (o.list && b.items?.length && o.refs === key && o.list.key === listKey(b)) {
        this.flush(deadline);
        this.growList(o, b, src, final, env, deadline);
        this.cursor++;
        return o;
      }
      this.drop(this.open[this.cursor++]);
    }
    // Plain code while streaming; a long fence also when final with a deadline (then highlighted by a job).
    const plain = !final || (!!topFence && deadline !== Infinity && topFence.content.length >= jobMinChars);
    plainLanguage = '';
    // A long list with a deadline: its first items now, the others added by growList on later frames.
    let shownItems = b.items;
    let part = b;
    if (b.items && b.items.length > listStep && deadline !== Infinity) {
      shownItems = b.items.slice(0, listStep);
      const last = shownItems[shownItems.length - 1];
      part = { ...b, tokens: [...b.tokens.slice(0, last.to + 1), b.tokens[b.tokens.length - 1]] };
      this.incomplete = true;
    }
    const html = blockHtml(part, env, plain);
    const s: Shown = { start, src: part === b ? src : partial + src, final, refs: key, hasCode: b.tokens.some(isCode) };
    if (shownItems?.length) {
      s.list = { key: listKey(b), el: undefined as unknown as HTMLElement, items: shownItems.map((it) => ({ src: src.slice(it.start - b.start, it.end - b.start), li: undefined as unknown as HTMLElement, final, hasCode: b.tokens.slice(it.from, it.to + 1).some(isCode) })) };
    }
    if (topFence && plain) s.fence = { code: undefined as unknown as HTMLElement, info: topFence.info, content: topFence.content, language: plainLanguage, closed: final || b.closedFence };
    if (html) this.batch.push({ s, html });
    return s;
  }

  /** flush sanitises the queued blocks in one pass and inserts them before the cursor's entry. */
  private flush(deadline: number): void {
    if (!this.batch.length) return;
    const batch = this.batch;
    this.batch = [];
    const frag = sanitizeFragment(batch.map((x) => x.html).join(''));
    const els = Array.from(frag.children) as HTMLElement[];
    batch.forEach((x, k) => {
      x.s.el = els[k];
      if (x.s.fence) x.s.fence.code = els[k].querySelector('code')!;
      if (x.s.list) {
        const list = els[k].firstElementChild as HTMLElement;
        x.s.list.el = list;
        const lis = Array.from(list.children) as HTMLElement[];
        x.s.list.items.forEach((it, n) => { it.li = lis[n]; });
      }
    });
    let before: Element | null = null;
    for (let k = this.cursor; k < this.open.length && !before; k++) before = this.open[k].el ?? null;
    this.el.insertBefore(frag, before);
    for (const x of batch) if (x.s.fence) this.startJob(x.s, deadline);
  }

  /**
   * growList updates a list on screen in place: items whose lines are the
   * same keep their element, the rest are rendered and put after them. Only
   * valid when listKey is unchanged (a list turning loose is rendered again).
   */
  private growList(o: Shown, b: Block, src: string, final: boolean, env: Record<string, unknown>, deadline: number): void {
    const list = o.list!;
    const items = b.items!;
    const itemSrc = (it: ListItem) => src.slice(it.start - b.start, it.end - b.start);
    let k = 0;
    while (k < items.length && k < list.items.length && list.items[k].src === itemSrc(items[k]) && (list.items[k].final === final || !list.items[k].hasCode)) k++;
    for (const it of list.items.slice(k)) {
      if (it.li.nextSibling?.nodeType === Node.TEXT_NODE) it.li.nextSibling.remove();
      it.li.remove();
    }
    list.items.length = k;
    for (let first = true; k < items.length && (first || performance.now() <= deadline); first = false) {
      const upto = Math.min(items.length, k + listStep);
      const tokens = b.tokens.slice(items[k].from, items[upto - 1].to + 1);
      const state = new md.core.State('', md, env);
      state.tokens = tokens;
      plainCode = !final;
      let html: string;
      try {
        md.core.process(state);
        html = md.renderer.render(state.tokens, md.options, env);
      } finally {
        plainCode = false;
      }
      // Inside the list's own tag, so the items parse as they do in the whole list.
      const frag = sanitizeFragment(`<${list.el.localName}>${html}</${list.el.localName}>`);
      const wrap = frag.firstElementChild!;
      const lis = Array.from(wrap.children) as HTMLElement[];
      for (let n = k; n < upto; n++) {
        list.items.push({ src: itemSrc(items[n]), li: lis[n - k], final, hasCode: b.tokens.slice(items[n].from, items[n].to + 1).some(isCode) });
      }
      list.el.append(...Array.from(wrap.childNodes));
      k = upto;
    }
    if (k < items.length) this.incomplete = true;
    o.src = k < items.length ? partial + src : src;
    o.final = final;
    o.hasCode = list.items.some((it) => it.hasCode);
  }

  private startJob(s: Shown, deadline: number): void {
    if (!s.fence || s.job || !s.fence.language) return;
    s.job = new HighlightJob(s.fence.code, s.fence.language, s.fence.content);
    s.job.grow(s.fence.content, s.fence.closed);
    this.jobs.push(s.job);
    if (deadline === Infinity) this.runJobs(deadline);
  }

  /** runJobs advances the highlight jobs in document order; false when one has work left that ran out of time. */
  private runJobs(deadline: number): boolean {
    let idle = true;
    this.jobs = this.jobs.filter((j) => {
      if (!idle) return true;
      const r = j.step(deadline);
      if (r === 'more') idle = false;
      return r !== 'done';
    });
    return idle;
  }

  private drop(s: Shown): void {
    s.el?.remove();
    if (s.job) s.job.dead = true;
  }

  private reset(): void {
    for (const j of this.jobs) j.dead = true;
    this.jobs = [];
    this.el.textContent = '';
    this.frozen = 0;
    this.prefix = '';
    this.open = [];
    this.batch = [];
    this.cursor = 0;
    this.refs = {};
    this.refKeys.clear();
  }
}

/**
 * warmUp renders a small streamed sample off-screen (a list, a table, a
 * highlighted fence), so the first real answer does not pay for the first
 * (unoptimised) runs of the parser, highlighter and sanitiser in its first
 * frames. A few ms; the webview calls it when idle after opening.
 */
export function warmUp(): void {
  const r = new BlockRenderer(document.createElement('div'));
  // JSON: a small grammar, enough to run highlight.js's own code once.
  const sample = '# Title\n\nSome **bold** text with `code` and a [link](https://example.com).\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```json\n{"a": [1, true, null, "s"]}\n```\n';
  for (let i = 1; i <= sample.length; i += 23) r.update(sample.slice(0, i), true, Infinity);
  r.update(sample, false, Infinity);
}

function isCode(t: { type: string }): boolean {
  return t.type === 'fence' || t.type === 'code_block';
}

/** listKey is what every item of a list renders with besides its own lines: list type, marker, start number, tightness. */
function listKey(b: Block): string {
  const open = b.tokens[0];
  const loose = b.tokens.some((t) => t.type === 'paragraph_open' && t.level === 2 && !t.hidden);
  return `${open.type}|${open.markup}|${JSON.stringify(open.attrs)}|${loose}`;
}

function isFence(b: Block): boolean {
  return b.tokens.length === 1 && b.tokens[0].type === 'fence';
}

function refsKey(env: Record<string, unknown>): string {
  return env.references ? JSON.stringify(env.references) : '';
}
