//! Issue 29: c2c's terminal view at 16 to 192 CPUs, read back by `report` from the 16-CPU
//! guest's result (tests/fixtures/host16/c2c-16cpu.json.gz) and from results grown from
//! it to 64 and 192 CPUs. Nothing is measured: each check is against the figures in the
//! JSON.

use std::collections::BTreeMap;
use std::process::Command;

use jitterscope::engine::cpu::CpuList;
use jitterscope::engine::topology::{CpuPlace, LastLevelCache, Topology};
use jitterscope::probes::c2c::C2cEntry;
use jitterscope::report::terminal::table::Layout;
use jitterscope::report::{ProbeEntry, ResultFile};
use serde_json::Value;

use crate::util::{bin, host16, stderr_lines};

/// `report FILE [extra]` at `COLUMNS=width`: its stdout.
fn report_at(width: u16, json: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c2c.json");
    std::fs::write(&path, json).unwrap();
    let out = Command::new(bin())
        .arg("report")
        .arg(&path)
        .args(extra)
        .env("COLUMNS", width.to_string())
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Each pair's median one-way latency in the result, by (cpu_a, cpu_b).
fn medians(json: &str) -> BTreeMap<(usize, usize), f64> {
    let d: Value = serde_json::from_str(json).unwrap();
    (d["probes"].as_array().unwrap().iter())
        .map(|p| {
            let cpu = |k: &str| p[k].as_u64().unwrap() as usize;
            (
                (cpu("cpu_a"), cpu("cpu_b")),
                p["median_ns"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The figure `v` as the view writes it (whole ns), or any rounding of a tie.
fn shows(text: &str, v: f64) -> bool {
    text.parse::<f64>().is_ok_and(|t| (t - v).abs() <= 0.5)
}

/// The view's words, one space apart: wrapped lines joined, table cells side by side.
fn unwrapped(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// No line over `width`, and no number broken over two lines: a line that begins (after
/// its indent) with "." and a digit, or that ends in a digit and "." with the next line
/// beginning with a digit, holds half of a split figure ("190" / ".2", "6." / "0").
fn assert_fits_and_numbers_whole(text: &str, width: usize) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        assert!(l.chars().count() <= width, "over {width}: {l:?}\n{text}");
        let t = l.trim();
        let digit = |c: char| c.is_ascii_digit();
        let split_start = t.starts_with('.') && t[1..].starts_with(digit);
        let next_digit = (lines.get(i + 1)).is_some_and(|n| n.trim_start().starts_with(digit));
        let split_end = next_digit && t.ends_with('.') && t[..t.len() - 1].ends_with(digit);
        assert!(!split_start && !split_end, "a split number: {l:?}\n{text}");
    }
}

/// The median matrix's rows, each as its label and cells, from the view's text.
fn median_rows(text: &str) -> Vec<Vec<String>> {
    let start = text
        .find("Median one-way latency (ns)")
        .expect("the matrix");
    let end = start + text[start..].find("Minimum one-way").unwrap();
    (text[start..end].lines())
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .filter(|w| w.first().is_some_and(|c| c.parse::<usize>().is_ok()))
        .collect()
}

#[test]
fn issue29_c2c_of_16_cpus_fits_100_and_80_columns_with_every_number_whole() {
    let json = host16("c2c-16cpu");
    let med = medians(&json);
    assert_eq!(med.len(), 120);
    for width in [100, 80] {
        let text = report_at(width, &json, &[]);
        assert_fits_and_numbers_whole(&text, usize::from(width));
        // The whole matrix, one line per CPU, each cell the pair's median in whole ns.
        let rows = median_rows(&text);
        assert_eq!(rows.len(), 16, "{text}");
        for row in &rows {
            let a: usize = row[0].parse().unwrap();
            assert_eq!(row.len(), 17, "row {a} has every column: {row:?}");
            for (b, cell) in row[1..].iter().enumerate() {
                if a == b {
                    assert_eq!(cell, "·");
                    continue;
                }
                let v = med[&(a.min(b), a.max(b))];
                assert!(shows(cell, v), "pair {a}-{b}: {cell} for {v}");
                assert!(!cell.contains('.'), "whole ns: {cell}");
            }
        }
        // The summary names the slowest and fastest pairs with their figures.
        let mut by: Vec<(&(usize, usize), &f64)> = med.iter().collect();
        by.sort_by(|x, y| y.1.total_cmp(x.1));
        let flat = unwrapped(&text);
        for (what, ((a, b), v)) in [("Slowest", by[0]), ("Fastest", by[by.len() - 1])] {
            let at = flat
                .find(&format!("{what} pairs: {a}-{b} "))
                .unwrap_or_else(|| panic!("{what} pair {a}-{b} not named first:\n{text}"));
            let figure = flat[at..].split_whitespace().nth(3).unwrap();
            assert!(shows(figure, *v), "{what}: {figure} for {v}");
        }
        // One class (the fixture records no cache), said so, with every pair in it.
        assert!(
            flat.contains("same package 120 "),
            "the one class and its count:\n{text}"
        );
        assert!(flat.contains("records no last-level cache"), "{text}");
    }
}

/// A synthetic topology of `n` CPUs (n a multiple of 8): 2 packages (one node each), 2
/// last-level caches per package, `n / 2` cores of 2 threads, CPU c and c + n/2 siblings.
fn place(cpu: usize, n: usize) -> CpuPlace {
    let half = n / 2;
    let core = cpu % half;
    let llc = core / (half / 4);
    let llc_cpus: Vec<usize> = (llc * half / 4..(llc + 1) * half / 4)
        .flat_map(|c| [c, c + half])
        .collect();
    CpuPlace {
        cpu,
        package: Some((core / (half / 2)) as u32),
        die: Some(0),
        core: Some(core as u32),
        smt_siblings: CpuList::from_cpus(vec![core, core + half]),
        node: Some((core / (half / 2)) as u32),
        llc: Some(LastLevelCache {
            level: 3,
            id: Some(llc as u32),
            cpus: CpuList::from_cpus(llc_cpus),
        }),
    }
}

/// The 16-CPU c2c result grown to `n` CPUs: pair (a, b) takes the figures of the
/// fixture's pair (a mod 16, b mod 16), or of a fixture pair picked by (a + b) when the
/// two fall on one CPU; the places are `place`'s. Real figures, repeated, on a made-up
/// 2-socket layout: for how the output scales, not for what it says of a host. Built as
/// the library's types, not JSON: 192 CPUs make 18 336 pairs, 30 MB of JSON that a
/// debug build takes seconds to parse.
fn grown_c2c(json: &str, n: usize) -> ResultFile {
    let mut r = ResultFile::parse(json).unwrap();
    let src: Vec<C2cEntry> = r.entries::<C2cEntry>().cloned().collect();
    let index: BTreeMap<(usize, usize), &C2cEntry> =
        src.iter().map(|e| ((e.cpu_a, e.cpu_b), e)).collect();
    let places: Vec<CpuPlace> = (0..n).map(|c| place(c, n)).collect();
    let topo = Topology {
        cpus: places.clone(),
    };
    let mut probes = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let (x, y) = (a % 16, b % 16);
            let mut e = match x == y {
                false => index[&(x.min(y), x.max(y))].clone(),
                true => src[(a + b) % src.len()].clone(),
            };
            (e.cpu_a, e.cpu_b) = (a, b);
            (e.place_a, e.place_b) = (places[a].clone(), places[b].clone());
            e.locality = topo.locality(a, b);
            probes.push(ProbeEntry::C2c(Box::new(e)));
        }
    }
    r.probes = probes;
    r.host.cpu_count = n;
    r.run.cpus.measured = CpuList::parse_kernel(&format!("0-{}", n - 1)).unwrap();
    r
}

/// Issue 35: the HTML page of a 192-CPU c2c result is at most 3 MB (it was 3.41 MB, 3.3
/// MB of it the heat map, a rectangle element per cell), its heat map drawn as paths of
/// merged runs, a row for every CPU.
#[test]
fn issue35_the_html_page_of_192_cpus_is_at_most_3_mb() {
    use jitterscope::report::page::{html, result_page};
    let r = grown_c2c(&host16("c2c-16cpu"), 192);
    let page = result_page::result_page(&[("c2c.json".into(), r)]).unwrap();
    let page = html::render(&page);
    assert!(page.len() <= 3_000_000, "{} bytes", page.len());
    // Every cell of the 192 × 192 matrix drawn once, following each path's pen.
    let at = page
        .find("scale(12 12)")
        .expect("the heat map's cells as paths");
    let (mut cells, mut rows) = (0, std::collections::BTreeSet::new());
    for path in page[at..].split("<path").skip(1) {
        let d = path
            .split("d=\"M0 0")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let (mut x, mut y) = (0i64, 0i64);
        for run in d.split('m').skip(1) {
            let (dxy, len) = run.split_once('h').unwrap();
            let (dx, dy) = dxy.split_once(' ').unwrap();
            (x, y) = (
                x + dx.parse::<i64>().unwrap(),
                y + dy.parse::<i64>().unwrap(),
            );
            let len: i64 = len.parse().unwrap();
            assert!(x >= 0 && x + len <= 192 && (0..192).contains(&y), "{x} {y}");
            (cells, x) = (cells + len, x + len);
            rows.insert(y);
        }
        if path.contains("</g>") {
            break;
        }
    }
    assert_eq!((cells, rows.len()), (192 * 192, 192));
}

/// Issue 35: at 96 CPUs, the most cells that still carry their value (24 pixels each),
/// the page is at most 1 MB (it was 2.3 MB, 2.2 MB of it the map: a rectangle and a
/// text element of plotters' per cell), and every pair's median is still written, in
/// whole ns, at the centre of both its cells.
#[test]
fn issue35_the_html_page_of_96_cpus_labels_every_cell_within_1_mb() {
    use jitterscope::report::page::{html, result_page};
    let (n, px) = (96, 24);
    let r = grown_c2c(&host16("c2c-16cpu"), n);
    let med = medians_of(&r);
    let page = result_page::result_page(&[("c2c.json".into(), r)]).unwrap();
    let page = html::render(&page);
    assert!(page.len() <= 1_000_000, "{} bytes", page.len());
    let at = page
        .find("scale(24 24)")
        .expect("the heat map's cells as paths");
    let map = &page[at..page[at..].find("</svg>").unwrap() + at];
    let mut seen = std::collections::BTreeSet::new();
    for text in map.split("<text x=\"").skip(1) {
        let (x, rest) = text.split_once("\" y=\"").unwrap();
        let (y, rest) = rest.split_once('"').unwrap();
        let v = rest.split_once('>').unwrap().1.split('<').next().unwrap();
        let (x, y): (i32, i32) = (x.parse().unwrap(), y.parse().unwrap());
        assert_eq!((x % px, y % px), (px / 2, px / 2), "centred: {x} {y}");
        let (col, row) = ((x / px) as usize, (y / px) as usize);
        let want = med[&(row.min(col), row.max(col))];
        assert!(
            v.parse::<u64>().is_ok() && shows(v, want),
            "{row}-{col}: {v}"
        );
        assert!(seen.insert((row, col)), "{row}-{col} written twice");
    }
    assert_eq!(
        seen.len(),
        n * (n - 1),
        "every measured cell, both ways round"
    );
}

/// Each pair's median one-way latency in `r`, by (cpu_a, cpu_b).
fn medians_of(r: &ResultFile) -> BTreeMap<(usize, usize), f64> {
    (r.entries::<C2cEntry>())
        .map(|e| ((e.cpu_a, e.cpu_b), e.median_ns.unwrap()))
        .collect()
}

/// What `report` prints of `r`'s tables at `width` columns (the view `report` calls).
fn tables_at(width: u16, r: &ResultFile) -> String {
    Layout::fixed(width, false).scoped(|| jitterscope::report::views::tables(r))
}

#[test]
fn issue29_c2c_of_64_and_192_cpus_stays_in_bounded_lines() {
    let json = host16("c2c-16cpu");
    for n in [64, 192] {
        let r = grown_c2c(&json, n);
        let med = medians_of(&r);
        assert_eq!(med.len(), n * (n - 1) / 2);
        let text = tables_at(100, &r);
        assert_fits_and_numbers_whole(&text, 100);
        let lines = text.lines().count();
        assert!(lines <= 50, "{n} CPUs: {lines} lines\n{text}");
        // No matrix, and a line saying where it is.
        assert!(!text.contains("Median one-way latency (ns)"), "{text}");
        let flat = unwrapped(&text);
        assert!(
            flat.contains(&format!("The {n} × {n} matrices")) && flat.contains("--wide"),
            "{text}"
        );
        // The four classes of the made-up layout, with their pair counts: n/2 sibling
        // pairs; per L3 n/4 CPUs; per package n/2 CPUs.
        let q = n / 4;
        let same_l3 = 4 * (q * (q - 1) / 2) - n / 2;
        let same_package = 2 * ((n / 2) * (n / 2 - 1) / 2) - 4 * (q * (q - 1) / 2);
        for (class, count) in [
            ("SMT siblings", n / 2),
            ("same L3", same_l3),
            ("same package", same_package),
            ("cross-package", (n / 2) * (n / 2)),
        ] {
            assert!(
                flat.contains(&format!("{class} {count} ")),
                "{class} {count}:\n{text}"
            );
        }
        // The slowest pair overall is named first, with its figure.
        let (&(a, b), &v) = (med.iter())
            .max_by(|x, y| x.1.total_cmp(y.1).then(y.0.cmp(x.0)))
            .unwrap();
        let at = flat.find("Slowest pairs: ").unwrap();
        let words: Vec<&str> = flat[at..].split_whitespace().collect();
        assert_eq!(words[2], format!("{a}-{b}"), "{text}");
        assert!(shows(words[3], v), "{text}");
    }
}

#[test]
fn issue29_c2c_wide_prints_the_whole_matrix_unwrapped() {
    let json = host16("c2c-16cpu");
    let grown = grown_c2c(&json, 64);
    let med = medians_of(&grown);
    let text = report_at(100, &grown.to_json(), &["--wide"]);
    let rows = median_rows(&text);
    assert_eq!(rows.len(), 64);
    for row in &rows {
        let a: usize = row[0].parse().unwrap();
        assert_eq!(row.len(), 65, "row {a}: {row:?}");
        let b = (a + 1) % 64;
        assert!(shows(&row[b + 1], med[&(a.min(b), a.max(b))]), "{row:?}");
    }
    // With --wide, where each CPU sits, too.
    assert!(
        text.contains("SMT siblings") && text.contains("L3 #3"),
        "{text}"
    );
}
