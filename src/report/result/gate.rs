//! `--fail-above METRIC=VALUE`: a pass/fail gate on a saved result, for the CI pipelines
//! and acceptance tests that today parse cyclictest's output.
//!
//! A gate names a figure of the noise and timer entries (a percentile, the maximum, the
//! mean, or noise's share of time lost and its rate) and a limit with its unit. Every
//! entry is checked; the first figure above its limit is the one reported.

use std::fmt;

use crate::probes::noise::NoiseEntry;
use crate::probes::timer::TimerEntry;
use crate::report::ResultFile;
use crate::stats::Summary;

/// What a gate looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    P50,
    P90,
    P99,
    P999,
    P9999,
    Max,
    Mean,
    /// Noise: the share of the run lost to interruptions, in %.
    Lost,
    /// Noise: interruptions a second.
    Rate,
}

impl Metric {
    const NAMES: [(&'static str, Metric); 9] = [
        ("p50", Metric::P50),
        ("p90", Metric::P90),
        ("p99", Metric::P99),
        ("p99.9", Metric::P999),
        ("p99.99", Metric::P9999),
        ("max", Metric::Max),
        ("mean", Metric::Mean),
        ("lost", Metric::Lost),
        ("rate", Metric::Rate),
    ];

    fn name(self) -> &'static str {
        Metric::NAMES
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }

    /// The unit its limit is written in.
    fn unit(self) -> Unit {
        match self {
            Metric::Lost => Unit::Percent,
            Metric::Rate => Unit::PerSecond,
            _ => Unit::Time,
        }
    }

    /// A time figure from a summary, in ns.
    fn of_summary(self, s: &Summary) -> Option<f64> {
        match self {
            Metric::P50 => s.p50_ns.map(|v| v as f64),
            Metric::P90 => s.p90_ns.map(|v| v as f64),
            Metric::P99 => s.p99_ns.map(|v| v as f64),
            Metric::P999 => s.p999_ns.map(|v| v as f64),
            Metric::P9999 => s.p9999_ns.map(|v| v as f64),
            Metric::Max => s.max_ns.map(|v| v as f64),
            Metric::Mean => s.mean_ns,
            Metric::Lost | Metric::Rate => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Time,
    Percent,
    PerSecond,
}

/// One gate: a metric and its limit (ns for times, % for lost, per second for rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gate {
    pub metric: Metric,
    pub limit: f64,
}

impl Gate {
    /// Whether it looks at a time (a percentile, the maximum, the mean), which every
    /// latency figure has; `lost` and `rate` are noise's alone.
    pub fn is_time(&self) -> bool {
        self.metric.unit() == Unit::Time
    }

    /// `p99=50us`, `max=1ms`, `lost=0.5%`, `rate=100/s`. Times need a unit (ns, us, µs,
    /// ms, s): a bare number means different units in different tools.
    pub fn parse(text: &str) -> Result<Gate, String> {
        let names: Vec<&str> = Metric::NAMES.iter().map(|(n, _)| *n).collect();
        let Some((name, value)) = text.split_once('=') else {
            return Err(format!(
                "expected METRIC=VALUE such as p99=50us, max=1ms or lost=0.5%, got '{text}'"
            ));
        };
        let metric = Metric::NAMES
            .iter()
            .find(|(n, _)| *n == name.trim())
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                format!(
                    "unknown metric '{name}' in '{text}'; expected one of {}",
                    names.join(", ")
                )
            })?;
        let limit = parse_limit(value.trim(), metric.unit()).ok_or_else(|| {
            let example = match metric.unit() {
                Unit::Time => "a time with its unit such as 50us, 1.5ms, 800ns or 1h",
                Unit::Percent => "a percentage such as 0.5%",
                Unit::PerSecond => "a rate such as 100/s",
            };
            format!("'{value}' in '{text}': expected {example}")
        })?;
        Ok(Gate { metric, limit })
    }
}

fn parse_limit(v: &str, unit: Unit) -> Option<f64> {
    let number =
        |num: &str| (num.trim().parse::<f64>().ok()).filter(|n: &f64| n.is_finite() && *n >= 0.0);
    match unit {
        Unit::Time => crate::units::time_ns(v, None).filter(|ns| *ns >= 0.0),
        Unit::Percent => number(v.strip_suffix('%')?),
        Unit::PerSecond => number(v.strip_suffix("/s")?),
    }
}

/// A figure above its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    /// "noise CPU 1", "timer CPU 0".
    pub what: String,
    pub gate: Gate,
    pub value: f64,
}

impl fmt::Display for Crossing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (v, l) = (self.value, self.gate.limit);
        let name = self.gate.metric.name();
        match self.gate.metric.unit() {
            Unit::Time => write!(f, "{} {name} {} > {}", self.what, time(v), time(l)),
            Unit::Percent => write!(f, "{} {name} {v:.3} % > {l} %", self.what),
            Unit::PerSecond => write!(f, "{} {name} {v:.1}/s > {l}/s", self.what),
        }
    }
}

/// A time in the unit that reads best: "62.3 µs".
fn time(ns: f64) -> String {
    match ns {
        ns if ns >= 1e6 => format!("{:.3} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.2} µs", ns / 1e3),
        ns => format!("{ns:.0} ns"),
    }
}

/// Every figure of the result above its gate, in entry order.
pub fn crossings(r: &ResultFile, gates: &[Gate]) -> Vec<Crossing> {
    let noise = r.entries::<NoiseEntry>().map(|n| {
        let what = format!("noise CPU {}", n.cpu);
        (
            what,
            &n.summary,
            Some(n.interrupted_pct),
            Some(n.rate_per_s),
        )
    });
    let timer = (r.entries::<TimerEntry>())
        .map(|t| (format!("timer CPU {}", t.cpu), &t.summary, None, None));
    let mut out = Vec::new();
    for (what, summary, lost, rate) in noise.chain(timer) {
        for g in gates {
            let value = match g.metric {
                Metric::Lost => lost,
                Metric::Rate => rate,
                m => m.of_summary(summary),
            };
            if let Some(v) = value.filter(|v| *v > g.limit) {
                out.push(Crossing {
                    what: what.clone(),
                    gate: *g,
                    value: v,
                });
            }
        }
    }
    out
}

/// The one line a crossed gate prints: the first crossing, and how many more there were.
pub fn crossing_line(c: &[Crossing]) -> Option<String> {
    let first = c.first()?;
    Some(match c.len() {
        1 => format!("limit crossed: {first}"),
        n => format!("limit crossed: {first} (and {} more)", n - 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_parse_with_units_and_refuse_the_rest() {
        assert_eq!(
            Gate::parse("p99=50us").unwrap(),
            Gate {
                metric: Metric::P99,
                limit: 50_000.0
            }
        );
        assert_eq!(Gate::parse("max=1ms").unwrap().limit, 1e6);
        assert_eq!(Gate::parse("p99.9=800ns").unwrap().metric, Metric::P999);
        assert_eq!(Gate::parse("lost=0.5%").unwrap().limit, 0.5);
        assert_eq!(Gate::parse("rate=100/s").unwrap().limit, 100.0);
        // issue 22: the units every time flag takes.
        assert_eq!(Gate::parse("max=1h").unwrap().limit, 3.6e12);
        assert_eq!(Gate::parse("max=2m").unwrap().limit, 120e9);
        for bad in [
            "p99", "p98=1us", "p99=50", "max=-1ms", "lost=0.5", "lost=1us", "x=", "=1us",
        ] {
            assert!(Gate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_crossing_says_which_figure_crossed_which_limit() {
        let c = Crossing {
            what: "timer CPU 1".into(),
            gate: Gate::parse("p99=50us").unwrap(),
            value: 62_300.0,
        };
        assert_eq!(
            crossing_line(std::slice::from_ref(&c)).unwrap(),
            "limit crossed: timer CPU 1 p99 62.30 µs > 50.00 µs"
        );
        assert_eq!(crossing_line(&[]), None);
    }
}
