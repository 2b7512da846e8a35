//! The audit's findings as text that fits the terminal (100 columns when not one): one
//! section per area, worst findings first, each a short block: severity, id and the value
//! seen; why it matters, wrapped; and its fixes, each saying where it applies, with every
//! command and boot option on a line of its own, whole, ready to paste. The verdict's top
//! fixes and watch's causes lay their fixes out with the same functions (`fix_text`).

use crate::report::terminal::table::{Layout, wrap};
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
        Remedy::Manual { what } => match words_then_command(what) {
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

/// The first words of the commands fixes hold: a clause that begins with one is a
/// command up to its first " (" (what follows is said about it).
const COMMANDS: [&str; 16] = [
    "for",
    "mkdir",
    "podman",
    "docker",
    "systemd-run",
    "sysctl",
    "echo",
    "taskset",
    "chrt",
    "systemctl",
    "tuned-adm",
    "cpupower",
    "jitterscope",
    "tuna",
    "modprobe",
    "sh",
];

/// A fix's lines, each begun with `indent`: its typed remedies as the audit lays them
/// out (`audit_table::remedy`: every command and boot option whole on a line of its
/// own). A fix stored before remedies were (`fix` only) is one clause: a command that
/// begins it is kept whole on its line, what is said after it wrapped below; words are
/// wrapped.
pub(crate) fn fix_text(
    fix: &str,
    remedies: &[crate::system::audit::Remedy],
    width: Option<usize>,
    indent: &str,
) -> String {
    if !remedies.is_empty() {
        let each = remedies.iter();
        return each.map(|r| remedy(r, width, indent)).collect();
    }
    let wrap = crate::report::terminal::table::wrap;
    let more = format!("{indent}  ");
    match command_of(fix, false) {
        None => format!("{}\n", wrap(&format!("{indent}{fix}"), width, &more)),
        Some((cmd, "")) => format!("{indent}{cmd}\n"),
        Some((cmd, said)) => format!(
            "{indent}{cmd}\n{}\n",
            wrap(&format!("{more}{said}"), width, &more)
        ),
    }
}

/// Words a shell command goes on with after its own "; " (`for …; do …; done`).
const SHELL_WORDS: [&str; 9] = [
    "do", "done", "then", "fi", "else", "elif", "if", "while", "esac",
];

/// A clause that is a command: the command, and what is said after it (from its first
/// " (", or its first "; " that no command or shell word follows); `None` for words.
/// With `now`, the clause is a command whatever its first word (a run-time remedy's).
fn command_of(clause: &str, now: bool) -> Option<(&str, &str)> {
    let first = clause.split(' ').next()?;
    if !now && !COMMANDS.contains(&first) {
        return None;
    }
    let goes_on = |rest: &str| {
        let word = rest.split([' ', ';']).next().unwrap_or_default();
        COMMANDS.contains(&word) || SHELL_WORDS.contains(&word)
    };
    let semi = (clause.match_indices("; "))
        .map(|(i, _)| i)
        .find(|&i| !goes_on(&clause[i + 2..]));
    let paren = clause.find(" (");
    Some(match [semi, paren].into_iter().flatten().min() {
        Some(i) => (&clause[..i], clause[i + 1..].trim_start_matches(';').trim()),
        None => (clause, ""),
    })
}

/// Words that end in a command ("leave for the root cgroup: echo $$ > …"): the words up
/// to their colon, the command, and what is said after it; `None` when no command follows
/// a colon. For a remedy written in words, so that its command can be pasted whole.
pub(crate) fn words_then_command(text: &str) -> Option<(&str, &str, &str)> {
    let (i, _) = text.match_indices(": ").find(|(i, _)| {
        let next = text[i + 2..].split(' ').next().unwrap_or_default();
        COMMANDS.contains(&next)
    })?;
    let (cmd, said) = command_of(&text[i + 2..], true)?;
    Some((&text[..=i], cmd, said))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_after_words_is_found_whole() {
        let t =
            "leave for the root cgroup, from the shell: echo $$ > /sys/fs/cgroup/cpu/cgroup.procs";
        assert_eq!(
            words_then_command(t),
            Some((
                "leave for the root cgroup, from the shell:",
                "echo $$ > /sys/fs/cgroup/cpu/cgroup.procs",
                ""
            ))
        );
        assert_eq!(words_then_command("check dmesg for isolcpus"), None);
        assert_eq!(words_then_command("note: nothing to run here"), None);
    }
}
