#!/usr/bin/env bash
# Builds (once) the real control-plane binaries the end-to-end tests run:
# etcd, kube-apiserver and kube-scheduler, from their published Go modules.
# Binaries are cached outside the repository, keyed by version, so reruns are instant.
# Prints the directory holding the binaries on its last line.
set -euo pipefail

K8S_VERSION=${HAMI_E2E_K8S_VERSION:-1.34.2}
ETCD_VERSION=${HAMI_E2E_ETCD_VERSION:-3.6.16}
CACHE=${HAMI_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hami-rs}
BIN="$CACHE/bin-k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION"

need() { command -v "$1" >/dev/null 2>&1 || { echo "e2e: '$1' is required to build the control plane ($2)" >&2; exit 1; }; }
need go "install Go 1.24 or newer"
need python3 "used to read the Kubernetes go.mod"

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-scheduler" && -x "$BIN/etcd" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$BIN"
export GOFLAGS=-buildvcs=false CGO_ENABLED=0

if [[ ! -x "$BIN/etcd" ]]; then
  w="$CACHE/wrap-etcd-v$ETCD_VERSION"
  mkdir -p "$w" && cd "$w"
  printf 'module local/etcdbin\n\ngo 1.24.0\n' > go.mod
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
  go mod tidy >&2
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" . >&2
fi

if [[ ! -x "$BIN/kube-apiserver" || ! -x "$BIN/kube-scheduler" ]]; then
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  staging="0.${K8S_VERSION#1.}"
  w="$CACHE/wrap-k8s-v$K8S_VERSION"
  mkdir -p "$w" && cd "$w"
  printf 'module local/k8sbins\n\ngo 1.24.0\n\ngodebug default=go1.24\n' > go.mod
  mod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$mod"); do
    go mod edit -replace="$m=$m@v$staging"
  done
  go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-scheduler@v$K8S_VERSION" >&2
  ld="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
  ld="$ld -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  go build -trimpath -ldflags "$ld" -o "$BIN/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler >&2
fi
echo "$BIN"
