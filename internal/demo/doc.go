// Package demo owns `ochatd demo`, the offline tour: it starts the bundled
// fake model (internal/fakemodel) in-process, installs or reuses a pinned
// real ACP adapter (codex-acp, through npm into a cache folder), makes a
// throwaway workspace with private agent and daemon state, and runs one
// chat turn that writes a file through a real ochatd daemon, with the
// permission question asked on the terminal. It also owns the pinned npm
// installs (NPMPackage) that the end-to-end tests share.
//
// It never touches the user's own agent settings, sessions or daemon
// state: everything lives under a temporary folder that it removes, except
// the npm cache, which is kept for the next run.
package demo
