#!/usr/bin/env bash
# Peak RSS of `jitterscope noise` as a user measures it: GNU time's maximum resident set
# of the release binary, for two measured CPUs and for one, RUNS times each, beside
# sysjitter's on the same CPUs when sysjitter is installed. Then a long run against a
# short one: memory must not grow with the run's length (within 1 MiB).
# Issue 15's targets: <= 4.5 MiB (two CPUs), <= 4 MiB (one CPU), which tests/memory.rs
# holds it to. The figure depends on how the binary was linked (scripts/jitterscope-gcc:
# glibc statically, the noise path's code placed together), so that is printed first.
#   bench/memory.sh [SECONDS] [RUNS] [LONG_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}; runs=${2:-3}; long=${3:-30}
/usr/bin/time -V 2>&1 | grep -q GNU || { echo "GNU time is missing: apt-get install -y time" >&2; exit 2; }
cargo build --release -q
bin=./target/release/jitterscope
if readelf -l "$bin" | grep -q INTERP; then linked="glibc dynamically"; else linked="glibc statically"; fi
echo "binary: $bin, $linked ($(du -k "$bin" | cut -f1) KiB with line tables)"
n=$(nproc)
two=$([ "$n" -ge 2 ] && echo "0-1" || echo "")
one=$((n - 1))
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
mib() { awk -v k="$1" 'BEGIN { printf "%.2f MiB", k / 1024 }'; }
echo "peak RSS (GNU time %M), $runs runs each"
for r in $(seq "$runs"); do
  line="run $r:"
  # SCHED_OTHER; --force because on two CPUs no housekeeping CPU is left.
  [ -n "$two" ] && line+="  noise -a $two --force -D ${secs}s: $(mib "$(peak $bin noise -a "$two" --force -D "${secs}s")")"
  line+="  noise -a $one -D ${secs}s: $(mib "$(peak $bin noise -a "$one" -D "${secs}s")")"
  echo "$line"
done
if command -v sysjitter >/dev/null; then
  for r in $(seq "$runs"); do
    [ -n "$two" ] && echo "sysjitter on CPUs 0,1: $(mib "$(peak sysjitter --cores 0,1 --runtime "$secs" 200)")"
    echo "sysjitter on CPU $one: $(mib "$(peak sysjitter --cores "$one" --runtime "$secs" 200)")"
  done
else
  echo "sysjitter: not installed here (no figure to set beside ours)"
fi
s=$(peak $bin noise -a "$one" -D "${secs}s"); l=$(peak $bin noise -a "$one" -D "${long}s")
echo "growth, CPU $one, ${long} s against ${secs} s: $((l - s)) KiB (target within 1024 KiB)"
echo "targets (issue 15): two CPUs <= 4.50 MiB, one CPU <= 4.00 MiB"
