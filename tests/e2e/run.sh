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
#      skip this), twice: Kubernetes 1.34.2 (HAMI_E2E_K8S_VERSION), which every scenario runs but
#      the native gang's, and 1.37.2 (HAMI_E2E_GANG_K8S_VERSION), whose native PodGroups
#      (scheduling.k8s.io/v1beta1, feature gate GenericWorkload) scenarios x and x2 run on;
#   2. cargo test --features e2e --test e2e --no-run and cargo build -p hami-loadtest (the builds,
#      outside the time box; the fake plugin is the workspace's loadtest crate, which cargo does
#      not build for hami-rs's tests, and the tests run the one beside their hami-rs binary; cargo's
#      CARGO_TARGET_DIR and CARGO_BUILD_JOBS apply, and the tests find both binaries in that target
#      directory);
#   3. cargo test --features e2e --test e2e -- --test-threads=1 --nocapture [FILTER], time-boxed
#      (each test starts its own control plane on free loopback ports; one at a time keeps the
#      load, and the timings they print, comparable). When the box runs out the run is killed
#      and every control plane it started is stopped, with the processes each test started.
# Also needed: openssl, curl, and unshare (util-linux, run as root) for the leader-election test.
# Env: HAMI_E2E_KEEP=1 keeps each test's directory (logs, PKI, kubeconfigs); a failing test always
# keeps it and prints the tail of every process log. HAMI_E2E_RUST_LOG sets hami-rs's RUST_LOG.
# HAMI_E2E_TIMEOUT: the time box in seconds (default 1200; the whole suite takes about 7 minutes
# on 2 cores). Test directories go under one fresh directory per run ($TMPDIR/hami-e2e-run.*).
# HAMI_E2E_HAMI_BIN and HAMI_E2E_LOADTEST_BIN run other hami-rs and hami-loadtest binaries than
# the debug ones cargo builds with the tests (e.g. target/release/…, for timings). Scenario o
# (throughput, tests/e2e/throughput.rs) runs only with HAMI_E2E_THROUGHPUT=1.
# Exits non-zero when a build or a test fails or the time box runs out (124); prints the wall time
# either way.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
start=$(date +%s)
report() { echo "e2e: wall time $(( $(date +%s) - start )) s (exit $1)"; }

bin=$("$here/build-bins.sh" | tail -n 1) || { s=$?; echo "e2e: building the control-plane binaries failed" >&2; report "$s"; exit "$s"; }
echo "e2e: control-plane binaries in $bin"
gang_version=${HAMI_E2E_GANG_K8S_VERSION:-1.37.2}
gang_bin=$(HAMI_E2E_K8S_VERSION=$gang_version "$here/build-bins.sh" | tail -n 1) \
  || { s=$?; echo "e2e: building the Kubernetes $gang_version control-plane binaries failed" >&2; report "$s"; exit "$s"; }
echo "e2e: control-plane binaries of the native gang scenarios (Kubernetes $gang_version) in $gang_bin"

cd "$repo"
cargo test --features e2e --test e2e --no-run || { s=$?; echo "e2e: building the tests failed" >&2; report "$s"; exit "$s"; }
if [[ -z ${HAMI_E2E_LOADTEST_BIN:-} ]]; then
  cargo build -p hami-loadtest || { s=$?; echo "e2e: building hami-loadtest failed" >&2; report "$s"; exit "$s"; }
fi

box=${HAMI_E2E_TIMEOUT:-1200}
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/hami-e2e-run.XXXXXX")
status=0
TMPDIR=$run_dir timeout --kill-after=20 "$box" \
  cargo test --features e2e --test e2e -- --test-threads=1 --nocapture "$@" || status=$?
if [[ $status -eq 124 || $status -eq 137 ]]; then
  echo "e2e: time box of $box s ran out; stopping what the run left behind" >&2
  for d in "$run_dir"/hami-e2e-*/; do
    d=${d%/}
    [[ -d "$d/pids" ]] || continue
    "$here/control-plane.sh" stop "$d" || true
    echo "e2e: stopped $d (logs in $d/logs)" >&2
  done
  status=124
fi
rmdir "$run_dir" 2>/dev/null || true
report "$status"
exit "$status"
