//! Issue 31: `scripts/import-cycles` missed the one circle in the house
//! (`system/tune/apply.rs` and `thread.rs`) because a `use super::{…, thread, …}` group
//! right after its root was read as an import of the parent module. The script is run
//! here on small trees of that shape, so that it is known to see such a circle.

use std::path::Path;
use std::process::Command;

use crate::util::skip;

/// Writes `files` (path under src/, text) into a fresh tree; runs the script on it.
fn check(files: &[(&str, &str)]) -> Option<(i32, String)> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for (path, text) in files {
        let file = src.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/import-cycles");
    let out = Command::new("python3")
        .arg(script)
        .arg(&src)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    Some((out.status.code().unwrap_or(-1), text))
}

/// The circle as it was: apply imports thread through a group after `super::`, thread
/// calls `super::apply::answer` by path.
const THE_OLD_CIRCLE: [(&str, &str); 4] = [
    ("lib.rs", "pub mod tune;\n"),
    (
        "tune/mod.rs",
        "pub mod apply;\npub mod thread;\npub fn under() {}\n",
    ),
    (
        "tune/apply.rs",
        "use super::{holds, thread, under};\npub fn answer() {}\n",
    ),
    (
        "tune/thread.rs",
        "use super::under;\nfn f() { super::apply::answer(); }\n",
    ),
];

#[test]
fn issue31_a_circle_through_a_use_group_after_super_is_found() {
    let Some((code, out)) = check(&THE_OLD_CIRCLE) else {
        return skip("issue31_import_cycles", "python3 is not installed");
    };
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cycle: src/tune/apply.rs, src/tune/thread.rs"),
        "{out}"
    );
    assert!(
        out.contains("src/tune/apply.rs -> src/tune/thread.rs"),
        "{out}"
    );
}

#[test]
fn issue31_nested_groups_and_super_super_are_followed() {
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod x;\n"),
        ("a/x/mod.rs", "pub mod y;\n"),
        // a::x::y imports b through a nested group, and b imports it back.
        ("a/x/y.rs", "use crate::{a::x, b::{self, f as g}};\n"),
        ("b.rs", "fn h() { super::a::x::y::k(); }\npub fn f() {}\n"),
    ];
    let Some((code, out)) = check(&files) else {
        return skip("issue31_import_cycles", "python3 is not installed");
    };
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("src/a/x/y.rs -> src/b.rs"), "{out}");
    assert!(out.contains("src/b.rs -> src/a/x/y.rs"), "{out}");
    // Untied (thread no longer calls into apply), the same tree has no circle.
    let mut untied = THE_OLD_CIRCLE;
    untied[3].1 = "use super::under;\n";
    let (code, out) = check(&untied).unwrap();
    assert_eq!(code, 0, "{out}");
}
