#!/usr/bin/env bash
# Filter and bind latency of hami-rs reading a real API server (hami-loadtest run --kubeconfig)
# against the same load on the embedded in-memory cluster (run --embedded), on one machine, one
# after the other. The control plane is the end-to-end suite's (tests/e2e/control-plane.sh:
# etcd and kube-apiserver built from their Go modules, cached under ~/.cache/hami-rs).
#
#   loadtest/kube-vs-embedded.sh [LOAD FLAGS...] [-- HAMI-RS FLAGS...]
#
# LOAD FLAGS go to both runs (default: --nodes 100 --gpus-per-node 8 --running-pods 1000
# --concurrency 4 --pods 2000 --warmup 100); HAMI-RS FLAGS to both hami-rs processes (default:
# --decision-write=bind, the chart's). Binaries: $HAMI_BIN_DIR (default target/release; build
# with `cargo build --release --bins`). Prints each run's report, then the two filter p50s.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin_dir=${HAMI_BIN_DIR:-$repo/target/release}
load=()
hami=()
while [[ $# -gt 0 && $1 != -- ]]; do load+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
hami=("$@")
[[ ${#load[@]} -gt 0 ]] || load=(--nodes 100 --gpus-per-node 8 --running-pods 1000 --concurrency 4 --pods 2000 --warmup 100)
[[ ${#hami[@]} -gt 0 ]] || hami=(--decision-write=bind)
for b in hami-rs hami-loadtest; do
  [[ -x "$bin_dir/$b" ]] || { echo "kube-vs-embedded: $bin_dir/$b missing (cargo build --release --bins)" >&2; exit 1; }
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/hami-kube-vs-embedded.XXXXXX")
hami_pid=
cleanup() {
  [[ -n $hami_pid ]] && kill "$hami_pid" 2>/dev/null || true
  "$repo/tests/e2e/control-plane.sh" stop "$dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HAMI_E2E_ETCD_PORT=$(free_port) HAMI_E2E_APISERVER_PORT=$(free_port) \
  "$repo/tests/e2e/control-plane.sh" start "$dir" >/dev/null

port=$(free_port)
metrics=$(free_port)
KUBECONFIG=$dir/admin.kubeconfig RUST_LOG=warn "$bin_dir/hami-rs" serve \
  --http_bind "127.0.0.1:$port" --metrics-bind-address "127.0.0.1:$metrics" \
  --scheduler-name hami-scheduler "${hami[@]}" > "$dir/logs/hami-rs.log" 2>&1 &
hami_pid=$!
for _ in $(seq 1 150); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null || { tail -20 "$dir/logs/hami-rs.log" >&2; exit 1; }

echo "== kubeconfig mode (hami-rs ${hami[*]} reading kube-apiserver)"
"$bin_dir/hami-loadtest" run --kubeconfig "$dir/admin.kubeconfig" --target "http://127.0.0.1:$port" \
  "${load[@]}" --cleanup | tee "$dir/kube.txt"
echo "== embedded mode (hami-rs ${hami[*]} serve --cluster-file)"
hami_args=()
for f in "${hami[@]}"; do hami_args+=("--hami-rs-arg=$f"); done
"$bin_dir/hami-loadtest" run --embedded --hami-rs "$bin_dir/hami-rs" "${hami_args[@]}" "${load[@]}" \
  | tee "$dir/embedded.txt"
p50() { awk '$1 == "filter" { print $4; exit }' "$1"; }
echo "== filter p50: kubeconfig $(p50 "$dir/kube.txt"), embedded $(p50 "$dir/embedded.txt")"
