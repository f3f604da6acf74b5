#!/usr/bin/env bash
# Checks and lints the workspace for the two macOS targets, from Linux: `cargo check` and
# `cargo clippy -D warnings` with --all-targets for x86_64-apple-darwin and
# aarch64-apple-darwin. Nothing is linked or run (there is no Apple linker or SDK here);
# what this proves is that every line compiled for macOS type-checks and lints clean.
#
# The one C build in the tree for those targets is ring's (rustls' crypto provider).
# Debian's clang compiles it for Apple targets itself; it lacks only Apple's SDK headers,
# so ring is built in its own no-libc-headers mode (RING_CORE_NOSTDLIBINC, the mode ring
# uses for targets without a libc), freestanding, with the one SDK header it includes
# (TargetConditionals.h) given by scripts/apple-check/include. ring's real C and assembly
# for each target are compiled; only the objects are never linked.
#
# Needs: rustup's standard libraries for both targets (scripts/install-peers.sh adds
# them) and clang on PATH (install-peers.sh installs Debian's).
set -euo pipefail
cd "$(dirname "$0")/.."
include="$PWD/scripts/apple-check/include"
for target in x86_64-apple-darwin aarch64-apple-darwin; do
  triple=${target//-/_}
  export "CC_$triple=clang"
  export "CFLAGS_$triple=-ffreestanding -DRING_CORE_NOSTDLIBINC=1 -I$include"
  echo "apple-check: cargo check --target $target" >&2
  cargo check --workspace --all-targets --locked --target "$target"
  echo "apple-check: cargo clippy --target $target" >&2
  cargo clippy --workspace --all-targets --locked --target "$target" -- -D warnings
done
