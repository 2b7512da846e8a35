//! Attribution summed over the batches of one CPU's gaps, in memory bounded by the causes
//! seen rather than by the gaps.

use indexmap::IndexMap;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};

use crate::stats::causes::{
    Attribution, CauseKind, CauseRow, GapBreakdown, Part, TaskTime, TraceCost,
};

use super::*;

/// Attribution summed over successive batches of one CPU's gaps, each with the events
/// around it, in memory bounded by the causes seen rather than by the gaps: a run of any
/// length is attributed whole (issue 22: the first 10 000 gaps of 227 508 were). Batches
/// come in time order; `finish` gives what `attribute` would have given for them all,
/// but that a cause's median over more than `SAMPLE` gaps is taken over an even sample
/// of them, and its period over its first `SAMPLE` gaps.
#[derive(Debug)]
pub struct Tally {
    /// Each cause's sums, by kind and label; reached by index from a batch's [`Seen`].
    causes: IndexMap<(CauseKind, String), Acc, FxBuildHasher>,
    gaps: u64,
    interrupted: u64,
    /// The largest gaps broken down, at most `top`, in no order.
    top: Vec<GapBreakdown>,
    top_n: usize,
    /// Once `top` is full, the index of its smallest gap (the first of equals).
    top_min: Option<usize>,
    /// Events stamped inside the gaps, and the shortest spacing of two successive events.
    events_in_gaps: u64,
    min_spacing_ns: Option<u64>,
    /// What ran inside each throttle's windows (by the throttle's label), and for how
    /// long (ns), by the task's label.
    held: FxHashMap<String, FxHashMap<String, u64>>,
    /// The measuring thread and the tick as the trace last showed them, across batches.
    carried: Carried,
    /// Some time was named a CFS quota: the method says on what evidence.
    quota_named: bool,
}

/// What a "CFS quota" row rests on: no trace event marks CFS throttling.
const QUOTA_EVIDENCE: &str = "; \"CFS quota\": the SCHED_OTHER loop, in a cgroup chain \
     with a quota, was switched out runnable (or found off its CPU with no switch out \
     recorded) and the CPU idled while it stayed runnable (the whole window); or it was \
     dequeued inside the kernel (\"R+\", as 6.18's CFS throttle does) and a quota refill \
     unthrottled a group on its CPU (sched_cfs_period_timer or sched_cfs_slack_timer \
     fired there, or __cfsb_csd_unthrottle ran there from another CPU): until then";

/// Per-gap values kept for a cause's median and period: at most 2 KiB a cause, so that a
/// run's memory is set by how many causes it names (at most [`MAX_CAUSES`]) (issue 29: at
/// 4096, a 192-CPU run held 64 KiB per cause per CPU). They grow as the cause's gaps come
/// (issue 35: taken whole when a cause was first seen, a recording made beside a build
/// held 59 causes a CPU, most with a few gaps: 36 MB over 192 CPUs).
const SAMPLE: usize = 128;
/// Causes a tally names at most (issue 29: a host that starts processes all day, a
/// build, named a new `task rustc:PID` every few gaps, and the rows grew with the run).
/// Past it, the cause with the least time so far goes into its kind's `other` row, so
/// that the largest keep their names however late they come.
pub const MAX_CAUSES: usize = 64;
/// Parts a broken-down gap lists in time order at most: past it, the first half in time
/// order, then the rest summed per cause.
pub const MAX_PARTS: usize = 48;
/// Tasks listed under one throttle at most; the rest are summed as `other tasks`.
const MAX_HELD_TASKS: usize = 32;

/// The row the causes of `kind` folded past [`MAX_CAUSES`] are summed in.
fn other_label(kind: CauseKind) -> String {
    match kind {
        CauseKind::Throttling => "other throttling".into(),
        k => format!("other {}s", k.as_str()),
    }
}

/// One cause's sums.
#[derive(Debug)]
struct Acc {
    gaps: u64,
    occurrences: u64,
    /// Gaps in which it was the largest part.
    largest_in: u64,
    total: u64,
    max: u64,
    /// Its time in every `stride`-th gap it appears in (all of them up to `SAMPLE`).
    sample: Vec<u64>,
    stride: u64,
    /// The starts of its first `SAMPLE` gaps, for its period.
    starts: Vec<u64>,
    /// Causes folded in past [`MAX_CAUSES`]: their gaps are summed (a gap two of them
    /// took part in counts twice), and they have no period.
    folded: bool,
}

impl Default for Acc {
    fn default() -> Acc {
        Acc {
            gaps: 0,
            occurrences: 0,
            total: 0,
            max: 0,
            sample: Vec::new(),
            stride: 1,
            starts: Vec::new(),
            largest_in: 0,
            folded: false,
        }
    }
}

impl Acc {
    fn add(&mut self, start: u64, ns: u64) {
        if self.gaps.is_multiple_of(self.stride) {
            if self.sample.len() == SAMPLE {
                // Keep every other value and take every other one from now on.
                let mut i = 0;
                self.sample.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
            if self.gaps.is_multiple_of(self.stride) {
                self.sample.push(ns);
            }
        }
        if self.starts.len() < SAMPLE {
            self.starts.push(start);
        }
        self.gaps += 1;
        self.total += ns;
        self.max = self.max.max(ns);
    }

    /// Sums `other`'s figures into this (an `other` row).
    fn fold(&mut self, other: Acc) {
        self.folded = true;
        self.gaps += other.gaps;
        self.occurrences += other.occurrences;
        self.largest_in += other.largest_in;
        self.total += other.total;
        self.max = self.max.max(other.max);
        self.sample.extend(other.sample.iter().take(SAMPLE / 16));
        while self.sample.len() > SAMPLE {
            let mut i = 0;
            self.sample.retain(|_| {
                i += 1;
                i % 2 == 1
            });
        }
        self.starts.clear();
    }

    fn row(&self, kind: CauseKind, cause: String, all: u64, scale: Scale) -> CauseRow {
        let mut ns = self.sample.clone();
        ns.sort_unstable();
        CauseRow {
            kind,
            cause,
            gaps: self.gaps,
            occurrences: self.occurrences,
            largest_in: self.largest_in,
            total_ns: self.total,
            share_pct: match all {
                0 => 0.0,
                a => self.total as f64 * 100.0 / a as f64,
            },
            median_ns: ns.get(ns.len() / 2).copied().unwrap_or(0),
            max_ns: self.max,
            period_ns: (!self.folded)
                .then(|| period(&self.starts))
                .flatten()
                .map(|t| scale.to_ns(t)),
            tasks: Vec::new(),
        }
    }
}

impl Tally {
    /// Nothing yet; `top` of the largest gaps will be broken down.
    pub fn new(top: usize) -> Tally {
        Tally {
            causes: IndexMap::default(),
            gaps: 0,
            interrupted: 0,
            top: Vec::new(),
            top_n: top,
            top_min: None,
            events_in_gaps: 0,
            min_spacing_ns: None,
            held: FxHashMap::default(),
            carried: Carried::default(),
            quota_named: false,
        }
    }

    /// Gaps attributed so far.
    pub fn gaps(&self) -> u64 {
        self.gaps
    }

    /// The heap it holds, bytes, as capacities (what it took from the allocator): a
    /// streaming reader counts it in its CPU's share of the memory budget (issue 35).
    pub fn bytes(&self) -> usize {
        use std::mem::size_of;
        // An entry, and its slot in the index table (an index and a control byte).
        let row = size_of::<((CauseKind, String), Acc)>() + 2 * size_of::<usize>() + 1;
        let causes: usize = (self.causes.iter())
            .map(|((_, label), a)| {
                label.capacity() + (a.sample.capacity() + a.starts.capacity()) * size_of::<u64>()
            })
            .sum();
        let top: usize = (self.top.iter())
            .map(|b| {
                let labels: usize = b.parts.iter().map(|p| p.cause.capacity()).sum();
                b.parts.capacity() * size_of::<Part>() + labels
            })
            .sum();
        let held: usize = (self.held.iter())
            .map(|(label, tasks)| {
                let names: usize = tasks.keys().map(String::capacity).sum();
                label.capacity() + names + tasks.capacity() * (size_of::<(String, u64)>() + 1)
            })
            .sum();
        self.causes.capacity() * row
            + causes
            + self.top.capacity() * size_of::<GapBreakdown>()
            + top
            + self.held.capacity() * (size_of::<(String, FxHashMap<String, u64>)>() + 1)
            + held
    }

    /// Adds one batch of gaps (sorted by start, later than any added before) with the
    /// CPU's events that cover them.
    pub fn add(&mut self, gaps: &[(Gap, u64)], events: &[Event], cx: &Context<'_>) {
        let quiet: Vec<u64> = match cx.measurer_kind {
            MeasurerKind::Spins => gaps.iter().map(|g| g.0.start).collect(),
            MeasurerKind::Sleeps => Vec::new(),
        };
        let segments = timeline(events, cx, &quiet, &mut self.carried);
        self.quota_named |=
            (segments.iter()).any(|s| matches!(s.cause, Cause::Throttled(By::CfsQuota, _)));
        self.count_trace_cost(gaps, events, cx.scale);
        // One interrupt or time slice is one occurrence, however many gaps it spans.
        let mut runs: FxHashMap<Cause, FxHashSet<u64>> = FxHashMap::default();
        let mut seen = Seen::default();
        // Reused from gap to gap: most gaps have a part or two, and allocating for them
        // was a tenth of a busy host's attribution time (issue 35).
        let (mut parts, mut per_gap) = (Vec::new(), Vec::new());
        let mut cursor = Cursor::default();
        for &(gap, duration_ns) in gaps {
            self.interrupted += duration_ns;
            self.gaps += 1;
            cursor.split(gap, &segments, &mut parts);
            per_gap.clear();
            let mut covered = 0u64;
            for &(cause, instance, _, ticks) in &parts {
                // A throttle is one row, whichever task ran in it.
                let key = match cause {
                    Cause::Throttled(by, _) => Cause::Throttled(by, NOBODY),
                    c => c,
                };
                runs.entry(key).or_default().insert(instance);
                // Never more than the gap's own interrupted time.
                let ns = cx.scale.to_ns(ticks).min(duration_ns - covered);
                covered += ns;
                match per_gap.iter_mut().find(|(c, _)| *c == Some(key)) {
                    Some((_, sum)) => *sum += ns,
                    None => per_gap.push((Some(key), ns)),
                }
                if let Cause::Throttled(_, t) = cause {
                    self.hold(&mut seen, cx, key, Cause::Task(t, None), ns);
                }
            }
            let rest = duration_ns - covered;
            if rest > 0 {
                per_gap.push((None, rest));
            }
            let main = main_part(&per_gap, &mut seen, cx);
            for (i, &(cause, ns)) in per_gap.iter().enumerate() {
                let row = self.row(&mut seen, cx, cause);
                let acc = &mut self.causes[row];
                acc.add(gap.start, ns);
                acc.occurrences += u64::from(cause.is_none());
                acc.largest_in += u64::from(main == Some(i));
            }
            self.offer_top(duration_ns, || {
                self_breakdown(cx, gap, duration_ns, &parts, rest)
            });
        }
        for (cause, set) in runs {
            let row = self.row(&mut seen, cx, Some(cause));
            self.causes[row].occurrences += set.len() as u64;
        }
    }

    /// Adds `ns` to what `task` ran inside the windows of throttle `by`.
    fn hold(&mut self, seen: &mut Seen, cx: &Context<'_>, by: Cause, task: Cause, ns: u64) {
        let ran = seen.label(cx, Some(task)).1.clone();
        let row = self
            .held
            .entry(seen.label(cx, Some(by)).1.clone())
            .or_default();
        let ran = match row.len() < MAX_HELD_TASKS || row.contains_key(&ran) {
            true => ran,
            false => "other tasks".to_string(),
        };
        *row.entry(ran).or_default() += ns;
    }

    /// The index of the row of `cause` (`None`: the unaccounted rest), found once a
    /// batch; a new row may fold another, which moves rows, so the batch finds them anew.
    fn row(&mut self, seen: &mut Seen, cx: &Context<'_>, cause: Option<Cause>) -> usize {
        if let Some(&i) = seen.rows.get(&cause) {
            return i;
        }
        let (kind, label) = seen.label(cx, cause).clone();
        let (i, folded) = self.acc(kind, label);
        if folded {
            seen.rows.clear();
        }
        seen.rows.insert(cause, i);
        i
    }

    /// Counts the events inside the gaps and the shortest spacing of two events.
    fn count_trace_cost(&mut self, gaps: &[(Gap, u64)], events: &[Event], scale: Scale) {
        // Walked once, gap by gap: a search per gap over the whole batch was a tenth of
        // the attribution (issue 35).
        let mut from = 0;
        for (g, _) in gaps {
            from = walk_on(events, from, |e| e.ts < g.start);
            let inside = events[from..].iter().take_while(|e| e.ts < g.end).count();
            self.events_in_gaps += inside as u64;
        }
        let spacing = (events.windows(2))
            .map(|w| w[1].ts.saturating_sub(w[0].ts))
            .filter(|&d| d > 0)
            .min();
        if let Some(d) = spacing.map(|d| scale.to_ns(d)) {
            self.min_spacing_ns = Some(self.min_spacing_ns.map_or(d, |m| m.min(d)));
        }
    }

    /// The index of a cause's row, and whether rows moved: a new one past [`MAX_CAUSES`]
    /// first folds the cause with the least time (never `unaccounted`, never an `other`
    /// row) into its kind's `other`.
    fn acc(&mut self, kind: CauseKind, label: String) -> (usize, bool) {
        let key = (kind, label);
        let mut folded = false;
        if self.causes.len() >= MAX_CAUSES && !self.causes.contains_key(&key) {
            let smallest = (self.causes.iter())
                .filter(|(k, a)| k.0 != CauseKind::Unaccounted && !a.folded)
                .min_by(|a, b| (a.1.total, &a.0.1).cmp(&(b.1.total, &b.0.1)))
                .map(|(k, _)| k.clone());
            if let Some(k) = smallest
                && let Some(acc) = self.causes.swap_remove(&k)
            {
                let other = self.causes.entry((k.0, other_label(k.0))).or_default();
                other.fold(acc);
                folded = true;
            }
        }
        let entry = self.causes.entry(key);
        let i = entry.index();
        entry.or_default();
        (i, folded)
    }

    /// Keeps the gap's breakdown if it is among the `top_n` largest so far.
    fn offer_top(&mut self, duration_ns: u64, breakdown: impl FnOnce() -> GapBreakdown) {
        if self.top_n == 0 {
            return;
        }
        if self.top.len() < self.top_n {
            self.top.push(breakdown());
        } else if let Some(i) = self
            .top_min
            .filter(|&i| self.top[i].duration_ns < duration_ns)
        {
            self.top[i] = breakdown();
        } else {
            return;
        }
        if self.top.len() == self.top_n {
            self.top_min = (0..self.top.len()).min_by_key(|&i| self.top[i].duration_ns);
        }
    }

    /// The attribution of every gap added.
    pub fn finish(self, scale: Scale) -> Attribution {
        let all = self.interrupted;
        let mut causes: Vec<CauseRow> = (self.causes.iter())
            .map(|((kind, label), acc)| {
                let mut r = acc.row(*kind, label.clone(), all, scale);
                r.tasks = (self.held.get(label).into_iter().flatten())
                    .map(|(task, &total_ns)| TaskTime {
                        task: task.clone(),
                        total_ns,
                    })
                    .collect();
                r.tasks
                    .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.task.cmp(&b.task)));
                r
            })
            .collect();
        let trace_cost = self.cost();
        let mut top = self.top;
        super::kthread::complete_irq_names(&mut causes, &mut top);
        causes.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.cause.cmp(&b.cause)));
        top.sort_by(|a, b| (b.duration_ns.cmp(&a.duration_ns)).then(a.start_tsc.cmp(&b.start_tsc)));
        let mut method = "kernel trace events on the loop's own counter (x86-tsc): net time \
                          per cause inside each gap"
            .to_string();
        if self.quota_named {
            method.push_str(QUOTA_EVIDENCE);
        }
        Attribution {
            method,
            gaps: self.gaps,
            interrupted_ns: all,
            causes,
            top,
            coincident_gaps: 0,
            coincidence_window_ns: 0,
            unattributed_gaps: 0,
            events_read: 0,
            events_lost: 0,
            trace_cost,

            reader_budget: None,
        }
    }

    /// Tracing's cost inside the gaps, once events were seen.
    fn cost(&self) -> Option<TraceCost> {
        let event_ns = self.min_spacing_ns?;
        let events_per_gap = self.events_in_gaps as f64 / self.gaps.max(1) as f64;
        Some(TraceCost {
            event_ns,
            events_per_gap,
            per_gap_ns: event_ns as f64 * events_per_gap,
        })
    }
}

/// The gap's main cause, by index: the largest part, the unaccounted rest included; ties
/// go to the cause first by label, so that the count is reproducible (labels are looked
/// up only for a tie: most gaps have one part).
fn main_part(per_gap: &[(Option<Cause>, u64)], seen: &mut Seen, cx: &Context<'_>) -> Option<usize> {
    let most = per_gap.iter().map(|p| p.1).max()?;
    let tied = || (per_gap.iter().enumerate()).filter(move |(_, p)| p.1 == most);
    if tied().count() == 1 {
        return tied().next().map(|(i, _)| i);
    }
    for (_, p) in tied() {
        seen.label(cx, p.0);
    }
    // The first label; of equal labels the last part, as a `max_by` over them gives.
    let label = |c: &Option<Cause>| seen.labels[c].1.as_str();
    (tied().fold(None, |best, (i, p)| match best {
        Some((j, q)) if label(q) < label(&p.0) => Some((j, q)),
        _ => Some((i, &p.0)),
    }))
    .map(|(i, _)| i)
}

/// What a batch knows of each cause it met (`None`: the unaccounted rest): its kind and
/// label, made once (formatting one per part of every gap was much of a busy host's
/// attribution time, issue 35; names do not change within a batch), and its row.
#[derive(Default)]
struct Seen {
    labels: FxHashMap<Option<Cause>, (CauseKind, String)>,
    rows: FxHashMap<Option<Cause>, usize>,
}

impl Seen {
    fn label(&mut self, cx: &Context<'_>, c: Option<Cause>) -> &(CauseKind, String) {
        self.labels.entry(c).or_insert_with(|| match c {
            Some(c) => (cx.kind(c), cx.label(c)),
            None => (CauseKind::Unaccounted, unaccounted(cx.naming).into()),
        })
    }
}

/// The row of time no event covered.
fn unaccounted(naming: Naming) -> &'static str {
    match naming {
        Naming::Full => "unaccounted (no event: entry and exit, the hypervisor, SMIs)",
        _ => "unaccounted",
    }
}

/// Each gap's parts, found walking the timeline on from the last gap's: a search of the
/// whole batch's timeline for each gap was a tenth of a busy host's attribution time
/// (issue 35). Segments come in time order, none overlapping, as do the gaps.
#[derive(Default)]
struct Cursor {
    first: usize,
}

impl Cursor {
    /// `gap`'s parts into `out`: (cause, instance, start tick, ticks), in time order.
    fn split(&mut self, gap: Gap, segments: &[Segment], out: &mut Vec<(Cause, u64, u64, u64)>) {
        self.first = walk_on(segments, self.first, |s| s.end <= gap.start);
        out.clear();
        out.extend(
            (segments[self.first..].iter())
                .take_while(|s| s.start < gap.end)
                .filter_map(|s| {
                    let (a, b) = (s.start.max(gap.start), s.end.min(gap.end));
                    (b > a).then_some((s.cause, s.instance, a, b - a))
                }),
        );
    }
}

/// The first of `items` (in time order) not `before` a gap, walking on from `from`, the
/// last gap's: gaps come in start order, so each walk is short. From the start if `from`
/// is already past it (a gap out of order), as a search would find it.
fn walk_on<T>(items: &[T], from: usize, before: impl Fn(&T) -> bool) -> usize {
    let from = match from > 0 && !before(&items[from - 1]) {
        true => 0,
        false => from,
    };
    from + items[from..].iter().take_while(|x| before(x)).count()
}

/// A gap's parts in time order, with what no event covered at its end.
fn self_breakdown(
    cx: &Context<'_>,
    gap: Gap,
    duration_ns: u64,
    parts: &[(Cause, u64, u64, u64)],
    rest: u64,
) -> GapBreakdown {
    let part = |&(c, _, at, ticks): &(Cause, u64, u64, u64)| Part {
        kind: cx.kind(c),
        cause: cx.label(c),
        offset_ns: cx.scale.to_ns(at - gap.start),
        duration_ns: cx.scale.to_ns(ticks),
    };
    let (first, later) = parts.split_at(parts.len().min(MAX_PARTS / 2));
    let mut out: Vec<Part> = first.iter().map(part).collect();
    if parts.len() > MAX_PARTS {
        // The rest summed per cause, each at its first offset: a long gap on a busy CPU
        // had 1 172 parts, and ten of them made 500 KB of a result.
        let mut summed: Vec<Part> = Vec::new();
        for p in later.iter().map(part) {
            match summed
                .iter_mut()
                .find(|s| s.kind == p.kind && s.cause == p.cause)
            {
                Some(s) => s.duration_ns += p.duration_ns,
                None => summed.push(p),
            }
        }
        out.extend(summed);
    } else {
        out.extend(later.iter().map(part));
    }
    if rest > 0 {
        out.push(Part {
            kind: CauseKind::Unaccounted,
            cause: "unaccounted".into(),
            offset_ns: 0,
            duration_ns: rest,
        });
    }
    GapBreakdown {
        start_ns: cx.scale.to_ns(gap.start.saturating_sub(cx.run_start)),
        start_tsc: gap.start,
        duration_ns,
        parts: out,
    }
}

#[cfg(test)]
mod walk_tests {
    use super::walk_on;

    /// Walking on from the last gap's place finds what a search of the whole slice
    /// finds, gaps in order or not.
    #[test]
    fn walking_on_finds_what_a_search_finds() {
        let ts = [10u64, 20, 20, 30, 45, 60];
        let mut from = 0;
        for start in [5u64, 20, 21, 44, 15, 60, 61, 0] {
            from = walk_on(&ts, from, |&t| t < start);
            assert_eq!(from, ts.partition_point(|&t| t < start), "gap at {start}");
        }
    }
}
