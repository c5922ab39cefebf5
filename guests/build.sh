#!/usr/bin/env bash
# Builds the example policy guests of this folder for wasm32-wasip2 and
# puts them where the shipped configuration refers to them:
#
#   config/guests/<package>.wasm   for each package in EXAMPLES below
#
# Plain `cargo build --release --target wasm32-wasip2` in guests/, with its
# own target folder, target/guests/ at the repository root (the one
# crates/testing/guest-artifacts builds into for the tests, so neither rebuilds
# what the other built). A copy is written only when its content changed,
# so a second run is quick and touches nothing. Runs from any directory;
# extra arguments go to cargo (e.g. --locked).
#
# The polyglot guests (Python, JavaScript, C) have their own script,
# guests/polyglot/build.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
TARGET=wasm32-wasip2
TARGET_DIR="$ROOT/target/guests"
DEST="$ROOT/config/guests"

# The guests the shipped configuration (config/*.toml) uses.
EXAMPLES=(
  pci-filter
  presence-health
  numa-packing
  allocate-shaper
  pre-start-check
  iommu-group
  gpu-partitions
  vfio-guard
)

sysroot="$(rustc --print sysroot)"
if [ ! -d "$sysroot/lib/rustlib/$TARGET" ]; then
  cat >&2 <<EOF
The Rust target $TARGET is not installed (no $sysroot/lib/rustlib/$TARGET).
The policy guests are WebAssembly components built for it. Install it with:

    bash tools/toolchain.sh   # the pinned toolchain with its targets

and run this script again.
EOF
  exit 1
fi

# The host build's settings must not reach the guests' build: flags meant
# for the native binary (e.g. -C target-cpu=native) do not fit wasm32, and
# a different target folder would rebuild everything.
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_BUILD_TARGET_DIR
export CARGO_TARGET_DIR="$TARGET_DIR"

packages=()
for package in "${EXAMPLES[@]}"; do
  packages+=(--package "$package")
done
(cd "$HERE" && cargo build --release --target "$TARGET" "${packages[@]}" "$@")

mkdir -p "$DEST"
for package in "${EXAMPLES[@]}"; do
  built="$TARGET_DIR/$TARGET/release/${package//-/_}.wasm"
  copy="$DEST/$package.wasm"
  if cmp -s "$built" "$copy"; then
    echo "up to date: ${copy#"$ROOT"/}"
  else
    # Write beside the destination, then rename: a host watching config/
    # never reads a half-written guest.
    partial="$DEST/.$package.partial.wasm"
    cp "$built" "$partial"
    mv -f "$partial" "$copy"
    echo "updated:    ${copy#"$ROOT"/}"
  fi
done
