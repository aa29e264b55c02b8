// A seeded generator of Markdown documents for the DOM-equality test
// (render.test.mjs): random sequences of the block kinds a chat answer holds,
// with the separators (blank lines or none) that decide where blocks end.
export function markdownDoc(seed, blocks = 14) {
  let x = seed >>> 0;
  const rand = () => { x = (x + 0x6d2b79f5) >>> 0; let t = x; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
  const pick = (a) => a[Math.floor(rand() * a.length)];
  const words = ['alpha', '**bold**', '`code`', '*em*', '[l](https://example.com)', 'https://x.example.org', '<b>raw</b>', 'a_b', '~~s~~', '&amp;', '[ref]', '\\*'];
  const line = () => Array.from({ length: 1 + Math.floor(rand() * 6) }, () => pick(words)).join(' ');
  const kinds = [
    () => line() + (rand() < 0.5 ? '\n' + line() : ''),
    () => `${pick(['#', '##', '###'])} ${line()}`,
    () => `${line()}\n${pick(['===', '---'])}`,
    () => Array.from({ length: 1 + Math.floor(rand() * 5) }, (_, k) => `${pick(['-', '*', '+'])} ${line()}${rand() < 0.3 ? '\n  ' + line() : ''}${rand() < 0.2 ? '\n' : ''}`).join('\n'),
    () => Array.from({ length: 1 + Math.floor(rand() * 5) }, (_, k) => `${k + 1 + (rand() < 0.2 ? 2 : 0)}${pick(['.', ')'])} ${line()}${rand() < 0.2 ? '\n\n   ' + line() : ''}`).join('\n'),
    () => { const f = pick(['```', '~~~', '````']); return `${f}${pick(['go', 'js', 'python', '', 'nolang'])}\n${Array.from({ length: 1 + Math.floor(rand() * 8) }, () => pick(['x := 1 // c', '/* open', 'close */', 's = "q"', '`raw', 'tick`', '', '  indented', '```'])).join('\n')}${rand() < 0.9 ? '\n' + f : ''}`; },
    () => `| ${line()} | b |\n|---|---|\n| 1 | ${line()} |${rand() < 0.5 ? '\n| 2 | 3 |' : ''}`,
    () => `> ${line()}\n> ${rand() < 0.5 ? '- ' : ''}${line()}`,
    () => '    indented code\n    more',
    () => pick(['***', '---', '___']),
    () => `[ref]: https://example.com/${Math.floor(rand() * 9)}${rand() < 0.5 ? ' "t"' : ''}`,
    () => '<div onclick="window.__xss=1">x</div>',
  ];
  let out = '';
  for (let i = 0; i < blocks; i++) out += pick(kinds)() + pick(['\n\n', '\n\n', '\n', '\n\n\n']);
  return rand() < 0.3 ? out.replace(/\n/g, '\r\n') : out;
}
