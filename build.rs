//! Stamps the build with its git commit (`JITTERSCOPE_COMMIT`): `jitterscope --version`
//! prints it and every result file records it, so that a figure can be traced to the code
//! that measured it. Where there is no git (a source tarball, a container build whose
//! context leaves `.git` out) the builder may set JITTERSCOPE_COMMIT itself; otherwise it
//! is "unknown". A few `git rev-parse` calls, rerun only when HEAD moves.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=JITTERSCOPE_COMMIT");
    let given = std::env::var("JITTERSCOPE_COMMIT").ok();
    let commit = given
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=JITTERSCOPE_COMMIT={commit}");
}

/// `git` with `args` in the package's directory: its output, when it succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The short commit of HEAD. The build is redone when HEAD moves: HEAD itself changes on
/// a checkout, the branch's ref and HEAD's reflog on a commit. Only files that exist are
/// named: cargo reruns a build script every time for a missing one (a ref that git has
/// packed has no file of its own).
fn git_commit() -> Option<String> {
    // Only this package's own repository: a crate unpacked under a home directory kept in
    // git must not take that repository's commit.
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let here = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    if Path::new(top.trim()).canonicalize().ok()? != Path::new(&here).canonicalize().ok()? {
        return None;
    }
    let commit = git(&["rev-parse", "--short", "HEAD"])?.trim().to_string();
    let branch = git(&["rev-parse", "--symbolic-full-name", "HEAD"]).unwrap_or_default();
    let mut ask = vec!["rev-parse", "--git-path", "HEAD", "--git-path", "logs/HEAD"];
    if branch.starts_with("refs/") {
        ask.extend(["--git-path", branch.trim()]);
    }
    for path in git(&ask).unwrap_or_default().lines() {
        if Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    Some(commit)
}
