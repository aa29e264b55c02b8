/**
 * Markdown rendering for the chat webview: markdown-it with raw HTML off,
 * highlight.js for fenced code, DOMPurify over the result. Long streamed
 * answers are split into top-level blocks that are rendered once and cached,
 * so each animation frame only re-renders the block still growing.
 */
import MarkdownIt from 'markdown-it';
import hljs from 'highlight.js/lib/common';
import DOMPurify from 'dompurify';
import { splitBlocks } from './blocks';

const md = new MarkdownIt({
  html: false,
  linkify: true,
  breaks: false,
  highlight(code: string, lang: string): string {
    const language = lang && hljs.getLanguage(lang) ? lang : '';
    try {
      const html = language ? hljs.highlight(code, { language, ignoreIllegals: true }).value : escapeHtml(code);
      return `<pre class="hljs"><code class="language-${escapeHtml(language || 'text')}">${html}</code></pre>`;
    } catch {
      return `<pre class="hljs"><code>${escapeHtml(code)}</code></pre>`;
    }
  },
});

/** escapeHtml escapes text for HTML. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** renderMarkdown renders one Markdown text to sanitised HTML. */
export function renderMarkdown(text: string): string {
  return DOMPurify.sanitize(md.render(text), purifyConfig) as string;
}

const purifyConfig = { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input'], FORBID_ATTR: ['style'] };

/**
 * BlockRenderer keeps one container element in sync with a growing Markdown
 * text: unchanged leading blocks keep their DOM, only changed or new blocks
 * are rendered, all of one update sanitised in one DOMPurify pass. With a
 * deadline (performance.now() ms) it stops after the block that crosses it
 * and reports false; the caller continues on a later frame.
 */
export class BlockRenderer {
  private blocks: string[] = [];
  private els: HTMLElement[] = [];
  constructor(readonly el: HTMLElement) {}

  /**
   * update renders text. While streaming, a last block longer than
   * plainLimit characters (a long code block still growing) is shown as plain
   * text and highlighted once it stops changing. Returns true when every
   * block is on screen.
   */
  update(text: string, streaming = false, deadline = Infinity, plainLimit = 4000): boolean {
    const next = splitBlocks(text);
    let i = 0;
    while (i < next.length && i < this.blocks.length && next[i] === this.blocks[i]) i++;
    for (let j = this.els.length - 1; j >= i; j--) this.els[j].remove();
    this.els.length = i;
    const html: string[] = [];
    let j = i;
    let plain: HTMLElement | undefined;
    for (; j < next.length; j++) {
      if (j > i && performance.now() > deadline) break;
      if (streaming && j === next.length - 1 && next[j].length > plainLimit) {
        plain = document.createElement('div');
        plain.className = 'md-block md-plain';
        const pre = document.createElement('pre');
        pre.textContent = next[j];
        plain.appendChild(pre);
        next[j] = '\u0000' + next[j]; // never equal: rendered properly on the next update
        j++;
        break;
      }
      html.push(`<div class="md-block">${md.render(next[j])}</div>`);
    }
    if (html.length) {
      const frag = DOMPurify.sanitize(html.join(''), { ...purifyConfig, RETURN_DOM_FRAGMENT: true }) as DocumentFragment;
      for (const child of Array.from(frag.children)) this.els.push(child as HTMLElement);
      this.el.appendChild(frag);
    }
    if (plain) {
      this.els.push(plain);
      this.el.appendChild(plain);
    }
    this.blocks = next.slice(0, j);
    return j === next.length;
  }
}
