#!/usr/bin/env bash
# The trace pipeline on a big host (issue 29): records real trace pages of a noise loop
# here (`trace_replay record`: root and tracefs, under the tests' measuring lock), then
# replays them through the reader's page parsing and the attribution
# (`app::tracing::read_pass`, what `noise --trace` runs) for 1, 16, 64 and 192 CPUs, at
# this host's event rate and at the 16-CPU host's (from its traced fixture), with one
# reader on one core; then 192 CPUs with the reading spread as `noise --trace` spreads
# it (one reader per housekeeping CPU); then an overload, to show what a
# reader that cannot keep up says (events lost per CPU, gaps left unattributed), and what
# it holds (private memory; with TRACE_REPLAY_HEAP=1 also the readers' heap at its peak,
# counted apart from the stand-in kernel buffers).
#   bench/trace_replay.sh [RECORD_SECONDS] [REPLAY_SECONDS]     (defaults 5, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
rec_s=${1:-5}; rep_s=${2:-10}
# Built first: the lock is never held around a build.
cargo bench -q --no-run --bench trace_replay 2>/dev/null
run() { cargo bench -q --bench trace_replay -- "$@"; }
out=target/trace-replay
mkdir -p "$out"
n=$(nproc)
flock /tmp/jitterscope-measuring.lock cargo bench -q --bench trace_replay -- \
  record "$out/recording.json" --cpu $((n - 1)) --seconds "$rec_s"
echo "== one reader, pinned to CPU 0"
run replay "$out/recording.json" --cpus 1,16,64,192 --rates host,host16 --seconds "$rep_s" \
  --readers 1 --pin 0
all=$(seq -s, 0 $((n - 1)))
echo "== 192 CPUs, the reading spread as noise --trace spreads it, over CPUs $all"
run replay "$out/recording.json" --cpus 192 --rates host,host16 --seconds "$rep_s" \
  --readers auto --pin "$all"
echo "== overload: 192 CPUs at 120 times this host's rate, one reader, 2 s"
run replay "$out/recording.json" --cpus 192 --rates 'host*120' --seconds 2 \
  --readers 1 --pin 0
