#!/usr/bin/env bash
# Timer wake-up latency, jitterscope against cyclictest, on the same CPU with the same
# settings, alternating so that a noisy stretch of the host hits both alike. Prints each
# round's median and minimum side by side, and the ratio of the medians; fails when the
# ratio of the medians over all rounds leaves 0.85-1.15. Run as root.
#
# Default: `jitterscope timer -p 90 -i 200` against `cyclictest -p 90 -i 200` (SCHED_FIFO,
# mlockall, /dev/cpu_dma_latency 0 for both).
# --main-job: the main job's own timer step (`jitterscope run --step-time SECONDS`, which
# runs noise, timer and pingpong), against cyclictest at the policy, priority, interval
# and CPU that the timer entry of that very result recorded (issue 15: within ±15 %).
#   bench/timer_parity.sh [--main-job] [CPU] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=timer
if [ "${1:-}" = "--main-job" ]; then mode=main-job; shift; fi
cpu=${1:-$(($(nproc) - 1))}
secs=${2:-5}
rounds=${3:-5}
command -v cyclictest >/dev/null || { apt-get install -y -qq rt-tests >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq rt-tests >/dev/null; }; }
cargo build --release -q
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# The timer entry on $cpu of a result: "policy priority interval_us".
settings() {
    python3 - "$1" "$cpu" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e = next(e for e in r["probes"] if e.get("probe") == "timer" and e["cpu"] == int(sys.argv[2]))
c = e["config"]
print(c["policy"], c["priority"], c["interval_ns"] // 1000)
PY
}

for r in $(seq 1 "$rounds"); do
    if [ "$mode" = main-job ]; then
        ./target/release/jitterscope run -a "$cpu" --step-time "${secs}s" -q \
            -o "$tmp/js$r.json" 2>/dev/null
    else
        ./target/release/jitterscope timer -a "$cpu" -p 90 -i 200 -D "${secs}s" -q \
            -o "$tmp/js$r.json" 2>/dev/null
    fi
    read -r policy prio interval < <(settings "$tmp/js$r.json")
    [ "$r" = 1 ] && echo "jitterscope ($mode) and cyclictest at $policy $prio, -i $interval µs, CPU $cpu"
    # -N: ns; with -N, -h's buckets are 1 ns wide, so 1000000 buckets cover 1 ms.
    cyclictest -m --policy="$policy" -p "$prio" -i "$interval" -a "$cpu" -t 1 -D "$secs" -q -N \
        -h 1000000 --json="$tmp/ct$r.json" >/dev/null 2>&1
done

python3 - "$tmp" "$rounds" "$cpu" "$secs" <<'PY'
import json, statistics, sys
tmp, rounds, cpu, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def cyclictest(path):
    t = json.load(open(path))["thread"]["0"]
    hist = sorted((int(k), v) for k, v in t["histogram"].items())
    total = t["cycles"]  # wake-ups beyond the histogram are in cycles, not in buckets
    seen, median = 0, None
    for ns, n in hist:
        seen += n
        if seen * 2 >= total:
            median = ns
            break
    return median, t["min"], total

def ours(path):
    e = next(e for e in json.load(open(path))["probes"] if e.get("probe") == "timer"
             and e["cpu"] == int(cpu))
    return e["summary"]["p50_ns"], e["summary"]["min_ns"], e["wakeups"]

print(f"timer wake-up latency on CPU {cpu}, {secs} s a run, {rounds} rounds, alternating")
print(f"{'round':>5} {'jitterscope p50':>16} {'cyclictest p50':>15} {'ratio':>6} "
      f"{'jitterscope min':>16} {'cyclictest min':>15} {'wake-ups (js/ct)':>17}")
js_med, ct_med = [], []
for r in range(1, rounds + 1):
    jm, jmin, jn = ours(f"{tmp}/js{r}.json")
    cm, cmin, cn = cyclictest(f"{tmp}/ct{r}.json")
    js_med.append(jm); ct_med.append(cm)
    print(f"{r:>5} {jm/1e3:>13.2f} µs {cm/1e3:>12.2f} µs {jm/cm:>6.3f} "
          f"{jmin/1e3:>13.2f} µs {cmin/1e3:>12.2f} µs {jn:>8}/{cn}")
ratio = statistics.median(js_med) / statistics.median(ct_med)
print(f"median of the round medians: jitterscope {statistics.median(js_med)/1e3:.2f} µs, "
      f"cyclictest {statistics.median(ct_med)/1e3:.2f} µs, ratio {ratio:.3f} "
      f"(target 0.85-1.15)")
sys.exit(0 if 0.85 <= ratio <= 1.15 else 1)
PY
