//! The HTML report of a real `noise` plus `timer` run (the frozen fixture's): one self-contained page (no
//! external references, no script) holding the host, the degradations, the summary tables
//! and every plot inline. It is opened in headless Chromium (Debian's `chromium`; the test
//! skips, saying how to install it, when it is absent): it loads with no console message,
//! and each plot's SVG lays out at a non-zero size.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jitterscope::probes::noise::NoiseEntry;
use jitterscope::probes::timer::TimerEntry;
use jitterscope::report::ResultFile;
use jitterscope::report::export::plot;

use crate::util::{frozen_part, jitterscope, measuring, skip, stderr_lines, two_cpus};

const TEST: &str = "html_page_of_noise_and_timer_loads_in_chromium";

#[test]
fn html_page_of_noise_and_timer_loads_in_chromium() {
    // Held throughout: Chromium is heavy enough to disturb another test's measurement.
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let results = measure(dir.path());
    let page = dir.path().join("page.html");
    let mut args = vec!["report"];
    args.extend(results.iter().map(|p| p.to_str().unwrap()));
    args.extend(["--format", "html", "-o", page.to_str().unwrap()]);
    run_ok(&args);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html);
    let (figures, plot_failed) = expected_figures(&results);
    assert_content(&html, &results, figures);
    if plot_failed {
        // No font, say: the page renders without those figures and says why.
        assert!(
            html.contains("left out"),
            "a plot failed, and no warning says so"
        );
    }

    let Some(chromium) = find_chromium() else {
        skip(
            TEST,
            "no chromium on PATH: install Debian's chromium package \
             (apt-get install --no-install-recommends chromium; scripts/test does this as root)",
        );
        return;
    };
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html_page");
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::copy(&page, keep.join("page.html")).unwrap();
    let browser = Browser {
        exe: chromium,
        profile: dir.path().join("profile"),
    };
    check_loads_cleanly(&browser, &page, &keep.join("page.png"));
    check_svg_sizes(&browser, dir.path(), &html, figures);
}

/// The frozen fixture's noise and timer entries, one file each (as a one-second noise
/// run and timer run would have saved them), the noise entry traced: an `attribution`
/// of known causes is written in, so the page also holds a cause bar. Nothing is
/// measured.
fn measure(dir: &Path) -> Vec<PathBuf> {
    use crate::attribution_report::{attribution, causes_a, top_a, traced_kinds};
    let a = attribution(causes_a(), top_a());
    let noise = traced_kinds(&dir.join("a.json"), &["noise"], Some(a));
    vec![noise, frozen_part(&dir.join("b.json"), &["timer"])]
}

fn run_ok(args: &[&str]) {
    let out = jitterscope(args);
    let err = stderr_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err:?}");
}

/// The figures the page should hold (every plot the plotter draws for each file), and
/// whether any plot failed (the page must then say so).
fn expected_figures(results: &[PathBuf]) -> (usize, bool) {
    let (mut n, mut failed) = (0, false);
    for p in results {
        let loaded = (p.clone(), ResultFile::read(p).unwrap());
        // A cause bar per traced entry, drawn by the same plotter.
        let traced = (loaded.1.entries::<NoiseEntry>())
            .filter(|e| e.attribution.is_some())
            .count();
        match plot::result_plots(&[loaded]) {
            Ok(plots) => {
                let ok = plots.iter().filter(|p| p.svg().is_ok()).count();
                failed |= ok < plots.len();
                n += ok + if ok > 0 { traced } else { 0 };
            }
            Err(_) => failed = true,
        }
    }
    (n, failed)
}

/// Nothing the page refers to lies outside it, and it runs no script.
fn assert_self_contained(html: &str) {
    let lower = html.to_lowercase();
    for banned in [
        "<script", "<link", "<iframe", "<img", "<object", "<embed", "@import", "src=",
    ] {
        assert!(!lower.contains(banned), "the page holds {banned}");
    }
    // References inside the page (`#id`) are fine; anything else is an asset.
    for (attr, inside) in [("href=", "href=\"#"), ("url(", "url(#")] {
        for (i, _) in lower.match_indices(attr) {
            let at = &html[i..(i + 80).min(html.len())];
            assert!(lower[i..].starts_with(inside), "external reference: {at}");
        }
    }
}

/// Host facts, degradations, one summary table per probe, figures with units.
fn assert_content(html: &str, results: &[PathBuf], figures: usize) {
    let mut captions = Vec::new();
    for p in results {
        let r = ResultFile::read(p).unwrap();
        if r.probes.iter().any(|e| e.get::<NoiseEntry>().is_some()) {
            captions.push("noise: summary (times in µs)");
        }
        if r.probes.iter().any(|e| e.get::<TimerEntry>().is_some()) {
            captions.push("timer: summary (times in µs)");
        }
        assert!(html.contains(&escape(&r.host.hostname)), "hostname");
        assert!(html.contains(&escape(&r.host.cpu_model)), "CPU model");
        for d in &r.run.degraded {
            assert!(html.contains(&escape(&d.message)), "{}", d.message);
        }
    }
    for caption in captions {
        assert!(html.contains(caption), "{caption}");
    }
    assert!(html.contains("interruptions/s") && html.contains("p99.9 (µs)"));
    assert_eq!(html.matches("<figure>").count(), figures);
    if figures == 0 {
        eprintln!("{TEST}: the plotter drew no plots; the SVG checks are vacuous");
    }
    for cap in html.split("<figcaption>").skip(1) {
        let cap = &cap[..cap.find("</figcaption>").unwrap()];
        let unit = ["(ns)", "(µs)", "(us)", "(ms)", "(s)", "(%)"];
        assert!(unit.iter().any(|u| cap.contains(u)), "no unit: {cap}");
    }
}

/// What maud writes for text.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

struct Browser {
    exe: PathBuf,
    /// A profile of our own: nothing shared with another Chromium.
    profile: PathBuf,
}

impl Browser {
    /// Runs headless Chromium on `page` with `extra` flags; returns stdout and stderr
    /// (where `--enable-logging=stderr` writes console messages as `…:CONSOLE…`).
    fn run(&self, extra: &[String], page: &Path) -> (String, String) {
        let out = tempfile::tempdir().unwrap();
        let (so, se) = (out.path().join("stdout"), out.path().join("stderr"));
        let mut child = Command::new(&self.exe)
            .args(self.flags())
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&so).unwrap())
            .stderr(std::fs::File::create(&se).unwrap())
            .spawn()
            .expect("chromium starts");
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("chromium did not finish within 120 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let (stdout, stderr) = (read(&so), read(&se));
        assert!(status.success(), "chromium: {status}: {stderr}");
        (stdout, stderr)
    }

    fn flags(&self) -> Vec<String> {
        [
            "--headless",
            // The sandbox refuses to run as root, as CI does.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--user-data-dir={}", self.profile.display())])
        .collect()
    }
}

/// Console messages in Chromium's log.
fn console_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

const SHOT_SIZE: &str = "--window-size=1280,6000";

/// The shipped page: a screenshot, no console message, not a blank image.
fn check_loads_cleanly(browser: &Browser, page: &Path, shot: &Path) {
    let _ = std::fs::remove_file(shot);
    // Tall enough to show the plots below the host facts and the audit.
    let flags = [format!("--screenshot={}", shot.display()), SHOT_SIZE.into()];
    let (_, log) = browser.run(&flags, page);
    assert_eq!(console_lines(&log), Vec::<&str>::new(), "console messages");
    eprintln!("{TEST}: screenshot of the page: {}", shot.display());
    let (width, height, dark) = png_stats(&std::fs::read(shot).expect("a screenshot"));
    assert_eq!((width, height), (1280, 6000));
    assert!(dark > 1000, "the screenshot is blank ({dark} dark pixels)");
}

/// Size and count of the pixels darker than light grey (text, lines).
fn png_stats(data: &[u8]) -> (u32, u32, usize) {
    let mut reader = png::Decoder::new(Cursor::new(data)).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let dark = buf[..info.buffer_size()]
        .chunks(channels)
        .filter(|px| px.iter().take(3).any(|&c| c < 160))
        .count();
    (info.width, info.height, dark)
}

/// Measures each SVG after layout: a copy of the page (the shipped one has no script)
/// with a script that writes every `svg`'s laid-out size and drawn extent into the DOM.
fn check_svg_sizes(browser: &Browser, dir: &Path, html: &str, figures: usize) {
    const PROBE: &str = r#"<script>
addEventListener('load', () => {
  const sizes = Array.from(document.querySelectorAll('figure svg'), s => {
    const r = s.getBoundingClientRect(), b = s.getBBox();
    return [r.width, r.height, b.width, b.height].map(v => v.toFixed(1)).join('x');
  });
  const pre = document.createElement('pre');
  pre.textContent = 'svg-sizes[' + sizes.join(' ') + ']';
  document.body.append(pre);
  console.log('jitterscope-probe-ran');
});
</script>"#;
    let probe = dir.join("probe.html");
    let at = html.rfind("</body>").expect("</body>");
    std::fs::write(&probe, format!("{}{PROBE}{}", &html[..at], &html[at..])).unwrap();
    // A laptop's window.
    let dump = [
        "--dump-dom",
        "--virtual-time-budget=5000",
        "--window-size=1280,800",
    ];
    let dump = dump.map(String::from);
    let (dom, log) = browser.run(&dump, &probe);
    // The probe's own message shows that console capture works: the clean log above
    // means something.
    let console = console_lines(&log);
    assert!(
        console.iter().any(|l| l.contains("jitterscope-probe-ran")),
        "console messages are not captured: {log}"
    );
    assert_eq!(console.len(), 1, "{console:?}");
    let start = dom.rfind("svg-sizes[").expect("the probe ran") + "svg-sizes[".len();
    let list = &dom[start..start + dom[start..].find(']').unwrap()];
    eprintln!("{TEST}: SVG sizes (box WxH, drawn WxH, px): {list}");
    let sizes: Vec<&str> = list.split_whitespace().collect();
    assert_eq!(sizes.len(), figures, "{list}");
    for s in sizes {
        let v: Vec<f64> = s.split('x').map(|v| v.parse().unwrap()).collect();
        assert!(v.iter().all(|&v| v > 10.0), "an SVG with no size: {s}");
    }
}

/// `--html PATH` on a measuring command writes the same page as `report --format html`
/// of the saved result, straight away.
#[test]
fn measuring_commands_write_the_page_with_html() {
    let Some((cpu, _)) = two_cpus() else {
        return skip(
            "measuring_commands_write_the_page_with_html",
            "needs two CPUs",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let (json, page) = (dir.path().join("n.json"), dir.path().join("n.html"));
    {
        let _lock = measuring();
        let c = cpu.to_string();
        run_ok(&[
            "noise",
            "-a",
            &c,
            "-D",
            "300ms",
            "-q",
            "-o",
            json.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ]);
    }
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html);
    let (figures, _) = expected_figures(std::slice::from_ref(&json));
    assert_content(&html, &[json], figures);
}

/// Issue 25: the page of a real `watch` result (tests/fixtures/watch.json, two threads of
/// a sleeper beside a CPU hog and a build): per thread its wake-up delay plots with their
/// unit, its summary row, its causes each with the audit finding whose fix would remove
/// it, its worst delays part by part, and the run's cost. Without the audit, the page says
/// so instead of naming a fix.
#[test]
fn issue25_watch_page_shows_threads_causes_and_fix_links() {
    const WATCH_TEST: &str = "issue25_watch_page_shows_threads_causes_and_fix_links";
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/watch.json");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("watch.html");
    let render = |json: &Path, page: &Path| {
        run_ok(&[
            "report",
            json.to_str().unwrap(),
            "--format",
            "html",
            "-o",
            page.to_str().unwrap(),
        ]);
        std::fs::read_to_string(page).unwrap()
    };
    let html = render(&fixture, &page);
    assert_self_contained(&html);
    let r = ResultFile::read(&fixture).unwrap();
    let w = r.watch.as_ref().expect("the fixture is a watch result");
    let audit = r.host.audit.as_ref().expect("the fixture has its audit");
    assert!(html.contains(&escape(&format!("watch: {}", w.target))));
    assert!(html.contains(&format!(
        "{} trace events read, {} lost",
        w.events_read, w.events_lost
    )));
    assert!(html.contains("ms of CPU per s"), "the tool's CPU cost");
    for th in &w.threads {
        let who = format!("{}:{}", th.comm, th.tid);
        assert!(
            html.contains(&format!("watch: thread {who}")),
            "{who}'s section"
        );
        // Its summary row: the wake-ups and p99 as the table shows them.
        let p99 = format!("{:.2}", th.wakeup.p99_ns.unwrap() as f64 / 1e3);
        assert!(
            html.contains(&format!("<td class=\"num\">{p99}</td>")),
            "{who} p99 {p99}"
        );
        let a = th.attribution.as_ref().expect("delays over the threshold");
        assert!(html.contains(&format!("watch {who}: the causes of {} delays", a.gaps)));
        assert!(html.contains(&format!("watch {who}: the {} largest delays", a.top.len())));
        for c in &a.causes {
            assert!(html.contains(&escape(&c.cause)), "{}", c.cause);
            // The link the terminal gives is the page's: the worst, most specific
            // finding of this host's audit whose fix removes the cause.
            if let Some(f) = jitterscope::report::terminal::watch::cause_findings(&r, c)
                .unwrap()
                .first()
            {
                assert_ne!(f.severity, jitterscope::system::audit::Severity::Ok);
                assert!(audit.findings.iter().any(|g| g.id == f.id));
                let link = escape(&format!("audit {}: {}", f.id, f.fix));
                assert!(html.contains(&link), "{}: {link}", c.cause);
            }
        }
    }
    // This host's audit: a task that ran instead points at isolation, the tick at
    // nohz_full.
    assert!(html.contains("audit isolated-missing: "), "a task's fix");
    assert!(
        html.contains("audit nohz-full-unsupported: "),
        "the tick's fix"
    );
    // Two plots per thread (percentiles, histogram), each with its unit.
    plot::result_plots(&[(fixture.clone(), r.clone())]).expect("the watch's plots");
    assert_eq!(html.matches("<figure>").count(), 2 * w.threads.len());
    assert!(html.contains("watch js-fixture wakeup: latency by percentile ("));
    assert!(html.contains("watch js-fixture wakeup: histogram ("));
    for cap in html.split("<figcaption>").skip(1) {
        let cap = &cap[..cap.find("</figcaption>").unwrap()];
        let unit = ["(ns)", "(µs)", "(ms)", "(s)", "(%)"];
        assert!(unit.iter().any(|u| cap.contains(u)), "no unit: {cap}");
    }

    // No audit in the result: no fix is named, and the page says why.
    let mut bare = r.clone();
    bare.host.audit = None;
    let bare_json = dir.path().join("no-audit.json");
    std::fs::write(&bare_json, serde_json::to_string(&bare).unwrap()).unwrap();
    let bare_html = render(&bare_json, &dir.path().join("no-audit.html"));
    assert!(
        !bare_html.contains("audit isolated-missing"),
        "a fix without an audit"
    );
    assert!(bare_html.contains("(no audit in this result)"));

    open_in_chromium(WATCH_TEST, dir.path(), &page, "watch.png");
}

/// Opens `page` in headless Chromium (a profile under `dir`), checks that it loads
/// cleanly and keeps its screenshot as `shot` under the target directory; skips, saying
/// why, without Chromium.
pub(crate) fn open_in_chromium(test: &str, dir: &Path, page: &Path, shot: &str) {
    let Some(chromium) = find_chromium() else {
        return skip(test, "no chromium on PATH: the page is not opened");
    };
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html_page");
    std::fs::create_dir_all(&keep).unwrap();
    let browser = Browser {
        exe: chromium,
        profile: dir.join("profile"),
    };
    let _m = measuring();
    check_loads_cleanly(&browser, page, &keep.join(shot));
}

// ---------------------------------------------------------------------------------------
// Issue 29: the page at 16 to 192 CPUs

/// The most a page of 192 CPUs may weigh.
const MAX_PAGE_BYTES: usize = 3 * 1024 * 1024;

/// `json` written to `dir/NAME.json`, and its page (`report --format html`).
fn page_of(dir: &Path, name: &str, json: &str) -> (PathBuf, String) {
    let (file, page) = (
        dir.join(format!("{name}.json")),
        dir.join(format!("{name}.html")),
    );
    std::fs::write(&file, json).unwrap();
    run_ok(&[
        "report",
        file.to_str().unwrap(),
        "--format",
        "html",
        "-o",
        page.to_str().unwrap(),
    ]);
    (page.clone(), std::fs::read_to_string(&page).unwrap())
}

/// The summary table's key cell of every CPU 1..n-1 of `probe`'s rows: every CPU named.
fn assert_every_cpu_named(html: &str, n: usize) {
    let missing: Vec<usize> = (1..n)
        .filter(|c| !html.contains(&format!("<td>cpu{c}</td>")))
        .collect();
    assert!(missing.is_empty(), "CPUs not named: {missing:?}");
}

/// The heat map of `probe`: its figure, a row label per CPU band, its colour key.
fn assert_heat_map(html: &str, probe: &str, gap: &str) {
    let caption = format!("<figcaption>{probe}: {gap} per ");
    let at = html
        .find(&caption)
        .unwrap_or_else(|| panic!("no {probe} heat map"));
    let svg_start = html[..at].rfind("<svg").expect("the heat map's svg");
    let svg = &html[svg_start..at];
    assert!(
        svg.contains("shape-rendering=\"crispEdges\""),
        "{probe}: not the heat map"
    );
    assert!(
        svg.contains(&format!("{gap} per cell (")),
        "{probe}: no colour key"
    );
    assert!(
        svg.contains(">time (s), each column "),
        "{probe}: no time axis"
    );
}

/// Issue 29: the page of a 191-CPU main job (the frozen fixture's main-job result, its
/// noise and timer entries copied onto CPUs 1-191) stays under 3 MB with a heat map of
/// each kind, one table of the largest events across CPUs and every CPU named; plots
/// only for the CPUs that stand out; and Chromium loads it with a clean console.
#[test]
fn issue29_the_page_of_a_191_cpu_main_job_is_bounded_and_has_heat_maps() {
    const TEST: &str = "issue29_the_page_of_a_191_cpu_main_job_is_bounded_and_has_heat_maps";
    let dir = tempfile::tempdir().unwrap();
    let json = crate::util::grown(&std::fs::read_to_string(crate::util::FROZEN).unwrap(), 192);
    let (page, html) = page_of(dir.path(), "main192", &json);
    assert!(
        html.len() <= MAX_PAGE_BYTES,
        "the page is {} bytes",
        html.len()
    );
    assert_self_contained(&html);
    assert_heat_map(&html, "noise", "largest interruption");
    assert_heat_map(&html, "timer", "largest latency");
    assert_every_cpu_named(&html, 192);
    for probe in ["noise", "timer"] {
        assert!(html.contains(&format!("<h2>{probe}: CPUs 1-191 (191 CPUs)</h2>")));
        // One table of the largest events across CPUs, with a CPU column.
        let caption = format!("{probe}: the 30 largest events of all 191 CPUs");
        assert_eq!(html.matches(&caption).count(), 1, "{caption}");
        // Not a table per CPU.
        assert!(
            !html.contains(&format!("{probe} CPU 5: the ")),
            "{probe}: a per-CPU table"
        );
    }
    // Plots for the few CPUs that stand out, not seven per CPU.
    let figures = html.matches("<figure>").count();
    assert!((10..=60).contains(&figures), "{figures} figures");
    assert!(
        html.contains("(stands out: the largest gap"),
        "no standout named"
    );
    assert!(html.contains("noise interruption, every CPU: latency by percentile"));
    open_in_chromium(TEST, dir.path(), &page, "main192.png");
}

/// Issue 29: the page of the 16-CPU host's traced noise (CPUs 1-15), and of it grown to
/// 191 CPUs: one CPU × cause matrix whose rows are every traced CPU, each row's shares
/// as stored; the heat map; each CPU's causes folded; under 3 MB.
#[test]
fn issue29_the_traced_host16_page_has_one_cause_matrix_at_15_and_191_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let traced = crate::util::host16("noise-traced-15cpu");
    for (n, json) in [
        (16, traced.clone()),
        (192, crate::util::grown(&traced, 192)),
    ] {
        let (_, html) = page_of(dir.path(), &format!("traced{n}"), &json);
        assert!(html.len() <= MAX_PAGE_BYTES, "{n}: {} bytes", html.len());
        assert_heat_map(&html, "noise", "largest interruption");
        assert_every_cpu_named(&html, n);
        let caption =
            "noise: the causes of every traced CPU, as shares of its interrupted time (%)";
        assert_eq!(html.matches(caption).count(), 1, "{n}: one matrix");
        let at = html.find(caption).unwrap();
        let table = &html[html[..at].rfind("<table").unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        let open_tag = &table[..table.find('>').unwrap()];
        assert!(open_tag.contains("matrix"), "{open_tag}");
        let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
        assert_eq!(rows.len(), n - 1, "{n}: a row per traced CPU");
        // Each row: the CPU, then the shares, the largest cause's as stored.
        let r = jitterscope::report::ResultFile::parse(&json).unwrap();
        for (row, e) in rows.iter().zip(r.entries::<NoiseEntry>()) {
            let a = e.attribution.as_ref().expect("traced");
            assert!(
                row.starts_with(&format!("<td class=\"num\">{}</td>", e.cpu)),
                "{row}"
            );
            let top = &a.causes[0];
            assert!(
                row.contains(&format!(">{:.1}</td>", top.share_pct)),
                "{row}"
            );
        }
        // Every CPU's own causes, folded.
        assert!(html.contains("<details"), "{n}: no folds");
        for c in [1, n - 1] {
            assert!(
                html.contains(&format!("noise CPU {c}: the causes of ")),
                "{n}: CPU {c}"
            );
        }
    }
}

/// Issue 29: `compare --format html` of two 64-CPU traced results draws the overlaid
/// plots of a few CPUs only and says how many it left out; the per-CPU cause tables are
/// folded; the page stays under 3 MB.
#[test]
fn issue29_the_compare_page_of_64_cpus_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let json = crate::util::grown(&crate::util::host16("noise-traced-15cpu"), 65);
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::write(&a, &json).unwrap();
    std::fs::write(&b, &json).unwrap();
    let page = dir.path().join("c.html");
    run_ok(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "html",
        "-o",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.len() <= MAX_PAGE_BYTES, "{} bytes", html.len());
    assert_self_contained(&html);
    assert!(
        html.contains("those of 60 of 64 noise CPUs are left out"),
        "says what it left out"
    );
    // Three plots (series, percentiles, histogram) for four CPUs.
    assert_eq!(html.matches("<figure>").count(), 12);
    assert_eq!(
        html.matches("<details>").count(),
        64,
        "a fold per CPU's causes"
    );
}
