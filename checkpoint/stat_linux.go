//go:build linux

package checkpoint

import (
	"io/fs"
	"os"
	"syscall"
)

// sysStat returns the inode and ctime (ns) of fi, 0 when unknown.
func sysStat(fi fs.FileInfo) (ino uint64, ctime int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino, st.Ctim.Nano()
	}
	return 0, 0
}

// openNoFollow opens abs for reading without following a final symlink and
// without blocking if a FIFO was swapped in.
func openNoFollow(abs string) (*os.File, error) {
	return os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}
