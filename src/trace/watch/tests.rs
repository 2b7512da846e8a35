use std::collections::VecDeque;

use super::watcher::SETTLE_EVERY;
use super::*;
use crate::stats::causes::CauseKind;
use crate::stats::histogram::LatencyHistogram;
use crate::trace::attribute::{CfsQuota, Throttle};
use crate::trace::event::{Kind, Task};

/// 1 tick = 1 ns.
fn scale() -> Scale {
    Scale::from_hz(1e9)
}

struct Trace {
    names: Names,
    per_cpu: BTreeMap<usize, Vec<Event>>,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            names: Names::default(),
            per_cpu: BTreeMap::new(),
        }
    }

    fn task(&mut self, comm: &str, pid: u32, prio: i32) -> Task {
        Task {
            pid,
            comm: self.names.intern(comm),
            prio,
        }
    }

    fn at(&mut self, cpu: usize, ts: u64, kind: Kind) {
        self.per_cpu
            .entry(cpu)
            .or_default()
            .push(Event { ts, kind });
    }

    fn wake(&mut self, cpu: usize, ts: u64, task: Task, target: usize) {
        let kind = Kind::Wakeup {
            task,
            target_cpu: target as i32,
            waker_pid: 0,
        };
        self.at(cpu, ts, kind);
    }

    fn switch(&mut self, cpu: usize, ts: u64, prev: Task, state: i32, next: Task) {
        let kind = Kind::Switch {
            prev,
            prev_state: state,
            next,
        };
        self.at(cpu, ts, kind);
    }

    /// Each CPU's events stamped in [from, until): one window a reader hands over.
    fn window(&self, from: u64, until: u64) -> BTreeMap<usize, Vec<Event>> {
        (self.per_cpu.iter())
            .map(|(&c, evs)| {
                let part = evs.iter().filter(|e| from <= e.ts && e.ts < until);
                (c, part.copied().collect())
            })
            .collect()
    }

    fn run(&self, watched: &Watched, threshold_ns: u64) -> Vec<ThreadFigures> {
        let symbols = HashMap::new();
        let s = Settings {
            scale: scale(),
            threshold_ns,
            top: 5,
            throttle: Throttle::default(),
            run_start: 0,
        };
        watch(&self.per_cpu, &self.names, watched, &s, &symbols)
    }
}

fn tids(t: &[u32]) -> Watched {
    Watched::Tids(t.iter().copied().collect())
}

/// The app woken while a real-time hog holds the CPU waits for it; the delay is the
/// hog's, with an IRQ inside it that is its own cause.
#[test]
fn a_delay_is_split_into_what_ran_instead() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let hog = t.task("hog", 20, 49);
    let idle = t.task("swapper/1", 0, 120);
    t.switch(1, 1_000, idle, 0, hog);
    t.wake(1, 2_000, app, 1);
    let name = t.names.intern("eth0");
    t.at(1, 50_000, Kind::IrqEntry { irq: 30, name });
    t.at(1, 60_000, Kind::IrqExit { irq: 30 });
    t.switch(1, 302_000, hog, 1, app);
    t.switch(1, 305_000, app, 1, idle);
    let f = t.run(&tids(&[10]), 10_000);
    assert_eq!(f.len(), 1);
    let a = &f[0];
    assert_eq!(a.wakeup.count(), 1);
    assert_eq!(a.wakeup.max_ns(), Some(300_000), "wake-up to switch-in");
    assert_eq!((a.runs, a.involuntary, a.migrations), (1, 0, 0));
    let attr = a.attribution.as_ref().expect("one delay over 10 µs");
    assert_eq!(attr.gaps, 1);
    let row = |k| attr.causes.iter().find(|r| r.kind == k).unwrap();
    assert!(row(CauseKind::Task).cause.starts_with("task hog:20"));
    assert_eq!(row(CauseKind::Task).total_ns, 290_000);
    assert_eq!(row(CauseKind::Task).largest_in, 1);
    assert_eq!(row(CauseKind::Irq).total_ns, 10_000);
    assert_eq!(row(CauseKind::Irq).largest_in, 0);
    assert_eq!(attr.top.len(), 1);
}

/// Issue 36: the hog's switch in was not recorded (a loaded guest's kernel drops a
/// few): the thread slept, a kworker ran, the hog woke, then the thread, and 164 µs
/// later the hog was switched out for it. The delay is the hog's, named from its
/// switch out, not left unaccounted as the kworker's unknown time.
#[test]
fn issue36_a_hog_whose_switch_in_was_lost_is_named_from_its_switch_out() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 94);
    let hog = t.task("hog", 20, 89);
    let kworker = t.task("kworker/1:1", 30, 120);
    let name = t.names.intern("local_timer");
    t.switch(1, 1_000, app, 1, kworker);
    t.at(1, 2_000, Kind::VectorEntry { name });
    t.wake(1, 2_010, hog, 1);
    t.at(1, 2_030, Kind::VectorExit { name });
    t.at(1, 9_000, Kind::VectorEntry { name });
    t.wake(1, 9_010, app, 1);
    t.at(1, 9_020, Kind::VectorExit { name });
    t.switch(1, 173_010, hog, 1, app);
    let f = t.run(&tids(&[10]), 10_000);
    let a = &f[0];
    assert_eq!(a.wakeup.max_ns(), Some(164_000), "wake-up to switch-in");
    let attr = a.attribution.as_ref().expect("one delay over 10 µs");
    let main = (attr.causes.iter()).find(|r| r.largest_in == 1).unwrap();
    assert_eq!(main.cause, "task hog:20 (real-time 10)");
    assert_eq!(main.total_ns, 164_000 - 10);
}

/// Preempted (switched out runnable) and back: preempted time, an involuntary
/// switch, a migration when it comes back elsewhere, and IRQ time while it ran.
#[test]
fn preemption_migration_and_irq_time_are_counted() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let other = t.task("other", 30, 120);
    let idle0 = t.task("swapper/0", 0, 120);
    t.switch(0, 100, idle0, 0, other);
    t.wake(0, 1_000, app, 1);
    t.switch(1, 1_500, idle0, 0, app);
    t.at(1, 2_000, Kind::VectorEntry { name: 0 });
    t.at(1, 2_700, Kind::VectorExit { name: 0 });
    // Preempted ("R+": TASK_REPORT_MAX), then back on CPU 0.
    t.switch(1, 5_000, app, 0x100, other);
    t.switch(0, 9_000, other, 1, app);
    t.switch(0, 10_000, app, 1, idle0);
    let f = t.run(&tids(&[10]), 10_000);
    let a = &f[0];
    assert_eq!(a.wakeup.max_ns(), Some(500));
    assert!(a.attribution.is_none(), "no delay over 10 µs");
    assert_eq!(a.preempted.as_ref().unwrap().max_ns(), Some(4_000));
    assert_eq!((a.runs, a.involuntary, a.migrations), (2, 1, 1));
    assert_eq!(a.irq.as_ref().unwrap().sum_ns(), 700);
}

/// No switch out of idle recorded: the exit of the interrupt that woke the thread
/// starts it (guessed); a later switch to it corrects the guess.
#[test]
fn a_start_from_idle_is_guessed_and_corrected() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let idle = t.task("swapper/1", 0, 120);
    let name = t.names.intern("local_timer");
    t.switch(1, 100, app, 1, idle);
    t.at(1, 1_000, Kind::VectorEntry { name });
    t.wake(1, 1_200, app, 1);
    t.at(1, 1_500, Kind::VectorExit { name });
    t.switch(1, 4_000, app, 1, idle);
    // Woken again, but another task got there first (its switch-in unrecorded).
    t.at(1, 10_000, Kind::VectorEntry { name });
    t.wake(1, 10_200, app, 1);
    t.at(1, 10_500, Kind::VectorExit { name });
    let hog = t.task("hog", 20, 120);
    t.switch(1, 30_200, hog, 1, app);
    t.switch(1, 31_000, app, 1, idle);
    let f = t.run(&tids(&[10]), 1_000_000);
    let a = &f[0];
    assert_eq!(a.wakeup.count(), 2);
    assert_eq!(a.wakeup.min_ns(), Some(300), "woken at 1200, ran at 1500");
    assert_eq!(a.wakeup.max_ns(), Some(20_000), "corrected by the switch");
    assert_eq!(a.starts_guessed, 1);
    assert_eq!(a.runs, 3, "the first switch out was a run too");
    assert!(
        a.irq.is_none(),
        "the interrupts that woke it are not its time"
    );
}

/// A task woken for an idle CPU before the app runs there first (no switch out of
/// idle recorded): the app waits for the switch, and the interrupts meanwhile are
/// not its time.
#[test]
fn a_task_woken_first_on_an_idle_cpu_runs_first() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let hog = t.task("hog", 20, 49);
    let idle = t.task("swapper/1", 0, 120);
    let name = t.names.intern("local_timer");
    t.switch(1, 100, app, 1, idle);
    t.wake(1, 1_000, hog, 1);
    t.wake(1, 50_000, app, 1);
    t.at(1, 50_100, Kind::VectorEntry { name });
    t.at(1, 50_300, Kind::VectorExit { name });
    t.switch(1, 301_000, hog, 1, app);
    t.switch(1, 302_000, app, 1, idle);
    let f = t.run(&tids(&[10]), 10_000);
    let a = &f[0];
    assert_eq!(a.wakeup.max_ns(), Some(251_000));
    assert_eq!(a.starts_guessed, 0);
    assert!(a.irq.is_none(), "the hog's interrupts are not the app's");
    let attr = a.attribution.as_ref().unwrap();
    assert!(
        attr.causes[0].cause.starts_with("task hog:20"),
        "{:?}",
        attr.causes
    );
    assert_eq!(attr.causes[0].largest_in, 1);
}

/// The other way round (issue 25's bench: a real-time sleeper beside `stress-ng
/// --switch`): a normal task woken for an idle CPU, then the real-time app woken for
/// it. The app runs first; the exit of the interrupt that woke it dates its start.
#[test]
fn a_higher_priority_thread_woken_later_runs_first() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 98);
    let other = t.task("switcher", 20, 120);
    let idle = t.task("swapper/1", 0, 120);
    let name = t.names.intern("local_timer");
    t.switch(1, 100, app, 1, idle);
    t.wake(1, 1_000, other, 1);
    t.at(1, 19_000, Kind::VectorEntry { name });
    t.wake(1, 20_000, app, 1);
    t.at(1, 34_000, Kind::VectorExit { name });
    t.switch(1, 48_000, app, 1, other);
    let f = t.run(&tids(&[10]), 10_000);
    let a = &f[0];
    assert_eq!((a.starts_guessed, a.starts_unseen), (1, 0));
    assert_eq!(
        a.wakeup.max_ns(),
        Some(14_000),
        "wake-up to the interrupt's exit"
    );
    // Not when the app is of no higher priority: then the other runs first.
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let other = t.task("switcher", 20, 100);
    let idle = t.task("swapper/1", 0, 120);
    let name = t.names.intern("local_timer");
    t.switch(1, 100, app, 1, idle);
    t.wake(1, 1_000, other, 1);
    t.wake(1, 20_000, app, 1);
    t.at(1, 34_000, Kind::VectorExit { name });
    t.switch(1, 48_000, other, 1, app);
    t.switch(1, 50_000, app, 1, idle);
    let a = &t.run(&tids(&[10]), 10_000)[0];
    assert_eq!(a.starts_guessed, 0);
    assert_eq!(a.wakeup.max_ns(), Some(28_000), "waited for the switch");
}

/// Off-CPU time, from the switch out asleep to the wake-up, by the state it slept in.
#[test]
fn blocked_time_is_split_by_the_state_it_slept_in() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let idle = t.task("swapper/1", 0, 120);
    t.switch(1, 1_000, idle, 0, app);
    t.switch(1, 2_000, app, 1, idle); // S
    t.wake(1, 1_002_000, app, 1);
    t.switch(1, 1_003_000, idle, 0, app);
    t.switch(1, 1_004_000, app, 2, idle); // D
    t.wake(1, 1_054_000, app, 1);
    t.switch(1, 1_055_000, idle, 0, app);
    t.switch(1, 1_056_000, app, 0x100, idle); // preempted: not blocked
    t.switch(1, 1_058_000, idle, 0, app);
    let a = &t.run(&tids(&[10]), 10_000)[0];
    let [s, d, other] = &a.blocked;
    assert_eq!(
        s.as_ref().map(|h| (h.count(), h.max_ns())),
        Some((1, Some(1_000_000)))
    );
    assert_eq!(
        d.as_ref().map(|h| (h.count(), h.max_ns())),
        Some((1, Some(50_000)))
    );
    assert!(other.is_none());
}

/// The priority first seen, and a change (a boost, a chrt) when an event shows it.
#[test]
fn a_priority_change_is_noted_when_seen() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let boosted = t.task("app", 10, 89);
    let idle = t.task("swapper/1", 0, 120);
    t.switch(1, 1_000, idle, 0, app);
    t.switch(1, 2_000, app, 1, idle);
    t.wake(1, 3_000_000, boosted, 1);
    t.switch(1, 3_001_000, idle, 0, boosted);
    t.switch(1, 3_002_000, boosted, 1, idle);
    let a = &t.run(&tids(&[10]), 10_000)[0];
    assert_eq!(a.prio, Some(120));
    assert_eq!(a.prio_changes_total, 1);
    // Ticks are ns in these traces, and the run began at 0.
    assert_eq!(a.prio_changes, vec![(3_000_000, 89)]);
}

/// A woken thread that switches out with no event before: its start is unseen.
#[test]
fn a_start_with_no_event_is_counted_not_guessed() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let idle = t.task("swapper/1", 0, 120);
    t.switch(1, 100, app, 1, idle);
    t.wake(0, 1_000, app, 1);
    t.switch(1, 4_000, app, 1, idle);
    let f = t.run(&tids(&[10]), 10_000);
    assert_eq!(f[0].wakeup.count(), 0);
    assert_eq!(f[0].starts_unseen, 1);
}

/// `--comm` follows every task of that name, and only those.
#[test]
fn comm_matches_every_task_of_the_name() {
    let mut t = Trace::new();
    let a = t.task("worker", 10, 120);
    let b = t.task("worker", 11, 120);
    let c = t.task("other", 12, 120);
    let busy = t.task("busy", 20, 120);
    t.switch(1, 0, c, 1, busy);
    for (i, task) in [a, b, c].into_iter().enumerate() {
        let ts = 1_000 + i as u64 * 100_000;
        t.wake(1, ts, task, 1);
        t.switch(1, ts + 50_000, busy, 0x100, task);
        t.switch(1, ts + 60_000, task, 1, busy);
    }
    let f = t.run(&Watched::Comm("worker".into()), 10_000);
    let seen: Vec<u32> = f.iter().map(|x| x.tid).collect();
    assert_eq!(seen, vec![10, 11]);
    for x in &f {
        assert_eq!(x.wakeup.max_ns(), Some(50_000));
        let attr = x.attribution.as_ref().unwrap();
        assert!(attr.causes[0].cause.starts_with("task busy:20"));
    }
}

/// A busy made-up trace on two CPUs: delays behind a hog with IRQs inside, starts
/// from idle guessed, preemptions and migrations, 200 times over.
fn busy_trace() -> Trace {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let app2 = t.task("app", 11, 120);
    let hog = t.task("hog", 20, 49);
    let other = t.task("other", 30, 120);
    let idle0 = t.task("swapper/0", 0, 120);
    let idle1 = t.task("swapper/1", 0, 120);
    let eth = t.names.intern("eth0");
    let timer = t.names.intern("local_timer");
    for i in 0..200u64 {
        let b = i * 1_000_000;
        let late = 5_000 + (i * 7_919) % 300_000;
        t.switch(1, b + 100, idle1, 0, hog);
        t.wake(1, b + 2_000, app, 1);
        t.at(1, b + 3_000, Kind::IrqEntry { irq: 30, name: eth });
        t.at(1, b + 3_000 + late / 10, Kind::IrqExit { irq: 30 });
        t.switch(1, b + 2_000 + late, hog, 1, app);
        t.switch(1, b + 10_000 + late, app, 1, idle1);
        // On CPU 0: a start from idle, guessed; every third run preempted and
        // finished on CPU 1.
        t.at(0, b + 500_000, Kind::VectorEntry { name: timer });
        t.wake(0, b + 500_200, app2, 0);
        t.at(
            0,
            b + 500_900 + (i % 4) * 5_000,
            Kind::VectorExit { name: timer },
        );
        if i % 3 == 0 {
            t.switch(0, b + 520_000, app2, 0, other);
            t.switch(1, b + 560_000, idle1, 0, app2);
            t.switch(1, b + 570_000, app2, 1, idle1);
            t.switch(0, b + 580_000, other, 1, idle0);
        } else {
            t.switch(0, b + 530_000, app2, 1, idle0);
        }
    }
    t
}

fn settings() -> Settings {
    Settings {
        scale: scale(),
        threshold_ns: 10_000,
        top: 5,
        throttle: Throttle::default(),
        run_start: 0,
    }
}

/// What a thread's figures say, for comparing two runs.
fn seen(f: &ThreadFigures) -> String {
    let sum = |h: &Option<LatencyHistogram>| h.as_ref().map(|h| h.summary());
    format!(
        "{} {} {:?} {:?} {:?} {} {} {} {} {} {:?}",
        f.tid,
        f.comm,
        f.wakeup.summary(),
        sum(&f.preempted),
        sum(&f.irq),
        f.runs,
        f.migrations,
        f.involuntary,
        f.starts_guessed,
        f.starts_unseen,
        f.attribution
    )
}

/// Fed window by window (cut inside delays, inside interrupts and between a guess
/// and its switch), the watcher gives what it gives fed all at once, and keeps only
/// the events the open delays need.
#[test]
fn windows_give_the_figures_the_whole_trace_gives() {
    let t = busy_trace();
    let symbols = HashMap::new();
    let watched = Watched::Comm("app".into());
    let whole = watch(&t.per_cpu, &t.names, &watched, &settings(), &symbols);
    assert_eq!(whole.len(), 2);
    assert!(whole.iter().all(|f| f.attribution.is_some()));
    for step in [333_333u64, 1_000_000, 7_777_777] {
        let mut w = Watcher::new(watched.clone(), settings());
        let mut most = 0;
        for from in (0..200_000_000u64).step_by(step as usize) {
            let until = from + step;
            let window = t.window(from, until);
            w.feed(&super::slices(&window), until, &t.names, &symbols);
            most = most.max(w.tails.values().map(VecDeque::len).max().unwrap_or(0));
        }
        let got = w.finish(&t.names, &symbols);
        assert_eq!(got.len(), whole.len());
        for (a, b) in got.iter().zip(&whole) {
            assert_eq!(seen(a), seen(b), "windows of {step} ticks");
        }
        // A CPU's events of about one period (6 a period), not of the run (1 800).
        assert!(most <= 40, "{most} events held with windows of {step}");
    }
}

/// A reader that fell behind feeds one batch of more events than a tail holds
/// (issue 25: 540 000 events a second on a CPU under `stress-ng --switch`): the
/// batch is settled on the way, so nothing is dropped and the delay inside it is
/// still split.
#[test]
fn a_batch_larger_than_a_tail_loses_nothing() {
    let mut t = Trace::new();
    let (a, b) = (t.task("ping", 30, 120), t.task("pong", 31, 120));
    let app = t.task("app", 10, 98);
    let n = TAIL_CAP as u64 * 2;
    for i in 0..n {
        let (prev, next) = if i % 2 == 0 { (a, b) } else { (b, a) };
        t.switch(0, 1_000 + i * 1_000, prev, 1, next);
    }
    // Late in the batch, the app waits 50 µs behind ping on CPU 1.
    let late = 1_000 + (n - 100) * 1_000;
    t.switch(1, late - 1_000, app, 1, a);
    t.switch(1, late - 500, app, 1, a);
    t.wake(1, late, app, 1);
    t.switch(1, late + 50_000, a, 1, app);
    let symbols = HashMap::new();
    let mut w = Watcher::new(Watched::Comm("app".into()), settings());
    w.feed(&super::slices(&t.per_cpu), u64::MAX, &t.names, &symbols);
    assert_eq!(w.evicted, 0, "nothing dropped");
    assert!(w.tails.values().all(|t| t.len() < SETTLE_EVERY * 2));
    let f = w.finish(&t.names, &symbols);
    let attr = f[0].attribution.as_ref().expect("the 50 µs delay");
    assert_eq!(attr.gaps, 1);
    assert!(attr.causes[0].cause.starts_with("task ping:30"), "{attr:?}");
}

/// Drained after every window (issue 25, `monitor --watch-comm`), the figures added
/// up over the drains are those of one run to the end: every wake-up, preemption,
/// run, migration and involuntary switch counted once, and each cause's time and
/// main-cause count too.
#[test]
fn drains_add_up_to_the_whole_run() {
    let t = busy_trace();
    let symbols = HashMap::new();
    let watched = Watched::Comm("app".into());
    let whole = watch(&t.per_cpu, &t.names, &watched, &settings(), &symbols);
    let mut w = Watcher::new(watched, settings());
    #[derive(Default, Debug, PartialEq)]
    struct Sums {
        wakeups: u64,
        wakeup_ns: u64,
        preempted_ns: u64,
        irq_ns: u64,
        counts: (u64, u64, u64),
        gaps: u64,
        causes: BTreeMap<(CauseKind, String), (u64, u64, u64)>,
    }
    let mut sums: BTreeMap<u32, Sums> = BTreeMap::new();
    let mut add = |f: &ThreadFigures| {
        let s = sums.entry(f.tid).or_default();
        s.wakeups += f.wakeup.count();
        s.wakeup_ns += f.wakeup.sum_ns();
        s.preempted_ns += f.preempted.as_ref().map_or(0, |h| h.sum_ns());
        s.irq_ns += f.irq.as_ref().map_or(0, |h| h.sum_ns());
        s.counts.0 += f.runs;
        s.counts.1 += f.migrations;
        s.counts.2 += f.involuntary;
        if let Some(a) = &f.attribution {
            s.gaps += a.gaps;
            for r in &a.causes {
                let c = s.causes.entry((r.kind, r.cause.clone())).or_default();
                (c.0, c.1, c.2) = (c.0 + r.gaps, c.1 + r.largest_in, c.2 + r.total_ns);
            }
        }
    };
    let step = 2_500_000u64;
    for from in (0..200_000_000u64).step_by(step as usize) {
        let until = from + step;
        let window = t.window(from, until);
        w.feed(&super::slices(&window), until, &t.names, &symbols);
        // A long idle time: no thread is dropped, so the migrations stay counted.
        w.drain(u64::MAX, &mut add);
    }
    // What the last window left open.
    w.feed(&[], u64::MAX, &t.names, &symbols);
    w.drain(u64::MAX, &mut add);
    let mut want: BTreeMap<u32, Sums> = BTreeMap::new();
    for f in &whole {
        add_whole(&mut want, f);
    }
    fn add_whole(m: &mut BTreeMap<u32, Sums>, f: &ThreadFigures) {
        let s = m.entry(f.tid).or_default();
        s.wakeups = f.wakeup.count();
        s.wakeup_ns = f.wakeup.sum_ns();
        s.preempted_ns = f.preempted.as_ref().map_or(0, |h| h.sum_ns());
        s.irq_ns = f.irq.as_ref().map_or(0, |h| h.sum_ns());
        s.counts = (f.runs, f.migrations, f.involuntary);
        if let Some(a) = &f.attribution {
            s.gaps = a.gaps;
            for r in &a.causes {
                s.causes.insert(
                    (r.kind, r.cause.clone()),
                    (r.gaps, r.largest_in, r.total_ns),
                );
            }
        }
    }
    assert_eq!(sums, want);
    assert!(want.values().all(|s| s.gaps > 0 && s.wakeups >= 200));
}

/// A process that starts a thread for every request (a new tid each time, one name):
/// drained with an idle time, the threads that ended are dropped from the open
/// state, so it stays at the threads alive in a window however many come and go;
/// every thread's wake-up is still handed over once.
#[test]
fn threads_that_end_are_dropped_after_their_last_drain() {
    let mut t = Trace::new();
    let busy = t.task("busy", 20, 120);
    let idle = t.task("swapper/1", 0, 120);
    t.switch(1, 0, idle, 0, busy);
    let n = 2_000u64;
    for i in 0..n {
        let w = t.task("worker", 1_000 + i as u32, 120);
        let ts = 1_000 + i * 100_000;
        t.wake(1, ts, w, 1);
        t.switch(1, ts + 20_000, busy, 0x100, w);
        // Exits: switched out dead (TASK_DEAD, 0x80), never seen again.
        t.switch(1, ts + 30_000, w, 0x80, busy);
    }
    let symbols = HashMap::new();
    let mut w = Watcher::new(Watched::Comm("worker".into()), settings()).streaming();
    let (mut handed, mut most, mut delays) = (0u64, 0usize, 0u64);
    let step = 1_000_000u64;
    for from in (0..n * 100_000 + step).step_by(step as usize) {
        let until = from + step;
        let window = t.window(from, until);
        w.feed(&super::slices(&window), until, &t.names, &symbols);
        most = most.max(w.threads());
        w.drain(2_000_000, |f| {
            handed += f.wakeup.count();
            delays += f.attribution.as_ref().map_or(0, |a| a.gaps);
            if let Some(a) = &f.attribution {
                // Named for a fleet: no pid.
                assert_eq!(a.causes[0].cause, "task busy", "{:?}", a.causes);
            }
        });
    }
    assert_eq!(handed, n, "every wake-up handed over once");
    assert_eq!(delays, n, "every 20 µs delay attributed once");
    // 10 threads a window, kept for 2 ms of idle time: about 30 at most.
    assert!(most <= 40, "{most} threads held at once");
    assert!(w.threads() <= 40, "{} threads held at the end", w.threads());
}

/// Issue 34: a watched thread in a group with a CFS quota, preempted at 10 µs
/// ("R+", `preempted` in the kernel, as 6.18's throttle switches it out) and run
/// again at 80 µs on the same CPU, while `other` ran there; the refill's timer fires
/// there at 60 µs when `refill`, in the timer's vector (59.9–60.5 µs). What `other`
/// ran until the refill is the quota's (49.9 µs), the vector its own, the rest
/// `other`'s. `end_seen` false: no switch in is recorded (out of idle),
/// and the thread is next seen going to sleep at 90 µs.
fn quota_trace(state: i32, refill: bool, end_seen: bool) -> ThreadFigures {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let other = t.task("other", 30, 120);
    t.switch(1, 1_000, other, 1, app);
    t.switch(1, 10_000, app, state, other);
    if refill {
        // As the kernel runs it: inside the local timer's vector.
        let name = t.names.intern("local_timer");
        t.at(1, 59_900, Kind::VectorEntry { name });
        t.at(1, 60_000, Kind::HrtimerEntry { function: 0xcf5 });
        t.at(1, 60_400, Kind::HrtimerExit);
        t.at(1, 60_500, Kind::VectorExit { name });
    }
    if end_seen {
        t.switch(1, 80_000, other, 0, app);
    }
    t.switch(1, 90_000, app, 1, other);
    let symbols = HashMap::from([(0xcf5, "sched_cfs_period_timer".to_string())]);
    let mut s = settings();
    s.throttle.cfs_quota = Some(CfsQuota {
        setting: "cpu.max 30000 100000".into(),
        group: "/pod/ctr".into(),
    });
    watch(&t.per_cpu, &t.names, &tids(&[10]), &s, &symbols).remove(0)
}

fn quota_ns(f: &ThreadFigures) -> u64 {
    let label = crate::stats::causes::quota_label("cpu.max 30000 100000", "/pod/ctr");
    let rows = f.attribution.iter().flat_map(|a| &a.causes);
    let quota = rows.filter(|r| r.kind == CauseKind::Throttling);
    quota
        .inspect(|r| assert_eq!(r.cause, label))
        .map(|r| r.total_ns)
        .sum()
}

#[test]
fn issue34_a_throttled_preemption_is_named_the_quota_until_the_refill() {
    let f = quota_trace(0x100, true, true);
    assert_eq!(f.preempted.as_ref().unwrap().max_ns(), Some(70_000));
    let a = f
        .attribution
        .as_ref()
        .expect("the 70 µs stretch attributed");
    assert_eq!(a.gaps, 1);
    assert_eq!(quota_ns(&f), 49_900);
    let other = (a.causes.iter()).find(|r| r.cause.starts_with("task other:30"));
    assert_eq!(other.map(|r| r.total_ns), Some(19_500));
}

/// No refill on the CPU, or a preemption at a return to user ("R"): time-sharing,
/// not the quota.
#[test]
fn issue34_a_preemption_without_the_refill_is_not_the_quota() {
    for (state, refill) in [(0x100, false), (0, true)] {
        let f = quota_trace(state, refill, true);
        assert!(f.attribution.is_some(), "the 70 µs stretch attributed");
        assert_eq!(quota_ns(&f), 0, "state {state:#x}, refill {refill}");
    }
}

/// Run again with no switch recorded: the stretch is attributed up to the thread's
/// next switch out (the quota's part still ends at the refill), counted, and kept
/// out of the preempted histogram.
#[test]
fn issue34_a_throttled_stretch_whose_end_is_unseen_is_still_named() {
    let f = quota_trace(0x100, true, false);
    assert_eq!(f.preempted_ends_unseen, 1);
    assert!(f.preempted.is_none());
    assert_eq!(quota_ns(&f), 49_900);
}

/// Issue 34: a real-time watched thread preempted while runnable, and a SCHED_OTHER
/// task run in its place on its CPU: RT throttling, named with its group's
/// bandwidth beside the kernel's.
#[test]
fn issue34_a_real_time_thread_held_off_is_named_its_groups_rt_throttling() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 94);
    let other = t.task("other", 30, 120);
    t.switch(1, 1_000, other, 0, app);
    t.switch(1, 10_000, app, 0, other);
    t.switch(1, 80_000, other, 0, app);
    t.switch(1, 90_000, app, 1, other);
    let mut s = settings();
    s.throttle.rt = Some((950_000, 1_000_000));
    s.throttle.rt_group = Some(CfsQuota {
        setting: "cpu.rt_runtime_us 30000, cpu.rt_period_us 100000".into(),
        group: "/pod/ctr".into(),
    });
    let f = watch(&t.per_cpu, &t.names, &tids(&[10]), &s, &HashMap::new()).remove(0);
    let a = f
        .attribution
        .as_ref()
        .expect("the 70 µs stretch attributed");
    let row = (a.causes.iter()).find(|r| r.kind == CauseKind::Throttling);
    assert_eq!(
        row.map(|r| (r.cause.as_str(), r.total_ns)),
        Some((
            "real-time throttling (cpu.rt_runtime_us 30000, cpu.rt_period_us 100000 of \
             /pod/ctr; kernel.sched_rt_runtime_us = 950000 of 1000000)",
            70_000
        ))
    );
}

#[test]
fn names_longer_than_the_kernel_keeps_are_refused() {
    assert!(comm_of("worker").is_ok());
    assert!(comm_of("").is_err());
    let e = comm_of("a-very-long-thread-name").unwrap_err();
    assert!(e.contains("'a-very-long-thr'"), "{e}");
    assert!(still_runnable(0) && still_runnable(0x100) && !still_runnable(1));
}

/// Issue 34: a thread of a watched cgroup is woken, then leaves the listing (it ended,
/// or moved out) before its switch in is fed: that delay never ends for the watcher.
/// Left open, it held every CPU's events back to its wake-up for 2 s, past the tail's
/// bound (3.65 M events dropped in one bench pair at 250 000 switches a second). Given
/// up when the thread stops being watched, it holds nothing.
#[test]
fn issue34_a_delay_left_open_by_a_thread_no_longer_watched_holds_no_events() {
    let mut t = Trace::new();
    let (a, b) = (t.task("ping", 30, 120), t.task("pong", 31, 120));
    let gone = t.task("app", 10, 120);
    t.wake(0, 500, gone, 0);
    // 1.2 s at one switch every 4 µs: more than a tail holds.
    let n = TAIL_CAP as u64 * 2 + 10_000;
    for i in 0..n {
        let (prev, next) = if i % 2 == 0 { (a, b) } else { (b, a) };
        t.switch(0, 1_000 + i * 4_000, prev, 1, next);
    }
    let symbols = HashMap::new();
    let mut w = Watcher::new(tids(&[10]), settings());
    let step = 20_000_000u64;
    let mut most = 0;
    for from in (0..n * 4_000 + step).step_by(step as usize) {
        let until = from + step;
        let window = t.window(from, until);
        w.feed(&super::slices(&window), until, &t.names, &symbols);
        if from == 0 {
            // Listed again: thread 10 is gone.
            w.watch_tids([]);
        }
        most = most.max(w.tails.values().map(VecDeque::len).max().unwrap_or(0));
    }
    assert_eq!(w.evicted, 0, "no event dropped");
    // A window's events (5 000) and the last switch before them, not 1.2 s of them.
    assert!(most <= 10_000, "{most} events held");
    let f = w.finish(&t.names, &symbols);
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].wakeup.count(),
        0,
        "the delay whose end went unseen is not made up"
    );
}

/// Issue 35: a delay longer than a tail holds (a thread woken while ping and pong switch
/// 1.2 s on its CPU) loses its first events to the bound: it is counted unattributed,
/// not named from the events after the hole. A later delay is split as ever.
#[test]
fn issue35_a_delay_whose_events_were_dropped_is_left_unattributed() {
    let mut t = Trace::new();
    let (a, b) = (t.task("ping", 30, 120), t.task("pong", 31, 120));
    let app = t.task("app", 10, 120);
    t.switch(0, 100, app, 1, a);
    t.wake(0, 500, app, 0);
    let n = TAIL_CAP as u64 + 10_000;
    for i in 0..n {
        let (prev, next) = if i % 2 == 0 { (a, b) } else { (b, a) };
        t.switch(0, 1_000 + i * 1_000, prev, 1, next);
    }
    let end = 1_000 + n * 1_000;
    let last = if n.is_multiple_of(2) { a } else { b };
    t.switch(0, end, last, 1, app);
    // Asleep, woken again, and 20 µs behind ping.
    t.switch(0, end + 1_000, app, 1, a);
    t.wake(0, end + 2_000, app, 0);
    t.switch(0, end + 22_000, a, 1, app);
    let symbols = HashMap::new();
    let mut w = Watcher::new(tids(&[10]), settings());
    w.feed(&super::slices(&t.per_cpu), u64::MAX, &t.names, &symbols);
    assert!(w.evicted > 0, "the bound was reached");
    let f = w.finish(&t.names, &symbols);
    assert_eq!(f[0].wakeup.count(), 2, "both delays are in the histogram");
    let attr = f[0].attribution.as_ref().expect("an attribution");
    assert_eq!((attr.gaps, attr.unattributed_gaps), (1, 1), "{attr:?}");
    assert!(attr.causes[0].cause.starts_with("task ping:30"), "{attr:?}");
    assert_eq!(attr.interrupted_ns, 20_000, "only the later delay is split");
}

/// Issue 34: the merge walks every CPU's events once, in (stamp, CPU) order with each
/// CPU's events at one stamp in their order, and no run longer than it is allowed.
#[test]
fn the_merge_is_in_time_then_cpu_order_run_by_run() {
    use super::watcher::Merge;
    let ev = |ts: u64, tag: u32| Event {
        ts,
        kind: Kind::IrqExit { irq: tag },
    };
    let tag = |e: &Event| match e.kind {
        Kind::IrqExit { irq } => irq,
        _ => unreachable!(),
    };
    let (a, b, c) = (
        [ev(1, 10), ev(5, 11), ev(5, 12), ev(9, 13)],
        [ev(2, 20), ev(5, 21), ev(6, 22)],
        [ev(5, 30), ev(7, 31), ev(8, 32), ev(10, 33)],
    );
    let per_cpu: [(usize, &[Event]); 3] = [(0, &a), (3, &b), (7, &c)];
    let mut merge = Merge::new(&per_cpu);
    let (mut order, mut runs) = (Vec::new(), Vec::new());
    while let Some((cpu, run)) = merge.next_run(2) {
        runs.push((cpu, run.len()));
        order.extend(run.iter().map(|e| (e.ts, cpu, tag(e))));
    }
    let mut want: Vec<(u64, usize, u32)> = (per_cpu.iter())
        .flat_map(|(cpu, evs)| evs.iter().map(|e| (e.ts, *cpu, tag(e))))
        .collect();
    want.sort_by_key(|&(ts, cpu, _)| (ts, cpu));
    assert_eq!(order, want);
    assert!(runs.iter().all(|&(_, n)| (1..=2).contains(&n)), "{runs:?}");
    // CPU 7's 7 and 8 come as one run: nothing of another CPU lies between.
    assert!(runs.contains(&(7, 2)), "{runs:?}");
}

/// Issue 48: a watched thread woken while PREEMPT_RT's IRQ thread runs its IRQ's handler
/// waits for IRQ 4, as the delay's row says (of the IRQ kind, never another task), and the
/// fix it points at is the IRQ's affinity.
#[test]
fn issue48_a_delay_behind_an_irq_thread_is_its_irqs() {
    let mut t = Trace::new();
    let app = t.task("app", 10, 120);
    let irq = t.task("irq/4-ttyS0", 102, 49);
    let idle = t.task("swapper/1", 0, 120);
    let tty = t.names.intern("ttyS0");
    t.at(1, 1_000, Kind::IrqEntry { irq: 4, name: tty });
    t.at(1, 1_500, Kind::IrqExit { irq: 4 });
    t.switch(1, 2_000, idle, 0, irq);
    t.wake(1, 3_000, app, 1);
    t.switch(1, 203_000, irq, 1, app);
    t.switch(1, 205_000, app, 1, idle);
    let f = t.run(&tids(&[10]), 10_000);
    let attr = f[0].attribution.as_ref().expect("one delay over 10 µs");
    let row = &attr.causes[0];
    assert_eq!(
        (row.kind, row.cause.as_str()),
        (
            CauseKind::Irq,
            "irq 4 ttyS0 (its thread irq/4-ttyS0, real-time 50)"
        )
    );
    assert_eq!(row.total_ns, 200_000);
    let fixes = crate::system::cause_fix::wakeup_findings(row.kind, &row.cause);
    assert_eq!(
        fixes.first(),
        Some(&crate::system::finding_id::FindingId::IrqOnMeasuredCpus)
    );
}
