//! Issue 24, item 5: a build names its version and the git commit it was built from, on
//! screen (`--version`) and in every result it saves.

use std::process::Command;

use crate::util;

/// HEAD's short commit as git gives it for this checkout, or `None` outside git (where
/// build.rs writes "unknown"). Any directory is safe: the suite may run as a user who
/// does not own the checkout (as uid 65534), for whom git would refuse it.
fn head_commit() -> Option<String> {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("git")
        .args(["-c", "safe.directory=*", "rev-parse", "--short", "HEAD"])
        .current_dir(manifest)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn issue_24_version_names_the_commit() {
    let printed = util::run_ok(&["--version"]);
    let commit = head_commit().unwrap_or_else(|| "unknown".into());
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(printed.trim(), format!("jitterscope {version} ({commit})"));
    // Every subcommand answers the same.
    let printed = util::run_ok(&["noise", "--version"]);
    assert_eq!(
        printed.trim(),
        format!("jitterscope-noise {version} ({commit})")
    );
}

#[test]
fn issue_24_the_result_records_the_commit() {
    let Some((cpu, _)) = util::two_cpus() else {
        return util::skip("issue_24_the_result_records_the_commit", "one usable CPU");
    };
    let _m = util::measuring();
    let result = util::json_result(&["noise", "-a", &cpu.to_string(), "-D", "100ms"]);
    let commit = head_commit().unwrap_or_else(|| "unknown".into());
    assert_eq!(result.run.tool_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(result.run.tool_commit.as_deref(), Some(commit.as_str()));
}
