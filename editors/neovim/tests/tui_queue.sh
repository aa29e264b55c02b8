#!/bin/sh
# The message queue typed in the real Neovim TUI (tmux): two messages sent while a slow turn runs are queued and
# shown; gx removes one, ge edits the other, gs sends it now (the running turn is cancelled), checked on screen and
# in the daemon's store (`ochatd queue`, `ochatd show`). Screens in editors/neovim/artifacts/tui-queue-<version>.txt.
# An ochatd without the queue (docs/protocol.md "Queue"; `ochatd queue` missing) is reported and skipped.
#
# Needs tmux, nvim, and OCHAT_BIN_DIR with ochatd and testagent (tests/run.sh sets it). NVIM overrides the nvim.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${OCHAT_BIN_DIR:?OCHAT_BIN_DIR must name a directory with ochatd and testagent}
nv=${NVIM:-nvim}
if ! "$bin/ochatd" queue --help >/dev/null 2>&1; then
	echo "SKIP: $bin/ochatd has no message queue (docs/protocol.md \"Queue\"); the queue UI is covered by unit_spec.lua only"
	exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ochat-tui-queue.XXXXXX")
sock=ochat-nvim-queue-$$
art=$here/artifacts
mkdir -p "$art" "$tmp/ws" "$tmp/config/ochat" "$tmp/state" "$tmp/run" "$tmp/agent"
chmod 700 "$tmp/run"
out=$art/tui-queue-$($nv --version | head -1 | awk '{print $2}').txt
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

conv() { "$tmp/ochatd.sh" conversations | awk 'NR==2 {print $1}'; }

t new-session -d -s A -x 120 -y 40 "$tmp/nvim.sh"
wait_for 'first line of a real buffer'
t send-keys -t A ':OChat' Enter
wait_for '# ochat'
t send-keys -t A 'i' 'SLOW 400' C-s
wait_for 'c2 '
# Sent while the turn runs: queued, shown under the messages, the input empty again.
t send-keys -t A 'PLAIN queued one' C-s
wait_for '## Queued (1)'
t send-keys -t A 'PLAIN queued two' C-s
wait_for '## Queued (2)'
wait_for '2. PLAIN queued two (test)'
save 'two messages queued while a turn runs'
"$tmp/ochatd.sh" queue "$(conv)" >"$tmp/q1"
grep -qF 'PLAIN queued two' "$tmp/q1" || { cat "$tmp/q1" >&2; fail 'the daemon does not hold the queued message'; }
# In the transcript: gx on the second removes it, ge on the first edits it.
t send-keys -t A C-k
t send-keys -t A '/^2\. PLAIN' Enter
t send-keys -t A 'gx'
wait_for '## Queued (1)'
wait_gone 'queued two'
t send-keys -t A '/^1\. PLAIN' Enter
t send-keys -t A 'ge'
wait_for 'Edit queued message'
t send-keys -t A C-u 'PLAIN edited one' Enter
wait_for '1. PLAIN edited one (test)'
"$tmp/ochatd.sh" queue "$(conv)" >"$tmp/q2"
grep -qF 'PLAIN edited one' "$tmp/q2" || { cat "$tmp/q2" >&2; fail 'the edit did not reach the daemon'; }
save 'one removed (gx), the other edited (ge)'
# gs: steer, the running turn is cancelled and the edited message runs now.
t send-keys -t A '/^1\. PLAIN' Enter
t send-keys -t A 'gs'
wait_gone '## Queued'
wait_for '## test · cancelled'
wait_for 'edited one'
i=0
until "$tmp/ochatd.sh" show "$(conv)" | grep -qF 'PLAIN edited one'; do
	i=$((i + 1))
	[ $i -gt 100 ] && fail 'the sent-now message is not in the store'
	sleep 0.1
done
save 'sent now (gs): the running turn cancelled, the message answered'
t send-keys -t A Escape ':qa' Enter
echo "PASS: queue typed in the TUI (queued while running, gx, ge, gs); screens in $out"
