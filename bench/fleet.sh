#!/usr/bin/env bash
# How long `jitterscope fleet` takes over 1 000 main-job results, and how much memory it
# holds (issue 37: under 10 s and 100 MB, at most 60 lines at 100 columns). The fleet is
# grown by scripts/make-fleet from the 16-CPU host's real results, three outliers
# planted. The reference, timed in the same run on the same files, is reading them
# (`cat DIR/*.json > /dev/null`): the floor any reader of 1 000 files pays; the ratio is
# what parsing and ranking add.
#   bench/fleet.sh [N] [ROUNDS] [DIR]   (default 1000 hosts, 3 rounds; the best is printed;
#   DIR: a fleet scripts/make-fleet already wrote, with its planted list in DIR.planted)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
rounds=${2:-3}
cargo build --release -q
bin=$PWD/target/release/jitterscope
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if [ -n "${3:-}" ]; then
  ln -s "$(realpath "$3")" "$dir/fleet"
  cp "$3.planted" "$dir/planted"
else
  scripts/make-fleet "$dir/fleet" "$n" > "$dir/planted"
fi
echo "fleet of $n: $(du -sh "$dir/fleet" | cut -f1) of JSON; planted: $(tr '\n' ' ' < "$dir/planted")"

# The best wall time of ROUNDS runs of COMMAND, in s, each under the measuring lock.
best() {
  local t best=
  for _ in $(seq "$rounds"); do
    t=$(flock /tmp/jitterscope-measuring.lock /usr/bin/env TIMEFORMAT=%R \
      bash -c "time $1 >/dev/null" 2>&1 | tail -1)
    best=$(awk -v a="$t" -v b="${best:-$t}" 'BEGIN { print (a < b ? a : b) }')
  done
  echo "$best"
}

fleet=$(best "COLUMNS=100 '$bin' fleet '$dir/fleet'")
read_all=$(best "cat '$dir'/fleet/*.json")
rss=$(/usr/bin/time -v "$bin" fleet "$dir/fleet" 2>&1 >/dev/null \
  | awk '/Maximum resident set size/ { print $NF }')
lines=$(COLUMNS=100 "$bin" fleet "$dir/fleet" | tee "$dir/out" | wc -l)
widest=$(python3 -c 'import sys; print(max(len(l) for l in open(sys.argv[1], encoding="utf-8").read().splitlines()))' "$dir/out")
printf '%-22s %8s\n' "fleet (s)" "$fleet" "cat (s)" "$read_all"
awk -v a="$fleet" -v b="$read_all" 'BEGIN { printf "%-22s %8.1f\n", "ratio fleet/cat", a / b }'
printf '%-22s %8s\n' "max RSS (KiB)" "$rss" "lines at 100 columns" "$lines" "widest line" "$widest"
for host in $(cut -d' ' -f1 "$dir/planted"); do
  grep -q "^  $host (" "$dir/out" && echo "$host named" || echo "$host NOT named"
done
