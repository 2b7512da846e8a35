#!/usr/bin/env bash
# Issue 25, done-when 4: what `watch` costs the program it watches. Under
# `stress-ng --switch 1` (over 50 000 context switches a second, from /proc/stat), a
# sleeper of our own (bench/watch_sleeper.c: clock_nanosleep to deadlines every 1 ms,
# SCHED_FIFO 1, pinned) runs once unwatched and once under `watch --comm js-sleeper`, in
# pairs (odd pairs unwatched first, even pairs watched first), with a control last: the
# same events enabled in an instance nobody reads, the tracepoints' own cost. Prints per
# run the sleeper's own p50/p99/max lateness, the host's switch rate and that of the
# sleeper's CPU, and the hypervisor's steal there; for the watched runs the events read
# and lost and the tool's CPU time per second; last, the p99 and p50 over unwatched of
# watched and of the control, per pair (goal for the p99 watched: at most 1.10 on the
# pairs' median), and the steal each side met. Lost events read
# "Nk+Mr": N overwritten in the kernel's buffers (the reader was too slow), M dropped by
# watch's own bounds. The measuring lock is held around each pair, stress-ng included.
# Needs root (tracefs, SCHED_FIFO), cc and stress-ng. Usage:
#   [SWITCH_FREQ=N] bench/watch_overhead.sh [CPU] [PAIRS] [SECONDS] [fifo|other]
# SWITCH_FREQ asks stress-ng for that many switches a second (default: as fast as it can).
# CONTAINERS=N (issue 34, done-when 5): N cgroup v1 `cpu` groups named as podman names
# its containers (libpod-<64 hex>.scope) under one parent, the sleeper in the first and a
# 1 kHz sleeper at SCHED_OTHER in each other one, all followed by `watch --cgroup PARENT`;
# stress-ng runs outside them, on the host.
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=${1:-1}; pairs=${2:-3}; secs=${3:-10}; policy=${4:-fifo}
for tool in cc stress-ng; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
cargo build --release -q
bin=$PWD/target/release/jitterscope
# KEEP=1 keeps the sleeper's figures and watch's results, and says where.
dir=$(mktemp -d)
control=/sys/kernel/tracing/instances/js-bench-control-$$
# The containers' groups (CONTAINERS=N), under one parent given real-time runtime: with
# RT group scheduling a group without it refuses the sleeper SCHED_FIFO.
cpu_root=/sys/fs/cgroup/cpu
parent=$cpu_root/js-bench-$$
groups=()
if [ -n "${CONTAINERS:-}" ]; then
  [ -e "$cpu_root/cpu.rt_runtime_us" ] || { echo "CONTAINERS needs cgroup v1 cpu" >&2; exit 2; }
  mkdir "$parent"
  echo 400000 >"$parent/cpu.rt_runtime_us"
  for k in $(seq 1 "$CONTAINERS"); do
    g=$parent/libpod-$(printf '%064x' $((0xc0a7a1 * 1000 + k))).scope
    mkdir "$g"
    [ "$k" -gt 1 ] || echo 200000 >"$g/cpu.rt_runtime_us"
    groups+=("$g")
  done
fi
# Becomes "$@" in container $1 (1…N), or as it is without CONTAINERS: called in a
# subshell (a pipeline's part, or with &), whose pid is then the command's.
in_group() {
  local k=$1; shift
  [ ${#groups[@]} -eq 0 ] || echo "$BASHPID" >"${groups[k - 1]}/cgroup.procs"
  exec "$@"
}
cleanup() {
  if [ -d "$control" ]; then echo >"$control/set_event"; rmdir "$control"; fi
  if [ -d "$parent" ]; then
    for g in "${groups[@]}" "$parent"; do
      for t in $(cat "$g/tasks" 2>/dev/null); do echo "$t" >"$cpu_root/tasks" 2>/dev/null || true; done
    done
    rmdir "${groups[@]}" "$parent" 2>/dev/null || true
  fi
  if [ -n "${KEEP:-}" ]; then echo "kept in $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
# The name is the comm watched.
cc -O2 -o "$dir/js-sleeper" bench/watch_sleeper.c

ctxt() { awk '/^ctxt/ {print $2}' /proc/stat; }
# The hypervisor's steal on the sleeper's CPU, in USER_HZ ticks: time its vCPU was
# runnable but not run. On a guest it sets the sleeper's p99 more than anything traced.
steal() { awk -v c="cpu$cpu" '$1 == c {print $9}' /proc/stat; }
hz=$(getconf CLK_TCK)
# The sleeper for $secs on $cpu: "n p50 p99 max switches/s on-cpu/s steal-µs/s" into $1:
# the host's switches a second (/proc/stat), those on the sleeper's own CPU (perf's
# software counter, 0 without perf): the load that meets the sleeper is the second; and
# the hypervisor's steal there.
sleeper() {
  local c0 c1 t0 t1 s0 s1 on=0 pf=$dir/perf-cs count=()
  rm -f "$pf"
  command -v perf >/dev/null && count=(perf stat -x, -e context-switches -C "$cpu" -o "$pf" --)
  c0=$(ctxt); s0=$(steal); t0=$(date +%s%N)
  in_group 1 "${count[@]}" taskset -c "$cpu" "$dir/js-sleeper" "$secs" 1000 "$policy" \
    | tr -d '\n' >"$1"
  c1=$(ctxt); s1=$(steal); t1=$(date +%s%N)
  [ -s "$pf" ] && on=$(awk -F, '/context-switches/ {print $1}' "$pf")
  echo " $(( (c1 - c0) * 1000000000 / (t1 - t0) )) $(( on * 1000000000 / (t1 - t0) ))" \
    "$(( (s1 - s0) * 1000000 / hz * 1000000000 / (t1 - t0) ))" >>"$1"
}
# The control (CONTROL=0 leaves it out): the kernel writing the very events watch enables,
# into an instance nobody reads (the kernel overwrites its oldest pages). What it costs
# the sleeper is the tracepoints' own; what watched costs beyond it is the reader's.
tracefs=/sys/kernel/tracing
mountpoint -q "$tracefs" || mount -t tracefs nodev "$tracefs"
# The first watch's instance as it set itself up: its events, trace clock and buffer.
events="" clock="" kib=""
copy_setup() {
  events=$(cat "$1/set_event")
  clock=$(grep -o '\[[^]]*\]' "$1/trace_clock" | tr -d '[]')
  kib=$(awk '{print $1; exit}' "$1/buffer_size_kb")
}
kernel_only() {
  local inst=$control
  mkdir "$inst"
  echo "$clock" >"$inst/trace_clock"
  echo "$kib" >"$inst/buffer_size_kb"
  echo "$events" >"$inst/set_event"
  [ "$(wc -l <"$inst/set_event")" -gt 2 ] || { echo "the control enabled no events" >&2; exit 1; }
  sleep 0.3
  sleeper "$dir/kernel-$1"
  echo >"$inst/set_event"
  rmdir "$inst"
}
# watch --comm js-sleeper around one sleeper run; waits until its trace has begun.
watched() {
  local target=(--comm js-sleeper)
  [ ${#groups[@]} -eq 0 ] || target=(--cgroup "$parent")
  "$bin" watch "${target[@]}" -D "$((secs + 2))s" -q --json="$dir/watch-$1.json" \
    2>"$dir/watch-$1.err" &
  local w=$! t=0
  until [ -d "/sys/kernel/tracing/instances/jitterscope-$w" ]; do
    sleep 0.05; t=$((t + 1)); [ "$t" -lt 200 ] || { echo "watch never began" >&2; exit 1; }
  done
  sleep 0.3
  [ -n "$events" ] || copy_setup "$tracefs/instances/jitterscope-$w"
  sleeper "$dir/watched-$1"
  wait "$w" || { cat "$dir/watch-$1.err" >&2; exit 1; }
}

for i in $(seq 1 "$pairs"); do
  (
    flock 9
    stress-ng --switch 1 ${SWITCH_FREQ:+--switch-freq "$SWITCH_FREQ"} \
      --timeout $((secs * 3 + 10))s -q &
    load=($!)
    # The other containers' apps: a 1 kHz sleeper each, at SCHED_OTHER, not pinned.
    for k in $(seq 2 "${CONTAINERS:-1}"); do
      in_group "$k" "$dir/js-sleeper" $((secs * 3 + 10)) 1000 other >/dev/null &
      load+=($!)
    done
    sleep 1
    # The order turns pair by pair (unwatched first in odd pairs, watched first in even
    # ones), so that a load that drifts over a pair (stress-ng settling) weighs on each
    # side alike. The control comes last: it copies the events the first watch enabled.
    if [ $((i % 2)) -eq 1 ]; then sleeper "$dir/plain-$i"; watched "$i"
    else watched "$i"; sleeper "$dir/plain-$i"; fi
    [ "${CONTROL:-1}" = 0 ] || kernel_only "$i"
    kill "${load[@]}"; wait "${load[@]}" || true
  ) 9>/tmp/jitterscope-measuring.lock
done

python3 - "$dir" "$pairs" "$cpu" <<'PY'
import json, sys, statistics
d, n = sys.argv[1], int(sys.argv[2])
def own(kind, i):
    c, p50, p99, mx, rate, on, steal = map(int, open(f"{d}/{kind}-{i}").read().split())
    return dict(n=c, p50=p50, p99=p99, max=mx, rate=rate, on=on, steal=steal)
def tool(i):
    r = json.load(open(f"{d}/watch-{i}.json"))
    w, secs = r["watch"], r["run"]["actual_duration_ns"] / 1e9
    th = [t for t in w["threads"] if t["comm"] == "js-sleeper"]
    lost = f'{w["events_lost_kernel"]}k+{w["events_lost_reader"]}r' if w["events_lost"] else "0"
    return dict(read=w["events_read"], lost=lost, secs=secs,
                cpu=w["tool_cpu_ns"] / secs / 1e6, threads=len(th),
                wakeups=sum(t["wakeup"]["count"] for t in th),
                unseen=sum(t["starts_unseen"] for t in th))
print(f"{'run':<10}{'wakes':>7}{'p50 µs':>8}{'p99 µs':>8}{'max µs':>9}{'switch/s':>10}{'on CPU/s':>9}"
      f"{'steal ms/s':>11}"
      f"{'events':>10}{'lost':>14}{'tool ms/s':>10}{'traced wakes':>13}{'undated':>8}")
import os
rows = {"plain": [], "watched": []}
if os.path.exists(f"{d}/kernel-1"):
    rows["kernel"] = []
for i in range(1, n + 1):
    for k in rows:
        x = own(k, i)
        rows[k].append(x)
        line = (f"{k + ' ' + str(i):<10}{x['n']:>7}{x['p50'] / 1e3:>8.1f}{x['p99'] / 1e3:>8.1f}"
                f"{x['max'] / 1e3:>9.1f}{x['rate']:>10}{x['on']:>9}{x['steal'] / 1e3:>11.1f}")
        if k == "watched":
            t = tool(i)
            line += f"{t['read']:>10}{t['lost']:>14}{t['cpu']:>10.2f}{t['wakeups']:>13}{t['unseen']:>8}"
        print(line)
slow = [x["rate"] for k in rows for x in rows[k] if x["rate"] <= 50000]
if slow:
    print(f"WARNING: {len(slow)} runs at or below 50 000 context switches/s: {slow}")
# Each pair ran back to back; on a shared host one noisy run can swing a mean, so the
# median of the pairs' ratios is given beside the ratio of the means.
def per_pair(side, q):
    r = [w[q] / p[q] for p, w in zip(rows["plain"], rows[side])]
    return ", ".join(f"{x:.3f}" for x in r) + f"; median {statistics.median(r):.3f}"
print(f"p99 watched / unwatched per pair: {per_pair('watched', 'p99')}")
if "kernel" in rows:
    # The same events written, nobody reading: the tracepoints' cost alone.
    print(f"p99 control (events on, not read) / unwatched per pair: {per_pair('kernel', 'p99')}")
    print(f"p50 watched / unwatched per pair: {per_pair('watched', 'p50')}")
    print(f"p50 control / unwatched per pair: {per_pair('kernel', 'p50')}")
# The p50 moves by what tracing adds to each wake-up's path; the p99 by the host's spread.
m50 = {k: statistics.mean(x["p50"] for x in rows[k]) for k in rows}
print(f"p50 lateness: unwatched {m50['plain'] / 1e3:.2f} µs, watched {m50['watched'] / 1e3:.2f} µs, "
      f"ratio {m50['watched'] / m50['plain']:.3f}")
m = {k: statistics.mean(x["p99"] for x in rows[k]) for k in rows}
print(f"p99 lateness: unwatched {m['plain'] / 1e3:.1f} µs, watched {m['watched'] / 1e3:.1f} µs, "
      f"ratio {m['watched'] / m['plain']:.3f} (goal: at most 1.10)")
# A guest's vCPU stopped by the hypervisor while the sleeper waits adds the stop to its
# lateness, whoever runs: the steal each side met, beside its p99.
for k in rows:
    st = [x["steal"] / 1e3 for x in rows[k]]
    print(f"steal on CPU {sys.argv[3]} ({k}): median {statistics.median(st):.1f} ms/s, "
          f"{min(st):.1f}–{max(st):.1f}")
print(f"max lateness: unwatched {max(x['max'] for x in rows['plain']) / 1e3:.1f} µs, "
      f"watched {max(x['max'] for x in rows['watched']) / 1e3:.1f} µs")
PY
