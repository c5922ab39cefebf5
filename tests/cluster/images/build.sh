#!/usr/bin/env bash
# Builds the tier-3 images (README.md: a real kubelet) as OCI archives, no
# registry and no engine: a static pause (the pod sandbox) and a static
# workload that prints the device nodes and environment it was given.
#
#   bash tests/cluster/images/build.sh OUT_DIR
#
# Writes OUT_DIR/pause.oci.tar (wdp.test/pause:1) and
# OUT_DIR/workload.oci.tar (wdp.test/workload:1), each imported with
# `ctr -n k8s.io images import`. Needs musl-gcc (Debian's musl-tools) or a
# C compiler that links statically, and python3 (deploy/oci-image.py).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: build.sh OUT_DIR}"
mkdir -p "$out"
cc="${CC:-$(command -v musl-gcc || echo cc)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for name in pause workload; do
  mkdir -p "$work/$name"
  "$cc" -static -Os -Wall -Werror -o "$work/$name/$name" "$here/$name.c"
  strip "$work/$name/$name" 2>/dev/null || true
  python3 "$here/../../../deploy/oci-image.py" pack --rootfs "$work/$name" \
    --output "$out/$name.oci.tar" --tag "wdp.test/$name:1" \
    --entrypoint "[\"/$name\"]" --cmd '[]' --epoch 0
done
