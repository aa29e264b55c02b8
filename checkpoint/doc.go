// Package checkpoint records the state of a workspace's files in a shadow git
// repository beside the ochat store, independent of what an agent reports,
// and answers what changed between two checkpoints and what a file held in
// one. It restores exact bytes and mode from a checkpoint.
//
// It owns the shadow repository (a bare repository written with go-git: zlib
// compressed, content addressed, so storage grows with changed bytes), a stat
// cache (path → size, mtime, ctime, mode, inode, blob hash) so a checkpoint
// re-reads only files whose stat changed, the ignore rules (.gitignore files,
// .git/info/exclude and a built-in list) and the size caps.
//
// It never touches the user's own repository (.git, index, refs, stash) and
// never follows a symbolic link: a link is stored as a link. What it leaves
// out (over a cap, unreadable, a FIFO or socket, changing while read) is
// reported in Checkpoint.Skipped, never fatal. It knows nothing about
// conversations, agents or editors.
package checkpoint
