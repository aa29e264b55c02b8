module github.com/ochat-dev/ochat

go 1.26

require (
	github.com/coder/acp-go-sdk v0.13.0
	github.com/fsnotify/fsnotify v1.9.0
	github.com/klauspost/compress v1.18.0
	github.com/oklog/ulid/v2 v2.1.1
	github.com/segmentio/encoding v0.3.4
	github.com/sergi/go-diff v1.4.0
	github.com/tailscale/hujson v0.0.0-20260727124030-b80ff77dac4f
	go.etcd.io/bbolt v1.4.3
	go.lsp.dev/jsonrpc2 v0.10.0
	go.lsp.dev/protocol v0.12.0
	go.lsp.dev/uri v0.3.0
	golang.org/x/sys v0.34.0
	modernc.org/sqlite v1.38.2
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/ncruces/go-strftime v0.1.9 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	go.lsp.dev/pkg v0.0.0-20210717090340-384b27a52fb2 // indirect
	go.uber.org/atomic v1.9.0 // indirect
	go.uber.org/multierr v1.8.0 // indirect
	go.uber.org/zap v1.21.0 // indirect
	golang.org/x/exp v0.0.0-20250620022241-b7579e27df2b // indirect
	modernc.org/libc v1.66.3 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.11.0 // indirect
)
