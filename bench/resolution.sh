#!/usr/bin/env bash
# Resolution of the noise loop, against two references measured in the same run on the
# same CPU: a bare back-to-back RDTSC loop (bench/bare_tsc.rs) and oslat (rt-tests).
# Prints each figure and the ratios. Run as root on an otherwise idle machine.
#   bench/resolution.sh [CPU] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=${1:-$(($(nproc) - 1))}
secs=${2:-3}
command -v oslat >/dev/null || { apt-get install -y -qq rt-tests >/dev/null 2>&1 || apt-get update -qq && apt-get install -y -qq rt-tests >/dev/null; }
cargo build --release -q
cargo bench -q --bench bare_tsc --no-run 2>/dev/null
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

bare=$(cargo bench -q --bench bare_tsc -- "$cpu" "$secs" fifo)
./target/release/jitterscope noise -a "$cpu" -p 1 -D "${secs}s" -q -o "$tmp/noise.json" 2>/dev/null
oslat -c "$cpu" -f 1 -D "$secs" -b 1024 -z --json="$tmp/oslat.json" >/dev/null 2>&1

python3 - "$bare" "$tmp/noise.json" "$tmp/oslat.json" <<'PY'
import json, sys
bare = dict(kv.split("=") for kv in sys.argv[1].split()[1:])
n = json.load(open(sys.argv[2]))["probes"][0]
o = json.load(open(sys.argv[3]))
t = o["thread"]["0"] if "thread" in o else list(o["threads"].values())[0]
hist = t.get("histogram", {})
iters = sum(int(v) for v in hist.values())
osl_mean = float(t.get("duration", o.get("duration", 0))) * 1e9 / iters if iters else float("nan")
lp = n["loop_period"]
bare_med, bare_mean = float(bare["stored_median_ns"]), float(bare["counted_mean_ns"])
print(f"CPU {bare['cpu']}, SCHED_FIFO 1, all three measured in this run")
print(f"  bare rdtsc loop      median step {bare_med:7.2f} ns   mean step {bare_mean:7.2f} ns")
print(f"  jitterscope noise    median step {lp['median_ns']:7.2f} ns   mean step {lp['mean_ns']:7.2f} ns   min {lp['min_ns']:.2f} ns")
print(f"  oslat                mean step   {osl_mean:7.2f} ns   (oslat reports no median; its smallest bucket is 1 us)")
print(f"ratio noise/bare, median: {lp['median_ns']/bare_med:.3f}  (target <= 1.2)")
# oslat's mean is duration / iterations, interruptions included: compare the same thing.
noise_wall_mean = n["runtime_ns"] / n["iterations"]
print(f"  jitterscope noise    duration / iterations {noise_wall_mean:7.2f} ns (oslat's definition)")
print(f"ratio noise/oslat, duration / iterations: {noise_wall_mean/osl_mean:.3f}  (target <= 1: no coarser than oslat)")
PY
