#!/bin/sh
# Drives the real Neovim TUI in a private tmux server: asks the test agent to write a file, answers the permission
# request from the keyboard (gy in the input: the request's float never takes the focus), expands the turn's activity line, and saves the screens as text to
# editors/neovim/artifacts/tui-capture-<nvim version>.txt (git-ignored). Fails when an expected text is not on screen.
#
# Needs tmux, nvim, and OCHAT_BIN_DIR with ochatd and testagent (tests/run.sh sets it). NVIM overrides the nvim.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${OCHAT_BIN_DIR:?OCHAT_BIN_DIR must name a directory with ochatd and testagent}
nv=${NVIM:-nvim}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ochat-tui.XXXXXX")
sock=ochat-nvim-tui-$$
art=$here/artifacts
mkdir -p "$art" "$tmp/ws" "$tmp/config/ochat" "$tmp/state" "$tmp/run" "$tmp/agent"
chmod 700 "$tmp/run"
out=$art/tui-capture-$($nv --version | head -1 | awk '{print $2}').txt

cleanup() {
	tmux -L "$sock" kill-server 2>/dev/null || true
	for p in $(ps -eo pid=,args= | awk -v ws="$tmp/ws" '$0 ~ /ochatd serve/ && index($0, ws) {print $1}'); do
		kill "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

printf '{"agent_servers":{"test":{"command":"%s/testagent"}}}\n' "$bin" >"$tmp/config/ochat/settings.json"
printf 'first line of a real buffer\nsecond line\n' >"$tmp/ws/notes.md"
cat >"$tmp/init.lua" <<EOF
vim.opt.rtp:prepend('$here')
vim.cmd('runtime plugin/ochat.lua')
require('ochat').setup({ cmd = { '$bin/ochatd' }, agent = 'test', ui = { width = 0.9, height = 0.85 } })
EOF
cat >"$tmp/nvim.sh" <<EOF
#!/bin/sh
export XDG_CONFIG_HOME='$tmp/config' XDG_STATE_HOME='$tmp/state' XDG_DATA_HOME='$tmp/state' XDG_RUNTIME_DIR='$tmp/run'
export TESTAGENT_STATE='$tmp/agent' TERM=xterm-256color
cd '$tmp/ws' && exec $nv -n -i NONE -u '$tmp/init.lua' notes.md
EOF
chmod +x "$tmp/nvim.sh"

t() { tmux -L "$sock" "$@"; }
screen() { t capture-pane -p -t S; }
wait_for() { # wait_for TEXT
	i=0
	while ! screen | grep -qF -- "$1"; do
		i=$((i + 1))
		if [ $i -gt 100 ]; then
			echo "FAIL: '$1' not on screen after 10 s; screen:" >&2
			screen >&2
			return 1
		fi
		sleep 0.1
	done
}

t new-session -d -s S -x 110 -y 34 "$tmp/nvim.sh"
wait_for 'first line of a real buffer'
t send-keys -t S ':OChat WRITE hello.txt Hello from the agent\nsecond line' Enter
wait_for '# test asks permission'
wait_for 'Allow  (allow_once)  ← gy'
{
	echo "== permission request (float with tool, input, diff and the agent's options)"
	screen
} >"$out"
# The float never took the focus: the input (Normal mode) answers with gy, allow once.
t send-keys -t S 'gy'
wait_for '## test · completed'
t send-keys -t S Escape
t send-keys -t S ":lua vim.api.nvim_set_current_win(require('ochat.chat').get().win)" Enter
t send-keys -t S 'gg' '/▸' Enter
sleep 0.2
t send-keys -t S Enter
wait_for '▾ 1 tool · 1 file +2 -0'
wait_for 'hello.txt +2 -0'
{
	echo
	echo "== after the turn, activity line expanded in place"
	screen
} >>"$out"
t send-keys -t S Escape ':qa!' Enter
grep -q 'Hello from the agent' "$tmp/ws/hello.txt"
echo "PASS: TUI chat with a tool call; screens saved to $out"
