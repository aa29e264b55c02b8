/** Pure Markdown block splitting for incremental rendering of streamed answers. */

/**
 * splitBlocks splits Markdown at blank lines outside fenced code blocks. A
 * list or quote interrupted by a blank line becomes two blocks, which renders
 * the same in practice.
 */
export function splitBlocks(text: string): string[] {
  const out: string[] = [];
  const lines = text.split('\n');
  let cur: string[] = [];
  let fence = '';
  for (const line of lines) {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (!fence) fence = m[1][0].repeat(m[1].length);
      else if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, '') === '') fence = '';
    }
    if (!fence && line.trim() === '' && cur.length) {
      out.push(cur.join('\n'));
      cur = [];
      continue;
    }
    if (!fence && line.trim() === '') continue;
    cur.push(line);
  }
  if (cur.length) out.push(cur.join('\n'));
  return out;
}

