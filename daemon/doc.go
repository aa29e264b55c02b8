// Package daemon is ochatd's editor-facing side: the JSON-RPC 2.0 server
// (LSP base-protocol framing on go.lsp.dev/jsonrpc2, LSP lifecycle) that
// answers every ochat/… method in docs/protocol.md, the client connections
// and their subscriptions, the run registry (one running prompt turn per
// conversation, its numbered events, a bounded per-turn replay buffer for late
// subscribers, permission fan-out with first-answer-wins), each
// conversation's message queue (messages sent while a turn runs), the
// per-workspace unix socket (discovery, peer-uid check, stale-socket removal, idle exit), the
// `ochatd connect` stdio forwarder with auto-start, and a small Go client for
// the CLI.
//
// It never parses a provider format: agents come through package agents and
// storage through package history; the transcript shapes are package
// transcript's. It holds no credentials and makes no permission decisions:
// every permission request reaches the user with the agent's own options.
package daemon
