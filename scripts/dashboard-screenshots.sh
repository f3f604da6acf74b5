#!/usr/bin/env bash
# Screenshots of every view of the dashboard, from the running example
# (examples/dashboard), into docs/dashboard/ (or the directory given as $1):
#   1. builds corral, corral-fixture and corral-bench (debug) unless CORRAL_SKIP_BUILD=1,
#   2. copies the example to a temporary directory (its state, .corral/, stays out of
#      the repository; a `target` link there keeps the example's relative paths to the
#      binaries working), with its static site on a free port,
#   3. starts its daemon (`corral up -d`), crashes the flaky server once (a restart and
#      an incident to show),
#   4. `corral-bench dashboard --screenshots`: headless Chromium (Debian's `chromium`)
#      opens the proxied page (it throws), signs in with `corral dashboard`'s link and
#      captures each view at 1400x900 once its content is in: overview, errors, logs,
#      traffic, tools, events, and the overview and logs in dark mode,
#   5. stops the daemon and removes the copy.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-$repo/docs/dashboard}")"
target="${CARGO_TARGET_DIR:-$repo/target}"
target="$(realpath -m "$target")"
cd "$repo"
if [ "${CORRAL_SKIP_BUILD:-0}" != 1 ]; then
  cargo build -p corral -p corral-fixture -p corral-bench
fi
corral="$target/debug/corral"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/corral-dashboard-shots.XXXXXX")"
mkdir -p "$tmp/examples"
cp -r "$repo/examples/dashboard" "$tmp/examples/"
rm -rf "$tmp/examples/dashboard/.corral"
ln -s "$target" "$tmp/target"
config="$tmp/examples/dashboard/corral.toml"
stop() {
  "$corral" -c "$config" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap stop EXIT

# A free port for the static site (the proxy's target), chosen by the OS.
CORRAL_EXAMPLE_SITE_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export CORRAL_EXAMPLE_SITE_PORT

"$corral" -c "$config" up -d
# One crash of the flaky server: `crash` fails the call (exit 1) and the server restarts.
"$corral" -c "$config" call flaky crash '{}' >/dev/null 2>&1 || true

mkdir -p "$out"
# The worker's traceback, the flaky server's crash, the page's failed fetch and its two
# browser errors: five incidents before the first view is taken.
"$target/debug/corral-bench" dashboard --screenshots "$out" -c "$config" \
  --min-incidents "${CORRAL_SHOTS_MIN_INCIDENTS:-4}" --logs worker
