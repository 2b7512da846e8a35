#!/usr/bin/env bash
# What tracing costs the noise loop: untraced and traced runs alternate on one CPU, in the
# same session, and the script prints each run's median loop period, gap rate and time
# lost, the events traced, and the cost per traced event (the extra time lost per event
# over the untraced runs' mean). Needs root (tracefs). Usage:
#   bench/trace_overhead.sh [CPU] [PAIRS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=${1:-1}; pairs=${2:-3}; secs=${3:-3}
cargo build --release -q
bin=target/release/jitterscope
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for i in $(seq 1 "$pairs"); do
  flock /tmp/jitterscope-measuring.lock "$bin" noise -a "$cpu" -D "${secs}s" -p 1 -q -o "$dir/plain-$i.json" 2>/dev/null
  flock /tmp/jitterscope-measuring.lock "$bin" noise -a "$cpu" -D "${secs}s" -p 1 -q --trace -o "$dir/traced-$i.json" 2>/dev/null
done
python3 - "$dir" "$pairs" <<'PY'
import json, sys, statistics
d, n = sys.argv[1], int(sys.argv[2])
def load(kind, i):
    r = json.load(open(f"{d}/{kind}-{i}.json"))
    e = [p for p in r["probes"] if p["probe"] == "noise"][0]
    secs = r["run"]["actual_duration_ns"] / 1e9
    a = e.get("attribution") or {}
    return dict(median=e["loop_period"]["median_ns"], rate=e["rate_per_s"],
                lost=e["interrupted_ns"] / secs, events=a.get("events_read", 0) / secs)
rows = {k: [load(k, i) for i in range(1, n + 1)] for k in ("plain", "traced")}
print(f"{'run':<10}{'loop median (ns)':>18}{'gaps (/s)':>12}{'lost (µs/s)':>13}{'events (/s)':>13}")
for i in range(n):
    for k in ("plain", "traced"):
        x = rows[k][i]
        print(f"{k + ' ' + str(i + 1):<10}{x['median']:>18.1f}{x['rate']:>12.0f}{x['lost'] / 1e3:>13.1f}{x['events']:>13.0f}")
m = {k: {f: statistics.mean(x[f] for x in rows[k]) for f in rows[k][0]} for k in rows}
ratio = m["traced"]["median"] / m["plain"]["median"]
print(f"loop median traced / untraced: {ratio:.3f}")
print(f"gap rate traced / untraced: {m['traced']['rate'] / m['plain']['rate']:.3f}")
ev = m["traced"]["events"]
extra = m["traced"]["lost"] - m["plain"]["lost"]
print(f"extra time lost per traced event: {extra / ev if ev else float('nan'):.0f} ns "
      f"({extra / 1e3:.1f} µs/s over {ev:.0f} events/s; the spread between runs of one kind bounds it)")
PY
