// Package agents owns ochat's side of the Agent Client Protocol (ACP): the
// registry of agents a user can start (built-ins plus Zed-style
// "agent_servers" settings), spawning one agent process in its own process
// group, the ACP client connection on github.com/coder/acp-go-sdk
// (initialize, session/new, session/load, session/resume, session/prompt,
// session/cancel, session/set_config_option), and the translation of what an
// agent sends into the canonical transcript: session/update notifications
// become live events (content.delta, reasoning.delta, activity.upsert,
// plan.updated) or agent State, session/request_permission becomes a
// PermissionRequest for the user, and fs/read_text_file and
// fs/write_text_file are served inside the workspace only.
//
// Provider differences end here. The rules of the live path
// (docs/architecture.md, "Rules for the live path") are implemented here:
// tool calls are upserted by toolCallId whatever the arrival order; updates
// are routed by session id and history replayed by session/load is never
// delivered as live events; nothing an agent sends is fatal (unknown update
// kinds are recognised by their raw sessionUpdate value and ignored,
// non-JSON stdout lines are skipped); agent exit fails every pending request;
// a cancel answers pending permission requests and never reaches the next
// prompt turn.
//
// The package never renders, never stores conversations and never speaks the
// editor protocol: turn.completed and turn.failed, sequence numbers and
// persistence belong to the daemon.
package agents
