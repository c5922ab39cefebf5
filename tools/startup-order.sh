#!/usr/bin/env bash
# Writes crates/wasm-device-plugin/link/startup-order.txt: the functions
# one start of the release binary runs, for the linker to place together
# (crates/wasm-device-plugin/build.rs; docs/performance.md, "Start-up code
# laid out together"). Run it after a dependency or compiler update, when
# the names in the file no longer match (the script prints how many do).
#
# What it does, on x86_64 glibc with valgrind installed (about 20 minutes
# on 2 cores, most of it two fat-LTO links):
#   1. builds the release binary with its symbols kept (`-C strip=none` to
#      the final crate alone keeps cargo's -C metadata, hence the names the
#      shipped build has);
#   2. starts it under callgrind on a scratch host root of N device nodes
#      against a simulated kubelet (crates/testing/kubelet-sim, example
#      one_start): registration, the first listing of N healthy devices, one
#      admission, then SIGTERM and the orderly exit;
#   3. writes every Rust function of the binary the profile saw, in the
#      order callgrind first names them, and prints how many of the names
#      the next link matches.
#
# usage: bash tools/startup-order.sh [N]   (N device nodes, 1024 by default)
set -euo pipefail

cd "$(dirname "$0")/.."
count=${1:-1024}
resource=example.com/acc
order=crates/wasm-device-plugin/link/startup-order.txt
command -v valgrind >/dev/null || { echo "startup-order: valgrind is needed" >&2; exit 1; }
[[ "$(rustc -vV | sed -n 's/^host: //p')" == x86_64-unknown-linux-gnu ]] \
  || { echo "startup-order: only the x86_64 glibc build is laid out" >&2; exit 1; }

work=$(mktemp -d)
plugin_pid=
cleanup() {
  [[ -n "$plugin_pid" ]] && kill "$plugin_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "startup-order: building the release binary with its symbols" >&2
cargo rustc --release --locked -p wasm-device-plugin --bin wasm-device-plugin -- -C strip=none
cp target/release/wasm-device-plugin "$work/wasm-device-plugin"
cargo build --locked -p wdp-kubelet-sim --example one_start
stand_in=target/debug/examples/one_start

mkdir -p "$work/host/dev" "$work/config" "$work/device-plugins"
for ((i = 0; i < count; i++)); do
  # Character nodes of a local/experimental major where we may make them;
  # plain files otherwise (discovery lists both).
  mknod "$work/host/dev/acc$i" c 240 "$i" 2>/dev/null || : >"$work/host/dev/acc$i"
done
printf 'version = 1\nresource = "%s"\n\n[[nodes]]\npath = "/dev/acc*"\n' "$resource" \
  >"$work/config/acc.toml"

"$stand_in" "$work/device-plugins" "$resource" "$count" >"$work/stand-in.log" 2>&1 &
stand_in_pid=$!
until grep -q '^serving' "$work/stand-in.log"; do
  kill -0 "$stand_in_pid" 2>/dev/null || { cat "$work/stand-in.log" >&2; exit 1; }
  sleep 0.1
done

echo "startup-order: one start under callgrind ($count devices)" >&2
valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/callgrind.out" \
  "$work/wasm-device-plugin" run --config-dir "$work/config" \
  --device-plugin-dir "$work/device-plugins" --host-root "$work/host" \
  --registration kubelet --metrics-addr 127.0.0.1:0 >"$work/plugin.log" 2>&1 &
plugin_pid=$!
if ! wait "$stand_in_pid"; then
  cat "$work/stand-in.log" "$work/plugin.log" >&2
  exit 1
fi
cat "$work/stand-in.log" >&2
kill -TERM "$plugin_pid"
wait "$plugin_pid" || { cat "$work/plugin.log" >&2; exit 1; }
plugin_pid=

# callgrind names a function once, as `fn=(id) name` (or `cfn=` for a
# callee), and by `(id)` alone afterwards; `ob=`/`cob=` name the object
# the following function lines belong to. Keep the binary's own Rust
# functions (mangled `_ZN…` or `_R…`), each once, in first-named order.
awk -v binary="$work/wasm-device-plugin" '
  function object(rest) {
    if (match(rest, /^\([0-9]+\)/)) {
      id = substr(rest, 2, RLENGTH - 2); rest = substr(rest, RLENGTH + 1); sub(/^ /, "", rest)
      if (rest != "") objects[id] = rest
      return objects[id]
    }
    return rest
  }
  /^ob=/  { fn_object = object(substr($0, 4)); cfn_object = fn_object; next }
  /^cob=/ { cfn_object = object(substr($0, 5)); next }
  /^c?fn=/ {
    is_callee = substr($0, 1, 1) == "c"
    rest = substr($0, is_callee ? 5 : 4)
    in_binary = (is_callee ? cfn_object : fn_object) == binary
    # A `cob=` names the object of the next callee only.
    cfn_object = fn_object
    if (match(rest, /^\([0-9]+\)/)) {
      id = substr(rest, 2, RLENGTH - 2); rest = substr(rest, RLENGTH + 1); sub(/^ /, "", rest)
      if (rest != "") names[id] = rest
      rest = names[id]
    }
    if (in_binary && rest ~ /^_(ZN|R)/ && !(rest in seen)) { seen[rest] = 1; print rest }
  }
' "$work/callgrind.out" >"$work/startup-order.txt"

mkdir -p "$(dirname "$order")"
mv "$work/startup-order.txt" "$order"
defined=$(nm --defined-only "$work/wasm-device-plugin" | awk '{ print $3 }' | sort -u)
matched=$(sort -u "$order" | comm -12 - <(printf '%s\n' "$defined") | wc -l)
echo "startup-order: wrote $order: $(wc -l <"$order") functions, $matched of them defined in the binary" >&2
