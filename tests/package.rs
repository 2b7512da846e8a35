//! Issue 24, item 4: the Debian package. scripts/build-deb builds it, lintian finds no
//! error in it, and `dpkg -i` installs it on this machine. Then, as a user would: the
//! installed binary passes `selftest`, `dpkg -L` lists a manual page per command and
//! `man jitterscope` and `man jitterscope-tune` show theirs (issue 31), bash (and fish
//! and zsh, where installed) complete it from the system directories, and the monitor's
//! unit is there but disabled. `dpkg -r` leaves nothing behind.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{self, is_root, skip};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const TEST: &str = "the_package_installs_works_and_removes_cleanly";

/// Where a package leaves things: every path under these whose name says jitterscope is
/// listed before the install and after the removal, and the lists must match.
const WATCHED: [&str; 4] = ["/etc", "/usr", "/var/lib/dpkg", "/var/lib/systemd"];

/// Paths under `dir` whose file name contains "jitterscope" (links not followed).
fn ours_under(dir: &Path, found: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if e.file_name().to_string_lossy().contains("jitterscope") {
            found.insert(path.clone());
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            ours_under(&path, found);
        }
    }
}

fn ours() -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for dir in WATCHED {
        ours_under(Path::new(dir), &mut found);
    }
    found
}

/// dpkg's status of the jitterscope package ("installed", "config-files"), if it knows it.
fn package_status() -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Status}", "jitterscope"])
        .output()
        .ok()?;
    let status = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !status.is_empty() && status != "not-installed").then_some(status)
}

/// Runs a command that must succeed: its stdout and stderr.
fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?}: {text}");
    text
}

/// The package, installed for the test; removed however the test ends.
struct Installed;

impl Installed {
    fn new(deb: &str) -> Installed {
        ok(Command::new("dpkg").args(["-i", deb]));
        Installed
    }

    fn remove(self) {
        ok(Command::new("dpkg").args(["-r", "jitterscope"]));
        std::mem::forget(self);
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["-P", "jitterscope"]).output();
    }
}

/// Why this test cannot run here, if it cannot.
fn missing() -> Option<String> {
    if !is_root() {
        return Some("needs root to install a package".into());
    }
    if Command::new("dpkg").arg("--version").output().is_err() {
        return Some("no dpkg: not a Debian-like system".into());
    }
    if Command::new("cargo-deb").arg("--version").output().is_err() {
        return Some("cargo-deb is not installed (cargo install cargo-deb --locked)".into());
    }
    if let Some(status) = package_status() {
        return Some(format!(
            "a jitterscope package is already {status} here; not replacing it"
        ));
    }
    None
}

/// lintian's findings; none may be an error. Warnings are printed.
fn lint(deb: &str) {
    if Command::new("lintian").arg("--version").output().is_err() {
        return skip(&format!("{TEST} (lintian)"), "lintian is not installed");
    }
    let out = Command::new("lintian")
        .args(["--fail-on", "error", deb])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("lintian {deb}:\n{said}");
    assert!(out.status.success(), "lintian found errors:\n{said}");
    assert!(!said.lines().any(|l| l.starts_with("E: ")), "{said}");
}

/// The package holds a manual page per command (issue 31), as `dpkg -L` lists them, and
/// `man jitterscope` and `man jitterscope-tune` render the installed pages.
fn manual_pages_show() {
    let listed = ok(Command::new("dpkg").args(["-L", "jitterscope"]));
    let pages: BTreeSet<&str> = listed
        .lines()
        .filter(|l| l.starts_with("/usr/share/man/man1/"))
        .collect();
    eprintln!("{TEST}: dpkg -L lists {} manual pages", pages.len());
    let commands = jitterscope::app::manual::commands();
    let expected: BTreeSet<String> = commands
        .iter()
        .map(|c| format!("/usr/share/man/man1/jitterscope-{c}.1.gz"))
        .chain(["/usr/share/man/man1/jitterscope.1.gz".to_string()])
        .collect();
    let expected: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    let files: BTreeSet<&str> = pages
        .iter()
        .copied()
        .filter(|p| p.ends_with(".gz"))
        .collect();
    assert_eq!(files, expected, "dpkg -L jitterscope");
    if Command::new("man").arg("--version").output().is_err() {
        return skip(
            &format!("{TEST} (man)"),
            "man is not installed (apt-get install man-db)",
        );
    }
    if !Path::new("/usr/share/man/man1/jitterscope-tune.1.gz").exists() {
        // Container images of Debian tell dpkg to leave manual pages out.
        return skip(
            &format!("{TEST} (man)"),
            "dpkg was told not to install manual pages here",
        );
    }
    let man = |page: &str| {
        let text = ok(Command::new("man")
            .arg(page)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80"));
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let top = man("jitterscope");
    assert!(top.contains("jitterscope-noise(1)"), "{top}");
    let tune = man("jitterscope-tune");
    assert!(
        tune.contains("jitterscope-tune - Did the change help?"),
        "{tune}"
    );
    assert!(
        tune.contains("--restore") && tune.contains("SEE ALSO"),
        "{tune}"
    );
    let guide = "/usr/share/doc/jitterscope/docs/guide/tune.md";
    assert!(
        Path::new(guide).exists(),
        "the page's SEE ALSO names {guide}"
    );
}

/// bash completes `jitterscope no` to `noise` with what it loads from the system
/// directory (bash-completion's loader when installed, else the file sourced by hand).
fn bash_completes() {
    let script = r#"
        if [ -r /usr/share/bash-completion/bash_completion ]; then
            . /usr/share/bash-completion/bash_completion
            __load_completion jitterscope || exit 3
        else
            . /usr/share/bash-completion/completions/jitterscope
        fi
        f=$(complete -p jitterscope | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
        COMP_WORDS=(jitterscope no); COMP_CWORD=1; COMP_LINE="jitterscope no"; COMP_POINT=14
        "$f" jitterscope no jitterscope
        printf '%s\n' "${COMPREPLY[@]}"
    "#;
    let words = ok(Command::new("bash").args(["-c", script]));
    assert!(
        words.lines().any(|w| w.trim() == "noise"),
        "bash offered: {words}"
    );
}

/// fish and zsh, where installed, find the completion in their vendor directories.
fn other_shells_complete() {
    match Command::new("fish")
        .args(["-c", "complete -C 'jitterscope no'"])
        .output()
    {
        Ok(out) => {
            let words = String::from_utf8_lossy(&out.stdout);
            assert!(
                words.lines().any(|l| l.starts_with("noise")),
                "fish offered: {words}"
            );
        }
        Err(_) => skip(&format!("{TEST} (fish)"), "fish is not installed"),
    }
    let zsh = "autoload -Uz compinit && compinit -u && print -r -- $_comps[jitterscope]";
    match Command::new("zsh").args(["-c", zsh]).output() {
        Ok(out) => {
            let function = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                function.trim(),
                "_jitterscope",
                "zsh's completion for jitterscope"
            );
        }
        Err(_) => skip(&format!("{TEST} (zsh)"), "zsh is not installed"),
    }
}

/// The unit is installed where systemd looks, and nothing enables it.
fn unit_is_installed_disabled() {
    let unit = Path::new("/usr/lib/systemd/system/jitterscope-monitor.service");
    let text = std::fs::read_to_string(unit).expect("the unit is installed");
    assert!(
        text.contains("ExecStart=/usr/bin/jitterscope monitor"),
        "{text}"
    );
    let mut enabled = BTreeSet::new();
    ours_under(Path::new("/etc/systemd"), &mut enabled);
    assert!(enabled.is_empty(), "enabled: {enabled:?}");
}

#[test]
#[ignore = "builds the static binary and a package (minutes), installs it: scripts/test runs it"]
fn the_package_installs_works_and_removes_cleanly() {
    if let Some(why) = missing() {
        return skip(TEST, &why);
    }
    let deb = util::build_with("build-deb", &[]).unwrap();
    let name = Path::new(&deb)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(
        name.starts_with(&format!("jitterscope_{VERSION}-1_")),
        "{name}"
    );
    let changelog = std::fs::read_to_string("deploy/debian/changelog").unwrap();
    assert!(
        changelog.starts_with(&format!("jitterscope ({VERSION}-1)")),
        "the changelog names this version"
    );
    let bytes = std::fs::metadata(&deb).unwrap().len();
    eprintln!("{TEST}: {deb} is {bytes} bytes");
    lint(&deb);

    let before = ours();
    let installed = Installed::new(&deb);
    let version = ok(Command::new("/usr/bin/jitterscope").arg("--version"));
    assert_eq!(
        version,
        util::run_ok(&["--version"]),
        "the package holds this build"
    );
    util::selftest_passes(TEST, || {
        let mut c = Command::new("/usr/bin/jitterscope");
        c.arg("selftest");
        c
    });
    manual_pages_show();
    bash_completes();
    other_shells_complete();
    unit_is_installed_disabled();
    for shared in [
        "/usr/share/jitterscope/prometheus/rules.yml",
        "/usr/share/jitterscope/grafana/dashboard.json",
    ] {
        assert!(Path::new(shared).exists(), "{shared}");
    }

    installed.remove();
    assert_eq!(package_status(), None, "dpkg -r forgot the package");
    let after = ours();
    let left: Vec<_> = after.difference(&before).collect();
    assert!(left.is_empty(), "dpkg -r left {left:?}");
}
