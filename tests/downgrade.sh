#!/usr/bin/env bash
# The upgrade-and-rollback e2e test against the previous release's binary:
# builds the previous release from its own source (a git worktree of
# commit PREVIOUS, default below) into target/previous-release/, then runs
# the test `dra_an_upgrade_from_the_previous_release_and_a_rollback_to_it_lose_no_claim`
# (ignored in the plain test run, which has no second binary) with it.
#
#   bash tests/downgrade.sh [PREVIOUS]
#
# The previous release here is fc9f0e5, the last one before the DRA
# checkpoint became forward compatible: the release a rollback from this
# one lands on. It builds in a target folder of its own (about 20 minutes
# on 2 cores the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
previous="${1:-fc9f0e5}"
out="$PWD/target/previous-release"
src="$out/src"
mkdir -p "$out"
if [ ! -d "$src" ]; then
  git worktree add --detach "$src" "$previous"
else
  git -C "$src" checkout -q --detach "$previous"
fi
(cd "$src" && CARGO_TARGET_DIR="$out" cargo build -p wasm-device-plugin --bin wasm-device-plugin)
echo "previous release $(git -C "$src" rev-parse --short HEAD): $out/debug/wasm-device-plugin"
WDP_PREVIOUS_BINARY="$out/debug/wasm-device-plugin" cargo nextest run --workspace --run-ignored only \
  -E 'binary_id(wasm-device-plugin::e2e) & test(dra_an_upgrade_from_the_previous_release_and_a_rollback_to_it_lose_no_claim)'
