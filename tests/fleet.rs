//! `jitterscope fleet` on fleets grown by scripts/make-fleet from the 16-CPU host's real
//! results, with three planted outliers (another kernel, another command line, a CPU hog)
//! whose differences are the ground truth: each must be named with its own.

use std::path::Path;
use std::process::{Command, Output};

use super::util::{assert_bad_input, bin, host16, skip};

/// A fleet of `n` hosts written into `dir` (`lean`: without histograms, series and
/// largest events); the planted outliers as (host, what). `None` (said why) without
/// python3.
fn make_fleet(test: &str, dir: &Path, n: usize, lean: bool) -> Option<Vec<(String, String)>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-fleet");
    let out = match Command::new("python3")
        .arg(&script)
        .arg(dir)
        .arg(n.to_string())
        .args(lean.then_some("--lean"))
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            skip(test, &format!("python3 cannot run scripts/make-fleet: {e}"));
            return None;
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let planted = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (host, what) = l.split_once(' ')?;
            Some((host.to_string(), what.to_string()))
        })
        .collect::<Vec<_>>();
    assert_eq!(planted.len(), 3, "{planted:?}");
    Some(planted)
}

/// `jitterscope fleet ARGS` at `columns` columns.
fn fleet(args: &[&str], columns: usize) -> Output {
    Command::new(bin())
        .arg("fleet")
        .args(args)
        .env("COLUMNS", columns.to_string())
        .output()
        .expect("the binary runs")
}

fn text_of(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The outlier's paragraph: its line under "Standing out" and the lines continuing it.
fn said_of(text: &str, host: &str) -> String {
    let start = format!("  {host} (");
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&start));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("{host} not named:\n{text}"));
    let rest = lines.take_while(|l| l.starts_with("    "));
    std::iter::once(first)
        .chain(rest)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Issue 37: the three planted outliers of 30 hosts are named, each with its own
/// difference, and the majority is one row.
#[test]
fn issue37_the_planted_outliers_are_named_with_what_differs() {
    const TEST: &str = "issue37_the_planted_outliers_are_named_with_what_differs";
    let dir = tempfile::tempdir().unwrap();
    let Some(planted) = make_fleet(TEST, dir.path(), 30, false) else {
        return;
    };
    let text = text_of(&fleet(&[dir.path().to_str().unwrap()], 100));
    for (host, what) in &planted {
        let said = said_of(&text, host);
        let expected: &[&str] = match what.as_str() {
            "kernel" => &["(timer p99 high)", "kernel 6.19.3-rt1 (most: 6.18.44"],
            "cmdline" => &["(share lost high)", "boot options +nohz=off -psi=1"],
            "hog" => &[
                "(another top cause)",
                "top cause task stress-ng-cpu (SCHED_OTHER nice 0)",
            ],
            other => panic!("unknown outlier {other}"),
        };
        for e in expected {
            assert!(
                said.contains(e),
                "{host} ({what}) lacks '{e}': {said}\n{text}"
            );
        }
        if what != "kernel" {
            assert!(!said.contains("kernel 6."), "{host}: {said}");
        }
    }
    let majority = text
        .lines()
        .filter_map(|l| {
            l.trim_start()
                .split(" hosts ")
                .next()?
                .parse::<usize>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    assert!(
        majority >= 24,
        "the 27 ordinary hosts are not one group:\n{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

/// Issue 37: the text is as long at 200 hosts as at 10 (groups, not a line a host), and
/// fits 60 lines of 100 columns.
#[test]
fn issue37_the_text_is_as_long_at_200_hosts_as_at_10() {
    const TEST: &str = "issue37_the_text_is_as_long_at_200_hosts_as_at_10";
    let mut lengths = Vec::new();
    for n in [10, 200] {
        let dir = tempfile::tempdir().unwrap();
        if make_fleet(TEST, dir.path(), n, true).is_none() {
            return;
        }
        let text = text_of(&fleet(&[dir.path().to_str().unwrap()], 100));
        assert!(text.lines().count() <= 60, "{n} hosts:\n{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        lengths.push(text.lines().count());
    }
    assert!(
        lengths[1] <= lengths[0] + 2,
        "10 hosts take {} lines, 200 take {}",
        lengths[0],
        lengths[1]
    );
}

/// Issue 37: the CSV is a row a host, the outliers marked; the page renders the table,
/// every host in the heat map, and loads in Chromium.
#[test]
fn issue37_csv_is_a_row_a_host_and_the_page_renders() {
    const TEST: &str = "issue37_csv_is_a_row_a_host_and_the_page_renders";
    let dir = tempfile::tempdir().unwrap();
    let fleet_dir = dir.path().join("fleet");
    let Some(planted) = make_fleet(TEST, &fleet_dir, 30, true) else {
        return;
    };
    let d = fleet_dir.to_str().unwrap();
    let csv = text_of(&fleet(&[d, "--format", "csv"], 100));
    let mut lines = csv.lines().map(super::report::split_csv);
    let headers = lines.next().unwrap();
    let at = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<Vec<String>> = lines.collect();
    assert_eq!(rows.len(), 30, "{csv}");
    assert!(rows.iter().all(|r| r.len() == headers.len()), "{csv}");
    for (host, _) in &planted {
        let row = rows.iter().find(|r| &r[at("host")] == host).unwrap();
        assert!(!row[at("standing_out")].is_empty(), "{host}: {row:?}");
    }
    let marked = rows.iter().filter(|r| !r[at("standing_out")].is_empty());
    assert!(marked.count() < 10, "{csv}");

    let page = dir.path().join("fleet.html");
    text_of(&fleet(
        &[d, "--format", "html", "-o", page.to_str().unwrap()],
        100,
    ));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Hosts × figures"), "no heat map");
    for i in 0..30 {
        assert!(
            html.contains(&format!("<td>node{i:04}</td>")),
            "node{i:04} missing"
        );
    }
    for (host, _) in &planted {
        assert!(
            html.contains(&format!("{host} stands out")),
            "{host} not said"
        );
    }
    assert!(html.contains("class=\"s"), "no cell is shaded");
    super::html_page::open_in_chromium(TEST, dir.path(), &page, "fleet.png");
}

/// Results of single commands rank on the figures they have: a noise result has no
/// timer figure (shown "-", not as a low one).
#[test]
fn issue37_bare_noise_and_timer_results_rank_on_their_own_figures() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["noise-traced-15cpu", "timer-fifo-15cpu"] {
        std::fs::write(dir.path().join(format!("{name}.json")), host16(name)).unwrap();
    }
    std::fs::write(dir.path().join("notes.txt"), "not a result").unwrap();
    let text = text_of(&fleet(&[dir.path().to_str().unwrap()], 100));
    assert!(text.contains("1 noise, 1 timer"), "{text}");
    assert!(
        text.contains("1 file(s) in "),
        "the skipped file is not said:\n{text}"
    );
    assert!(text.contains("-"), "{text}");
    let csv = text_of(&fleet(
        &[dir.path().to_str().unwrap(), "--format", "csv"],
        100,
    ));
    assert_eq!(csv.lines().count(), 3, "{csv}");
}

/// Bad input: one line, exit 2.
#[test]
fn issue37_bad_fleet_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("x.json");
    std::fs::write(&text, "hello").unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"schema":"jitterscope/9"}"#).unwrap();
    let (t, e, o) = (
        text.to_str().unwrap(),
        empty.to_str().unwrap(),
        other.to_str().unwrap(),
    );
    assert_bad_input(&[
        &["fleet"],
        &["fleet", "/nonexistent/fleet"],
        &["fleet", t],
        &["fleet", e],
        &["fleet", o],
        &["fleet", dir.path().to_str().unwrap()],
        &["fleet", e, "--format", "nosuch"],
    ]);
}
