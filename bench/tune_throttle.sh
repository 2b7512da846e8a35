#!/usr/bin/env bash
# Issue 23's first ground truth, RUNS times: with `noise` at SCHED_FIFO on CPU, RT
# throttling takes about 50 ms of every second, so `tune --step rt-throttling-on` on the
# per-block max must keep the step, the max falling from tens of ms to under 1 ms. Prints
# one line a run (decision, per-block max medians, p) and the count kept; exits 1 unless
# every run kept it. Each run restores the throttle; it takes the measuring lock, so it
# never overlaps a timing test. Root only.
#   bench/tune_throttle.sh [RUNS] [CPU]     (defaults 5, 1)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}; cpu=${2:-1}
cargo build --release -q
bin=./target/release/jitterscope
before=$(cat /proc/sys/kernel/sched_rt_runtime_us)
echo "sched_rt_runtime_us: $before; $(uname -r); $(nproc) CPUs"
kept=0
for i in $(seq 1 "$runs"); do
  out=$(mktemp)
  flock /tmp/jitterscope-measuring.lock "$bin" tune -a "$cpu" --step rt-throttling-on \
    --metric max --block 2s --blocks 5 --rest 200ms --yes -q -o "$out" 2>/dev/null || true
  line=$(python3 - "$out" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["tune"]["steps"][0]["judgement"]
print(f'{j["decision"]}: per-block max {j["baseline_median"]/1e3:.0f} µs -> '
      f'{j["step_median"]/1e3:.0f} µs, p {j["p"]:.4f}')
EOF
  )
  rm -f "$out"
  echo "run $i: $line"
  case $line in kept:*|Kept:*) kept=$((kept + 1)) ;; esac
  [ "$(cat /proc/sys/kernel/sched_rt_runtime_us)" = "$before" ] || { echo "not restored"; exit 1; }
done
echo "kept in $kept of $runs runs"
[ "$kept" = "$runs" ]
