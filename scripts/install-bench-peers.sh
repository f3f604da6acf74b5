#!/usr/bin/env bash
# Installs the gateways `corral-bench peers` compares Corral with, into .peers/bench/
# (git-ignored):
#   - mcp-proxy (PyPI), in a virtualenv: .peers/bench/venv/bin/mcp-proxy
#   - supergateway (npm): .peers/bench/node/node_modules/.bin/supergateway
#   - 1MCP (npm @1mcp/agent), optional: .peers/bench/1mcp/node_modules/.bin/1mcp
#     (the npm registry this workplace reaches answers 404 for the package; the script then
#     writes npm's reason to .peers/bench/1mcp/NOT-INSTALLED and goes on, and
#     `corral-bench peers` reports 1MCP as not measured, with that reason)
# Idempotent: a second run with the same pinned versions does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH="$PWD/.peers/bench"
MCP_PROXY_VERSION="0.13.0"
SUPERGATEWAY_VERSION="4.0.0"
ONEMCP_VERSION="0.26.1"
mkdir -p "$BENCH"

stamp="$BENCH/.installed-$MCP_PROXY_VERSION-$SUPERGATEWAY_VERSION-$ONEMCP_VERSION"
if [ -f "$stamp" ]; then
  exit 0
fi

echo "installing mcp-proxy==$MCP_PROXY_VERSION into .peers/bench/venv" >&2
python3 -m venv "$BENCH/venv"
"$BENCH/venv/bin/pip" install --quiet --disable-pip-version-check "mcp-proxy==$MCP_PROXY_VERSION" >&2

echo "installing supergateway@$SUPERGATEWAY_VERSION into .peers/bench/node" >&2
mkdir -p "$BENCH/node"
npm install --silent --no-audit --no-fund --prefix "$BENCH/node" \
  "supergateway@$SUPERGATEWAY_VERSION" >&2

echo "installing @1mcp/agent@$ONEMCP_VERSION into .peers/bench/1mcp (optional)" >&2
mkdir -p "$BENCH/1mcp"
npm_log="$BENCH/1mcp/npm-install.log"
if npm install --no-audit --no-fund --prefix "$BENCH/1mcp" \
  "@1mcp/agent@$ONEMCP_VERSION" >"$npm_log" 2>&1; then
  rm -f "$BENCH/1mcp/NOT-INSTALLED"
else
  if grep -q E404 "$npm_log"; then
    reason="the npm registry answered 404 Not Found for @1mcp/agent"
  else
    # npm's first error line, without addresses.
    reason="$(grep -m1 -E '^npm (error|ERR!)' "$npm_log" | sed -E 's/^npm (error|ERR!) //; s#[a-z]+://[^ ]*#<url>#g' || true)"
  fi
  echo "npm install @1mcp/agent@$ONEMCP_VERSION failed: $reason" >"$BENCH/1mcp/NOT-INSTALLED"
  echo "install-bench-peers: $(cat "$BENCH/1mcp/NOT-INSTALLED");" \
    "corral-bench peers will report 1MCP as not measured" >&2
fi

rm -f "$BENCH"/.installed-*
touch "$stamp"
