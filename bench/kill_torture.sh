#!/usr/bin/env bash
# Kill torture for the commands that change the host (issue 22): each trial runs one of
#   noise -a 1 -D 3s --trace -o F      timer -a 1 -D 3s --trace -o F
#   monitor -a 1 --trace (loopback, a free port; runs until signalled)
#   run -a 1 --step-time 1s -o F (the main job, tracing as root by default)
# sends it SIGINT, SIGTERM or SIGKILL at a random moment from 0 to 3 s, waits for it to
# exit and checks that the host is as it was:
#   - tracefs mounted exactly as before the script started, and no instance of ours
#     (instances/jitterscope-PID) left. After a SIGKILL the instance is the next run's to
#     remove, so a short `noise --trace` run goes first and the check follows it;
#   - /dev/cpu_dma_latency released: no process holds it open, and it reads back the
#     kernel's default, 2000000000 (no latency request in force);
#   - every result file (*.json) absent or whole, valid JSON; after SIGINT or SIGTERM
#     no temporary file of an atomic write left either (after SIGKILL one may be: it is
#     never the result, and a killed run cannot remove it);
#   - after SIGINT or SIGTERM, exit status 0 or 130 (never a panic or a crash).
# Each trial, cleanup run included, holds /tmp/jitterscope-measuring.lock, as the tests
# do, so that it never measures beside them.
#
# Output: one line per trial (number, command, signal and moment, exit status, result
# files), then "kill torture: N of M trials clean" and, for each failed trial, what was
# wrong. Exits 1 if any trial failed. Needs root and 2 CPUs (CPU 0 is left for the
# coordinator). Usage: bench/kill_torture.sh [TRIALS]   (default 100)
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-100}
[[ $(id -u) == 0 ]] || { echo "kill torture needs root (tracefs, SCHED_FIFO)" >&2; exit 2; }
nice -n 19 cargo build --release -q
bin=$(realpath target/release/jitterscope)
lock=/tmp/jitterscope-measuring.lock
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The kernel's PM QoS value when no request is in force (PM_QOS_CPU_LATENCY_DEFAULT_VALUE).
dma_default=2000000000

# tracefs mounts as (source, mount point, options): the state to keep.
tracefs_mounts() { awk '$3 == "tracefs" {print $1, $2, $4}' /proc/mounts; }
mounts_before=$(tracefs_mounts)

# Instances of ours in any tracefs mount.
our_instances() {
  local root
  for root in $(awk '$3 == "tracefs" {print $2}' /proc/mounts); do
    find "$root/instances" -maxdepth 1 -name 'jitterscope-*' 2>/dev/null || true
  done
}

# Processes holding /dev/cpu_dma_latency open, as "pid(comm)".
dma_holders() {
  local fd pid
  for fd in /proc/[0-9]*/fd/*; do
    if [[ $(readlink "$fd" 2>/dev/null) == /dev/cpu_dma_latency ]]; then
      pid=${fd#/proc/}
      pid=${pid%%/*}
      echo "$pid($(cat "/proc/$pid/comm" 2>/dev/null))"
    fi
  done | sort -u | paste -sd ' '
}

# The latency request in force, as the device reports it (a native 32-bit int).
dma_value() { od -An -t d4 -N4 /dev/cpu_dma_latency | tr -d ' '; }

# What is wrong with the host after a trial; prints nothing when all is well.
# $1: the trial's directory; $2: the signal; $3: whether to check tracefs now.
host_problems() {
  local dir=$1 sig=$2 trace_now=$3 f held value left
  if [[ $trace_now == yes ]]; then
    [[ $(tracefs_mounts) == "$mounts_before" ]] ||
      echo "tracefs mounts changed: before [${mounts_before:-none}] now [$(tracefs_mounts)]"
    left=$(our_instances | tr '\n' ' ')
    [[ -z $left ]] || echo "instances left: $left"
  fi
  held=$(dma_holders)
  [[ -z $held ]] || echo "/dev/cpu_dma_latency held by $held"
  value=$(dma_value)
  [[ $value == "$dma_default" ]] || echo "/dev/cpu_dma_latency reads $value, not $dma_default"
  for f in "$dir"/*.json; do
    [[ -e $f ]] || continue
    python3 -m json.tool "$f" >/dev/null 2>&1 || echo "$(basename "$f") is not whole JSON"
  done
  if [[ $sig != KILL ]]; then
    for f in "$dir"/.*.tmp; do
      [[ -e $f ]] && echo "temporary file left: $(basename "$f")"
    done
  fi
  return 0
}

# The command line of a trial of kind $1 writing into $2.
command_for() {
  case $1 in
    noise) echo noise -a 1 -D 3s --trace -q -o "$2/result.json" ;;
    timer) echo timer -a 1 -D 3s --trace -q -o "$2/result.json" ;;
    # Port 0: the kernel picks a free loopback port.
    monitor) echo monitor -a 1 --trace --listen 127.0.0.1:0 ;;
    run) echo run -a 1 --step-time 1s -q -o "$2/result.json" --out-dir "$2" ;;
  esac
}

# Runs the command, signals it after $3 ms and waits (SIGKILL after 30 s more: a run
# that does not end is a failure). Prints the exit status, or "hung".
signal_run() {
  local dir=$1 sig=$2 ms=$3 pid rc=0 waited=0
  shift 3
  # fd 9 (the lock) is not the child's: it must not hold the lock after we release it.
  "$bin" "$@" >"$dir/stdout" 2>"$dir/stderr" 9>&- &
  pid=$!
  sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
  kill -s "$sig" "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && ((waited < 300)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -s KILL "$pid"
    wait "$pid" || true
    echo hung
    return
  fi
  wait "$pid" || rc=$?
  echo "$rc"
}

kinds=(noise timer monitor run)
signals=(INT TERM KILL)
clean=0
failures=()
exec 9>>"$lock"
for i in $(seq 1 "$trials"); do
  kind=${kinds[RANDOM % 4]}
  sig=${signals[RANDOM % 3]}
  ms=$((RANDOM % 3001))
  dir=$work/$i
  mkdir "$dir"
  read -ra cmd <<<"$(command_for "$kind" "$dir")"
  flock 9
  rc=$(signal_run "$dir" "$sig" "$ms" "${cmd[@]}")
  problems=()
  if [[ $sig == KILL ]]; then
    # What the kernel undoes (the latency request) must be undone now; tracefs is the
    # next run's to tidy.
    mapfile -t -O "${#problems[@]}" problems < <(host_problems "$dir" "$sig" no)
    "$bin" noise -a 1 -D 0.2s --trace -q >"$dir/cleanup.out" 2>&1 9>&- ||
      problems+=("the cleanup run failed: $(tail -1 "$dir/cleanup.out")")
  elif [[ $rc != 0 && $rc != 130 ]]; then
    problems+=("exit status $rc after SIG$sig: $(tail -1 "$dir/stderr")")
  fi
  mapfile -t -O "${#problems[@]}" problems < <(host_problems "$dir" "$sig" yes)
  flock -u 9
  results=$(find "$dir" -maxdepth 1 -name '*.json' | wc -l)
  printf 'trial %3d: %-7s SIG%-4s at %4d ms: exit %-4s result files %d\n' \
    "$i" "$kind" "$sig" "$ms" "$rc" "$results"
  if ((${#problems[@]} == 0)); then
    clean=$((clean + 1))
  else
    failures+=("trial $i ($kind, SIG$sig at $ms ms): $(IFS=';'; echo "${problems[*]}")")
  fi
done
echo "kill torture: $clean of $trials trials clean"
for f in "${failures[@]}"; do echo "  $f"; done
((clean == trials))
