//go:build !linux

package checkpoint

import (
	"io/fs"
	"os"
)

// sysStat returns 0s where inode and ctime are not read; size, mtime and
// mode still key the stat cache.
func sysStat(fs.FileInfo) (ino uint64, ctime int64) { return 0, 0 }

// openNoFollow opens abs for reading; the caller checks the type after.
func openNoFollow(abs string) (*os.File, error) { return os.Open(abs) }
