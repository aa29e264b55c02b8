#!/bin/sh
# Types into the real Neovim TUI as a person does (tmux send-keys, bracketed paste) and checks the screen
# (capture-pane) and the daemon's store (`ochatd show`):
#   - :OChat leaves Normal mode: a `:lua …` typed next runs as a command and is never sent as a prompt;
#   - the input keeps several lines; a bracketed paste of 5 and of 2,000 lines is sent whole (<CR> in Normal mode,
#     <C-s> in Insert mode); `?` lists the keys; the input is empty after a send (old prompts do not pile up);
#   - a permission request that arrives while one types in the input, in another buffer, and in a second Neovim on
#     the same workspace takes no keystroke (nothing lost, no E21); gy answers allow once; the other Neovim's float
#     and status line clear when one answers;
#   - :qa quits at once after the chat was used.
# Screens are saved to editors/neovim/artifacts/tui-input-<nvim version>.txt (git-ignored).
#
# Needs tmux, nvim, and OCHAT_BIN_DIR with ochatd and testagent (tests/run.sh sets it). NVIM overrides the nvim.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${OCHAT_BIN_DIR:?OCHAT_BIN_DIR must name a directory with ochatd and testagent}
nv=${NVIM:-nvim}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ochat-tui-input.XXXXXX")
sock=ochat-nvim-input-$$
art=$here/artifacts
mkdir -p "$art" "$tmp/ws" "$tmp/config/ochat" "$tmp/state" "$tmp/run" "$tmp/agent"
chmod 700 "$tmp/run"
out=$art/tui-input-$($nv --version | head -1 | awk '{print $2}').txt
: >"$out"

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
vim.o.laststatus = 2
vim.o.statusline = '%f %{v:lua.require("ochat").status()}'
require('ochat').setup({ cmd = { '$bin/ochatd' }, agent = 'test', ui = { width = 0.9, height = 0.85 } })
EOF
env="XDG_CONFIG_HOME='$tmp/config' XDG_STATE_HOME='$tmp/state' XDG_DATA_HOME='$tmp/state' XDG_RUNTIME_DIR='$tmp/run' TESTAGENT_STATE='$tmp/agent'"
cat >"$tmp/nvim.sh" <<EOF
#!/bin/sh
export $env TERM=xterm-256color
cd '$tmp/ws' && exec $nv -n -i NONE -u '$tmp/init.lua' notes.md
EOF
cat >"$tmp/ochatd.sh" <<EOF
#!/bin/sh
export $env
cd '$tmp/ws' && exec '$bin/ochatd' "\$@"
EOF
chmod +x "$tmp/nvim.sh" "$tmp/ochatd.sh"

t() { tmux -L "$sock" "$@"; }
screen() { t capture-pane -p -t "${1:-A}"; }
fail() {
	echo "FAIL: $1; screen of ${2:-A}:" >&2
	screen "${2:-A}" >&2
	exit 1
}
wait_for() { # wait_for TEXT [SESSION]
	i=0
	while ! screen "${2:-A}" | grep -qF -- "$1"; do
		i=$((i + 1))
		[ $i -gt 150 ] && fail "'$1' not on screen after 15 s" "${2:-A}"
		sleep 0.1
	done
}
wait_gone() { # wait_gone TEXT [SESSION]
	i=0
	while screen "${2:-A}" | grep -qF -- "$1"; do
		i=$((i + 1))
		[ $i -gt 150 ] && fail "'$1' still on screen after 15 s" "${2:-A}"
		sleep 0.1
	done
}
never() { # never TEXT [SESSION]: an error must not be on screen
	if screen "${2:-A}" | grep -qF -- "$1"; then fail "'$1' on screen" "${2:-A}"; fi
}
save() { # save TITLE [SESSION]
	{
		echo "== $1"
		screen "${2:-A}"
		echo
	} >>"$out"
}
paste_lines() { # paste_lines N PREFIX [SESSION]: a bracketed paste of N lines, as a terminal sends a clipboard
	awk -v n="$1" -v p="$2" 'BEGIN { for (i = 1; i <= n; i++) printf "%s %d%s", p, i, (i < n ? "\n" : "") }' >"$tmp/paste"
	t load-buffer -b clip "$tmp/paste"
	t paste-buffer -p -d -b clip -t "${3:-A}"
}
wait_idle() { # wait_idle: the chat's turn has ended (asked through :lua, for answers taller than the screen)
	i=0
	while :; do
		t send-keys -t A ":lua print('turn ' .. (require('ochat.chat').get().running_id and 'running' or 'idle'))" Enter
		sleep 0.2
		screen | grep -qF 'turn idle' && return 0
		i=$((i + 1))
		[ $i -gt 75 ] && fail 'the turn did not end'
	done
}
# The user messages of the newest conversation, as the daemon stored them.
stored() { "$tmp/ochatd.sh" show "$("$tmp/ochatd.sh" conversations | awk 'NR==2 {print $1}')"; }

t new-session -d -s A -x 120 -y 40 "$tmp/nvim.sh"
wait_for 'first line of a real buffer'

# :OChat opens the input in Normal mode: the next `:lua …` runs as a command.
t send-keys -t A ':OChat' Enter
wait_for '# ochat'
t send-keys -t A ":lua print('probe' .. '-ran')" Enter
wait_for 'probe-ran'

# `?` lists the keys.
t send-keys -t A '?'
wait_for 'ochat keys'
wait_for 'send the message'
save 'keys (?)'
t send-keys -t A Escape
wait_gone 'ochat keys'

# Several typed lines, then a bracketed paste of 5 lines, sent with <C-s> from Insert mode.
t send-keys -t A 'i' 'PLAIN typed line one' Enter 'typed line two' Enter
paste_lines 5 'pasted five'
wait_for 'pasted five 5'
save 'input with typed and pasted lines'
t send-keys -t A C-s
wait_for '## test · completed'
stored >"$tmp/show1"
for want in 'typed line one' 'typed line two' 'pasted five 1' 'pasted five 5'; do
	grep -qF "$want" "$tmp/show1" || { cat "$tmp/show1" >&2; fail "store lacks '$want'"; }
done

# A paste of 2,000 lines, sent with <CR> in Normal mode; the input is empty afterwards.
t send-keys -t A 'PLAIN big'
paste_lines 2000 'line'
wait_for 'line 2000'
t send-keys -t A Escape Enter
i=0
until "$tmp/ochatd.sh" conversations >/dev/null 2>&1 && stored | grep -qF 'line 2000'; do
	i=$((i + 1))
	[ $i -gt 150 ] && fail 'the 2,000-line paste never reached the store'
	sleep 0.1
done
stored >"$tmp/show2"
n=$(grep -c '^line [0-9]*$' "$tmp/show2" || true)
[ "$n" -ge 2000 ] || fail "the store has $n of the 2,000 pasted lines"
wait_idle
t send-keys -t A ":lua print('input lines: ' .. #vim.api.nvim_buf_get_lines(require('ochat.chat').get().prompt_buf, 0, -1, false))" Enter
wait_for 'input lines: 1'

# A permission request arrives while the user types in the input (Insert mode): nothing typed is lost.
t send-keys -t A 'i' 'WRITE hello.txt from the agent' C-s 'I keep typing here'
wait_for '# test asks permission'
t send-keys -t A ' and here'
wait_for 'I keep typing here and here'
never 'E21'
save 'permission request while typing in the input'
t send-keys -t A Escape
t send-keys -t A ":lua print('mode ' .. vim.api.nvim_get_mode().mode .. ' buf ' .. vim.fn.bufname())" Enter
wait_for 'mode n buf ochat://'
t send-keys -t A 'gy'
wait_gone '# test asks permission'
wait_for 'Wrote hello.txt.'
grep -q 'from the agent' "$tmp/ws/hello.txt" || fail 'hello.txt not written after gy'
t send-keys -t A 'dd'

# A second Neovim on the same workspace opens the same conversation.
t new-session -d -s B -x 120 -y 40 "$tmp/nvim.sh"
wait_for 'first line of a real buffer' B
t send-keys -t B ':OChatHistory' Enter
wait_for 'ochat history' B
t send-keys -t B '1' Enter
wait_for 'Wrote hello.txt.' B

# The first Neovim hides the chat and types in notes.md; the second one asks the agent to write again and keeps
# typing in its input. Neither loses a key; both show the request; answering in the first clears the second.
t send-keys -t A 'q'
wait_gone '# ochat' A
t send-keys -t A 'G' 'o' 'typed in notes while the agent asks'
t send-keys -t B 'i' 'WRITE second.txt again' C-s 'B types on'
wait_for '# test asks permission' B
wait_for '# test asks permission' A
wait_for 'test asks permission' A
t send-keys -t A ' and on'
t send-keys -t B ' and on'
wait_for 'typed in notes while the agent asks and on' A
wait_for 'B types on and on' B
never 'E21' A
never 'E21' B
save 'permission request while typing in another buffer' A
save 'the same request in a second Neovim' B
t send-keys -t A Escape ':w' Enter ':OChatAllow' Enter
wait_gone '# test asks permission' A
wait_gone '# test asks permission' B
wait_gone 'asks permission' B
grep -q 'typed in notes while the agent asks and on' "$tmp/ws/notes.md" || fail 'notes.md lost what was typed'
i=0
until [ -f "$tmp/ws/second.txt" ]; do
	i=$((i + 1))
	[ $i -gt 100 ] && fail 'second.txt not written after :OChatAllow'
	sleep 0.1
done
save 'after the first Neovim answered' B

# :qa quits both at once though the chat was used (no E37/E162, no stop in the input).
t send-keys -t B Escape ':qa' Enter
t send-keys -t A ':qa' Enter
i=0
while t has-session -t A 2>/dev/null || t has-session -t B 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 50 ]; then
		t has-session -t A 2>/dev/null && fail ':qa did not quit' A
		fail ':qa did not quit' B
	fi
	sleep 0.1
done
echo "PASS: typing, pastes, permission while typing (input, other buffer, second Neovim), :qa; screens in $out"
