import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { readableError, relInText, relPath, shellCommand, toolInputText, inputPath } from '../../src/model/readable';

test('toolInputText shows what a person reads', () => {
  const root = '/home/me/proj';
  const cases: Array<[string, unknown, string]> = [
    ['codex exec: the script, not the argv wrapper or bookkeeping', { command: ['/bin/bash', '-lc', 'go test ./...'], cwd: root, call_id: 'call_1', turn_id: 't', started_at_ms: 17 }, '$ go test ./...'],
    ['argv quoted where needed', { command: ['rg', '-n', 'two words', 'src'] }, "$ rg -n 'two words' src"],
    ['a cwd elsewhere stays, relative when inside', { command: 'ls', cwd: `${root}/sub` }, '$ ls\ncwd: sub'],
    ['a JSON string is parsed, no escapes', JSON.stringify({ file_path: `${root}/a/b.go`, old_string: 'x', new_string: 'y' }), 'file_path: a/b.go\nold_string: x\nnew_string: y'],
    ['multi-line text indented under its key', { path: 'a.txt', content: 'one\ntwo\n' }, 'path: a.txt\ncontent:\n  one\n  two'],
    ['a plain string stays', 'just text', 'just text'],
    ['arrays of paths relative', { files: [`${root}/a`, '/etc/b'] }, 'files: a, /etc/b'],
    ['nested objects compact, numbers as is', { limit: 5, opts: { a: 1 } }, 'limit: 5\nopts: {"a":1}'],
  ];
  for (const [name, input, want] of cases) assert.equal(toolInputText(input, root), want, name);
  assert.equal(toolInputText(undefined), '');
});

test('relative paths and the path a tool names', () => {
  assert.equal(relPath('/w/a.txt', '/w'), 'a.txt');
  assert.equal(relPath('/w', '/w/'), '.');
  assert.equal(relPath('/wx/a.txt', '/w'), '/wx/a.txt');
  assert.equal(relInText('Edit /w/a.txt and /w/b.txt', '/w'), 'Edit a.txt and b.txt');
  assert.equal(inputPath({ file_path: '/w/x' }), '/w/x');
  assert.equal(inputPath('{"path":"y"}'), 'y');
  assert.equal(inputPath({ command: 'ls' }), undefined);
  assert.equal(shellCommand(['sh', '-c', 'echo hi']), 'echo hi');
});

test('readableError drops JSON-RPC framing', () => {
  const cases: Array<[string, string]> = [
    ['Request ochat/chat/send failed with message: agent claude cannot start: not logged in', 'agent claude cannot start: not logged in'],
    ['session/new: jsonrpc2: code -32000 message: Authentication required', 'session/new: Authentication required'],
    ['agent error: {"code":-32603,"message":"Internal error","data":{"message":"Invalid API key"}}', 'agent error: Internal error (Invalid API key)'],
    ['{"error":{"message":"rate limited"}}', 'rate limited'],
    ['plain words stay', 'plain words stay'],
  ];
  for (const [input, want] of cases) assert.equal(readableError(input), want, input);
});
