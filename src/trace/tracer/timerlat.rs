//! The timerlat tracer's text output, parsed: each line of `trace` or `trace_pipe` is one
//! sample (`#N context irq|thread timer_latency X ns`) or a note of events the ring buffer
//! dropped (`CPU:N [LOST M EVENTS]`). Everything else (comments, other events) is skipped.
//! Parsing borrows the line and allocates nothing.

use crate::probes::timerlat::{Context, CpuFold, Sample};

/// What one line of the trace is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    Sample(Sample),
    /// The ring buffer dropped this many events on this CPU.
    Lost {
        cpu: usize,
        events: u64,
    },
    Other,
}

/// The measured CPUs' folds, fed the trace's lines as they come; a line of another CPU
/// (none, with the tracer's cpumask set) is skipped.
pub struct Folds {
    pub cpus: Vec<CpuFold>,
    /// Lines of the tracer that named a CPU not measured.
    pub other_cpu: u64,
}

impl Folds {
    pub fn new(cpus: impl IntoIterator<Item = usize>) -> Folds {
        Folds {
            cpus: cpus.into_iter().map(CpuFold::new).collect(),
            other_cpu: 0,
        }
    }

    /// Feeds every whole line of `text`.
    pub fn feed(&mut self, text: &str) {
        for line in text.lines() {
            self.feed_line(line);
        }
    }

    pub fn feed_line(&mut self, line: &str) {
        let (cpu, l) = match parse_line(line) {
            Line::Sample(s) => (s.cpu, Line::Sample(s)),
            Line::Lost { cpu, events } => (cpu, Line::Lost { cpu, events }),
            Line::Other => return,
        };
        let Some(f) = self.cpus.iter_mut().find(|f| f.cpu == cpu) else {
            self.other_cpu += 1;
            return;
        };
        match l {
            Line::Sample(s) => f.add(&s),
            Line::Lost { events, .. } => f.lost(events),
            Line::Other => {}
        }
    }
}

/// Parses one line of the timerlat tracer's text output.
pub fn parse_line(line: &str) -> Line {
    if let Some(l) = lost(line) {
        return l;
    }
    sample(line).map_or(Line::Other, Line::Sample)
}

/// `<comm>-<pid> [CPU] <flags> <stamp>: #SEQ context CTX timer_latency N ns`: the CPU
/// is the first bracketed number after the task (a comm may hold brackets or spaces,
/// so the fields are found from the `: #` that starts the sample).
fn sample(line: &str) -> Option<Sample> {
    let at = line.find(": #")?;
    let (head, body) = (&line[..at], &line[at + 3..]);
    let mut words = body.split_ascii_whitespace();
    let seq = words.next()?.parse().ok()?;
    if words.next()? != "context" {
        return None;
    }
    let context = match words.next()? {
        "irq" => Context::Irq,
        "thread" => Context::Thread,
        "user-ret" => Context::UserRet,
        _ => return None,
    };
    if words.next()? != "timer_latency" {
        return None;
    }
    let latency_ns = words.next()?.parse().ok()?;
    if words.next()? != "ns" {
        return None;
    }
    Some(Sample {
        cpu: cpu_field(head)?,
        seq,
        context,
        latency_ns,
    })
}

/// The `[NNN]` CPU field of a trace line's head: the last bracketed number before the
/// flags and the stamp.
fn cpu_field(head: &str) -> Option<usize> {
    let mut rest = head;
    let mut found = None;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let close = after.find(']')?;
        if let Ok(cpu) = after[..close].trim().parse() {
            found = Some(cpu);
        }
        rest = &after[close + 1..];
    }
    found
}

/// `CPU:1 [LOST 42 EVENTS]`.
fn lost(line: &str) -> Option<Line> {
    let rest = line.trim_start().strip_prefix("CPU:")?;
    let (cpu, rest) = rest.split_once(' ')?;
    let n = rest
        .trim()
        .strip_prefix("[LOST ")?
        .strip_suffix(" EVENTS]")?;
    Some(Line::Lost {
        cpu: cpu.parse().ok()?,
        events: n.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_irq_and_thread_samples_and_lost_events() {
        let irq = "          <idle>-0       [001] d.h1.   101.512345: #1     context    irq timer_latency      2045 ns";
        let thr = "   timerlat/1-351     [001] .....   101.512360: #1     context thread timer_latency     17382 ns";
        assert_eq!(
            parse_line(irq),
            Line::Sample(Sample {
                cpu: 1,
                seq: 1,
                context: Context::Irq,
                latency_ns: 2045
            })
        );
        assert_eq!(
            parse_line(thr),
            Line::Sample(Sample {
                cpu: 1,
                seq: 1,
                context: Context::Thread,
                latency_ns: 17382
            })
        );
        assert_eq!(
            parse_line("CPU:1 [LOST 17 EVENTS]"),
            Line::Lost { cpu: 1, events: 17 }
        );
        assert_eq!(parse_line("# tracer: timerlat"), Line::Other);
        assert_eq!(
            parse_line("#                                _-----=> irqs-off"),
            Line::Other
        );
    }

    /// A comm with brackets and a space still yields the CPU field.
    #[test]
    fn a_strange_comm_does_not_confuse_the_cpu() {
        let l = " my [7] task-99  [003] d.h1.   5.000001: #12 context irq timer_latency 900 ns";
        let Line::Sample(s) = parse_line(l) else {
            panic!("a sample")
        };
        assert_eq!((s.cpu, s.seq, s.latency_ns), (3, 12, 900));
    }

    /// The trace of Debian 12's 6.1 PREEMPT_RT kernel (the lab, CPU 1, period 1000 µs):
    /// every sample line is read, each activation paired with its own IRQ sample, and the
    /// thread's part is thread − IRQ, as the lines say.
    #[test]
    fn reads_a_real_6_1_rt_trace() {
        let text = include_str!("../../../tests/fixtures/timerlat/trace-6.1-rt.txt");
        let irq_lines = text
            .lines()
            .filter(|l| l.contains("context    irq"))
            .count() as u64;
        let thread_lines = text
            .lines()
            .filter(|l| l.contains("context thread"))
            .count() as u64;
        let mut f = Folds::new([1]);
        f.feed(text);
        let e = f.cpus.pop().unwrap().finish(1_000_000, false);
        assert_eq!(f.other_cpu, 0);
        assert_eq!(
            (e.irq.count, e.thread_latency.count),
            (irq_lines, thread_lines)
        );
        assert!(irq_lines > 90, "{irq_lines}");
        assert_eq!(e.thread_part.count, thread_lines - e.unpaired_thread);
        assert_eq!(e.unpaired_thread, 0);
        assert_eq!(e.irq.min_ns, Some(min_of(text, "context    irq")));
        assert_eq!(
            e.thread_latency.max_ns,
            Some(max_of(text, "context thread"))
        );
        // Each activation kept is the one the lines give under its number.
        assert_eq!(e.largest[0].thread_ns, e.thread_latency.max_ns.unwrap());
        for a in &e.largest {
            let of = |ctx: &str| {
                let l = (text.lines())
                    .find(|l| l.contains(&format!("#{} ", a.seq)) && l.contains(ctx))
                    .unwrap();
                l.split_whitespace()
                    .rev()
                    .nth(1)
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            };
            assert_eq!(
                (a.irq_ns, a.thread_ns),
                (of("context    irq"), of("context thread"))
            );
        }
    }

    /// The same kernel's `trace_pipe` with the osnoise events enabled between samples
    /// (irq_noise, thread_noise): only the samples are read.
    #[test]
    fn reads_samples_among_osnoise_events() {
        let text = include_str!("../../../tests/fixtures/timerlat/trace_pipe-events-6.1-rt.txt");
        let samples = text.lines().filter(|l| l.contains(" context ")).count() as u64;
        assert!(text.contains("irq_noise:") && text.contains("thread_noise:"));
        let mut f = Folds::new([1]);
        f.feed(text);
        let e = f.cpus.pop().unwrap().finish(1_000_000, false);
        assert_eq!(e.irq.count + e.thread_latency.count, samples);
        assert!(e.unpaired_irq <= 1 && e.unpaired_thread <= 1);
    }

    fn latencies<'a>(text: &'a str, ctx: &'a str) -> impl Iterator<Item = u64> + 'a {
        (text.lines().filter(move |l| l.contains(ctx)))
            .filter_map(|l| l.split_whitespace().rev().nth(1)?.parse().ok())
    }

    fn min_of(text: &str, ctx: &str) -> u64 {
        latencies(text, ctx).min().unwrap()
    }

    fn max_of(text: &str, ctx: &str) -> u64 {
        latencies(text, ctx).max().unwrap()
    }

    #[test]
    fn malformed_lines_are_other() {
        for l in [
            "x [001] d.h1. 1.0: #1 context irq timer_latency 12 us",
            "x [001] d.h1. 1.0: #1 context bogus timer_latency 12 ns",
            "x [001] d.h1. 1.0: #x context irq timer_latency 12 ns",
            "x d.h1. 1.0: #1 context irq timer_latency 12 ns",
            "CPU:x [LOST 1 EVENTS]",
        ] {
            assert_eq!(parse_line(l), Line::Other, "{l}");
        }
    }
}
