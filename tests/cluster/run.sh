#!/usr/bin/env bash
# Builds the upstream Kubernetes control plane from its Go modules
# (tests/cluster/go.mod: kube-apiserver, kube-scheduler,
# kube-controller-manager and etcd, as one binary, wdp-cluster; the kubelet;
# containerd from tests/cluster/runtime/go.mod) and runs the cluster tests
# (tests/cluster/*.rs) against them. README.md here says
# what each tier proves.
#
#   bash tests/cluster/run.sh [nextest arguments: a test-name substring narrows it]
#
# Needs Go (1.26 or later) and the Go module proxy on the first run; the
# module and build caches are Go's own (`go env GOMODCACHE GOCACHE`, under
# $HOME), outside the clone, so a second run only links. kubectl (1.37, for
# applying manifests and asking the server's authorizer) and the manifests
# rendered from deploy/ come from deploy/validate.sh, run here unless
# WDP_DEPLOY_RENDERED=1 says it just ran (CI). The example guests must be
# built (bash guests/build.sh && bash guests/polyglot/build.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf 'cluster/run.sh: %s\n' "$*" >&2; }

[ -n "${WDP_CLUSTER_BIN:-}" ] || command -v go >/dev/null 2>&1 || { log "error: go is not installed (Go 1.26 or later)"; exit 1; }
for guest in gpu-partitions c-sriov presence-health allocate-shaper; do
  [ -f "config/guests/$guest.wasm" ] || {
    log "error: config/guests/$guest.wasm is missing: run bash guests/build.sh && bash guests/polyglot/build.sh"
    exit 1
  }
done

out="$PWD/target/cluster"
mkdir -p "$out"
if [ -n "${WDP_CLUSTER_BIN:-}" ]; then
  [ -x "$WDP_CLUSTER_BIN" ] || { log "error: WDP_CLUSTER_BIN=$WDP_CLUSTER_BIN is not an executable"; exit 1; }
  log "using $WDP_CLUSTER_BIN (built already)"
else
  started=$SECONDS
  log "building wdp-cluster ($(go version | cut -d' ' -f3), k8s.io/kubernetes $(grep -m1 'k8s.io/kubernetes v' tests/cluster/go.mod | awk '{print $2}'))"
  (cd tests/cluster && go build -trimpath -ldflags='-s -w' -o "$out/wdp-cluster" ./cmd/wdp-cluster)
  log "wdp-cluster built in $((SECONDS - started)) s"
  WDP_CLUSTER_BIN="$out/wdp-cluster"
  # Tier 3: the kubelet (this module) and containerd, its shim and ctr (a
  # module of their own, runtime/: containerd 2.2 needs containerd/api
  # v1.10, which k8s 1.37's graph moves on).
  started=$SECONDS
  (cd tests/cluster && go build -trimpath -ldflags='-s -w' -o "$out/kubelet" ./cmd/kubelet)
  (cd tests/cluster/runtime && for c in containerd containerd-shim-runc-v2 ctr; do
    go build -trimpath -ldflags='-s -w' -o "$out/$c" "./cmd/$c"
  done)
  log "kubelet and containerd built in $((SECONDS - started)) s"
fi
export WDP_NODE_BIN_DIR="${WDP_NODE_BIN_DIR:-$(dirname "$WDP_CLUSTER_BIN")}"

# Tier 3 needs root (containerd and the kubelet mount and make cgroups),
# runc, and its images (a static pause and workload, built here). Where it
# cannot run it is left out, loudly, never passed.
filter='binary_id(wasm-device-plugin::cluster)'
if [ "$(id -u)" != 0 ] || ! { command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ]; }; then
  log "TIER 3 LEFT OUT (a real kubelet): needs root and runc (apt-get install runc musl-tools)"
  filter="$filter and not test(/^kubelet::/)"
else
  bash tests/cluster/images/build.sh "$WDP_NODE_BIN_DIR/images"
fi

if [ "${WDP_DEPLOY_RENDERED:-0}" != 1 ]; then
  bash deploy/validate.sh >"$out/validate.log" 2>&1 || { cat "$out/validate.log"; exit 1; }
fi
cache="${WDP_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wasm-device-plugin-deploy}"

export WDP_CLUSTER_BIN
export WDP_KUBECTL="$cache/venv/bin/kubectl"
export WDP_DEPLOY_OUT="${WDP_DEPLOY_OUT:-$PWD/target/deploy}"
started=$SECONDS
# `--workspace`, as the README's test command: the same feature set, so the
# test binaries it built are reused.
cargo nextest run --workspace --run-ignored only --no-fail-fast -E "$filter" "$@"
log "cluster tests ran in $((SECONDS - started)) s"
