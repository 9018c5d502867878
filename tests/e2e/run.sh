#!/usr/bin/env bash
# End-to-end tests of hami-rs against a real etcd, kube-apiserver and kube-scheduler, with a fake
# device plugin (hami-loadtest fake-plugin) in place of the kubelet side.
#
#   tests/e2e/run.sh                 # every scenario
#   tests/e2e/run.sh kill_9          # only tests whose name contains "kill_9"
#
# Steps:
#   1. tests/e2e/build-bins.sh builds etcd, kube-apiserver and kube-scheduler from their Go modules
#      once (Go 1.24+ and the Go module proxy needed; cached under ~/.cache/hami-rs, so later runs
#      skip this);
#   2. cargo test --features e2e --test e2e -- --test-threads=1 --nocapture [FILTER]
#      (each test starts its own control plane on free loopback ports; one at a time keeps the
#      load, and the timings they print, comparable).
# Also needed: openssl, curl, and unshare (util-linux, run as root) for the leader-election test.
# Env: HAMI_E2E_KEEP=1 keeps each test's directory (logs, PKI, kubeconfigs); a failing test always
# keeps it and prints the tail of every process log. HAMI_E2E_RUST_LOG sets hami-rs's RUST_LOG.
# Exits non-zero when a build or a test fails; prints the wall time either way.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
start=$(date +%s)
report() { echo "e2e: wall time $(( $(date +%s) - start )) s (exit $1)"; }

bin=$("$here/build-bins.sh" | tail -n 1) || { s=$?; echo "e2e: building the control-plane binaries failed" >&2; report "$s"; exit "$s"; }
echo "e2e: control-plane binaries in $bin"

cd "$repo"
status=0
cargo test --features e2e --test e2e -- --test-threads=1 --nocapture "$@" || status=$?
report "$status"
exit "$status"
