#!/usr/bin/env bash
# Builds config/guests/{{name}}.wasm from guest.js (node build.mjs), after
# installing componentize-js with npm the first time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  cat >&2 <<MISSING
error: node and npm are needed (Node.js 20 or later).
Install them as docs/guests/javascript.md of wasm-device-plugin explains
(Debian: apt-get install nodejs npm; \`bash guests/polyglot/build.sh\` in the
wasm-device-plugin repository installs them too), then run this script again.
MISSING
  exit 1
fi
if [ ! -d node_modules/@bytecodealliance/componentize-js ]; then
  echo "installing componentize-js with npm (once)"
  # `npm install` rather than `npm ci`: npm 11 refuses componentize-js's
  # lock file over optional platform packages that were never published.
  npm install --no-audit --no-fund --loglevel=error
fi
node build.mjs
