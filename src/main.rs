//! The `jitterscope` binary: parse, install signal handling, dispatch, and map the
//! outcome to an exit code (0 done, 1 a limit was crossed (`timer --stop-above`), 2 bad
//! input or failure, 130 interrupted). Every error is one line on stderr starting with `jitterscope: `.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use jitterscope::app::{self, Ending};
use jitterscope::cli::{Cli, Command, MainArgs};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, &argv),
    };
    // monitor runs until SIGTERM, and SIGHUP asks it to reopen its log (logrotate).
    let monitor = matches!(cli.command, Some(Command::Monitor(_)));
    // tune must revert what it changed: a second Ctrl-C does not cut that short.
    let tune = matches!(cli.command, Some(Command::Tune(_)));
    if !tune && let Some(w) = jitterscope::system::tune::journal::warning(std::path::Path::new("/"))
    {
        say(&format!("warning: {w}"));
    }
    // A watch with no -D runs until Ctrl-C as asked: that ending is no interruption.
    let endless =
        monitor || matches!(&cli.command, Some(Command::Watch(w)) if w.duration.is_none());
    let (stop, reopen) = match install_signal_handlers(monitor, tune) {
        Ok(flags) => flags,
        Err(e) => return fail(anyhow::anyhow!("cannot install signal handlers: {e}")),
    };
    let outcome = match cli.command {
        Some(Command::Noise(args)) => app::noise::run(&args, &argv, &stop),
        Some(Command::Timer(args)) => app::timer::run(&args, &argv, &stop),
        Some(Command::Pingpong(args)) => app::pingpong::run(&args, &argv, &stop),
        Some(Command::C2c(args)) => app::c2c::run(&args, &argv, &stop),
        Some(Command::Queue(args)) => app::queue::run(&args, &argv, &stop),
        Some(Command::Work(args)) => app::work::run(&args, &argv, &stop),
        Some(Command::Syscalls(args)) => app::syscalls::run(&args, &argv, &stop),
        Some(Command::Ptp(args)) => app::ptp::run(&args, &argv, &stop),
        Some(Command::Audit(args)) => app::audit::run(&args),
        Some(Command::Report(args)) => app::report::run(&args),
        Some(Command::Compare(args)) => app::compare::run(&args),
        Some(Command::Fleet(args)) => app::fleet::run(&args),
        Some(Command::Selftest(args)) => app::selftest::run(&args, &stop),
        Some(Command::Completions(args)) => completions(args.shell),
        Some(Command::Man(args)) => man_page(&args),
        Some(Command::Run(args)) => app::main_job::run(&args, &argv, &stop),
        Some(Command::Monitor(args)) => app::monitor::run(&args, &argv, &stop, &reopen),
        Some(Command::Tune(args)) => app::tune::run(&args, &argv, &stop),
        Some(Command::Watch(args)) => app::watch::run(&args, &argv, &stop),
        Some(Command::Hold(args)) => app::hold::run(&args, &stop),
        None => app::main_job::run(&MainArgs::default(), &argv, &stop),
    };
    match outcome {
        // A signal that came while saving or printing still makes this an interrupted run.
        Ok(Ending::Completed) if !endless && stop.load(std::sync::atomic::Ordering::Relaxed) => {
            ExitCode::from(130)
        }
        Ok(Ending::Completed) => ExitCode::SUCCESS,
        Ok(Ending::Interrupted) => ExitCode::from(130),
        Ok(Ending::LimitExceeded) => ExitCode::from(1),
        Ok(Ending::Undecided) => ExitCode::from(3),
        Ok(Ending::Unjudged) => ExitCode::from(4),
        Err(e) => fail(e),
    }
}

/// The completion script for `shell`, on stdout.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<Ending> {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "jitterscope", &mut std::io::stdout());
    Ok(Ending::Completed)
}

/// One manual page on stdout, or every page into `--dir`.
fn man_page(args: &jitterscope::cli::ManArgs) -> anyhow::Result<Ending> {
    match &args.dir {
        Some(dir) => {
            app::manual::write_all(dir)?;
        }
        None => app::manual::print(args.command.as_deref())?,
    }
    Ok(Ending::Completed)
}

/// SIGINT, SIGTERM and SIGHUP set the stop flag: the run ends cleanly, saves and prints.
/// A second SIGINT or SIGTERM exits at once; SIGHUP (a dropped terminal) never counts as
/// the first of those, so it cannot turn a later Ctrl-C into an exit without saving.
/// For `monitor` (`hup_reopens`), SIGHUP sets the second flag instead: reopen the logs.
/// For `tune` (`patient`), a second signal only sets the flag again: it is restoring the
/// host's settings, and an exit now would leave them for `tune --restore`.
fn install_signal_handlers(
    hup_reopens: bool,
    patient: bool,
) -> std::io::Result<(Arc<AtomicBool>, Arc<AtomicBool>)> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::flag;
    let stop = Arc::new(AtomicBool::new(false));
    let asked_to_stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        if !patient {
            flag::register_conditional_shutdown(sig, 130, Arc::clone(&asked_to_stop))?;
        }
        flag::register(sig, Arc::clone(&asked_to_stop))?;
        flag::register(sig, Arc::clone(&stop))?;
    }
    let reopen = Arc::new(AtomicBool::new(false));
    let on_hup = if hup_reopens { &reopen } else { &stop };
    flag::register(SIGHUP, Arc::clone(on_hup))?;
    Ok((stop, reopen))
}

/// clap's errors, cut to one line, with clap's own suggestion or, for a flag of a peer
/// tool that jitterscope spells differently, what to use instead (help and version print
/// as usual).
fn usage_error(e: clap::Error, argv: &[String]) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            let text = e.render().to_string();
            say(&one_line(&text, peer_hint(&e, argv)));
            ExitCode::from(2)
        }
    }
}

/// The message's first paragraph on one line (some of clap's messages end their first
/// line with ':' and name the argument on the next), then a hint or clap's tip.
fn one_line(text: &str, hint: Option<&str>) -> String {
    let para: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let first = para.join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    let first = if first.is_empty() {
        "invalid arguments"
    } else {
        first
    };
    let tip = text
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("tip: "));
    match (hint, tip) {
        (Some(h), _) => format!("{first}: {h}"),
        (None, Some(t)) => format!("{first}; {t} (see --help)"),
        (None, None) => format!("{first} (see --help)"),
    }
}

/// Flags of cyclictest (and oslat) that jitterscope does not take, with what does their job.
const PEER_FLAGS: &[(&[&str], &str)] = &[
    (
        &["-t", "--threads"],
        "timer runs one thread per CPU it measures; choose them with -a LIST (cyclictest -t)",
    ),
    (
        &["-S", "--smp"],
        "timer measures every CPU but the housekeeping one by default, each thread pinned \
         (cyclictest -S); -a LIST picks others",
    ),
    (
        &["-n", "--nanosleep"],
        "timer always sleeps with clock_nanosleep (cyclictest -n); nothing to ask for",
    ),
    (
        &["-A", "--affinity"],
        "use -a/--cpus LIST to choose the CPUs (cyclictest -a/-A)",
    ),
    (
        &["--laptop"],
        "use --no-dma-latency to leave /dev/cpu_dma_latency alone (cyclictest --laptop)",
    ),
    (&["-y"], "use --policy fifo|rr|other (cyclictest -y)"),
];

/// The replacement for an unknown flag of `timer` that cyclictest has.
fn peer_hint(e: &clap::Error, argv: &[String]) -> Option<&'static str> {
    let timer = argv.get(1).is_some_and(|c| c == "timer");
    if e.kind() != ErrorKind::UnknownArgument || !timer {
        return None;
    }
    let bad = match e.get(clap::error::ContextKind::InvalidArg) {
        Some(clap::error::ContextValue::String(s)) => s.clone(),
        _ => return None,
    };
    // "-t4" and "--threads=4" name the same flag.
    let name = bad.split('=').next().unwrap_or(&bad);
    let name = match name.strip_prefix("--") {
        Some(_) => name.to_string(),
        None => name.chars().take(2).collect(),
    };
    PEER_FLAGS
        .iter()
        .find(|(names, _)| names.contains(&name.as_str()))
        .map(|(_, hint)| *hint)
}

fn fail(e: anyhow::Error) -> ExitCode {
    say(&chain_text(&e));
    ExitCode::from(2)
}

/// The error and its causes on one line, `outer: cause: …`, skipping a cause the message
/// before it already ends with (errors that name their source in their own message).
fn chain_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// One line on stderr; a closed stderr is no reason to panic.
fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "jitterscope: {msg}");
}
