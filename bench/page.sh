#!/usr/bin/env bash
# How big the HTML page of a main job is, and how long `report --format html` takes to
# make it, at 16, 64 and 192 CPUs (issue 29: at most 3 MB and under 2 s at 192). The
# results are the frozen main-job fixture with the 16-CPU host's traced noise and
# SCHED_FIFO timer entries (CPUs 1-15) in place of its own, copied round-robin onto CPUs
# 1..N-1 (real figures, repeated). The reference, timed in the same run on the same
# file, is `report --format csv`: reading and parsing the result and its distributions,
# which the page needs as well; the ratio is what drawing the page adds.
#
# Then the same for c2c (issue 35: a 192-CPU c2c page at most 3 MB): the 16-CPU host's
# c2c result (tests/fixtures/host16/c2c-16cpu.json.gz) as it is, and grown to 64 and 192
# CPUs as tests/c2c_view.rs grows it (pair (a, b) takes the figures of pair (a mod 16,
# b mod 16), on a made-up 2-socket layout with SMT and two L3s a socket).
#   bench/page.sh [ROUNDS]     (default 3; the best of ROUNDS is printed)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
cargo build --release -q
bin=$PWD/target/release/jitterscope
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

python3 - "$dir" <<'EOF'
import copy, gzip, json, sys
out = sys.argv[1]
base = json.load(open("tests/fixtures/all-probes.json"))
fx = lambda n: json.load(gzip.open(f"tests/fixtures/host16/{n}.json.gz"))
noise = [p for p in fx("noise-traced-15cpu")["probes"] if p["probe"] == "noise"]
timer = [p for p in fx("timer-fifo-15cpu")["probes"] if p["probe"] == "timer"]
others = [p for p in base["probes"] if p["probe"] not in ("noise", "timer")]
for n in (16, 64, 192):
    d = copy.deepcopy(base)
    probes = []
    for entries in (noise, timer):
        for i, cpu in enumerate(range(1, n)):
            e = copy.deepcopy(entries[i % len(entries)])
            e["cpu"] = cpu
            e.pop("events", None)
            if "thread_index" in e:
                e["thread_index"] = i
            probes.append(e)
    d["probes"] = probes + others
    d["host"]["cpu_count"] = n
    d["host"]["cpus_online"] = f"0-{n-1}"
    d["run"]["cpus"] = {"measured": f"1-{n-1}", "housekeeping": "0"}
    json.dump(d, open(f"{out}/main{n}.json", "w"))
EOF

python3 - "$dir" <<'EOF'
import copy, gzip, json, sys
out = sys.argv[1]
base = json.load(gzip.open("tests/fixtures/host16/c2c-16cpu.json.gz"))
src = base["probes"]
index = {(p["cpu_a"], p["cpu_b"]): p for p in src}

def place(cpu, n):
    # tests/c2c_view.rs's `place`: CPU c and c + n/2 siblings, n/8 cores an L3.
    half, q = n // 2, n // 8
    core = cpu % half
    llc, package = core // q, core // (half // 2)
    lo = llc * q
    return {"cpu": cpu, "package": package, "die": 0, "core": core,
            "smt_siblings": f"{core},{core + half}", "node": package,
            "llc": {"level": 3, "id": llc,
                    "cpus": f"{lo}-{lo + q - 1},{lo + half}-{lo + half + q - 1}"}}

def locality(a, b):
    if a["core"] == b["core"]:
        return "smt-siblings"
    if a["llc"]["id"] == b["llc"]["id"]:
        return "same-llc"
    return "same-package" if a["package"] == b["package"] else "cross-package"

json.dump(base, open(f"{out}/c2c16.json", "w"))
for n in (64, 192):
    places = [place(c, n) for c in range(n)]
    probes = []
    for a in range(n):
        for b in range(a + 1, n):
            x, y = a % 16, b % 16
            e = copy.deepcopy(index[(min(x, y), max(x, y))] if x != y
                              else src[(a + b) % len(src)])
            e["cpu_a"], e["cpu_b"] = a, b
            e["place_a"], e["place_b"] = places[a], places[b]
            e["locality"] = locality(places[a], places[b])
            probes.append(e)
    d = copy.deepcopy(base)
    d["probes"] = probes
    d["host"]["cpu_count"] = n
    d["host"]["cpus_online"] = f"0-{n-1}"
    d["run"]["cpus"] = {"measured": f"0-{n-1}", "housekeeping": f"0-{n-1}"}
    json.dump(d, open(f"{out}/c2c{n}.json", "w"))
EOF

# The best wall time of ROUNDS runs of `report FILE --format FORMAT -o OUT`, in s, each
# under the measuring lock.
best() {
  local file=$1 format=$2 out=$3 t best=
  for _ in $(seq "$rounds"); do
    t=$(flock /tmp/jitterscope-measuring.lock /usr/bin/env TIMEFORMAT=%R \
      bash -c "time '$bin' report '$file' --format $format -o '$out' >/dev/null" 2>&1 | tail -1)
    best=$(awk -v a="$t" -v b="${best:-$t}" 'BEGIN { print (a < b ? a : b) }')
  done
  echo "$best"
}

printf '%-5s %10s %8s %8s %8s %8s\n' CPUs "page (KB)" figures "html (s)" "csv (s)" ratio
for n in 16 64 192; do
  f=$dir/main$n.json
  html=$(best "$f" html "$dir/page$n.html")
  csv=$(best "$f" csv "$dir/page$n.csv")
  kb=$(( $(stat -c %s "$dir/page$n.html") / 1024 ))
  figs=$(grep -o '<figure>' "$dir/page$n.html" | wc -l)
  ratio=$(awk -v a="$html" -v b="$csv" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')
  printf '%-5s %10s %8s %8s %8s %8s\n' "$((n - 1))" "$kb" "$figs" "$html" "$csv" "${ratio}x"
done

# c2c: the page against issue 35's bound (3 MB at 192 CPUs), and how much of it is the
# heat map's SVG (the one titled "c2c median").
echo
printf '%-5s %10s %10s %8s %8s %8s  %s\n' CPUs "page (KB)" "map (KB)" "html (s)" "csv (s)" ratio "≤ 3 MB"
for n in 16 64 192; do
  f=$dir/c2c$n.json
  html=$(best "$f" html "$dir/c2c$n.html")
  csv=$(best "$f" csv "$dir/c2c$n.csv")
  bytes=$(stat -c %s "$dir/c2c$n.html")
  map=$(python3 -c 'import re, sys
svgs = re.findall(r"<svg.*?</svg>", open(sys.argv[1]).read(), re.S)
print(sum(len(s) for s in svgs if "c2c median" in s) // 1024)' "$dir/c2c$n.html")
  ratio=$(awk -v a="$html" -v b="$csv" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')
  fits=$([ "$bytes" -le 3000000 ] && echo yes || echo NO)
  printf '%-5s %10s %10s %8s %8s %8s  %s\n' "$n" "$((bytes / 1024))" "$map" "$html" "$csv" "${ratio}x" "$fits"
done
