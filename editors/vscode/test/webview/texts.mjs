// Markdown texts for the incremental-rendering tests (render.test.mjs): each
// one stresses a block boundary the streaming renderer must get right.
const goFunc = (i) => `func f${i}(x int) int {\n\t// line comment ${i}\n\treturn x * ${i} + len("s${i}")\n}\n`;
let longGo = '```go\npackage main\n\n';
for (let i = 0; i < 30; i++) longGo += goFunc(i);
longGo += '/* a block comment\n' + Array.from({ length: 60 }, (_, k) => ` * spanning line ${k}`).join('\n') + '\n */\n';
longGo += 'var raw = `a raw string\n' + Array.from({ length: 50 }, (_, k) => `raw ${k} <b>&amp;</b>`).join('\n') + '\n`\n';
for (let i = 30; i < 45; i++) longGo += goFunc(i);
longGo += '```\n';

const items = (n, f) => Array.from({ length: n }, (_, k) => f(k)).join('');

export const texts = {
  longLists: items(60, (k) => `- item ${k} with **bold** and [a link](https://example.com/${k})\n${k % 7 === 3 ? '  ```go\n  x := ' + k + '\n  ```\n' : ''}`) +
    '\nThen a list that turns loose late:\n\n' + items(40, (k) => `${k + 1}. step ${k}\n`) + '\n41. loose now\n\n' + items(30, (k) => `* star ${k}\n  continued ${k}\n`),
  fences: 'Intro with `code`.\n\n' + longGo + '\nBetween.\n\n~~~python\ndef f():\n    """doc\n    string"""\n    return 1\n~~~~\n\n````\n```\nnot a close\n```\n````\n\n```unknownlang\nplain <b>text</b>\n```\n\n    indented code\n    more\n\nAfter.\n',
  lists: '- a\n- b\n\n- loose now\n\n3. three\n4. four\n\n   continued paragraph\n\n   ```js\n   const x = 1;\n   ```\n5. five\n\n* star\n  * nested\n    1. deep\n\nParagraph after the list.\n1. interrupts\n2. two\n\n> quote\n> - in a list\n>\n> more\n\nTitle\n=====\n\nSub\n---\n\n***\n',
  tables: 'Before the table\n| a | b |\n|---|---|\n| 1 | **2** |\n| `x|y` | [l](https://example.com) |\n\n| only header |\n|---|\n\nnot | a table\n',
  html: 'Raw: <script>window.__xss=1</script> and <img src=x onerror="window.__xss=1">\n\n<div onclick="window.__xss=1">block html</div>\n\n[js](javascript:window.__xss=1) <javascript:alert(1)> [ok](https://example.com "t") https://linkify.example.com\n\n![img](data:image/png;base64,AAAA) ![x](data:image/gif;base64,R0lGODlhAQABAAAAACw=)\n\n<style>body{display:none}</style><form><input></form>\n',
  refs: 'See [the docs][d] and [d].\n\n- item [d]\n\n[d]: https://example.com/docs "Docs"\n\nAfter [d].\n',
  crlf: 'Line one\r\nline two\r\n\r\n```go\r\nx := 1\r\n```\r\n\r\n- a\r\n- b\r\n',
  unclosed: 'Text.\n\n```ts\nconst a = 1;\n/* open comment\nstill open',
};
