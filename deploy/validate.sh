#!/usr/bin/env bash
# Render every manifest under deploy/ and check it against the Kubernetes
# schemas, without a cluster. Runnable from any directory; safe to rerun.
#
#   deploy/validate.sh
#
# Needs only Debian's and PyPI's package registries, and only on the first
# run (tools are cached):
#   - kubectl for `kubectl kustomize`: the one on PATH if any, else Debian's
#     kubernetes-client is installed. Debian's kubectl (1.20, kustomize
#     v2.0.3) is also unpacked into the cache when the kubectl on PATH is a
#     different one, and both must render the same objects.
#   - a virtualenv with kubernetes-validate (the schemas), helm-python-sdk
#     (Helm's Go SDK, to lint and render the chart) and PyYAML.
#
# Environment:
#   KUBE_VERSIONS    Kubernetes versions to validate against
#                    (default: "1.25.0 1.29.0 1.32.0 1.37.0")
#   WDP_DEPLOY_CACHE where the tools go
#                    (default: ${XDG_CACHE_HOME:-~/.cache}/wasm-device-plugin-deploy)
#   WDP_DEPLOY_OUT   where rendered manifests go (default: <repo>/target/deploy)
set -euo pipefail

DEPLOY_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname -- "$DEPLOY_DIR")"
CACHE="${WDP_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wasm-device-plugin-deploy}"
OUT="${WDP_DEPLOY_OUT:-$REPO_DIR/target/deploy}"
KUBE_VERSIONS="${KUBE_VERSIONS:-1.25.0 1.29.0 1.32.0 1.37.0}"

# Pinned so that a run is repeatable; kubernetes-validate 1.37.0 carries the
# schemas of Kubernetes 1.25 to 1.37.
PY_REQUIREMENTS=(
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

# --- kubectl -----------------------------------------------------------------

if ! command -v kubectl >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 ||
    die "kubectl is missing and apt-get is not available: install kubectl (any version >= 1.20)"
  apt_update_once
  log "installing Debian's kubernetes-client (kubectl)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null ||
    die "apt-get install kubernetes-client failed"
fi
KUBECTL_PATH="$(command -v kubectl)"
path_kubectl_version="$("$KUBECTL_PATH" version --client 2>/dev/null | head -n1 || true)"

# Debian's kubectl is the renderer the project promises to support. If the
# kubectl on PATH is not it, unpack Debian's next to the cache (no install, so
# it cannot clash with the kubectl package that owns /usr/bin/kubectl).
renderers=()
case "$path_kubectl_version" in
  *'GitVersion:"v1.20.'*)
    renderers+=("--kubectl" "debian-1.20=$KUBECTL_PATH")
    ;;
  *)
    renderers+=("--kubectl" "path=$KUBECTL_PATH")
    deb_kubectl="$CACHE/kubernetes-client/usr/bin/kubectl"
    if [ ! -x "$deb_kubectl" ] && command -v apt-get >/dev/null 2>&1; then
      if ! apt-cache show kubernetes-client >/dev/null 2>&1; then apt_update_once; fi
      tmp="$(mktemp -d)"
      if (cd "$tmp" && apt-get download -qq kubernetes-client >/dev/null 2>&1) ||
        { apt_update_once && (cd "$tmp" && apt-get download -qq kubernetes-client >/dev/null 2>&1); }; then
        rm -rf "$CACHE/kubernetes-client"
        mkdir -p "$CACHE/kubernetes-client"
        dpkg-deb -x "$tmp"/kubernetes-client_*.deb "$CACHE/kubernetes-client"
      fi
      rm -rf "$tmp"
    fi
    if [ -x "$deb_kubectl" ]; then
      renderers+=("--kubectl" "debian-1.20=$deb_kubectl")
    elif [ "${CI:-}" = "true" ]; then
      die "could not obtain Debian's kubernetes-client (apt-get download kubernetes-client)"
    else
      log "note: Debian's kubectl not available here; rendering with $KUBECTL_PATH only"
    fi
    ;;
esac

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

# --- render and check --------------------------------------------------------

log "renderers: $(printf '%s ' "${renderers[@]}" | sed 's/--kubectl //g')"
log "Kubernetes versions: $KUBE_VERSIONS"
exec "$VENV/bin/python" "$DEPLOY_DIR/validate.py" \
  --deploy-dir "$DEPLOY_DIR" \
  --out-dir "$OUT" \
  "${renderers[@]}" \
  --kubernetes-validate "$VENV/bin/kubernetes-validate" \
  --versions "$KUBE_VERSIONS"
