// History view benchmark: the tree provider with 2,000 conversations and
// 2,000 terminal-started sessions (4 agents, 50 live) behind a fake daemon —
// refresh (list + build the tree) and getTreeItem for every node, as VS Code
// does when the groups are expanded. Needs out/ (npm run compile-tests).
// Prints median and max over 20 runs, in ms.
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
require('../out/test/unit/fakeVscode.js');
const { HistoryProvider } = require('../out/src/ui/historyView.js');

const now = Date.now();
const conversations = Array.from({ length: 2000 }, (_, i) => ({ id: `C${i}`, title: `conversation ${i}`, agents: ['claude'], createdAt: now - i * 60000, updatedAt: now - i * 60000 }));
const agents = ['claude', 'codex', 'gemini', 'opencode'];
const sessions = Array.from({ length: 2000 }, (_, i) => ({ agent: agents[i % 4], sessionId: `s${i}`, title: `session ${i}`, updatedAt: now - i * 1000, live: i < 50, messageCount: i % 40 }));
const rpc = {
  async request(method) {
    if (method === 'ochat/conversations/list') return { conversations };
    if (method === 'ochat/sessions/list') return { sessions };
    throw new Error(method);
  },
  onNotification: () => () => undefined,
};

function walk(p, nodes) {
  let n = 0;
  for (const node of nodes) {
    p.getTreeItem(node);
    n++;
    if (node.kind === 'group') n += walk(p, p.getChildren(node));
  }
  return n;
}

const times = [];
let count = 0;
for (let i = 0; i < 20; i++) {
  const p = new HistoryProvider(rpc);
  const t = performance.now();
  await p.refresh();
  count = walk(p, await p.getChildren());
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
console.log(`history tree: ${count} nodes (2,000 conversations + 2,000 sessions): median ${times[10].toFixed(1)} ms, max ${times[19].toFixed(1)} ms (refresh + every TreeItem)`);
