#!/usr/bin/env bash
# Builds config/guests/{{name}}.wasm from app.py with componentize-py.
#
# componentize-py comes from $COMPONENTIZE_PY, else from the virtual
# environment that `bash guests/polyglot/build.sh` of the wasm-device-plugin
# repository installs (${WDP_POLYGLOT_CACHE:-~/.cache/wdp-polyglot}/venv),
# else from PATH.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

CACHE="${WDP_POLYGLOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wdp-polyglot}"
componentize="${COMPONENTIZE_PY:-}"
if [ -z "$componentize" ]; then
  if [ -x "$CACHE/venv/bin/componentize-py" ]; then
    componentize="$CACHE/venv/bin/componentize-py"
  else
    componentize="$(command -v componentize-py || true)"
  fi
fi
if [ -z "$componentize" ] || [ ! -x "$componentize" ]; then
  cat >&2 <<MISSING
error: componentize-py not found (not in $CACHE/venv, not on PATH).
Install it as docs/guests/python.md of wasm-device-plugin explains:

    python3 -m venv $CACHE/venv
    $CACHE/venv/bin/pip install componentize-py==0.25.1

(\`bash guests/polyglot/build.sh\` in the wasm-device-plugin repository
installs it there too), then run this script again.
MISSING
  exit 1
fi

mkdir -p config/guests
"$componentize" -d wit -w guest componentize -p . app -o config/guests/{{name}}.wasm.tmp >/dev/null
mv config/guests/{{name}}.wasm.tmp config/guests/{{name}}.wasm
echo "built config/guests/{{name}}.wasm ($(wc -c <config/guests/{{name}}.wasm) bytes)"
