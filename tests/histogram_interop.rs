//! The stored histogram is real HdrHistogram V2: an independent implementation (the
//! Python `hdrhistogram` package) decodes it and agrees with the summary.

use std::process::Command;

use crate::util::{frozen_part, skip};

const CHECK: &str = r#"
import json, math, sys
from hdrh.histogram import HdrHistogram

def nearest_rank(h, q):
    # The value at rank ceil(q*N) (at least 1), walking the decoded buckets ourselves:
    # the definition jitterscope documents. (hdrh's own get_value_at_percentile rounds
    # the rank to nearest instead, which picks another bucket when few values lie there.)
    target = max(1, math.ceil(q * h.get_total_count()))
    seen = 0
    for i in range(h.counts_len):
        seen += h.get_count_at_index(i)
        if seen >= target:
            return h.get_highest_equivalent_value(h.get_value_from_index(i))

r = json.load(open(sys.argv[1]))
for p in r["probes"]:
    s, h = p["summary"], HdrHistogram.decode(p["histogram"]["data"])
    assert p["histogram"]["encoding"] == "hdrhistogram-v2-deflate-base64"
    assert s["count"] > 0, "nothing recorded"
    assert h.get_total_count() == s["count"], (h.get_total_count(), s["count"])
    for q, key in [(0.2, "p20_ns"), (0.5, "p50_ns"), (0.8, "p80_ns"), (0.9, "p90_ns"), (0.99, "p99_ns"), (0.999, "p999_ns")]:
        theirs = min(nearest_rank(h, q), s["max_ns"])  # ours is capped at the exact max
        assert theirs == s[key], (key, theirs, s[key])
    assert h.values_are_equivalent(h.get_min_value(), s["min_ns"])
    assert h.values_are_equivalent(h.get_max_value(), s["max_ns"])
    assert abs(h.get_mean_value() - s["mean_ns"]) <= s["mean_ns"] * 0.001 + 1
    print(p["probe"], p.get("cpu"), h.get_total_count(), nearest_rank(h, 0.5), h.get_max_value())
"#;

#[test]
fn python_hdrhistogram_decodes_the_result() {
    const NAME: &str = "python_hdrhistogram_decodes_the_result";
    let has_hdrh = Command::new("python3")
        .args(["-c", "import hdrh.histogram"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_hdrh {
        return skip(
            NAME,
            "python3 with the hdrhistogram package is missing (pip install hdrhistogram)",
        );
    }
    // The frozen fixture's entries whose summary and histogram are at the top level,
    // written by the probes themselves. Nothing is measured.
    let dir = tempfile::tempdir().unwrap();
    let kinds = ["noise", "timer", "c2c", "work", "syscalls"];
    let path = frozen_part(&dir.path().join("r.json"), &kinds);
    let check = Command::new("python3")
        .args(["-c", CHECK])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "python decode failed: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    eprintln!(
        "python hdrh (cpu, count, p50, max): {}",
        String::from_utf8_lossy(&check.stdout).trim()
    );
}
