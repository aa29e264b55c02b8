# ochat — build and test. `make test` is what CI runs (.ci/run installs nothing else by hand).
GO ?= go
FUZZTIME ?= 3s

.PHONY: build test deps test-go test-fuzz test-nvim test-vscode bench

build:
	$(GO) build -o bin/ochatd ./cmd/ochatd

# Everything: Go unit + daemon tests, real adapters end to end (OCHAT_E2E=1, npm registry), short fuzzing,
# headless Neovim against a real daemon, the VS Code extension's tests.
test: deps test-go test-fuzz test-nvim test-vscode

# Installs what the editor tests need when it is missing (Debian packages need root; see each script).
deps:
	$(GO) mod download
	editors/neovim/tests/install-deps.sh
	editors/vscode/scripts/install-deps.sh

test-go:
	$(GO) vet ./...
	OCHAT_E2E=$${OCHAT_E2E:-1} $(GO) test -timeout 20m ./...

test-fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

test-nvim:
	editors/neovim/tests/run.sh

test-vscode:
	editors/vscode/scripts/ci.sh

bench:
	$(GO) test -run '^$$' -bench . ./...
