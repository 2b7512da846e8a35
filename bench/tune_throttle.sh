#!/usr/bin/env bash
# Issue 49, part 1 (and issue 23's first ground truth): does `tune` decide what a user can
# see, beside whatever the host is doing? Three tallies, each RUNS runs of the release
# binary under the measuring lock (so never beside a timing test), one line a run:
#   step   `tune -a CPU --step rt-throttling-on --yes`: RT throttling takes ~50 ms of
#          every second from a SCHED_FIFO spinner; the step must be kept every time.
#   sham   `tune -a CPU --step sham --yes`: a step that changes nothing, judged as any
#          other (RT throttling on in both sides); it must be kept in none.
#   whole  `tune -a CPU --yes`: every step that applies; rt-throttling-on must be kept.
# Each line: the decision, the metric's medians baseline → step, p and the look's level,
# the pairs taken and in how many the step was better, the run's time. Every run must
# leave sched_rt_runtime_us as it found it. Root only. Exits 1 unless the tally holds.
#   bench/tune_throttle.sh [step|sham|whole] [RUNS] [CPU]    (defaults: step 10 1)
# JITTERSCOPE=path uses that binary (no build); KEEP=DIR keeps each run's result file.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-step}; runs=${2:-10}; cpu=${3:-1}
case $mode in
  step) args=(--step rt-throttling-on); want=rt-throttling-on ;;
  sham) args=(--step sham); want=sham ;;
  whole) args=(); want=rt-throttling-on ;;
  *) echo "mode: step, sham or whole" >&2; exit 2 ;;
esac
if [ -z "${JITTERSCOPE:-}" ]; then
  nice -n 10 cargo build --release -q
  bin=./target/release/jitterscope
else
  bin=$JITTERSCOPE
fi
keep=${KEEP:-}
[ -n "$keep" ] && mkdir -p "$keep"
before=$(cat /proc/sys/kernel/sched_rt_runtime_us)
echo "$mode: sched_rt_runtime_us $before; $(uname -r); $(nproc) CPUs; $($bin --version)"
echo "command: $bin tune -a $cpu ${args[*]} --yes"
kept=0
for i in $(seq 1 "$runs"); do
  out=$(mktemp)
  start=$(date +%s)
  load=$(cut -d' ' -f1 /proc/loadavg)
  flock /tmp/jitterscope-measuring.lock "$bin" tune -a "$cpu" "${args[@]}" --yes -q \
    -o "$out" 2>/dev/null || true
  secs=$(( $(date +%s) - start ))
  line=$(python3 - "$out" "$want" <<'EOF'
import json, sys
try:
    t = json.load(open(sys.argv[1]))["tune"]
except Exception as e:
    print(f"no result ({e})"); sys.exit()
s = next((s for s in t["steps"] if s["id"] == sys.argv[2]), None)
j = s and s.get("judgement")
if not j:
    print(f"not judged ({s and s.get('class')})"); sys.exit()
m = s.get("metric") or t["metric"]
unit, scale = ("ms/s", 1e6) if m == "lost" else ("ms", 1e6)
judged = sum(1 for x in t["steps"] if x.get("judgement"))
kept = [x["id"] for x in t["steps"] if (x.get("judgement") or {}).get("decision") == "kept"]
print(f'{j["decision"]}: {m} {j["baseline_median"]/scale:.1f} -> {j["step_median"]/scale:.1f} {unit}, '
      f'p {j["p"]:.4f} (level {j["alpha"]:.4f}, look {j.get("look")}), '
      f'{j.get("pairs")} pairs ({j.get("better")} better)'
      + (f'; {judged} steps judged, kept: {" ".join(kept) or "none"}' if sys.argv[2] != s["id"] or len(t["steps"]) > 1 else ''))
EOF
  )
  [ -n "$keep" ] && cp "$out" "$keep/$mode-$i.json"
  rm -f "$out"
  echo "run $i: $line [${secs} s, load $load]"
  case $line in kept:*) kept=$((kept + 1)) ;; esac
  now=$(cat /proc/sys/kernel/sched_rt_runtime_us)
  [ "$now" = "$before" ] || { echo "sched_rt_runtime_us reads $now, not $before: not restored"; exit 1; }
done
echo "$mode: $want kept in $kept of $runs runs; sched_rt_runtime_us $(cat /proc/sys/kernel/sched_rt_runtime_us) after"
case $mode in
  sham) [ "$kept" = 0 ] ;;
  *) [ "$kept" = "$runs" ] ;;
esac
