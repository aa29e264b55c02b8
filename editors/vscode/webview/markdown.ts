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
  return DOMPurify.sanitize(md.render(text), { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input'], FORBID_ATTR: ['style'] });
}

/**
 * BlockRenderer keeps one container element in sync with a growing Markdown
 * text: unchanged leading blocks keep their DOM, only changed blocks are
 * rendered again.
 */
export class BlockRenderer {
  private blocks: string[] = [];
  private els: HTMLElement[] = [];
  constructor(readonly el: HTMLElement) {}

  /**
   * update renders text. While streaming, a last block longer than
   * plainLimit characters (a long code block still growing) is shown as plain
   * text and highlighted once it stops changing.
   */
  update(text: string, streaming = false, plainLimit = 4000): void {
    const next = splitBlocks(text);
    let i = 0;
    while (i < next.length && i < this.blocks.length && next[i] === this.blocks[i]) i++;
    for (let j = this.els.length - 1; j >= i; j--) this.els[j].remove();
    this.els.length = i;
    for (let j = i; j < next.length; j++) {
      const div = document.createElement('div');
      div.className = 'md-block';
      if (streaming && j === next.length - 1 && next[j].length > plainLimit) {
        div.classList.add('md-plain');
        const pre = document.createElement('pre');
        pre.textContent = next[j];
        div.appendChild(pre);
        next[j] = '\u0000' + next[j]; // never equal: rendered properly on the next update
      } else div.innerHTML = renderMarkdown(next[j]);
      this.el.appendChild(div);
      this.els.push(div);
    }
    this.blocks = next;
  }
}
