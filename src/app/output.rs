//! Where a command's words go: warnings on stderr (or held, for the main job), the saved
//! result and page, and the table or JSON on stdout; and the clock line every header
//! carries.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use crate::cli::SaveArgs;
use crate::engine::clock::Counter;
use crate::report::ResultFile;

/// The sink for warnings, handed to every step rather than switched globally: it prints
/// each one on stderr at once, or holds them (the main job prints its steps' warnings
/// once, merged, from the result).
#[derive(Debug, Clone, Copy)]
pub struct Warnings {
    print: bool,
}

impl Warnings {
    /// Printed on stderr as they come.
    pub fn stderr() -> Warnings {
        Warnings { print: true }
    }

    /// Kept only in the result; the caller prints them later.
    pub fn held() -> Warnings {
        Warnings { print: false }
    }

    /// One warning line on stderr, unless held; a closed stderr is no reason to panic.
    pub fn warn(&self, msg: &str) {
        if self.print {
            warn(msg);
        }
    }
}

/// One warning line on stderr now; a closed stderr is no reason to panic.
pub fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr(), "jitterscope: warning: {msg}");
}

/// Saves, then prints (`text()` or the JSON): a terminal that went away (SIGHUP, EIO)
/// must not cost the saved result.
pub fn emit(result: &ResultFile, to: &SaveArgs, text: impl Fn() -> String) -> anyhow::Result<()> {
    let json_file = to.json.as_ref().and_then(Option::as_deref);
    for path in to.output.iter().map(|p| p.as_path()).chain(json_file) {
        result.write_atomic(path)?;
    }
    if let Some(page) = &to.html {
        write_page(result, to.output.as_deref().or(json_file), page, |_| {})?;
    }
    let mut out = std::io::stdout().lock();
    let printed = if to.json_on_stdout() {
        writeln!(out, "{}", result.to_json())
    } else if !to.quiet {
        let layout = crate::report::terminal::table::Layout::terminal(to.wide).per_cpu(to.per_cpu);
        let text = layout.scoped(text);
        write!(out, "{text}")
    } else {
        Ok(())
    };
    // A closed stdout (`| head`) is not an error worth failing the run for.
    if let Err(e) = printed.and_then(|_| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e).context("cannot write to stdout");
    }
    Ok(())
}

/// The result's page at `page`, naming the saved file when there is one; `edit` may add
/// to it (the main job leads with its verdict).
pub fn write_page(
    result: &ResultFile,
    saved: Option<&Path>,
    page: &Path,
    edit: impl FnOnce(&mut crate::report::page::html::Page),
) -> anyhow::Result<()> {
    let name = saved.map_or_else(
        || Path::new("(not saved: no -o)").to_path_buf(),
        Path::to_path_buf,
    );
    let mut p = crate::report::page::result_page::result_page(&[(name, result.clone())])?;
    edit(&mut p);
    crate::report::result::write_atomic(page, crate::report::page::html::render(&p).as_bytes())
        .with_context(|| format!("cannot write {}", page.display()))
}

/// The clock line every header carries: the counter, its frequency, where the frequency
/// came from, and how far the other sources are from it; on a PREEMPT_RT kernel, a line
/// that says so (its IRQs, timers and RCU callbacks run in threads of their own).
pub fn clock_line(r: &ResultFile) -> String {
    let mut out = clock_only(r);
    if let Some(from) = r.host.preempt_rt() {
        out.push_str(&format!(
            "kernel: {}, PREEMPT_RT ({from})\n",
            r.host.kernel_release
        ));
    }
    out
}

fn clock_only(r: &ResultFile) -> String {
    let c = &r.host.clock;
    let checks: Vec<String> = c
        .cross_checks
        .iter()
        .map(|x| format!("{} {:+.1} ppm", x.source, x.diff_ppm))
        .collect();
    let head = format!(
        "clock: {} at {:.3} MHz ({})",
        match c.counter {
            Counter::Tsc => "TSC",
            Counter::ClockMonotonic => "CLOCK_MONOTONIC",
        },
        c.frequency_hz / 1e6,
        c.frequency_source.describe(),
    );
    match checks.is_empty() {
        true => format!("{head}\n"),
        // On a line of its own: together they pass 100 columns.
        false => format!("{head}\n       cross-checks: {}\n", checks.join(", ")),
    }
}

/// The measured CPUs, with what set them apart where the host did: "1 (isolcpus,
/// nohz_full)", so that a header says why a run with no `-a` measured those.
pub fn measured_cpus(r: &ResultFile) -> String {
    let m = &r.run.cpus.measured;
    let iso = &r.host.isolation;
    let by: Vec<&str> = [("isolcpus", &iso.isolated), ("nohz_full", &iso.nohz_full)]
        .into_iter()
        .filter(|(_, l)| !m.is_empty() && m.intersect(l) == *m)
        .map(|(name, _)| name)
        .collect();
    match by.is_empty() {
        true => m.to_string(),
        false => format!("{m} ({})", by.join(", ")),
    }
}

/// The root domain a deadline run made and removed, on a line of its own, or nothing.
pub fn root_domain_line(r: &ResultFile) -> String {
    r.run
        .root_domain
        .as_ref()
        .map_or_else(String::new, |d| format!("{d}\n"))
}

/// The policy the measuring threads ran with, as the result records it, never the one
/// asked for: "SCHED_FIFO 90"; "SCHED_OTHER (SCHED_FIFO 90 refused)" when the threads
/// could not have it; "SCHED_FIFO 90 on 3 threads, SCHED_OTHER on 1 (refused)" when
/// they differ. `asked` is only named beside a refusal, or when no thread ran.
pub fn policy_ran<'a>(
    threads: impl IntoIterator<Item = &'a crate::probes::record::ThreadRecord>,
    asked: crate::engine::sched::SchedRequest,
) -> String {
    use crate::engine::sched::SchedRequest;
    let mut ran: Vec<(SchedRequest, usize)> = Vec::new();
    let mut refused = false;
    for t in threads {
        let req = SchedRequest {
            policy: t.policy,
            priority: t.priority,
        };
        refused |= t.sched_refused.is_some();
        match ran.iter_mut().find(|(r, _)| *r == req) {
            Some((_, n)) => *n += 1,
            None => ran.push((req, 1)),
        }
    }
    let refusal = |s: String| match refused {
        true => format!("{s} ({asked} refused)"),
        false => s,
    };
    match ran.as_slice() {
        [] => format!("{asked} asked for (no thread ran)"),
        [(one, _)] => refusal(one.to_string()),
        many => refusal(
            many.iter()
                .map(|(r, n)| format!("{r} on {n} thread{}", if *n == 1 { "" } else { "s" }))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// The policy every thread of a result ran with (`policy_ran` over all its entries).
pub fn result_policy(r: &ResultFile, asked: crate::engine::sched::SchedRequest) -> String {
    policy_ran(r.probes.iter().flat_map(|p| p.threads()), asked)
}

/// " (interrupted)" after a header's duration, when the run was.
pub fn interrupted_mark(r: &ResultFile) -> &'static str {
    match r.run.interrupted {
        true => " (interrupted)",
        false => "",
    }
}
