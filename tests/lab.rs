//! The tuned-host lab (issue 48): Debian's own kernels booted by `scripts/lab` under
//! QEMU's TCG, with this test build's binary in the guest. A boot is shared by every test
//! that reads it: the first test to ask boots it (holding the measuring lock, since the
//! emulator takes both host CPUs), the rest wait for it and read its files. TCG's timing
//! means nothing, so these tests judge behaviour only: which CPUs were measured, what the
//! header says, which findings, fixes and causes came out, that every file is valid.
//!
//! A guest runs one script; each part of it is written between `part NAME` and its end,
//! so that a test reads the output of the part it judges (`Guest::part`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use jitterscope::report::ResultFile;

use crate::util::{self, skip};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// What a boot is: its kernel, vCPUs, command line and script.
pub struct Boot {
    pub kernel: &'static str,
    pub cpus: u32,
    pub cmdline: String,
    /// `--rtla`, `--ptp`.
    pub flags: &'static [&'static str],
    pub script: String,
}

/// A guest that ran its script: its files and what it printed.
pub struct Guest {
    pub dir: PathBuf,
    pub output: String,
}

impl Guest {
    /// What the part `name` printed (stdout and stderr, in order), and its exit status.
    pub fn part(&self, name: &str) -> (String, i32) {
        let begin = format!("<<<part {name}\n");
        let start = (self.output.find(&begin))
            .unwrap_or_else(|| panic!("no part {name} in the guest's output:\n{}", self.output))
            + begin.len();
        let rest = &self.output[start..];
        let end_tag = format!(">>>part {name} exit ");
        let end = rest.find(&end_tag).unwrap_or_else(|| {
            panic!("part {name} did not end (the guest stopped in it):\n{rest}")
        });
        let status = rest[end + end_tag.len()..]
            .lines()
            .next()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(-1);
        (rest[..end].to_string(), status)
    }

    /// A part's output, which must have exited with `code`.
    pub fn part_exit(&self, name: &str, code: i32) -> String {
        let (text, status) = self.part(name);
        assert_eq!(status, code, "part {name} exited {status}:\n{text}");
        text
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The text of a file the guest wrote.
    pub fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.file(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// A result file the guest wrote, read by this build's own reader.
    pub fn result(&self, name: &str) -> ResultFile {
        ResultFile::read(&self.file(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }
}

/// The script's part `name`: `commands` run in a subshell, framed so that
/// `Guest::part` finds them.
pub fn part(name: &str, commands: &str) -> String {
    format!("echo '<<<part {name}'\n( {commands}\n) 2>&1\necho \">>>part {name} exit $?\"\n")
}

type Shared = Arc<OnceLock<Result<Arc<Guest>, String>>>;

/// The guest booted as `name` (once per test process; `make` says how), or `None` with
/// the skip recorded when this host cannot run QEMU. A boot that fails fails the test.
pub fn guest(test: &str, name: &str, make: impl FnOnce() -> Boot) -> Option<Arc<Guest>> {
    if let Err(why) = qemu_usable() {
        skip(test, &why);
        return None;
    }
    static BOOTS: Mutex<Option<HashMap<String, Shared>>> = Mutex::new(None);
    let cell: Shared = {
        let mut boots = BOOTS.lock().unwrap_or_else(|p| p.into_inner());
        let map = boots.get_or_insert_with(HashMap::new);
        map.entry(name.to_string()).or_default().clone()
    };
    match cell.get_or_init(|| boot(name, make())) {
        Ok(g) => Some(g.clone()),
        Err(e) => panic!("{test}: the lab's {name} guest: {e}"),
    }
}

/// QEMU and a static busybox are here, or the test command could install them (root).
fn qemu_usable() -> Result<(), String> {
    let sh = |c: &str| {
        Command::new("sh")
            .args(["-c", c])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let have = |c: &str| sh(&format!("command -v {c}"));
    let static_busybox = sh("file -L /bin/busybox | grep -q 'statically linked'");
    if have("qemu-system-x86_64") && static_busybox {
        return Ok(());
    }
    if util::is_root() && have("apt-get") {
        return Ok(()); // scripts/lab installs them
    }
    Err("qemu-system-x86 and busybox-static are not installed (needs root and apt)".into())
}

/// Boots `b` into `target/lab/PID/NAME` (a directory of this test process's own, so that
/// a second `cargo test` beside it never empties the files its tests read; those of
/// processes that are gone are removed first). The script runs under `setpriv
/// --pdeathsig`: should this process die, the guest dies with it.
fn boot(name: &str, b: Boot) -> Result<Arc<Guest>, String> {
    let _m = util::measuring();
    let base = Path::new(REPO).join("target/lab");
    remove_gone(&base);
    let dir = base.join(std::process::id().to_string()).join(name);
    let script = dir.with_extension("sh");
    std::fs::create_dir_all(dir.parent().unwrap()).map_err(|e| e.to_string())?;
    std::fs::write(&script, &b.script).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let out = Command::new("setpriv")
        .args(["--pdeathsig", "KILL"])
        .arg(Path::new(REPO).join("scripts/lab"))
        .args(["--kernel", b.kernel, "--cpus", &b.cpus.to_string()])
        .args(["--cmdline", &b.cmdline])
        .arg("--binary")
        .arg(util::bin())
        .arg("--out")
        .arg(&dir)
        .arg("--script")
        .arg(&script)
        .args(b.flags)
        .output()
        .map_err(|e| format!("cannot run scripts/lab: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "lab {name}: {:.0} s, {} vCPUs, '{}'\n{err}",
        started.elapsed().as_secs_f64(),
        b.cpus,
        b.cmdline
    );
    if !out.status.success() {
        return Err(format!("scripts/lab failed: {err}"));
    }
    let output = std::fs::read_to_string(dir.join("output.txt")).map_err(|e| e.to_string())?;
    Ok(Arc::new(Guest { dir, output }))
}

/// The directories of test processes that are gone.
fn remove_gone(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let gone = name
            .parse::<u32>()
            .is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
        if gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A shell function, `state`, that prints what a kernel tracer run may change and must
/// leave as found: the tracer, its threshold and CPU mask, every osnoise and hwlat file,
/// the instances and tune's journal, one `file=value` line each.
pub const TRACER_STATE: &str = r#"state() {
  T=/sys/kernel/tracing
  echo "current_tracer=$(cat $T/current_tracer)"
  echo "tracing_thresh=$(cat $T/tracing_thresh)"
  echo "tracing_cpumask=$(cat $T/tracing_cpumask)"
  for f in $T/osnoise/* $T/hwlat_detector/*; do [ -f $f ] && echo "${f#$T/}=$(cat $f)"; done
  echo "instances=$(ls $T/instances | tr '\n' ' ')"
  echo "journal=$(ls /run/jitterscope 2>/dev/null | tr '\n' ' ')"
}
"#;

/// The `file=value` lines of a `state` dump (`TRACER_STATE`).
pub fn tracer_state(text: &str) -> Vec<String> {
    (text.lines())
        .filter(|l| {
            l.split_once('=')
                .is_some_and(|(k, _)| !k.is_empty() && !k.contains(' '))
        })
        .map(str::to_string)
        .collect()
}
