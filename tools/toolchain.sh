#!/usr/bin/env bash
# Makes the Rust toolchain that rust-toolchain.toml pins usable here, with
# the targets the build needs (wasm32-wasip2 for the guests; the image
# build adds x86_64-unknown-linux-musl itself):
#
#   bash tools/toolchain.sh [TARGET ...]   # more targets: deploy/build-image.sh
#                                          # asks for x86_64-unknown-linux-musl
#
# 1. already installed under the pinned name: nothing to do;
# 2. an installed toolchain of exactly the pinned version (say `stable`
#    being 1.95.0, as on a machine that reaches no Rust mirror) is made
#    reachable under the pinned name: rustup offers no command for that
#    (`toolchain link` refuses channel names), so it is a symlink in
#    rustup's toolchains folder;
# 3. otherwise rustup installs it (this needs static.rust-lang.org).
#
# The README's commands and CI run this first. It checks, too, that the
# workspace's declared MSRV (`rust-version`) is the pinned version: the
# one toolchain every build and test here runs with.
set -euo pipefail
cd "$(dirname "$0")/.."

channel="$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)"
msrv="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
[ -n "$channel" ] || { echo "toolchain.sh: no channel in rust-toolchain.toml" >&2; exit 1; }
if [ "$msrv" != "$channel" ] && [ "$msrv.0" != "$channel" ]; then
  echo "toolchain.sh: Cargo.toml declares rust-version $msrv but rust-toolchain.toml pins $channel: keep them one version" >&2
  exit 1
fi

rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
version_of() { RUSTUP_TOOLCHAIN="$1" rustc --version 2>/dev/null | awk '{print $2}'; }

if [ "$(version_of "$channel")" != "$channel" ]; then
  found=""
  for toolchain in $(rustup toolchain list 2>/dev/null | awk '{print $1}'); do
    [ "$toolchain" = "$channel" ] && continue
    if [ "$(version_of "$toolchain")" = "$channel" ]; then found="$toolchain"; break; fi
  done
  if [ -n "$found" ]; then
    host="${found#*-}"
    sysroot="$(RUSTUP_TOOLCHAIN="$found" rustc --print sysroot)"
    ln -sfn "$sysroot" "$rustup_home/toolchains/$channel-$host"
    echo "toolchain.sh: $channel is the installed $found; reachable under the pinned name"
  else
    rustup toolchain install "$channel" --profile minimal --component rustfmt,clippy
  fi
fi

# Targets and components go to the toolchain that really holds the files
# (a symlinked one shares them).
sysroot="$(RUSTUP_TOOLCHAIN="$channel" rustc --print sysroot)"
owner="$(basename "$(readlink -f "$sysroot")")"
for target in wasm32-wasip2 "$@"; do
  [ -d "$sysroot/lib/rustlib/$target" ] || rustup target add --toolchain "$owner" "$target"
done
RUSTUP_TOOLCHAIN="$channel" rustfmt --version >/dev/null 2>&1 || rustup component add --toolchain "$owner" rustfmt
RUSTUP_TOOLCHAIN="$channel" cargo clippy --version >/dev/null 2>&1 || rustup component add --toolchain "$owner" clippy
RUSTUP_TOOLCHAIN="$channel" rustc --version
