#!/usr/bin/env bash
# Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) and the tracefs format
# files the trace targets decode with (fuzz/tracefs/) from this host's real data:
# /proc/interrupts, /proc/softirqs and /proc/stat; the sysfs CPU lists; tracefs's
# header_page, the format files of the events a session enables and raw pages of
# trace_pipe_raw from a private instance; an interval log written by `monitor
# --log-dir` and one by `report --format hdr`; and command lines from the README.
#
# Needs root and a built binary. tracefs is left as found: it is mounted only if it was
# not, the instance (fuzzseed-PID) is removed and what was mounted is unmounted. The
# measuring runs take /tmp/jitterscope-measuring.lock, as the tests do.
#
# Usage: fuzz/make_seeds.sh [BINARY]   (default target/release/jitterscope)
# Prints, per target, how many seed files it holds.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/jitterscope}")
corpus=fuzz/corpus
scratch=$(mktemp -d)
# What seed_trace made, undone however the script ends.
trace_inst="" trace_mounted=""
cleanup() {
  [[ -n $trace_inst ]] && rmdir "$trace_inst" 2>/dev/null
  [[ -n $trace_mounted ]] && umount "$trace_mounted"
  rm -rf "$scratch"
}
trap cleanup EXIT
lock() { flock /tmp/jitterscope-measuring.lock "$@"; }

# /proc counters, as a snapshot reads them.
seed_proc() {
  local d=$corpus/proc_counters
  mkdir -p "$d"
  for f in interrupts softirqs stat; do cp "/proc/$f" "$d/$f"; done
}

# CPU lists: each sysfs list file alone, and user list / online / allowed / housekeeping
# (the cpu_list target's four lines) as `-a` meets them on this host.
seed_cpu_lists() {
  local d=$corpus/cpu_list sys=/sys/devices/system/cpu
  mkdir -p "$d"
  for f in online possible present offline isolated nohz_full; do
    [[ -r $sys/$f ]] && cp "$sys/$f" "$d/sysfs-$f"
  done
  local online allowed
  online=$(cat $sys/online)
  allowed=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
  printf '%s\n%s\n%s\n' 1 "$online" "$allowed" >"$d/user-1"
  printf '%s\n%s\n%s\n0\n' "$online" "$online" "$allowed" >"$d/user-all-hk0"
}

# Command lines, NUL-separated as cli_args reads them.
seed_cli() {
  local d=$corpus/cli_args n=0
  mkdir -p "$d"
  while IFS= read -r line; do
    n=$((n + 1))
    # shellcheck disable=SC2086  # split the line into its words on purpose
    printf '%s\0' $line | head -c -1 >"$d/argv-$n"
  done <<'EOF'
noise -a 1 -D 3s --trace -o run.json
noise -a 1-3,5 -D 500ms -T 2us --top 16 --event-log 1000 --json
timer -a 1 -D 3s --trace -o run.json
timer -i 200 -d 0 -p 99 -l 100000 -h 400 --dma-latency 0 --stop-above 150
timer --aligned --clock realtime --timer-slack default --spikes 100 --spike-nodes 50
pingpong -a 0,1 -D 2s --json=out.json
c2c -a 0-1 --json
queue -D 1s
work -D 1s
syscalls
ptp
audit --json
run --quick --out-dir /tmp -o run.json --fail-above p99=50us --fail-above max=1ms
run --step-time 1s --no-trace -q
monitor --listen 127.0.0.1:9464 --trace -D 10s --log-dir /tmp/logs --log-interval 1s
monitor --noise-every 1m --noise-cpus 1 --late-above 100us,1ms,5
report --format csv --buckets run.json
report --format hdr -o run.hlog run.json
compare a.json b.json
completions bash
help timer
EOF
}

# tracefs: the format files into fuzz/tracefs, raw pages into trace_page's corpus, and
# one real record of each event with its format into trace_format's.
seed_trace() {
  local root inst
  root=$(awk '$3 == "tracefs" {print $2; exit}' /proc/mounts)
  if [[ -z $root ]]; then
    root=/sys/kernel/tracing
    mount -t tracefs nodev "$root"
    trace_mounted=$root
  fi
  inst=$root/instances/fuzzseed-$$
  mkdir "$inst"
  trace_inst=$inst
  echo x86-tsc >"$inst/trace_clock"
  echo 256 >"$inst/buffer_size_kb"
  local events="irq/irq_handler_entry irq/irq_handler_exit irq/softirq_entry irq/softirq_exit
    nmi/nmi_handler sched/sched_switch sched/sched_wakeup workqueue/workqueue_execute_start
    workqueue/workqueue_execute_end timer/hrtimer_expire_entry timer/hrtimer_expire_exit"
  events+=" $(cd "$root/events" && ls -d irq_vectors/*_entry irq_vectors/*_exit)"
  rm -rf fuzz/tracefs
  mkdir -p fuzz/tracefs/events
  cp "$root/events/header_page" "$root/events/header_event" fuzz/tracefs/
  for e in $events; do
    mkdir -p "fuzz/tracefs/events/$e"
    cp "$inst/events/$e/format" "fuzz/tracefs/events/$e/format"
    echo 1 >"$inst/events/$e/enable"
  done
  echo 1 >"$inst/tracing_on"
  # Some work on every CPU: file system walks wake tasks, take IRQs and softirqs.
  for _ in 1 2 3; do ls -R /usr >/dev/null; sleep 0.3; done
  echo 0 >"$inst/tracing_on"
  python3 - "$inst" "$scratch" <<'PY'
import os, sys
inst, out = sys.argv[1], sys.argv[2]
for cpu in range(os.cpu_count()):
    path = f"{inst}/per_cpu/cpu{cpu}/trace_pipe_raw"
    if not os.path.exists(path):
        continue
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    for n in range(6):
        try:
            page = os.read(fd, 4096)
        except BlockingIOError:
            break
        if not page:
            break
        open(f"{out}/page-cpu{cpu}-{n}", "wb").write(page)
    os.close(fd)
PY
  local d=$corpus/trace_page
  rm -rf "$d" && mkdir -p "$d"
  for p in "$scratch"/page-*; do
    # Mode 0: the default layout; mode 1: header_page text, a NUL, the page.
    { printf '\0'; cat "$p"; } >"$d/$(basename "$p")"
    { printf '\1'; cat "$root/events/header_page"; printf '\0'; cat "$p"; } >"$d/$(basename "$p")-hp"
  done
  split_records "$scratch" "$corpus/trace_format"
}

# Per event, its format and the first record of it found in the pages (none when it did
# not fire), as "system:event\nFORMAT\0RECORD"; and header_page with a page (its layout,
# then parse_page).
split_records() {
  local pages=$1 d=$2
  rm -rf "$d" && mkdir -p "$d"
  python3 - "$pages" "$d" fuzz/tracefs <<'PY'
import glob, os, struct, sys
pages, out, tracefs = sys.argv[1:]
formats = {}
for path in glob.glob(f"{tracefs}/events/*/*/format"):
    text = open(path).read()
    ident = next(int(l.split(":")[1]) for l in text.splitlines() if l.startswith("ID:"))
    sys_, ev = path.split("/")[-3:-1]
    formats[ident] = (f"{sys_}:{ev}", text)
def records(page):
    # The ring-buffer page format (see src/trace/ring.rs): 8-byte stamp, commit, data.
    commit = struct.unpack_from("<Q", page, 8)[0] & 0xFFFFF
    data, at = page[16:16 + commit], 0
    while at + 4 <= len(data):
        head = struct.unpack_from("<I", data, at)[0]
        kind = head & 0x1F
        if kind == 0:
            n = struct.unpack_from("<I", data, at + 4)[0]
            yield data[at + 8:at + 4 + n]
            at += 4 + max(n, 4)
        elif kind <= 28:
            yield data[at + 4:at + 4 + 4 * kind]
            at += 4 + 4 * kind
        elif kind == 29:
            break
        else:
            at += 8
seen = set()
for page in sorted(glob.glob(f"{pages}/page-*")):
    for rec in records(open(page, "rb").read()):
        ident = struct.unpack_from("<H", rec, 0)[0] if len(rec) >= 2 else None
        if ident in formats and ident not in seen:
            seen.add(ident)
            name, text = formats[ident]
            open(f"{out}/{name.replace(':', '-')}", "wb").write(
                f"{name}\n{text}".encode() + b"\0" + rec)
# Events that fired on no page still seed the format parser, with no record.
for ident, (name, text) in formats.items():
    if ident not in seen:
        open(f"{out}/{name.replace(':', '-')}", "wb").write(f"{name}\n{text}".encode() + b"\0")
first = sorted(glob.glob(f"{pages}/page-*"))[0]
open(f"{out}/header_page", "wb").write(
    b"header_page\n" + open(f"{tracefs}/header_page", "rb").read() + b"\0" + open(first, "rb").read())
PY
}

# Interval logs: monitor's (a few one-second intervals of CPU 1) and report's export of a
# noise result.
seed_interval_logs() {
  local d=$corpus/interval_log cpu
  cpu=$(($(nproc) > 1 ? 1 : 0))
  mkdir -p "$d" "$scratch/logs"
  lock "$bin" monitor -a "$cpu" -D 4s --listen 127.0.0.1:0 --log-dir "$scratch/logs" \
    --log-interval 1s 2>/dev/null
  cp "$scratch/logs/monitor.hlog" "$d/monitor.hlog"
  lock "$bin" noise -a "$cpu" -D 1s -q -o "$scratch/noise.json"
  "$bin" report --format hdr -o "$d/report.hlog" "$scratch/noise.json"
}

seed_proc
seed_cpu_lists
seed_cli
seed_interval_logs
seed_trace
for t in "$corpus"/*/; do
  printf '%-16s %3d seeds\n' "$(basename "$t")" "$(find "$t" -type f | wc -l)"
done
