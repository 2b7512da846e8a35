//! The flags that take a time, and what a bare number means for each: one table that the
//! parsers, the guide's table and a test read.

/// What a bare number (no unit) means for a time flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bare {
    Seconds,
    Micros,
    Nanos,
}

impl Bare {
    /// The unit's name.
    pub fn unit(self) -> &'static str {
        match self {
            Bare::Seconds => "s",
            Bare::Micros => "µs",
            Bare::Nanos => "ns",
        }
    }

    /// One of it, in ns.
    pub fn ns(self) -> u64 {
        match self {
            Bare::Seconds => 1_000_000_000,
            Bare::Micros => 1_000,
            Bare::Nanos => 1,
        }
    }
}

/// A flag that takes a time.
#[derive(Debug, Clone, Copy)]
pub struct TimeFlag {
    pub commands: &'static [&'static str],
    pub flag: &'static str,
    /// The argument's id (its field's name), for the test that checks the parser.
    pub id: &'static str,
    pub bare: Bare,
    /// Why a bare number means that: the tool whose habit it keeps.
    pub why: &'static str,
    /// Other arguments the flag needs, for the test that parses it.
    pub needs: &'static [&'static str],
}

/// Every flag that takes a time, with what a bare number means. Every one also takes a
/// unit (ns, us, µs, ms, s; durations also m and h). The guide's table
/// (docs/guide/README.md) is made from this list and a test checks the parsers against
/// it, so neither can drift.
pub const TIME_FLAGS: &[TimeFlag] = &[
    TimeFlag {
        commands: &["noise", "timer"],
        flag: "--runtime",
        id: "runtime",
        bare: Bare::Micros,
        why: "cyclicdeadline's and rtla's -P d: µs",
        needs: &[],
    },
    TimeFlag {
        commands: &["noise", "timer"],
        flag: "--deadline",
        id: "deadline",
        bare: Bare::Micros,
        why: "as --runtime",
        needs: &[],
    },
    TimeFlag {
        commands: &["noise"],
        flag: "--period",
        id: "period",
        bare: Bare::Micros,
        why: "rtla's -P d:runtime:period",
        needs: &[],
    },
    TimeFlag {
        commands: &["timer"],
        flag: "--work",
        id: "work",
        bare: Bare::Micros,
        why: "timer's -i",
        needs: &[],
    },
    TimeFlag {
        commands: &["noise", "timer", "pingpong", "queue", "work", "syscalls"],
        flag: "-D/--duration",
        id: "duration",
        bare: Bare::Seconds,
        why: "cyclictest's and oslat's -D",
        needs: &[],
    },
    TimeFlag {
        commands: &["run"],
        flag: "--step-time",
        id: "step_time",
        bare: Bare::Seconds,
        why: "a duration, as -D",
        needs: &[],
    },
    TimeFlag {
        commands: &["noise", "timer", "pingpong"],
        flag: "--warmup",
        id: "warmup",
        bare: Bare::Seconds,
        why: "a duration, as -D",
        needs: &[],
    },
    TimeFlag {
        commands: &["c2c"],
        flag: "--preheat",
        id: "preheat",
        bare: Bare::Seconds,
        why: "a duration, as -D",
        needs: &[],
    },
    TimeFlag {
        commands: &["noise"],
        flag: "-T/--threshold",
        id: "threshold",
        bare: Bare::Micros,
        why: "oslat's and rtla osnoise's -T",
        needs: &[],
    },
    TimeFlag {
        commands: &["timer"],
        flag: "-i/--interval",
        id: "interval",
        bare: Bare::Micros,
        why: "cyclictest's -i",
        needs: &[],
    },
    TimeFlag {
        commands: &["timer"],
        flag: "-d/--distance",
        id: "distance",
        bare: Bare::Micros,
        why: "cyclictest's -d",
        needs: &[],
    },
    TimeFlag {
        commands: &["timer"],
        flag: "-b/--stop-above",
        id: "stop_above",
        bare: Bare::Micros,
        why: "cyclictest's -b",
        needs: &[],
    },
    TimeFlag {
        commands: &["timer"],
        flag: "--spikes",
        id: "spikes",
        bare: Bare::Micros,
        why: "cyclictest's --spike",
        needs: &[],
    },
    TimeFlag {
        commands: &["timer"],
        flag: "--dma-latency",
        id: "dma_latency",
        bare: Bare::Micros,
        why: "cyclictest's --latency (whole µs only)",
        needs: &[],
    },
    TimeFlag {
        commands: &["timer"],
        flag: "--timer-slack",
        id: "timer_slack",
        bare: Bare::Nanos,
        why: "the kernel's unit (prctl PR_SET_TIMERSLACK)",
        needs: &[],
    },
    TimeFlag {
        commands: &["queue"],
        flag: "-i/--interval",
        id: "interval",
        bare: Bare::Micros,
        why: "timer's -i",
        needs: &[],
    },
    TimeFlag {
        commands: &["pingpong", "work"],
        flag: "--pause",
        id: "pause",
        bare: Bare::Nanos,
        why: "pauses are ns long",
        needs: &[],
    },
    TimeFlag {
        commands: &["work"],
        flag: "--ns",
        id: "ns",
        bare: Bare::Nanos,
        why: "its name",
        needs: &[],
    },
    TimeFlag {
        commands: &["monitor"],
        flag: "-i/--interval",
        id: "interval",
        bare: Bare::Micros,
        why: "cyclictest's -i",
        needs: &[],
    },
    TimeFlag {
        commands: &["monitor"],
        flag: "-D/--duration",
        id: "duration",
        bare: Bare::Seconds,
        why: "as for the other commands",
        needs: &[],
    },
    TimeFlag {
        commands: &["monitor"],
        flag: "--noise-threshold",
        id: "noise_threshold",
        bare: Bare::Micros,
        why: "noise's -T",
        needs: &[],
    },
    TimeFlag {
        commands: &["monitor"],
        flag: "--noise-every",
        id: "noise_every",
        bare: Bare::Seconds,
        why: "a duration, as -D",
        needs: &["--noise-cpus", "1"],
    },
    TimeFlag {
        commands: &["monitor"],
        flag: "--noise-for",
        id: "noise_for",
        bare: Bare::Seconds,
        why: "a duration, as -D",
        needs: &[],
    },
    TimeFlag {
        commands: &["monitor"],
        flag: "--log-interval",
        id: "log_interval",
        bare: Bare::Seconds,
        why: "a duration, as -D",
        needs: &[],
    },
    TimeFlag {
        commands: &["monitor"],
        flag: "--audit-every",
        id: "audit_every",
        bare: Bare::Seconds,
        why: "a duration, as -D",
        needs: &[],
    },
];

/// The guide's table of time flags (docs/guide/README.md), from `TIME_FLAGS`.
pub fn time_flags_markdown() -> String {
    let mut out =
        String::from("| flag | commands | a bare number is | as in |\n|---|---|---|---|\n");
    for f in TIME_FLAGS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.flag,
            f.commands.join(", "),
            f.bare.unit(),
            f.why
        ));
    }
    out
}
