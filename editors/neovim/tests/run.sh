#!/bin/sh
# Runs the Neovim plugin's tests: unit specs (fake connection), end-to-end specs against a real ochatd with the
# scripted ACP test agent, the benchmarks (figures only) and, when tmux is present, the real TUI typed into through
# tmux (tests/tui.sh, tests/tui_input.sh, tests/tui_queue.sh).
#
# Builds ochatd and testagent into a temp dir; installs nothing (tests/install-deps.sh does). Runs on the `nvim` on
# PATH and, when OCHAT_NVIM_010 names a Neovim 0.10+ (default: the chroot wrapper install-deps.sh writes to
# $OCHAT_CACHE_DIR/nvim-0.10, when it exists), there too.
# OCHAT_REAL_AGENT=1 (default when node and npm are on PATH; 0 skips) adds one end-to-end run with a real adapter
# (codex-acp from npm, cached under $OCHAT_CACHE) against the fake model.
# Exit status: 0 when every suite passed.
#
#   editors/neovim/tests/run.sh            # all
#   OCHAT_SKIP_TUI=1 OCHAT_SKIP_BENCH=1 editors/neovim/tests/run.sh
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)

command -v nvim >/dev/null 2>&1 || { echo "nvim not found: run editors/neovim/tests/install-deps.sh" >&2; exit 2; }
command -v go >/dev/null 2>&1 || { echo "go not found" >&2; exit 2; }

bin=$(mktemp -d "${TMPDIR:-/tmp}/ochat-nvim-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
(cd "$repo" && CGO_ENABLED=0 go build -o "$bin/" ./cmd/ochatd ./internal/testagent/cmd/testagent ./editors/neovim/tests/realagent)
export OCHAT_BIN_DIR="$bin"
# The real-adapter run needs node and npm (and the npm registry the first time); on by default when npm is here.
if [ -z "${OCHAT_REAL_AGENT:-}" ] && command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
	export OCHAT_REAL_AGENT=1
fi

status=0
suite() { # suite NVIM LABEL [EXTRA_SPEC...]
	nv=$1
	label=$2
	shift 2
	echo "== $label: $("$nv" --version | head -1)"
	cd "$here"
	if ! "$nv" --headless -n -i NONE -u NONE --cmd "set rtp^=$here" -c 'luafile tests/minitest.lua' \
		tests/plugin_spec.lua tests/unit_spec.lua tests/e2e_spec.lua "$@" </dev/null; then
		status=1
	fi
	if [ "${OCHAT_SKIP_BENCH:-0}" != 1 ]; then
		"$nv" --headless -n -i NONE -u NONE --cmd "set rtp^=$here" -c 'luafile tests/bench.lua' </dev/null || status=1
		"$nv" --headless -n -i NONE -u NONE --cmd "set rtp^=$here" -c 'luafile tests/bench_e2e.lua' </dev/null || status=1
	fi
}

# The real-adapter spec (codex-acp + fake model; needs node and npm) runs when OCHAT_REAL_AGENT=1, on the host nvim.
suite nvim "nvim on PATH" tests/real_spec.lua
# The chroot wrapper that install-deps.sh (OCHAT_NVIM_CHROOT=1) leaves in the cache is used when present.
if [ -z "${OCHAT_NVIM_010:-}" ] && [ -x "${OCHAT_CACHE_DIR:-$HOME/.cache/ochat-ci}/nvim-0.10" ]; then
	OCHAT_NVIM_010=${OCHAT_CACHE_DIR:-$HOME/.cache/ochat-ci}/nvim-0.10
fi
# The chroot wrapper binds the repository it was generated for; bind this one (another checkout may have rewritten it).
export OCHAT_CHROOT_BINDS="${OCHAT_CHROOT_BINDS:-$repo /tmp /proc /dev}"
if [ -n "${OCHAT_NVIM_010:-}" ]; then
	suite "$OCHAT_NVIM_010" "OCHAT_NVIM_010"
fi

if [ "${OCHAT_SKIP_TUI:-0}" != 1 ] && command -v tmux >/dev/null 2>&1; then
	echo "== real TUI via tmux"
	sh "$here/tests/tui.sh" || status=1
	sh "$here/tests/tui_input.sh" || status=1
	sh "$here/tests/tui_queue.sh" || status=1
	if [ -n "${OCHAT_NVIM_010:-}" ]; then
		NVIM=$OCHAT_NVIM_010 sh "$here/tests/tui.sh" || status=1
		NVIM=$OCHAT_NVIM_010 sh "$here/tests/tui_input.sh" || status=1
		NVIM=$OCHAT_NVIM_010 sh "$here/tests/tui_queue.sh" || status=1
	fi
fi

[ $status = 0 ] && echo "neovim: all suites passed" || echo "neovim: FAILED" >&2
exit $status
