/**
 * Top-level Markdown blocks for incremental rendering of streamed answers.
 * The boundaries come from markdown-it's own block parser (the one that
 * renders the message), never from a hand-rolled grammar: a list, a fenced
 * code block or a table is always one block, whatever blank lines it holds.
 * Pure (no DOM): the webview's BlockRenderer and the unit tests use it.
 */
import MarkdownIt from 'markdown-it';

type Token = MarkdownIt.Token;
type Markdown = InstanceType<typeof MarkdownIt>;

/** The markdown-it options of the chat webview (raw HTML off); block structure depends on them. */
export const markdownOptions = { html: false, linkify: true, breaks: false } as const;

/** One top-level block of a parsed source. Offsets are UTF-16 indexes into that source. */
export interface Block {
  /** Start of the block's first line. */
  start: number;
  /** End of the block's own lines (after the newline of its last line, or the source end). */
  end: number;
  /** markdown-it's block tokens of this block, level 0 open to level 0 close (inline children not parsed yet). */
  tokens: Token[];
  /** The block is a fenced code block whose closing fence line is complete: later text cannot change it. */
  closedFence: boolean;
  /** The block is only reference definitions: it renders to nothing. */
  refOnly: boolean;
  /** For a list: its items, as indexes into tokens (open and close) and source offsets of their lines. */
  items?: ListItem[];
}

/** One item of a top-level list block. */
export interface ListItem {
  from: number;
  to: number;
  start: number;
  end: number;
}

/**
 * normalizeSource applies markdown-it's input normalisation (CRLF and CR to
 * LF, NUL to U+FFFD) so that offsets in the result match the parser's lines.
 */
export function normalizeSource(text: string): string {
  if (text.indexOf('\r') < 0 && text.indexOf('\0') < 0) return text;
  return text.replace(/\r\n?/g, '\n').replace(/\0/g, '\uFFFD');
}

/** lineStarts returns the offset of every line start of src, plus src.length when src ends with a newline. */
export function lineStarts(src: string): number[] {
  const out = [0];
  for (let p = src.indexOf('\n'); p >= 0; p = src.indexOf('\n', p + 1)) out.push(p + 1);
  return out;
}

const closerRe = /^ {0,3}(`{3,}|~{3,})[ \t]*\n$/;

/**
 * parseBlocks runs markdown-it's block parser (no inline parsing) over src,
 * which must be normalised (normalizeSource), and groups the tokens into
 * top-level blocks. env collects reference definitions, as in md.parse.
 */
export function parseBlocks(md: Markdown, src: string, env: Record<string, unknown>): Block[] {
  const tokens: Token[] = [];
  md.block.parse(src, md, env, tokens);
  const ls = lineStarts(src);
  const at = (line: number) => (line < ls.length ? ls[line] : src.length);
  const out: Block[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const open = tokens[i];
    let j = i;
    if (open.nesting === 1) {
      j = i + 1;
      while (j < tokens.length - 1 && !(tokens[j].level === 0 && tokens[j].nesting === -1)) j++;
    }
    const group = tokens.slice(i, j + 1);
    const map = open.map ?? [0, 0];
    let closedFence = false;
    if (open.type === 'fence' && map[1] - 1 > map[0] && map[1] < ls.length) {
      const m = closerRe.exec(src.slice(at(map[1] - 1), at(map[1])));
      closedFence = !!m && m[1][0] === open.markup[0] && m[1].length >= open.markup.length;
    }
    const refOnly = group.every((t) => t.type === 'reference_definition');
    let items: ListItem[] | undefined;
    if (open.type === 'bullet_list_open' || open.type === 'ordered_list_open') {
      items = [];
      for (let a = 1; a < group.length; a++) {
        if (group[a].type !== 'list_item_open' || group[a].level !== 1) continue;
        let z = a + 1;
        while (z < group.length && !(group[z].type === 'list_item_close' && group[z].level === 1)) z++;
        const m = group[a].map ?? map;
        items.push({ from: a, to: z, start: at(m[0]), end: at(m[1]) });
        a = z;
      }
    }
    const prev = out.at(-1);
    if (refOnly && prev?.refOnly) {
      prev.tokens.push(...group);
      prev.end = at(map[1]);
    } else {
      out.push({ start: at(map[0]), end: at(map[1]), tokens: group, closedFence, refOnly, items });
    }
    i = j;
  }
  return out;
}

let splitter: Markdown | undefined;

/**
 * splitBlocks returns the source of every top-level block of text (the
 * block's own lines without their final newline; blank lines between blocks
 * dropped), as markdown-it parses it with the webview's options.
 */
export function splitBlocks(text: string): string[] {
  splitter ??= new MarkdownIt(markdownOptions);
  const src = normalizeSource(text);
  return parseBlocks(splitter, src, {}).map((b) => src.slice(b.start, b.end).replace(/\n+$/, ''));
}
