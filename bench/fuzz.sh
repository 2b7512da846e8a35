#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets) for SECONDS each, one after another,
# at the lowest CPU priority. Each target grows a scratch corpus in
# target/fuzz/<target>/corpus (seeded from fuzz/corpus/<target>, which it never writes),
# kept between runs so that a later run starts from what an earlier one found; libFuzzer's
# log goes to target/fuzz/<target>/log and a crashing input to target/fuzz/<target>/artifacts.
#
# Output, one line per target: how many inputs it ran (libFuzzer's final
# stat::number_of_executed_units) and its crashes: 0, or the paths of the inputs that
# crashed, leaked, ran out of memory or timed out (libFuzzer stops a target at its first;
# reproduce one with `cargo +nightly fuzz run TARGET PATH`). Exits 1 if any target crashed.
#
# Needs nightly and cargo-fuzz (`cargo install cargo-fuzz`). Usage:
# bench/fuzz.sh [SECONDS [TARGET...]] (default 600 s, every target).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
nice -n 19 cargo +nightly fuzz build
if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

# One target: fuzz it, then print its line; returns 1 if it crashed.
fuzz_one() {
  local t=$1 dir=target/fuzz/$1
  mkdir -p "$dir/corpus"
  rm -rf "$dir/artifacts" && mkdir -p "$dir/artifacts"
  # -timeout: an input that takes 10 s is a hang, reported like a crash.
  nice -n 19 cargo +nightly fuzz run "$t" "$dir/corpus" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1 || true
  local runs crashes
  # The final stats, else the last "#N" status line (a crash may cut the stats short).
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log" | grep -o '[0-9]*$' |
    tail -1 || true)
  [[ -n $runs ]] || runs=$(grep -o '^#[0-9]*' "$dir/log" | tr -d '#' | tail -1 || true)
  if [[ -z $runs ]]; then
    printf '%-16s did not run: see %s\n' "$t" "$dir/log"
    return 1
  fi
  crashes=$(find "$dir/artifacts" -type f | sort | tr '\n' ' ')
  printf '%-16s inputs run: %-12s crashes: %s\n' "$t" "$runs" "${crashes:-0}"
  [[ -z $crashes ]]
}

failed=0
for t in "${targets[@]}"; do
  fuzz_one "$t" || failed=1
done
exit "$failed"
