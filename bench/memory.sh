#!/usr/bin/env bash
# Peak RSS of `jitterscope noise`: a long run must use no more memory than a short one
# (within 1 MiB), and two measured CPUs must stay under 6 MiB. Uses the run's own
# ru_maxrss (run.peak_rss_kib) and, where GNU time exists, its figure as a cross-check.
#   bench/memory.sh [LONG_SECONDS] [SHORT_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
long=${1:-60}; short=${2:-5}
cargo build --release -q
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
n=$(nproc)
cpus=$([ "$n" -ge 2 ] && echo "0-1" || echo "0")   # SCHED_OTHER: all CPUs may be measured
run() {
  local secs=$1
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$tmp/time.$secs" ./target/release/jitterscope noise -a "$cpus" -D "${secs}s" -q -o "$tmp/r.$secs.json" 2>/dev/null
  else
    ./target/release/jitterscope noise -a "$cpus" -D "${secs}s" -q -o "$tmp/r.$secs.json" 2>/dev/null
  fi
}
run "$short"; run "$long"
python3 - "$tmp" "$short" "$long" "$cpus" <<'PY'
import json, os, sys
tmp, short, long, cpus = sys.argv[1:]
def rss(secs):
    r = json.load(open(f"{tmp}/r.{secs}.json"))
    t = f"{tmp}/time.{secs}"
    return r["run"]["peak_rss_kib"], (int(open(t).read().split()[-1]) if os.path.exists(t) else None), len(r["probes"])
(s, st, n), (l, lt, _) = rss(short), rss(long)
print(f"noise on CPUs {cpus} ({n} measured), peak RSS (ru_maxrss, KiB): {short} s {s}, {long} s {l}"
      + (f"; GNU time: {st}, {lt}" if st else ""))
print(f"growth {long} s vs {short} s: {l - s:+d} KiB (target within 1024 KiB)")
print(f"peak {max(s, l) / 1024:.2f} MiB (target < 6 MiB with 2 measured CPUs)")
PY
