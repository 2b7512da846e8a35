#!/usr/bin/env bash
# What `jitterscope noise` costs in memory: its private memory (Anonymous + Swap from
# /proc/PID/smaps_rollup; tests/memory.rs says why these fields), for one measured CPU
# and for two, RUNS runs each, sampled SECONDS into the run; then one long run sampled
# at 10 s and at its end, which must be flat. Peak RSS (VmHWM) is printed for
# information: mlockall maps the whole binary, so it mostly measures code size.
# Targets: private memory <= 1.5 MiB for `noise -a 1`, within 64 KiB from 10 s to 10 min.
#   bench/memory.sh [SECONDS] [RUNS] [LONG_SECONDS]     (defaults 3, 3, 600)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}; runs=${2:-3}; long=${3:-600}
cargo build --release -q
bin=./target/release/jitterscope
echo "binary: $bin ($(du -k "$bin" | cut -f1) KiB with line tables)"

# "PRIVATE_KIB PEAK_KIB" of a running process.
look() {
  local anon swap hwm
  anon=$(awk '/^Anonymous:/ {print $2}' "/proc/$1/smaps_rollup")
  swap=$(awk '/^Swap:/ {print $2}' "/proc/$1/smaps_rollup")
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$1/status")
  echo "$((anon + swap)) $hwm"
}
mib() { awk -v k="$1" 'BEGIN { printf "%.2f MiB", k / 1024 }'; }

# Runs `noise ARGS` for DURATION s, sampling at each of the following times (s); prints
# one "private X, peak RSS Y" per sample.
sampled() {
  local duration=$1; shift
  local -a at=()
  while [ "$1" != -- ]; do at+=("$1"); shift; done; shift
  $bin noise "$@" -D "${duration}s" >/dev/null 2>&1 &
  local pid=$! t=0 p h
  for s in "${at[@]}"; do
    sleep $((s - t)); t=$s
    read -r p h < <(look "$pid")
    echo "at ${s} s: private $(mib "$p") ($p KiB), peak RSS $(mib "$h")"
  done
  wait "$pid"
}

n=$(nproc)
one=$((n - 1))
for r in $(seq "$runs"); do
  echo "run $r, noise -a $one: $(sampled $((secs + 1)) "$secs" -- -a "$one")"
  # --force: on two CPUs no housekeeping CPU is left.
  [ "$n" -ge 2 ] && echo "run $r, noise -a 0-1 --force: $(sampled $((secs + 1)) "$secs" -- -a 0-1 --force)"
done
echo "flatness, noise -a $one for $((long + 1)) s:"
sampled $((long + 1)) 10 "$long" -- -a "$one"
echo "targets: private <= 1.50 MiB (noise -a 1), growth from 10 s to the end <= 64 KiB"
