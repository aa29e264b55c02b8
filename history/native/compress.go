package native

import (
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// decompressFor wraps r in a zstd decoder when path ends in .zst (Codex
// compresses finished rollouts to .jsonl.zst).
func decompressFor(path string, r io.Reader) (io.Reader, func(), error) {
	if !strings.HasSuffix(path, ".zst") {
		return r, func() {}, nil
	}
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, nil, fmt.Errorf("open zstd %s: %w", path, err)
	}
	return d, d.Close, nil
}
