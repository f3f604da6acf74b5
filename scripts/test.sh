#!/usr/bin/env bash
# The whole test set-up and run, on a fresh machine:
#   1. installs the real peers (scripts/install-peers.sh): MCP servers and the conformance
#      suite (npm + PyPI), Vite with React (npm) and FastAPI with uvicorn (PyPI) into .peers/
#      (git-ignored), and Debian's chromium and nginx-light (apt-get, as root or through
#      passwordless sudo) when missing,
#   2. builds every binary (the tests drive the real `corral` and `corral-fixture`),
#   3. runs every test with cargo-nextest, then the documentation examples (falls back
#      to `cargo test`, which runs both, without it),
#   4. fuzzes each fuzz target for 10 s (scripts/fuzz.sh; installs cargo-fuzz when
#      missing; CORRAL_SKIP_FUZZ=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-peers.sh
cargo build --workspace --bins --locked
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
  # nextest does not run documentation examples.
  cargo test --workspace --locked --doc
else
  # One test at a time: process-tree checks look at the test process's children.
  cargo test --workspace --locked --no-fail-fast -- --test-threads=1
fi
if [ "${CORRAL_SKIP_FUZZ:-0}" != 1 ]; then
  ./scripts/fuzz.sh
fi
