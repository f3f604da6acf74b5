#!/usr/bin/env bash
# Fuzzes every target in fuzz/ (cargo-fuzz, libFuzzer) for a fixed short time, starting
# from its committed corpus (fuzz/corpus/<target>/), and fails if any target crashes,
# printing the input that reproduces it. scripts/test.sh runs it after the test suite.
#
#   CORRAL_FUZZ_SECONDS   seconds per target (default 10; 9 targets ≈ 90 s of fuzzing)
#   CORRAL_FUZZ_SANITIZER none (default) or address: the targets are safe Rust, where
#                         AddressSanitizer finds nothing the panics do not, and costs a
#                         slower build and about half the executions
#
# cargo-fuzz needs nightly flags (-Z sanitizer coverage); RUSTC_BOOTSTRAP=1 lets the
# stable toolchain take them. cargo-fuzz itself is installed into cargo's bin directory
# when missing, and reused after. New inputs the fuzzer finds go to a temporary
# directory, not into the committed corpus; crashes go to fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${CORRAL_FUZZ_SECONDS:-10}
sanitizer=${CORRAL_FUZZ_SANITIZER:-none}
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

# The same flags for build and run, so that run does not build again: release with
# debug assertions and overflow checks.
flags=(--release --debug-assertions --sanitizer "$sanitizer")

cd fuzz
cargo metadata --locked --format-version 1 >/dev/null # fuzz/Cargo.lock is current
cargo fuzz build "${flags[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
for target in $(cargo fuzz list); do
  mkdir -p "$work/$target" "artifacts/$target"
  echo "fuzz: $target for ${seconds}s"
  if ! cargo fuzz run "${flags[@]}" "$target" "$work/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=1024 \
    -artifact_prefix="artifacts/$target/" -print_final_stats=1 \
    >"$work/$target.log" 2>&1; then
    grep -E -A4 'panicked at|==ERROR|SUMMARY|^ERROR' "$work/$target.log" | head -n 40 ||
      tail -n 40 "$work/$target.log"
    find "artifacts/$target" -type f -newer "$work/$target" | while read -r crash; do
      echo "fuzz: $target crashed on fuzz/$crash; reproduce with:"
      echo "  (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run ${flags[*]} $target $crash)"
    done
    failed+=("$target")
  else
    grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$work/$target.log" | tail -n 1 || true
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: no crash in ${seconds}s per target"
