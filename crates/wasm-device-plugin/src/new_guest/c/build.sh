#!/usr/bin/env bash
# Builds config/guests/{{name}}.wasm from guest.c: wit-bindgen c generates
# the bindings of wit/world.wit into gen/, clang compiles against wasi-libc
# into a core module, wasm-tools makes it a component (with the WASI
# preview1 reactor adapter).
#
# Each tool comes from its variable (WIT_BINDGEN, WASM_TOOLS, WASI_ADAPTER,
# WASM_CC), else from where `bash guests/polyglot/build.sh` of the
# wasm-device-plugin repository installs it
# (${WDP_POLYGLOT_CACHE:-~/.cache/wdp-polyglot}), else from PATH.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

CACHE="${WDP_POLYGLOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wdp-polyglot}"
tool() { # name cached-path
  if [ -x "$2" ]; then echo "$2"; else command -v "$1" || true; fi
}
wit_bindgen="${WIT_BINDGEN:-$(tool wit-bindgen "$CACHE/cargo/bin/wit-bindgen")}"
wasm_tools="${WASM_TOOLS:-$(tool wasm-tools "$CACHE/venv/bin/wasm-tools")}"
adapter="${WASI_ADAPTER:-$(ls "$CACHE"/adapter-*/wasi_snapshot_preview1.reactor.wasm 2>/dev/null | sort -V | tail -n1)}"
cc="${WASM_CC:-$(command -v clang || true)}"

missing=()
[ -n "$wit_bindgen" ] || missing+=("wit-bindgen (wit-bindgen-cli 0.63.0, C generator)")
[ -n "$wasm_tools" ] || missing+=("wasm-tools")
[ -n "$adapter" ] && [ -f "$adapter" ] || missing+=("the WASI preview1 reactor adapter (wasi_snapshot_preview1.reactor.wasm)")
[ -n "$cc" ] || missing+=("clang")
if [ ${#missing[@]} -gt 0 ]; then
  {
    echo "error: missing: ${missing[*]}."
    echo "Install the C toolchain as docs/guests/c.md of wasm-device-plugin explains"
    echo "(\`bash guests/polyglot/build.sh\` in the wasm-device-plugin repository installs"
    echo "all of it, under $CACHE), then run this script again."
  } >&2
  exit 1
fi

rm -rf gen
mkdir -p gen config/guests
"$wit_bindgen" c wit --world guest --out-dir gen >gen/wit-bindgen.log 2>&1 ||
  { cat gen/wit-bindgen.log >&2; exit 1; }
# wasm32-wasi: the target name clang 14 (Debian bookworm) knows.
if ! "$cc" --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Wno-unused-function \
  -I gen -o gen/{{name}}.core.wasm guest.c gen/guest.c gen/guest_component_type.o \
  -Wl,--strip-all; then
  echo "error: $cc could not build for wasm32-wasi (wasi-libc and the wasm32" \
    "compiler builtins are needed too: docs/guests/c.md of wasm-device-plugin)" >&2
  exit 1
fi
"$wasm_tools" component new gen/{{name}}.core.wasm \
  --adapt "wasi_snapshot_preview1=$adapter" -o config/guests/{{name}}.wasm.tmp
mv config/guests/{{name}}.wasm.tmp config/guests/{{name}}.wasm
echo "built config/guests/{{name}}.wasm ($(wc -c <config/guests/{{name}}.wasm) bytes)"
