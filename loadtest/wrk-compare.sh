#!/usr/bin/env bash
# hami-rs's filter latency against the null extender, measured the way an outside checker does
# it: wrk with one thread and one connection, POSTing ready /filter bodies (loadtest/wrk/filter.lua).
# `hami-loadtest bodies` writes the cluster file and the bodies (by default kube-scheduler's
# window of candidates and the four shapes). `hami-rs serve --cluster-file` and `hami-loadtest
# null-extender` then run side by side on free loopback ports, and wrk drives them in alternating
# rounds (null, hami-rs, null, hami-rs, ...) after a warmup of each. Each round sends its own slice
# of the bodies. hami-rs sends each body at most once (once=1), so it never sees a pod twice. The
# null extender keeps nothing, so it may send the same slice around several times.
#
#   loadtest/wrk-compare.sh [BODIES FLAGS...] [-- HAMI-RS FLAGS...]
#
# BODIES FLAGS go to `hami-loadtest bodies` (default: --nodes 1000 --gpus-per-node 8
# --running-pods 20000; --pods and --out are set here). HAMI-RS FLAGS go to `hami-rs serve`
# (default: --reservation-ttl=5s. Every filter leaves a reservation that no bind commits, and at
# hami-rs's default of 30 s a run of several thousand filters a second fills the cluster).
# Env: ROUNDS (2), DURATION (seconds per round and target, 10), WARMUP (seconds, 2), PER_ROUND
# (bodies per round, 15000; if hami-rs answers them all before DURATION is up, its round ends
# early and the script says so), OUT (a directory to keep everything in; default a temporary one,
# removed at the end), HAMI_BIN_DIR (default target/release). Builds nothing: run
# `cargo build --release --bins` first. Needs wrk, curl and python3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin_dir=${HAMI_BIN_DIR:-$repo/target/release}
rounds=${ROUNDS:-2}
duration=${DURATION:-10}
warmup=${WARMUP:-2}
per_round=${PER_ROUND:-15000}
script=$here/wrk/filter.lua
bodies_flags=()
hami_flags=()
while [[ $# -gt 0 && $1 != -- ]]; do bodies_flags+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
hami_flags=("$@")
[[ ${#bodies_flags[@]} -gt 0 ]] || bodies_flags=(--nodes 1000 --gpus-per-node 8 --running-pods 20000)
[[ ${#hami_flags[@]} -gt 0 ]] || hami_flags=(--reservation-ttl=5s)
for b in hami-rs hami-loadtest; do
  [[ -x "$bin_dir/$b" ]] || { echo "wrk-compare: $bin_dir/$b missing (cargo build --release --bins)" >&2; exit 1; }
done
for t in wrk curl python3; do
  command -v "$t" >/dev/null || { echo "wrk-compare: $t is not installed" >&2; exit 1; }
done

if [[ -n ${OUT:-} ]]; then
  dir=$OUT
  mkdir -p "$dir"
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/hami-wrk-compare.XXXXXX")
fi
null_pid=
hami_pid=
cleanup() {
  [[ -n $null_pid ]] && kill "$null_pid" 2>/dev/null || true
  [[ -n $hami_pid ]] && kill "$hami_pid" 2>/dev/null || true
  [[ -n ${OUT:-} ]] || rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() { # NAME PORT PID LOG
  for _ in $(seq 1 1500); do
    curl -fsS "http://127.0.0.1:$2/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.2
  done
  echo "wrk-compare: $1 did not get ready; last log lines:" >&2
  tail -20 "$4" >&2
  exit 1
}
# VmRSS and VmHWM of a process, in MiB.
memory() { awk '/^VmRSS:/ { rss = $2 } /^VmHWM:/ { hwm = $2 } END { printf "RSS %.1f MiB, peak (VmHWM) %.1f MiB", rss / 1024, hwm / 1024 }' "/proc/$1/status"; }

total=$(((rounds + 1) * per_round))
echo "wrk-compare: writing the cluster and $total bodies (${bodies_flags[*]}) into $dir…" >&2
"$bin_dir/hami-loadtest" bodies --out "$dir" --pods "$total" "${bodies_flags[@]}"

null_port=$(free_port)
"$bin_dir/hami-loadtest" null-extender --listen "127.0.0.1:$null_port" > "$dir/null.log" 2>&1 &
null_pid=$!
hami_port=$(free_port)
metrics_port=$(free_port)
"$bin_dir/hami-rs" serve --cluster-file "$dir/cluster.json" --http_bind "127.0.0.1:$hami_port" \
  --metrics-bind-address "127.0.0.1:$metrics_port" "${hami_flags[@]}" > "$dir/hami-rs.log" 2>&1 &
hami_pid=$!
wait_ready null-extender "$null_port" "$null_pid" "$dir/null.log"
wait_ready hami-rs "$hami_port" "$hami_pid" "$dir/hami-rs.log"
mem_ready=$(memory "$hami_pid")

# drive WHO SLICE SECONDS LABEL: wrk against one target with slice SLICE of the bodies.
drive() {
  local port=$null_port extra=()
  if [[ $1 == hami-rs ]]; then port=$hami_port; extra=(once=1); fi
  wrk -t1 -c1 -d"$3"s --latency -s "$script" "http://127.0.0.1:$port" -- "$dir/bodies.jsonl" \
    first=$(($2 * per_round)) count="$per_round" quantiles="$dir/q-$4.txt" "${extra[@]}" > "$dir/wrk-$4.txt" 2>&1 \
    || { cat "$dir/wrk-$4.txt" >&2; exit 1; }
  printf '%-16s %s\n' "$4" "$(grep '^filter.lua: requests' "$dir/wrk-$4.txt" | cut -d' ' -f2-)"
}

echo "== wrk-compare: wrk -t1 -c1 POST /filter, warmup ${warmup}s, $rounds rounds x ${duration}s, hami-rs ${hami_flags[*]}"
drive null 0 "$warmup" warmup-null > /dev/null
drive hami-rs 0 "$warmup" warmup-hami-rs > /dev/null
for r in $(seq 1 "$rounds"); do
  drive null "$r" "$duration" "null-$r"
  drive hami-rs "$r" "$duration" "hami-rs-$r"
done
mem_end=$(memory "$hami_pid")
grep -h '^filter.lua: first answer' "$dir"/wrk-hami-rs-*.txt | head -1 || true

python3 - "$dir" "$rounds" "$per_round" <<'PY'
import sys
d, rounds, per_round = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def read(name):
    points, top, n = [], 0, 0
    for line in open(f"{d}/q-{name}.txt"):
        k, v = line.split()
        if k == "max":
            top = int(v)
        elif k == "requests":
            n = int(v)
        else:
            points.append(int(v))
    return points, top, n

def fields(name):
    line = next(l for l in open(f"{d}/wrk-{name}.txt") if l.startswith("filter.lua: requests"))
    return dict(kv.split("=") for kv in line.split()[1:])

def pooled(who):
    # Each round's 1000 quantile midpoints stand for 0.1 % of its requests each.
    weighted, top, total = [], 0, 0
    for r in range(1, rounds + 1):
        points, m, n = read(f"{who}-{r}")
        weighted += [(v, n / len(points)) for v in points]
        top, total = max(top, m), total + n
    weighted.sort()
    def q(p):
        acc = 0.0
        for v, w in weighted:
            acc += w
            if acc >= p * total:
                return v
        return weighted[-1][0]
    return total, [q(0.5), q(0.9), q(0.99), q(0.999), top]

ms = lambda us: f"{us / 1000:.3f}ms"
print(f"{'':10}{'requests':>10}{'p50':>11}{'p90':>11}{'p99':>11}{'p99.9':>11}{'max':>11}")
rows = {w: pooled(w) for w in ("hami-rs", "null")}
for w, (n, qs) in rows.items():
    print(f"{w:10}{n:>10}" + "".join(f"{ms(v):>11}" for v in qs))
print(f"{'ratio':10}{'':>10}" + "".join(f"{h / max(n, 1):>10.2f}x" for h, n in zip(rows["hami-rs"][1], rows["null"][1])))
for w in ("hami-rs", "null"):
    tot = {k: 0 for k in ("chosen", "nofit", "error", "non200", "repeated")}
    for r in range(1, rounds + 1):
        f = fields(f"{w}-{r}")
        for k in tot:
            tot[k] += int(f[k])
    print(f"answers   {w}: a node {tot['chosen']}, no node {tot['nofit']}, error {tot['error']}, "
          f"http errors {tot['non200']}, bodies sent again {tot['repeated']}")
short = [r for r in range(1, rounds + 1) if int(fields(f"hami-rs-{r}")["requests"]) >= per_round]
if short:
    print(f"note      hami-rs answered all {per_round} bodies of round(s) {short} before the round's time "
          f"was up (each pod is sent once); raise PER_ROUND for full rounds")
PY
echo "hami-rs   ready: $mem_ready; end: $mem_end"
[[ -n ${OUT:-} ]] && echo "kept $dir" >&2 || true
