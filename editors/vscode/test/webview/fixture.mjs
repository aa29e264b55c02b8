// A scripted conversation in the canonical transcript shape (docs/protocol.md):
// one finished turn with every kind of activity, and a running turn with a
// pending two-file permission request.
const t0 = 1764496000000;
export const agents = [
  { name: 'claude', command: 'claude-agent-acp', available: true },
  { name: 'codex', command: 'codex-acp', available: true },
  { name: 'gemini', command: 'gemini', available: false, reason: 'gemini not found on PATH' },
];

export const finishedTurn = {
  id: 'A1', role: 'assistant', agent: 'claude', timestamp: t0 + 10, status: 'completed', stopReason: 'end_turn', durationMs: 8120,
  segments: [
    { type: 'reasoning', content: 'The parser drops the last token; check the loop bound first.' },
    { type: 'plan', entries: [
      { content: 'Read the parser', status: 'completed' },
      { content: 'Fix the off-by-one', status: 'completed' },
      { content: 'Run the tests', status: 'in_progress' },
    ] },
    { type: 'tool', id: 't1', name: 'Read parser.go', status: 'completed', providerKind: 'read', input: { file_path: '/repo/parser.go' }, output: 'package parser\n…', durationMs: 40 },
    { type: 'tool', id: 't2', name: 'go test ./...', status: 'error', providerKind: 'execute', input: { command: 'go test ./...' }, error: 'exit status 1' },
    { type: 'tool', id: 't3', name: 'Edit parser.go', status: 'completed', providerKind: 'edit', input: { file_path: '/repo/parser.go' } },
    { type: 'fileChange', path: '/repo/parser.go', additions: 2, deletions: 1, status: 'applied', toolCallId: 't3',
      oldText: 'for i := 0; i < n-1; i++ {\n\temit(tok[i])\n}\n', newText: 'for i := 0; i < n; i++ {\n\temit(tok[i])\n}\n// all tokens\n' },
    { type: 'content', content: 'Fixed the loop bound in `parser.go`:\n\n```go\nfor i := 0; i < n; i++ {\n\temit(tok[i])\n}\n```\n\n| before | after |\n|---|---|\n| n-1 | n |\n\nRaw HTML stays text: <img src=x onerror="window.__xss=1"> and a [link](https://example.com).' },
  ],
};

export const runningTurn = {
  id: 'A2', role: 'assistant', agent: 'claude', timestamp: Date.now() - 3000, status: 'streaming',
  segments: [{ type: 'tool', id: 'w1', name: 'Write README.md, docs/a.md', status: 'pending', providerKind: 'edit' }],
};

export const permission = {
  permissionId: 'P1', conversationId: 'C1', turnId: 'A2', agent: 'claude',
  toolCall: { type: 'tool', id: 'w1', name: 'Write README.md, docs/a.md', status: 'pending', providerKind: 'edit', input: { files: ['README.md', 'docs/a.md'] } },
  fileChanges: [
    { type: 'fileChange', path: '/repo/README.md', additions: 2, deletions: 0, diff: '--- a/README.md\n+++ b/README.md\n@@ -1 +1,3 @@\n # repo\n+\n+Run `make`.\n' },
    { type: 'fileChange', path: '/repo/docs/a.md', additions: 1, deletions: 1, diff: '--- a/docs/a.md\n+++ b/docs/a.md\n@@ -1 +1 @@\n-old line\n+new line\n' },
  ],
  options: [
    { optionId: 'allow_always', name: 'Always Allow', kind: 'allow_always' },
    { optionId: 'allow', name: 'Allow', kind: 'allow_once' },
    { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
  ],
};

export const agentState = {
  conversationId: 'C1', agent: 'claude',
  commands: [{ name: 'review', description: 'Review the current diff' }, { name: 'compact', description: 'Compact the context' }],
  configOptions: [
    { id: 'mode', name: 'Mode', category: 'mode', type: 'select', currentValue: 'default', options: [{ value: 'default', name: 'Ask before edits' }, { value: 'acceptEdits', name: 'Accept edits' }, { value: 'plan', name: 'Plan' }] },
    { id: 'model', name: 'Model', category: 'model', type: 'select', currentValue: 'sonnet', options: [{ value: 'sonnet', name: 'Sonnet' }, { value: 'opus', name: 'Opus' }] },
  ],
  usage: { used: 52000, size: 200000 },
};

export function snapshot() {
  return {
    conversation: { id: 'C1', title: 'fix the parser', agents: ['claude'], createdAt: t0, updatedAt: t0 + 9000 },
    messages: [
      { id: 'U1', role: 'user', timestamp: t0, content: 'The parser drops the last token. Fix it.', attachments: [{ kind: 'file', path: 'parser.go', name: 'parser.go' }] },
      finishedTurn,
      { id: 'U2', role: 'user', timestamp: t0 + 20000, content: 'Now document it.' },
      runningTurn,
    ],
    running: { turnId: 'A2', messageId: 'A2', agent: 'claude', startedAt: Date.now() - 3000 },
    permissions: [permission],
    agentState: { claude: agentState },
    readOnly: false,
  };
}

export function init(snap = snapshot()) {
  return { type: 'init', snapshot: snap, agents, selectedAgent: 'claude', connection: { state: 'running' } };
}
