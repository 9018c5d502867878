#!/usr/bin/env bash
# Soak: drives `hami-rs serve --cluster-file` with the load generator for a fixed time and fails
# when the scheduler's resident set passes a ceiling, grows after warm-up, or a device ends up
# over-committed. The load is filter-only with a short reservation TTL, so reservations are made
# and expire all the time (every pod is new), which is what a leak in the per-pod state would show.
#
#   tests/soak.sh [DURATION]          # default 10m
#
# Env: SOAK_CEILING_MIB (default 512) is the RSS ceiling; SOAK_GROWTH_PCT (default 10) is the
# growth allowed from the middle of the run (the first half is the warm-up) to the end; SOAK_OUT
# (default a temporary directory) keeps the JSON report. Needs the release binaries (cargo build --release --bins).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10m}
ceiling=${SOAK_CEILING_MIB:-512}
growth=${SOAK_GROWTH_PCT:-10}
out=${SOAK_OUT:-$(mktemp -d)}
mkdir -p "$out"
lt=target/release/hami-loadtest
[[ -x $lt && -x target/release/hami-rs ]] || { echo "soak: build first: cargo build --release --bins" >&2; exit 2; }

echo "soak: $duration, 1000 nodes x 8 GPUs, 20000 running pods, filter-only, reservation TTL 5s"
rc=0
"$lt" run --embedded --nodes 1000 --gpus-per-node 8 --running-pods 20000 \
  --filter-only --concurrency 4 --duration "$duration" --warmup 500 --quiet \
  --hami-rs-arg=--reservation-ttl=5s --hami-rs-log=warn --rss-every 5s \
  --json-out "$out/soak.json" || rc=$?
if ((rc != 0)); then
  echo "soak: the load generator exited $rc (3: a device was over-committed)" >&2
  exit "$rc"
fi

python3 - "$out/soak.json" "$ceiling" "$growth" <<'PY'
import json, sys
report, ceiling, growth = json.load(open(sys.argv[1])), float(sys.argv[2]), float(sys.argv[3])
samples = report["scheduler"]["rss_samples"]
if len(samples) < 6:
    sys.exit(f"soak: only {len(samples)} RSS samples; run longer")
mib = lambda k: k / 1024.0
start, middle, end = samples[0], samples[len(samples) // 2], samples[-1]
warm = middle
peak = max(k for _, k in samples)
errors = report["errors_total"] - report["errors"].get("filter no-fit", 0)
no_fit = report["outcomes"]["no_fit"]
filters = report["outcomes"]["scheduled"] + no_fit
print(f"soak: RSS start {mib(start[1]):.1f} MiB ({start[0]:.0f}s), middle {mib(middle[1]):.1f} MiB "
      f"({middle[0]:.0f}s), end {mib(end[1]):.1f} MiB ({end[0]:.0f}s), peak {mib(peak):.1f} MiB; "
      f"after warm-up ({warm[0]:.0f}s, {mib(warm[1]):.1f} MiB) to end {100.0 * (end[1] - warm[1]) / warm[1]:+.1f}%; "
      f"filters {filters} ({no_fit} no-fit), other errors {errors}, invariant {'ok' if report['invariant_ok'] else 'FAILED'}")
bad = []
if mib(peak) > ceiling:
    bad.append(f"peak RSS {mib(peak):.1f} MiB is over the ceiling of {ceiling:.0f} MiB")
if end[1] > warm[1] * (1 + growth / 100.0):
    bad.append(f"RSS grew {100.0 * (end[1] - warm[1]) / warm[1]:.1f}% after warm-up (allowed {growth:.0f}%)")
if not report["invariant_ok"]:
    bad.append("a device was over-committed")
if errors:
    bad.append(f"{errors} request errors: {report.get('errors')}")
if bad:
    sys.exit("soak: FAILED: " + "; ".join(bad))
PY
