#!/usr/bin/env bash
# Installs what the VS Code extension's tests need, idempotently: the npm
# dependencies (npm ci, npm's cache), Debian's chromium for the webview and
# end-to-end tests, and — with OCHAT_VSCODE_E2E=1 — Node 24 and code-server in
# a cache directory (scripts/install-code-server.sh). apt needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
lock_sum=$(sha256sum package-lock.json | cut -c1-16)
if [[ ! -f node_modules/.ochat-lock-$lock_sum ]]; then
  npm ci --no-audit --no-fund --prefer-offline >&2
  touch "node_modules/.ochat-lock-$lock_sum"
fi
if ! command -v chromium >/dev/null 2>&1 && [[ -z ${CHROMIUM_PATH:-} ]]; then
  if [[ $(id -u) == 0 ]]; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
  else
    echo "install-deps: chromium is missing (apt-get install chromium as root, or set CHROMIUM_PATH)" >&2
  fi
fi
if [[ ${OCHAT_VSCODE_E2E:-0} == 1 ]]; then
  scripts/install-code-server.sh >/dev/null
fi
