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
    let text = match man_renders(&page.stdout) {
        Some(text) => text,
        None => return skip("the_man_page_renders", "man (man-db) is not installed"),
    };
    assert!(text.contains("jitterscope"), "{text}");
    assert!(
        text.contains("jitterscope-noise(1)"),
        "the top page names each command's page: {text}"
    );
}

/// `man -l` of a page: its text at 80 columns, or None without man.
fn man_renders(roff: &[u8]) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("page.1");
    std::fs::write(&file, roff).unwrap();
    let o = std::process::Command::new("man")
        .arg("-l")
        .arg(&file)
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .output()
        .ok()?;
    assert!(
        o.status.success(),
        "man -l failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(stdout(&o))
}

/// An option's or argument's names as help and the manual head it, brackets and
/// defaults left out: "-a --cpus LIST", "RESULT".
fn names(head: &str) -> String {
    let head = head.split(" [default").next().unwrap_or(head);
    head.replace(['<', '>', '[', ']', ','], " ")
        .replace("...", " ")
        .replace('=', " ")
        .split_whitespace()
        .fold(Vec::<&str>::new(), |mut seen, w| {
            // `<RESULT> <RESULT>...` (two or more) names one argument.
            if !seen.contains(&w) {
                seen.push(w);
            }
            seen
        })
        .join(" ")
}

/// The options and arguments `jitterscope help CMD` lists (the heads of its
/// Arguments: and Options: sections).
fn help_heads(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        // Heads are indented 2 or 6; their wrapped descriptions further.
        .filter(|l| (2..=6).contains(&(l.len() - l.trim_start().len())))
        .filter(|l| matches!(l.trim_start().chars().next(), Some('-' | '<' | '[')))
        .map(|l| names(l.trim().split("  ").next().unwrap()))
        .collect()
}

/// The heads of the options a manual page lists with no word on what they do.
fn undescribed(roff: &str) -> Vec<String> {
    let lines: Vec<&str> = roff.lines().collect();
    lines
        .windows(3)
        .filter(|w| w[0] == ".TP" && (w[2].is_empty() || w[2].starts_with('.')))
        .map(|w| w[1].to_string())
        .collect()
}

/// The options and arguments a manual page lists (the line after each `.TP`).
fn man_heads(roff: &str) -> std::collections::BTreeSet<String> {
    let lines: Vec<&str> = roff.lines().collect();
    let options = lines.iter().position(|l| *l == ".SH OPTIONS");
    let end = lines.iter().position(|l| l.starts_with(".SH SUBCOMMANDS"));
    let Some(start) = options else {
        return Default::default();
    };
    let body = &lines[start..end.unwrap_or(lines.len())];
    body.windows(2)
        .filter(|w| w[0] == ".TP")
        .map(|w| {
            let plain = w[1]
                .replace("\\fB", "")
                .replace("\\fR", "")
                .replace("\\fI", "")
                .replace("\\-", "-");
            names(&plain)
        })
        .collect()
}

/// Issue 31: a manual page per command, and it says what `jitterscope help CMD` says:
/// the same options and arguments, for the top level and every command, each with a word
/// on what it does; each page renders with man.
#[test]
fn issue31_each_command_has_a_man_page_with_its_help_options() {
    let commands = jitterscope::app::manual::commands();
    for must in [
        "noise", "timer", "run", "tune", "watch", "selftest", "monitor",
    ] {
        assert!(commands.iter().any(|c| c == must), "{commands:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = jitterscope(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    pages.sort();
    let mut expected: Vec<String> = commands
        .iter()
        .map(|c| format!("jitterscope-{c}.1"))
        .chain(["jitterscope.1".to_string()])
        .collect();
    expected.sort();
    assert_eq!(pages, expected);

    for cmd in std::iter::once(None).chain(commands.iter().map(|c| Some(c.as_str()))) {
        let (help_args, man_args, file) = match cmd {
            Some(c) => (
                vec!["help", c],
                vec!["man", c],
                format!("jitterscope-{c}.1"),
            ),
            None => (vec!["help"], vec!["man"], "jitterscope.1".to_string()),
        };
        let help = stdout(&jitterscope(&help_args));
        let man = jitterscope(&man_args);
        assert_eq!(man.status.code(), Some(0), "{man_args:?}");
        let roff = stdout(&man);
        assert_eq!(
            roff,
            std::fs::read_to_string(dir.path().join(&file)).unwrap(),
            "man {cmd:?} prints the page --dir writes"
        );
        let (from_help, from_man) = (help_heads(&help), man_heads(&roff));
        assert!(
            from_help.len() >= 2,
            "{cmd:?}: help lists {from_help:?}:\n{help}"
        );
        assert_eq!(from_help, from_man, "{cmd:?}: help against man");
        assert_eq!(
            undescribed(&roff),
            Vec::<String>::new(),
            "{cmd:?}: every option says what it does"
        );
        if let Some(c) = cmd {
            assert!(roff.contains(&format!(".TH jitterscope-{c} 1")), "{roff}");
        }
    }
    // Every page renders: man -l on all of them at once (one groff start, not 19).
    match std::process::Command::new("man")
        .arg("-l")
        .args(expected.iter().map(|p| dir.path().join(p)))
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let text = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(
                text.matches("SYNOPSIS").count(),
                expected.len(),
                "every page renders"
            );
            assert!(
                text.contains("jitterscope-tune - Did the change help?"),
                "{text}"
            );
        }
        Err(_) => skip("issue31 man pages render", "man (man-db) is not installed"),
    }
    let bad = jitterscope(&["man", "nosuch"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr_lines(&bad)[0].contains("the commands are noise"));
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

/// Issue 49, item 3: `jitterscope help C`, `C --help` and C's manual page open with the
/// sentence its parent's help lists for C, for every command at every depth. A flattened
/// option group's doc comment once took the place of noise's and timer's own.
#[test]
fn issue49_each_command_opens_with_its_own_sentence() {
    use clap::CommandFactory;
    let mut root = jitterscope::cli::Cli::command().disable_help_subcommand(true);
    // Built, the deferred arguments (and any nested subcommands) are in the tree.
    root.build();
    let mut checked = Vec::new();
    check_openings(&root, &[], &mut checked);
    for must in ["noise", "timer", "fleet", "tune", "man"] {
        assert!(checked.iter().any(|c| c == must), "{checked:?}");
    }
}

/// Checks each visible subcommand of `cmd` (reached by `path`), then its own.
fn check_openings(cmd: &clap::Command, path: &[&str], checked: &mut Vec<String>) {
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if subs.is_empty() {
        return;
    }
    let parent_help = stdout(&jitterscope(&[path, &["--help"]].concat()));
    let list = listed_commands(&parent_help);
    for sub in subs {
        let at: Vec<&str> = path.iter().copied().chain([sub.get_name()]).collect();
        let listed = list.iter().find(|(n, _)| n == sub.get_name());
        let Some((_, entry)) = listed else {
            panic!("{at:?} is not in its parent's list:\n{parent_help}");
        };
        let want = first_sentence(entry);
        assert!(want.len() > 10, "{at:?}: listed as {entry:?}");
        let help = stdout(&jitterscope(&[&["help"], &at[..]].concat()));
        let flag = stdout(&jitterscope(&[&at[..], &["--help"]].concat()));
        assert_eq!(first_sentence(&help), want, "help {at:?}:\n{help}");
        assert_eq!(first_sentence(&flag), want, "{at:?} --help:\n{flag}");
        // Only top-level commands have a page of their own (jitterscope-CMD(1)).
        if path.is_empty() {
            let roff = stdout(&jitterscope(&["man", sub.get_name()]));
            let (name, description) = man_openings(&roff);
            let dashed = format!("jitterscope-{} - ", sub.get_name());
            assert_eq!(
                name.strip_prefix(&dashed).map(first_sentence),
                Some(want.clone()),
                "man {at:?} NAME:\n{roff}"
            );
            assert_eq!(first_sentence(&description), want, "man {at:?} DESCRIPTION");
        }
        checked.push(at.join(" "));
        check_openings(sub, &at, checked);
    }
}

/// The Commands: list of a help page: each name with its text, wrapped lines joined.
fn listed_commands(help: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let list = help.lines().skip_while(|l| *l != "Commands:").skip(1);
    for line in list.take_while(|l| !l.trim().is_empty()) {
        let indent = line.len() - line.trim_start().len();
        match (indent, out.last_mut()) {
            (2, _) => {
                let (name, text) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
                out.push((name.to_string(), text.trim().to_string()));
            }
            (_, Some((_, text))) => *text = format!("{text} {}", line.trim()),
            (_, None) => panic!("a continuation line opens the list: {line:?}"),
        }
    }
    out
}

/// The text of a manual page's NAME and the first paragraph of its DESCRIPTION, with
/// roff's escapes undone.
fn man_openings(roff: &str) -> (String, String) {
    let plain = |s: &str| {
        s.replace("\\-", "-")
            .replace("\\*(Aq", "'")
            .replace("\\fB", "")
            .replace("\\fR", "")
            .replace("\\fI", "")
    };
    let after = |head: &str| {
        let body = roff.lines().skip_while(|l| *l != head).skip(1);
        let text: Vec<&str> = body
            .take_while(|l| !l.starts_with('.') && !l.is_empty())
            .collect();
        plain(&text.join(" "))
    };
    (after(".SH NAME"), after(".SH DESCRIPTION"))
}

/// The first sentence of a text's first paragraph, its spacing and a closing full stop
/// left out (clap drops the stop of a one-sentence summary).
fn first_sentence(text: &str) -> String {
    let paragraph = text.trim_start().split("\n\n").next().unwrap_or("");
    let words = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = (words.char_indices())
        .find(|&(i, c)| matches!(c, '.' | '?' | '!') && words[i + 1..].starts_with(' '))
        .map_or(words.len(), |(i, _)| i + 1);
    words[..end].trim_end_matches('.').to_string()
}
