//! The audit's findings as text that fits the terminal (100 columns when not one): one
//! section per area, worst findings first, each a short block: severity, id and the value
//! seen; why it matters, wrapped; and its fixes, each saying where it applies, with every
//! command and boot option on a line of its own, whole, ready to paste.

use crate::report::table::{Layout, wrap};
use crate::system::audit::{AuditReport, Finding, Remedy, Severity};

/// Every area's findings, then counts that keep "needs attention" apart from "info".
pub fn render(r: &AuditReport) -> String {
    let width = Layout::current().wrap_width();
    let hk = if r.housekeeping.is_empty() {
        "none".to_string()
    } else {
        r.housekeeping.to_string()
    };
    let mut out = format!(
        "Audit of {} for measured CPUs {} (housekeeping: {hk})\n",
        r.root.display(),
        r.measured
    );
    let mut areas: Vec<_> = r.findings.iter().map(|f| f.area).collect();
    areas.dedup();
    for area in areas {
        let mut rows: Vec<&Finding> = r.findings.iter().filter(|f| f.area == area).collect();
        rows.sort_by_key(|f| std::cmp::Reverse(f.severity));
        out.push_str(&format!("\n{area}\n"));
        for f in rows {
            out.push_str(&block(f, width));
        }
    }
    let count = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    out.push_str(&format!(
        "\n{} need attention ({} bad, {} warn); {} for information; {} ok\n",
        count(Severity::Bad) + count(Severity::Warn),
        count(Severity::Bad),
        count(Severity::Warn),
        count(Severity::Info),
        count(Severity::Ok)
    ));
    out
}

/// One finding's block.
fn block(f: &Finding, width: Option<usize>) -> String {
    let mut b = wrap(
        &format!("  {:<4}  {}: {}", f.severity.to_string(), f.id, f.value),
        width,
        "        ",
    );
    b.push('\n');
    if !f.why.is_empty() {
        b.push_str(&wrap(
            &format!("        why: {}", f.why),
            width,
            "             ",
        ));
        b.push('\n');
    }
    for r in &f.remedies {
        b.push_str(&remedy(r, width, "        "));
    }
    if let Some(cmd) = crate::system::tune::try_it(f) {
        b.push_str(&format!("        try it: {cmd}\n"));
    }
    if f.remedies.is_empty() && !f.fix.is_empty() {
        b.push_str(&wrap(
            &format!("        fix: {}", f.fix),
            width,
            "             ",
        ));
        b.push('\n');
    }
    b
}

/// A remedy, its lines begun with `indent`: where it applies, then what to paste on a
/// line of its own, whole, two spaces further in. The audit's blocks, the verdict's top
/// fixes and watch's causes all lay remedies out with it.
pub(crate) fn remedy(r: &Remedy, width: Option<usize>, indent: &str) -> String {
    let more = format!("{indent}  ");
    let note = |label: &str, text: &str| {
        format!(
            "{}\n",
            wrap(&format!("{indent}{label}: {text}"), width, &more)
        )
    };
    let paste = |line: &str| format!("{more}{line}\n");
    match r {
        Remedy::Runtime { command, .. } => format!("{indent}now:\n{}", paste(command)),
        Remedy::Boot { options, how } => {
            format!("{}{}", note("at boot", how), paste(&options.join(" ")))
        }
        Remedy::KernelBuild {
            config,
            options,
            how,
        } => {
            let mut t = note(
                "kernel build",
                &format!("this kernel lacks {} ({how})", config.join(" ")),
            );
            if !options.is_empty() {
                t.push_str(&note("then boot with", ""));
                t.push_str(&paste(&options.join(" ")));
            }
            t
        }
        Remedy::Host { what } => note("on the host, not this guest", what),
        Remedy::Manual { what } => match crate::report::verdict::words_then_command(what) {
            // The command on a line of its own, never broken, as the other remedies'.
            Some((words, cmd, said)) => {
                let mut t = note("by hand", words);
                t.push_str(&paste(cmd));
                if !said.is_empty() {
                    t.push_str(&format!(
                        "{}\n",
                        wrap(&format!("{more}{said}"), width, &more)
                    ));
                }
                t
            }
            None => note("by hand", what),
        },
    }
}
