//! Issue 16, items 4, 5 and 8: cyclictest's habits, clap's suggestions, per-command help,
//! shell completions and the manual page.

use crate::util::{jitterscope, measuring, skip, stderr_lines};

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn timer_h_is_the_histogram_not_help() {
    let _m = measuring();
    let out = jitterscope(&[
        "timer",
        "-h",
        "400",
        "-l",
        "5",
        "-i",
        "200",
        "-a",
        "0",
        "--no-dma-latency",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    assert!(!stdout(&out).contains("Usage:"), "{}", stdout(&out));
    // cyclictest's histogram: 1-µs buckets, one column per thread, every wake-up counted.
    assert!(stdout(&out).contains("# Histogram"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("# Total: 000000005"),
        "{}",
        stdout(&out)
    );
    let bare = jitterscope(&["timer", "-h"]);
    assert_eq!(
        bare.status.code(),
        Some(2),
        "a bare -h must not pass for help"
    );
    assert!(stdout(&jitterscope(&["timer", "--help"])).contains("--histogram"));
}

#[test]
fn json_equals_file_writes_the_result_there() {
    let _m = measuring();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let arg = format!("--json={}", file.display());
    let out = jitterscope(&[
        "timer",
        "-l",
        "5",
        "-i",
        "200",
        "-a",
        "0",
        "--no-dma-latency",
        &arg,
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    assert!(
        stdout(&out).contains("Wake-up latency"),
        "the table is still printed"
    );
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(jitterscope::report::ResultFile::parse(&saved).is_ok());
}

#[test]
fn mistakes_get_a_suggestion_or_the_replacement() {
    let cases: [(&[&str], &str); 5] = [
        (&["nosie"], "a similar subcommand exists: 'noise'"),
        (
            &["noise", "--treshold", "5"],
            "a similar argument exists: '--threshold'",
        ),
        (&["timer", "-t", "4"], "-a LIST (cyclictest -t)"),
        (&["timer", "--laptop"], "--no-dma-latency"),
        (&["timer", "-n"], "clock_nanosleep"),
    ];
    for (args, hint) in cases {
        let out = jitterscope(args);
        let lines = stderr_lines(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(lines[0].contains(hint), "{args:?}: {lines:?}");
    }
}

#[test]
fn each_command_lists_its_own_flags_and_defaults() {
    let noise = stdout(&jitterscope(&["noise", "--help"]));
    for other in ["pingpong", "syscalls", "-l,", "mechanism"] {
        assert!(
            !noise.contains(other),
            "noise --help mentions {other}:\n{noise}"
        );
    }
    let c2c = stdout(&jitterscope(&["c2c", "--help"]));
    assert!(
        !c2c.contains("--duration"),
        "c2c refuses -D, so its help must not list it"
    );
    let queue = stdout(&jitterscope(&["queue", "--help"]));
    assert!(
        !queue.contains("--cpus"),
        "queue places its roles with their own flags"
    );
    let pingpong = stdout(&jitterscope(&["pingpong", "--help"]));
    assert!(pingpong.contains("as A,B"));
}

#[test]
fn completions_load_in_bash_and_the_man_page_renders() {
    let bin = crate::util::bin();
    let script = format!(
        "source <('{}' completions bash) && complete -p jitterscope",
        bin.display()
    );
    match std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(stdout(&o).contains("jitterscope"));
        }
        Err(_) => skip("completions_load_in_bash", "bash is not installed"),
    }
    let page = jitterscope(&["man"]);
    assert_eq!(page.status.code(), Some(0));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jitterscope.1");
    std::fs::write(&file, &page.stdout).unwrap();
    match std::process::Command::new("man")
        .arg("-l")
        .arg(&file)
        .env("MANWIDTH", "80")
        .output()
    {
        Ok(o) if o.status.success() => {
            let text = stdout(&o);
            assert!(text.contains("jitterscope"), "{text}");
            assert!(
                text.contains("JITTERSCOPE NOISE"),
                "each command has a section"
            );
        }
        Ok(o) => panic!("man -l failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => skip("the_man_page_renders", "man (man-db) is not installed"),
    }
}

/// Issue 16: with COLUMNS=100 the audit fits 100 columns, except a command to paste,
/// which stands whole on a line of its own.
#[test]
fn the_audit_fits_100_columns_and_commands_stand_alone() {
    let out = std::process::Command::new(crate::util::bin())
        .arg("audit")
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for line in text.lines().filter(|l| l.chars().count() > 100) {
        // A pasted command is indented ten spaces under its "now:" or "at boot:" label.
        assert!(
            line.starts_with("          ") && !line.trim().contains(": "),
            "{line}"
        );
    }
    assert!(text.contains("need attention"), "{text}");
}
