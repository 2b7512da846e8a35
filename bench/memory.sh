#!/usr/bin/env bash
# What `jitterscope noise` costs in memory: its private memory (Anonymous + Swap from
# /proc/PID/smaps_rollup; tests/memory.rs says why these fields), for one measured CPU
# and for two, RUNS runs each, sampled SECONDS into the run; then one long run sampled
# at 10 s and at its end, which must be flat. Peak RSS (VmHWM) is printed for
# information: mlockall maps the whole binary, so it mostly measures code size.
# Targets: private memory <= 1.5 MiB for `noise -a 1`, within 64 KiB from 10 s to 10 min.
# Traced (issue 29): `noise -a 1 --trace` sampled at 10 s and 60 s (flat within 10 %), a
# second traced CPU's cost (`-a 0-1 --force --trace` against `-a 1 --trace`, both at
# 10 s), and the traced result's size per CPU-minute (at most 3 MB). The traced runs hold
# the tests' measuring lock.
#   bench/memory.sh [SECONDS] [RUNS] [LONG_SECONDS] [TRACED_SECONDS]  (defaults 3, 3, 600, 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}; runs=${2:-3}; long=${3:-600}; traced=${4:-60}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
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
  $bin noise "$@" -D "${duration}s" -o "$tmp/last.json" >/dev/null 2>&1 &
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

# Traced: attribution as it goes keeps nothing per gap (issue 29).
(
  flock 9
  echo "traced, noise -a $one --trace for $((traced + 1)) s:"
  sampled $((traced + 1)) 10 "$traced" -- -a "$one" --trace
  bytes=$(stat -c %s "$tmp/last.json")
  awk -v b="$bytes" -v s=$((traced + 1)) 'BEGIN { printf "result: %d bytes for 1 CPU x %d s: %.2f MB per CPU-minute\n", b, s, b / 1e6 / (s / 60) }'
  if [ "$n" -ge 2 ]; then
    echo "traced, noise -a 0-1 --force --trace: $(sampled 11 10 -- -a 0-1 --force --trace)"
  fi
) 9>/tmp/jitterscope-measuring.lock
echo "targets (traced): flat within 10 % from 10 s to ${traced} s, at most 3 MB per CPU-minute"
