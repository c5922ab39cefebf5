#!/usr/bin/env bash
# Build the wasm-device-plugin container image without a container engine and
# without pulling any base image:
#
#   deploy/build-image.sh [OUTPUT]      # default: target/image/wasm-device-plugin.oci.tar
#   deploy/build-image.sh --rootfs DIR  # only lay out the root filesystem in DIR
#                                       # (deploy/Containerfile uses this)
#
# 1. builds the example guests (guests/build.sh when the repository has it;
#    otherwise the cargo build below places them in config/guests/);
# 2. builds a statically linked release binary for x86_64-unknown-linux-musl
#    with musl's own allocator, which needs no environment to keep its heap
#    small (mimalloc, the feature `mimalloc`, held 4-8x the memory: figures
#    in docs/performance.md, "Memory of the image's binary");
# 3. lays out the image's root filesystem: the binary at
#    /usr/local/bin/wasm-device-plugin, the shipped config/ with its guests at
#    /etc/wasm-device-plugin/config, an empty /tmp, nothing else (FROM scratch);
# 4. writes it as a one-layer OCI image archive (deploy/oci-image.py, Python's
#    standard library only). Load it with `podman load -i OUTPUT`,
#    `skopeo copy oci-archive:OUTPUT docker://REGISTRY/wasm-device-plugin:TAG`
#    or `ctr -n k8s.io images import OUTPUT`.
#
# The archive is reproducible: the same sources and toolchain give the same
# bytes (timestamps come from SOURCE_DATE_EPOCH, default the last commit's).
#
# Environment: IMAGE_PROFILE (default release: fat LTO, what a release
# publishes; CI sets quick, the same binary unoptimised, built in a
# fraction of the time, to check the image's layout and that its binary
# starts and serves), CARGO_TARGET_DIR (honoured), IMAGE_TAG (default
# wasm-device-plugin:<crate version>), SOURCE_DATE_EPOCH.
set -euo pipefail

DEPLOY_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname -- "$DEPLOY_DIR")"
cd "$REPO_DIR"

TARGET=x86_64-unknown-linux-musl
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_DIR/target}"
ROOTFS_ONLY=""
if [ "${1:-}" = "--rootfs" ]; then
  [ -n "${2:-}" ] || { echo "usage: $0 [OUTPUT] | --rootfs DIR" >&2; exit 2; }
  ROOTFS_ONLY="$2"
fi
OUTPUT="${1:-$REPO_DIR/target/image/wasm-device-plugin.oci.tar}"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
IMAGE_TAG="${IMAGE_TAG:-wasm-device-plugin:$VERSION}"
PROFILE="${IMAGE_PROFILE:-release}"
# Only for the archive's timestamps: exported, it would reach cargo, and
# build scripts that watch it would rebuild at every commit.
EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"

log() { printf 'build-image.sh: %s\n' "$*" >&2; }
die() { printf 'build-image.sh: error: %s\n' "$*" >&2; exit 1; }

# --- toolchain (idempotent) ----------------------------------------------------
bash tools/toolchain.sh "$TARGET" >/dev/null
# The C and assembly parts of dependencies (ring, psm, wasmtime's fibers)
# are compiled for musl with musl-gcc.
if ! command -v musl-gcc >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "musl-gcc is missing: install musl-tools"
  log "installing Debian's musl-tools"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null
fi

# --- guests and binary ---------------------------------------------------------
if [ -f guests/build.sh ]; then
  log "building the example guests (guests/build.sh)"
  bash guests/build.sh
fi
log "building the static binary (profile $PROFILE, $TARGET, without the demo and its test doubles)"
# `demo` (the simulated kubelet and the in-process API server it runs
# against) is a default feature for `cargo run`; the image's binary leaves
# it out. No `mimalloc` either: musl's allocator (issue 52; CI checks the
# binary's idle RSS and a reload storm against a budget, tools/image-memory.py).
cargo build --profile "$PROFILE" --locked --target "$TARGET" -p wasm-device-plugin --no-default-features
BIN="$TARGET_DIR/$TARGET/$PROFILE/wasm-device-plugin"
[ -x "$BIN" ] || die "$BIN was not built"

# FROM scratch has no loader and no libraries: the binary must need neither.
if readelf -lW "$BIN" | grep -q 'Requesting program interpreter'; then
  die "$BIN asks for a program interpreter: not a static binary"
fi
if readelf -dW "$BIN" | grep -q '(NEEDED)'; then
  die "$BIN needs shared libraries: $(readelf -dW "$BIN" | grep '(NEEDED)' | tr -s ' ')"
fi

# Every guest the shipped config names must be there.
missing=()
while IFS= read -r guest; do
  [ -f "config/$guest" ] || missing+=("config/$guest")
done < <(sed -n 's/^[[:space:]]*guest[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' config/*.toml | sort -u)
[ "${#missing[@]}" -eq 0 ] ||
  die "the shipped config names guests that are not built: ${missing[*]} (run bash guests/build.sh or cargo build -p wasm-device-plugin)"

# --- root filesystem -----------------------------------------------------------
if [ -n "$ROOTFS_ONLY" ]; then
  ROOTFS="$ROOTFS_ONLY"
else
  STAGE="$(mktemp -d "${TMPDIR:-/tmp}/wdp-image.XXXXXX")"
  trap 'rm -rf "$STAGE"' EXIT
  ROOTFS="$STAGE/rootfs"
fi
install -d -m 0755 "$ROOTFS/usr/local/bin" "$ROOTFS/etc/wasm-device-plugin/config/guests"
install -m 0755 "$BIN" "$ROOTFS/usr/local/bin/wasm-device-plugin"
install -m 0644 config/*.toml "$ROOTFS/etc/wasm-device-plugin/config/"
if compgen -G 'config/guests/*.wasm' >/dev/null; then
  install -m 0644 config/guests/*.wasm "$ROOTFS/etc/wasm-device-plugin/config/guests/"
fi
# Mount points the DaemonSet uses; an empty /tmp for runs without one.
install -d -m 0755 "$ROOTFS/host" "$ROOTFS/var/lib/kubelet/device-plugins"
install -d -m 1777 "$ROOTFS/tmp"
if [ -n "$ROOTFS_ONLY" ]; then
  log "root filesystem laid out in $ROOTFS"
  exit 0
fi

log "assembling the OCI archive $OUTPUT ($IMAGE_TAG)"
python3 "$DEPLOY_DIR/oci-image.py" pack \
  --rootfs "$ROOTFS" \
  --output "$OUTPUT" \
  --tag "$IMAGE_TAG" \
  --epoch "$EPOCH" \
  --entrypoint '["/usr/local/bin/wasm-device-plugin"]' \
  --cmd '["run","--config-dir","/etc/wasm-device-plugin/config","--host-root","/host","--metrics-addr","0.0.0.0:9847"]' \
  --expose 9847/tcp \
  --label org.opencontainers.image.title=wasm-device-plugin \
  --label "org.opencontainers.image.description=Kubernetes device plugin with per-device policy in WebAssembly components" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
