#!/usr/bin/env bash
# Manual check with a real grpc-go client (not part of CI): dials a
# registration socket exactly as the kubelet's plugin watcher does
# (grpc.DialContext(socketPath) without an authority, so the socket path
# goes out as :authority), calls GetInfo, then NotifyRegistrationStatus
# with a refusal. Uses Debian's grpc-go (apt-get install golang-go
# golang-google-grpc-dev) in GOPATH mode, so it builds offline.
#
#   bash tests/kubelet-dial-go/run.sh /var/lib/kubelet/plugins_registry/gpu-reg.sock
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/kubeletdial"
cp "$here/main.go" "$work/src/kubeletdial/"
GO111MODULE=off GOFLAGS= GOPATH="$work:/usr/share/gocode" go build -o "$work/kubelet-dial" kubeletdial
"$work/kubelet-dial" "$1"
