#!/usr/bin/env bash
# Fuzzes every decoder target in fuzz/ (cargo-fuzz, libFuzzer) for SECONDS each (default 60) and
# prints target -> executions. Exits non-zero when any target crashes, leaks past the RSS limit
# or runs one input past the timeout; the input that did it is left in fuzz/artifacts/<target>/.
#
#   tests/fuzz.sh [SECONDS]
#
# Needs the nightly toolchain (`cargo +nightly`; HAMI_FUZZ_TOOLCHAIN names another) and
# cargo-fuzz (installed here when missing). HAMI_FUZZ_TARGET_DIR (default fuzz/target) is where
# the instrumented build, the grown corpus and the logs go: point it outside the checkout to keep
# the build between clones. HAMI_FUZZ_BUILD_BUDGET=SECONDS bounds the build: past it, what was
# built so far stays there for the next run and this run uses the fallback below.
# Without them it says so and runs the stable property-test fallback (tests/bad_input.rs, the
# same drive functions) with a large case count instead: HAMI_FUZZ_CASES, default 500 per second
# asked for, at least 5000.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
[[ "$secs" =~ ^[0-9]+$ ]] || { echo "usage: tests/fuzz.sh [SECONDS]" >&2; exit 2; }
export PATH="$HOME/.cargo/bin:$PATH"
tc=+${HAMI_FUZZ_TOOLCHAIN:-nightly}
targets=(node_register pod_devices mig_allocations node_lock extender_args admission_review device_config cluster_objects)

fallback() {
  local cases=${HAMI_FUZZ_CASES:-$(( secs * 500 > 5000 ? secs * 500 : 5000 ))}
  {
    echo "################################################################################"
    echo "## tests/fuzz.sh: $1"
    echo "## NOT FUZZING. Running the proptest fallback instead:"
    echo "##   HAMI_FUZZ_CASES=$cases cargo test --release --test bad_input fuzz_fallback"
    echo "################################################################################"
  } >&2
  HAMI_FUZZ_CASES=$cases cargo test --release --test bad_input fuzz_fallback -- --test-threads=2
  local rc=$?
  ((rc == 0)) || echo "tests/fuzz.sh: the proptest fallback FAILED (exit $rc)" >&2
  exit "$rc"
}

if ! cargo "$tc" --version >/dev/null 2>&1; then
  fallback "the ${tc#+} toolchain is not installed (rustup toolchain install ${tc#+})"
fi
if ! cargo "$tc" fuzz --version >/dev/null 2>&1; then
  echo "tests/fuzz.sh: installing cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
  cargo install cargo-fuzz --locked >&2 || fallback "cargo-fuzz could not be installed"
fi

tdir=${HAMI_FUZZ_TARGET_DIR:-$PWD/fuzz/target}
mkdir -p "$tdir"
budget=${HAMI_FUZZ_BUILD_BUDGET:-0}
echo "=== building the fuzz targets (cargo $tc fuzz build --target-dir $tdir)"
if ((budget > 0)); then
  timeout "$budget" cargo "$tc" fuzz build --target-dir "$tdir" >&2
  rc=$?
  ((rc == 124)) && fallback "the fuzz build did not finish within ${budget}s (what was built is kept in $tdir for the next run)"
  ((rc == 0)) || fallback "the fuzz targets do not build with ${tc#+}"
else
  cargo "$tc" fuzz build --target-dir "$tdir" >&2 || fallback "the fuzz targets do not build with ${tc#+}"
fi

logs=$tdir/fuzz-logs
work=$tdir/fuzz-corpus
bins=$tdir/$(rustc "$tc" -vV | sed -n 's/^host: //p')/release
mkdir -p "$logs"
# As cargo-fuzz runs them (its runs rebuild first; these run what was just built).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0}
declare -A execs result
failed=0
for t in "${targets[@]}"; do
  mkdir -p "$work/$t" "fuzz/artifacts/$t"
  echo "=== $t: ${secs}s"
  # New inputs go to the scratch corpus (first directory); the tracked seeds are only read.
  "$bins/$t" "$work/$t" "$PWD/fuzz/corpus/$t" \
    -max_total_time="$secs" -max_len=1048576 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$PWD/fuzz/artifacts/$t/" >"$logs/$t.log" 2>&1
  rc=$?
  n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$t.log" | tail -1 | grep -o '[0-9]*$')
  [[ -n "$n" ]] || n=$(grep -o '^Done [0-9]* runs' "$logs/$t.log" | tail -1 | grep -o '[0-9][0-9]*')
  execs[$t]=${n:-0}
  if ((rc == 0)); then
    result[$t]=ok
  else
    result[$t]="FAILED (exit $rc, see $logs/$t.log)"
    failed=1
    grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written|out-of-memory|timeout' "$logs/$t.log" | head -20 >&2
  fi
done

echo
printf '%-18s %14s %10s  %s\n' target executions exec/s result
total=0
for t in "${targets[@]}"; do
  per=$(( secs > 0 ? ${execs[$t]} / secs : 0 ))
  printf '%-18s %14s %10s  %s\n' "$t" "${execs[$t]}" "$per" "${result[$t]}"
  total=$(( total + ${execs[$t]} ))
done
printf '%-18s %14s\n' total "$total"
if ((failed)); then
  echo "tests/fuzz.sh: at least one target FAILED" >&2
  exit 1
fi
