use super::*;

const ME: u32 = 100;

fn task(names: &mut Names, comm: &str, pid: u32, prio: i32) -> Task {
    Task {
        pid,
        comm: names.intern(comm),
        prio,
    }
}

fn ev(ts: u64, kind: Kind) -> Event {
    Event { ts, kind }
}

fn cx<'a>(names: &'a Names, symbols: &'a HashMap<u64, String>) -> Context<'a> {
    Context::plain(names, symbols, ME)
}

/// A holder preempts the loop; inside its slice an IRQ runs, and inside the IRQ's
/// softirq-free stretch a tick vector: each counted once, where it ran.
/// Issue 22: a run attributed batch by batch, each batch with only the events from
/// its first gap on (what the streaming reader keeps), gives what one pass over the
/// whole run gives.
#[test]
fn issue22_batches_add_up_to_the_whole_run() {
    let mut names = Names::default();
    let me = task(&mut names, "measure-cpu1", ME, 120);
    let kw = task(&mut names, "kworker/1:1", 57, 120);
    let timer = names.intern("local_timer");
    let (mut events, mut gaps) = (Vec::new(), Vec::new());
    for i in 0..50u64 {
        let t = 10_000 * (i + 1);
        events.push(ev(t + 10, Kind::VectorEntry { name: timer }));
        events.push(ev(t + 30 + i, Kind::VectorExit { name: timer }));
        gaps.push((
            Gap {
                start: t,
                end: t + 40 + i,
            },
            40 + i,
        ));
        if i % 7 == 0 {
            let s = t + 5_000;
            let switch = |prev, next| Kind::Switch {
                prev,
                prev_state: 0,
                next,
            };
            events.push(ev(s + 5, switch(me, kw)));
            events.push(ev(s + 500, switch(kw, me)));
            gaps.push((
                Gap {
                    start: s,
                    end: s + 510,
                },
                510,
            ));
        }
    }
    let symbols = HashMap::new();
    let cx = cx(&names, &symbols);
    let whole = attribute(&gaps, &events, &cx);
    let mut t = Tally::new(cx.top);
    for batch in gaps.chunks(9) {
        let from = batch[0].0.start;
        let first = events.partition_point(|e| e.ts < from);
        t.add(batch, &events[first..], &cx);
    }
    assert_eq!(t.gaps(), gaps.len() as u64);
    assert_eq!(t.finish(cx.scale), whole);
    assert!(
        whole
            .causes
            .iter()
            .any(|c| c.cause.starts_with("task kworker"))
    );
}

#[test]
fn nested_causes_are_counted_once_and_the_rest_is_unaccounted() {
    let mut names = Names::default();
    let me = task(&mut names, "measure-cpu1", ME, 98);
    let holder = task(&mut names, "js-holder", 7, 97);
    let eth = names.intern("eth0");
    let timer = names.intern("local_timer");
    let events = vec![
        ev(
            1000,
            Kind::Switch {
                prev: me,
                prev_state: 0,
                next: holder,
            },
        ),
        ev(1200, Kind::IrqEntry { irq: 30, name: eth }),
        ev(1300, Kind::VectorEntry { name: timer }),
        ev(1350, Kind::VectorExit { name: timer }),
        ev(1400, Kind::IrqExit { irq: 30 }),
        ev(
            2000,
            Kind::Switch {
                prev: holder,
                prev_state: 0,
                next: me,
            },
        ),
    ];
    let symbols = HashMap::new();
    // The gap runs from 990 to 2010: 10 ticks each side belong to no event.
    let gaps = [(
        Gap {
            start: 990,
            end: 2010,
        },
        1020,
    )];
    let a = attribute(&gaps, &events, &cx(&names, &symbols));
    let get = |k: CauseKind| a.top_of(k).map_or(0, |r| r.total_ns);
    assert_eq!(get(CauseKind::Task), 200 + 600);
    assert_eq!(get(CauseKind::Irq), 100 + 50);
    assert_eq!(get(CauseKind::Vector), 50);
    assert_eq!(get(CauseKind::Unaccounted), 20);
    let shares: f64 = a.causes.iter().map(|c| c.share_pct).sum();
    assert!((shares - 100.0).abs() < 1e-9, "{shares}");
    let top = &a.causes[0];
    assert_eq!(top.cause, "task js-holder:7 (real-time 2)");
    let parts = &a.top[0].parts;
    assert_eq!(parts[0].offset_ns, 10);
    assert_eq!(parts.last().unwrap().kind, CauseKind::Unaccounted);
}

/// Contexts that began before the gap and end inside it, or span it, are clipped;
/// an NMI counts from its start, `delta_ns` before its stamp.
#[test]
fn contexts_are_clipped_to_the_gap_and_nmis_start_before_their_stamp() {
    let names = Names::default();
    let events = vec![
        ev(100, Kind::SoftirqEntry { vec: 9 }),
        ev(
            700,
            Kind::Nmi {
                delta_ns: 100,
                handler: 0,
            },
        ),
        ev(900, Kind::SoftirqExit { vec: 9 }),
    ];
    let symbols = HashMap::new();
    let gaps = [(
        Gap {
            start: 500,
            end: 1000,
        },
        500,
    )];
    let interval = Context {
        measurer_kind: MeasurerKind::Sleeps,
        ..cx(&names, &symbols)
    };
    let a = attribute(&gaps, &events, &interval);
    let rcu = a.causes.iter().find(|c| c.cause == "softirq RCU").unwrap();
    assert_eq!(rcu.total_ns, 300); // 500-600 and 700-900
    assert_eq!(a.top_of(CauseKind::Nmi).unwrap().total_ns, 100);
    assert_eq!(a.top_of(CauseKind::Unaccounted).unwrap().total_ns, 100);
}

#[test]
fn a_kworker_is_named_with_its_work_and_periods_are_found() {
    let mut names = Names::default();
    let me = task(&mut names, "measure-cpu1", ME, 120);
    let kw = task(&mut names, "kworker/1:1", 57, 120);
    let mut symbols = HashMap::new();
    symbols.insert(0xf00, "vmstat_update".to_string());
    let mut events = Vec::new();
    let mut gaps = Vec::new();
    for i in 0..6u64 {
        let t = 10_000 + i * 4_000_000;
        events.push(ev(
            t,
            Kind::Switch {
                prev: me,
                prev_state: 0,
                next: kw,
            },
        ));
        events.push(ev(t + 10, Kind::WorkStart { function: 0xf00 }));
        events.push(ev(t + 500, Kind::WorkEnd));
        events.push(ev(
            t + 600,
            Kind::Switch {
                prev: kw,
                prev_state: 1,
                next: me,
            },
        ));
        gaps.push((
            Gap {
                start: t,
                end: t + 600,
            },
            600,
        ));
    }
    let a = attribute(&gaps, &events, &cx(&names, &symbols));
    let work = a
        .causes
        .iter()
        .find(|c| c.cause.ends_with("vmstat_update"))
        .unwrap();
    assert_eq!(work.gaps, 6);
    assert_eq!(work.period_ns, Some(4_000_000));
    assert_eq!(period(&[0, 10, 20]), None, "too few to call it periodic");
}

/// An entry whose exit was lost stays open only until the loop is seen running again.
#[test]
fn an_entry_without_its_exit_does_not_leak_into_later_gaps() {
    let mut names = Names::default();
    let csf = names.intern("call_function_single");
    let events = vec![ev(100, Kind::VectorEntry { name: csf })];
    let symbols = HashMap::new();
    let gaps = [
        (
            Gap {
                start: 90,
                end: 150,
            },
            60,
        ),
        (
            Gap {
                start: 1000,
                end: 1100,
            },
            100,
        ),
    ];
    let a = attribute(&gaps, &events, &cx(&names, &symbols));
    let v = a.top_of(CauseKind::Vector).unwrap();
    assert_eq!((v.gaps, v.total_ns), (1, 50));
    assert_eq!(a.top_of(CauseKind::Unaccounted).unwrap().total_ns, 10 + 100);
}

/// A vector that ran an hrtimer is named by it: the tick apart from other timers.
#[test]
fn a_vector_is_named_by_the_hrtimer_it_ran() {
    let mut names = Names::default();
    let lt = names.intern("local_timer");
    let mut symbols = HashMap::new();
    symbols.insert(0xabc, "tick_nohz_handler".to_string());
    let events = vec![
        ev(100, Kind::VectorEntry { name: lt }),
        ev(110, Kind::HrtimerEntry { function: 0xabc }),
        ev(150, Kind::HrtimerExit),
        ev(160, Kind::VectorExit { name: lt }),
    ];
    let gaps = [(
        Gap {
            start: 95,
            end: 170,
        },
        75,
    )];
    let a = attribute(&gaps, &events, &cx(&names, &symbols));
    let v = a.top_of(CauseKind::Vector).unwrap();
    assert_eq!(v.cause, "vector local_timer: tick_nohz_handler");
    assert_eq!(v.total_ns, 60);
    assert_eq!(v.occurrences, 1);
}

/// No switch out of idle is recorded on some kernels: a task that switches out while
/// the CPU is thought idle ran since its wake-up.
#[test]
fn a_task_woken_from_idle_owns_the_time_since_its_wakeup() {
    let mut names = Names::default();
    let idle = task(&mut names, "swapper/1", 0, 120);
    let holder = task(&mut names, "js-holder", 7, 97);
    let me = task(&mut names, "measure-cpu1", ME, 98);
    let events = vec![
        ev(
            100,
            Kind::Switch {
                prev: me,
                prev_state: 1,
                next: idle,
            },
        ),
        ev(
            200,
            Kind::Wakeup {
                task: holder,
                target_cpu: 1,
                waker_pid: 0,
            },
        ),
        ev(
            1200,
            Kind::Switch {
                prev: holder,
                prev_state: 1,
                next: me,
            },
        ),
    ];
    let symbols = HashMap::new();
    let interval = Context {
        measurer_kind: MeasurerKind::Sleeps,
        ..cx(&names, &symbols)
    };
    let gaps = [(
        Gap {
            start: 150,
            end: 1250,
        },
        1100,
    )];
    let a = attribute(&gaps, &events, &interval);
    let h = a
        .causes
        .iter()
        .find(|c| c.cause.starts_with("task js-holder"))
        .unwrap();
    assert_eq!(h.total_ns, 1000);
    assert_eq!(
        a.causes
            .iter()
            .find(|c| c.cause.starts_with("idle"))
            .unwrap()
            .total_ns,
        50
    );
}

/// Stable names carry no pid, no policy and no kworker pool number.
#[test]
fn stable_names_leave_out_what_changes_from_one_minute_to_the_next() {
    let mut names = Names::default();
    // SCHED_OTHER: a real-time loop preempted runnable by a kworker would be throttled.
    let me = task(&mut names, "measure-cpu1", ME, 120);
    let kw = task(&mut names, "kworker/1:2", 4242, 120);
    let holder = task(&mut names, "js-holder", 7, 97);
    let idle = task(&mut names, "swapper/1", 0, 120);
    let mut symbols = HashMap::new();
    symbols.insert(0xf00, "vmstat_update".to_string());
    let switch = |ts, prev, next| {
        ev(
            ts,
            Kind::Switch {
                prev,
                prev_state: 0,
                next,
            },
        )
    };
    let events = vec![
        switch(100, me, kw),
        ev(100, Kind::WorkStart { function: 0xf00 }),
        ev(400, Kind::WorkEnd),
        switch(400, kw, holder),
        switch(700, holder, idle),
        switch(800, idle, me),
    ];
    let cx = Context {
        measurer_kind: MeasurerKind::Sleeps,
        naming: Naming::Stable,
        ..cx(&names, &symbols)
    };
    let gaps = [(
        Gap {
            start: 90,
            end: 900,
        },
        810,
    )];
    let a = attribute(&gaps, &events, &cx);
    let got: Vec<(&str, u64)> = (a.causes.iter())
        .map(|c| (c.cause.as_str(), c.total_ns))
        .collect();
    assert_eq!(
        got,
        vec![
            ("task js-holder", 300),
            ("task kworker vmstat_update", 300),
            ("unaccounted", 110),
            ("idle", 100),
        ]
    );
    assert_eq!(a.top[0].parts.last().unwrap().cause, "unaccounted");
}

/// The measuring thread woken from idle with no switch recorded: the time from its
/// wake-up to its waking is its own wake-up path, unaccounted, never a task's.
#[test]
fn the_measurer_woken_from_idle_is_no_cause_of_its_own_delay() {
    let mut names = Names::default();
    let idle = task(&mut names, "swapper/1", 0, 120);
    let me = task(&mut names, "measure-cpu1", ME, 98);
    let events = vec![
        ev(
            100,
            Kind::Switch {
                prev: me,
                prev_state: 1,
                next: idle,
            },
        ),
        ev(
            1000,
            Kind::Wakeup {
                task: me,
                target_cpu: 1,
                waker_pid: 0,
            },
        ),
        ev(
            1300,
            Kind::Switch {
                prev: me,
                prev_state: 1,
                next: idle,
            },
        ),
    ];
    let symbols = HashMap::new();
    let interval = Context {
        measurer_kind: MeasurerKind::Sleeps,
        ..cx(&names, &symbols)
    };
    // The deadline at 900, the clock read at 1200.
    let gaps = [(
        Gap {
            start: 900,
            end: 1200,
        },
        300,
    )];
    let a = attribute(&gaps, &events, &interval);
    let got: Vec<(&str, u64)> = (a.causes.iter())
        .map(|c| (c.cause.as_str(), c.total_ns))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "unaccounted (no event: entry and exit, the hypervisor, SMIs)",
                200
            ),
            ("idle (swapper/1)", 100),
        ]
    );
}

/// Issue 22: the settings of a 6.18 host, RT throttling at its default.
fn throttle(fair_server: FairServer) -> Throttle {
    Throttle {
        rt: Some((950_000, 1_000_000)),
        fair_server,
        cfs_quota: None,
        rt_group: None,
    }
}

const FAIR_ON: FairServer = FairServer::On {
    runtime_ns: 50_000_000,
    period_ns: 1_000_000_000,
};

fn rows(a: &Attribution) -> Vec<(&str, u64)> {
    (a.causes.iter())
        .map(|c| (c.cause.as_str(), c.total_ns))
        .collect()
}

/// Issue 22: a SCHED_FIFO 10 loop preempted while runnable, the CPU idle for 48 ms
/// (an IRQ and the RT period timer inside), the loop back with no switch recorded (as
/// on 6.18 in a KVM guest): RT throttling, not idle. Idle ran, so not the fair server.
#[test]
fn issue22_rt_throttling_is_named() {
    let mut names = Names::default();
    let me = task(&mut names, "measure-cpu1", ME, 89);
    let idle = task(&mut names, "swapper/1", 0, 120);
    let eth = names.intern("eth0");
    let timer = names.intern("local_timer");
    let events = vec![
        ev(
            1000,
            Kind::Switch {
                prev: me,
                prev_state: 0,
                next: idle,
            },
        ),
        ev(10_000, Kind::IrqEntry { irq: 30, name: eth }),
        ev(12_000, Kind::IrqExit { irq: 30 }),
        ev(48_000_500, Kind::VectorEntry { name: timer }),
        ev(48_000_600, Kind::VectorExit { name: timer }),
        ev(60_000_000, Kind::VectorEntry { name: timer }),
    ];
    let symbols = HashMap::new();
    let gaps = [
        (
            Gap {
                start: 1000,
                end: 48_001_000,
            },
            48_000_000,
        ),
        (
            Gap {
                start: 50_000_000,
                end: 50_000_100,
            },
            100,
        ),
    ];
    let cx = Context {
        throttle: &throttle(FAIR_ON),
        ..cx(&names, &symbols)
    };
    let a = attribute(&gaps, &events, &cx);
    let rt = "real-time throttling (kernel.sched_rt_runtime_us = 950000 of 1000000)";
    assert_eq!(
        rows(&a),
        vec![
            (rt, 48_000_000 - 2000 - 100),
            ("irq 30 eth0", 2000),
            (
                "unaccounted (no event: entry and exit, the hypervisor, SMIs)",
                100
            ),
            ("vector local_timer", 100),
        ]
    );
    let row = &a.causes[0];
    assert_eq!(row.kind, CauseKind::Throttling);
    assert_eq!((row.gaps, row.occurrences), (1, 1));
    let tasks: Vec<(&str, u64)> = (row.tasks.iter())
        .map(|t| (t.task.as_str(), t.total_ns))
        .collect();
    assert_eq!(tasks, vec![("idle (swapper/1)", 48_000_000 - 2100)]);
    let stable = Context {
        naming: Naming::Stable,
        ..cx
    };
    let a = attribute(&gaps, &events, &stable);
    assert_eq!(a.causes[0].cause, "real-time throttling");
}

/// Issue 22: a SCHED_OTHER task runs while the FIFO loop is runnable: the fair
/// server where the kernel has one, RT throttling where it has none, said so where
/// its settings could not be read; the task is listed under the cause.
#[test]
fn issue22_a_normal_task_running_instead_is_the_fair_server_where_there_is_one() {
    // Runnable either way: 0, or "R+" (0x100) where the kernel marks a preemption
    // (a CI run under load named such a window after the task).
    for state in [0, 0x100] {
        a_normal_task_running_instead(state);
    }
}

fn a_normal_task_running_instead(state: i32) {
    let mut names = Names::default();
    let me = task(&mut names, "measure-cpu1", ME, 89);
    let py = task(&mut names, "python3", 812, 120);
    let events = vec![
        ev(
            1000,
            Kind::Switch {
                prev: me,
                prev_state: state,
                next: py,
            },
        ),
        ev(
            36_001_000,
            Kind::Switch {
                prev: py,
                prev_state: 0,
                next: me,
            },
        ),
    ];
    let symbols = HashMap::new();
    let gaps = [(
        Gap {
            start: 1000,
            end: 36_001_000,
        },
        36_000_000,
    )];
    let rt = "real-time throttling (kernel.sched_rt_runtime_us = 950000 of 1000000)";
    let unread = "real-time throttling (kernel.sched_rt_runtime_us = 950000 of 1000000; fair server \
         unreadable)";
    for (fs, want) in [
        (
            FAIR_ON,
            "fair server (fair_server runtime 50 ms of 1000 ms)",
        ),
        (FairServer::Off, rt),
        (FairServer::Unreadable, unread),
    ] {
        let cx = Context {
            throttle: &throttle(fs),
            ..cx(&names, &symbols)
        };
        let a = attribute(&gaps, &events, &cx);
        assert_eq!(rows(&a), vec![(want, 36_000_000)], "{fs:?}");
        let t = &a.causes[0].tasks;
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].task, "task python3:812 (SCHED_OTHER nice 0)");
        assert_eq!(t[0].total_ns, 36_000_000);
    }
}

/// Issue 22: ordinary scheduling is not throttling: a loop that blocks, a
/// SCHED_OTHER loop, and a loop preempted by a higher real-time priority.
#[test]
fn issue22_blocking_normal_or_outranked_measurers_are_not_throttled() {
    let mut names = Names::default();
    let fifo = task(&mut names, "measure-cpu1", ME, 89);
    let normal = task(&mut names, "measure-cpu1", ME, 120);
    let idle = task(&mut names, "swapper/1", 0, 120);
    let nice10 = task(&mut names, "batch", 9, 130);
    let fifo50 = task(&mut names, "irq/36", 36, 49);
    let symbols = HashMap::new();
    let gaps = [(
        Gap {
            start: 1000,
            end: 49_001_000,
        },
        48_000_000,
    )];
    for (prev, prev_state, next, want) in [
        (fifo, 1, idle, "idle (swapper/1)"),
        (normal, 0, idle, "idle (swapper/1)"),
        (normal, 0, nice10, "task batch:9 (SCHED_OTHER nice 10)"),
        (fifo, 0, fifo50, "task irq/36:36 (real-time 50)"),
    ] {
        let events = vec![
            ev(
                1000,
                Kind::Switch {
                    prev,
                    prev_state,
                    next,
                },
            ),
            ev(
                49_000_000,
                Kind::Switch {
                    prev: next,
                    prev_state: 1,
                    next: prev,
                },
            ),
        ];
        let cx = Context {
            throttle: &throttle(FAIR_ON),
            ..cx(&names, &symbols)
        };
        let a = attribute(&gaps, &events, &cx);
        assert!(a.top_of(CauseKind::Throttling).is_none(), "{want}");
        assert_eq!(a.causes[0].cause, want);
        assert_eq!(a.causes[0].total_ns, 48_000_000);
    }
}

/// Recorded windows, on this 2-vCPU KVM guest's TSC (2.596 GHz): a loop's events,
/// ticks from its gap's start, built from a small script.
const GUEST_HZ: f64 = 2_596_124_157.7;

#[derive(Default)]
struct Script {
    names: Names,
    symbols: HashMap<u64, String>,
    events: Vec<Event>,
}

impl Script {
    fn task(&mut self, comm: &str, pid: u32, prio: i32) -> Task {
        task(&mut self.names, comm, pid, prio)
    }

    /// The events so far, which are then forgotten: the next window's start afresh.
    fn take(&mut self) -> Vec<Event> {
        let e = self.without(&[]);
        self.events.clear();
        e
    }

    fn switch(&mut self, ts: u64, prev: Task, prev_state: i32, next: Task) {
        let kind = Kind::Switch {
            prev,
            prev_state,
            next,
        };
        self.events.push(ev(ts, kind));
    }

    fn wakeup(&mut self, ts: u64, task: Task) {
        let kind = Kind::Wakeup {
            task,
            target_cpu: 1,
            waker_pid: 0,
        };
        self.events.push(ev(ts, kind));
    }

    /// A local_timer vector from `entry` to `exit` that ran hrtimer `function`.
    fn timer(&mut self, entry: u64, function: &str, exit: u64) {
        let name = self.names.intern("local_timer");
        let addr = 0x1000 + self.symbols.len() as u64;
        let addr = match self.symbols.iter().find(|(_, f)| *f == function) {
            Some((a, _)) => *a,
            None => {
                self.symbols.insert(addr, function.to_string());
                addr
            }
        };
        self.events.push(ev(entry, Kind::VectorEntry { name }));
        self.events
            .push(ev(entry + 5_000, Kind::HrtimerEntry { function: addr }));
        self.events.push(ev(exit, Kind::VectorExit { name }));
    }

    fn tick(&mut self, entry: u64, exit: u64) {
        self.timer(entry, "tick_nohz_handler", exit);
    }

    fn reschedule(&mut self, entry: u64, exit: u64) {
        let name = self.names.intern("reschedule");
        self.events.push(ev(entry, Kind::VectorEntry { name }));
        self.events.push(ev(exit, Kind::VectorExit { name }));
    }

    /// The events with those stamped at `lost` left out (a switch the kernel did not
    /// record), in time order.
    fn without(&self, lost: &[u64]) -> Vec<Event> {
        let mut e: Vec<Event> = (self.events.iter())
            .filter(|e| !lost.contains(&e.ts))
            .copied()
            .collect();
        e.sort_by_key(|e| e.ts);
        e
    }
}

/// The guest's settings: RT throttling at its default, the fair server unread.
const GUEST: Throttle = Throttle {
    rt: Some((950_000, 1_000_000)),
    fair_server: FairServer::Unreadable,
    cfs_quota: None,
    rt_group: None,
};

fn guest_cx<'a>(names: &'a Names, symbols: &'a HashMap<u64, String>) -> Context<'a> {
    Context {
        scale: Scale::from_hz(GUEST_HZ),
        throttle: &GUEST,
        ..cx(names, symbols)
    }
}

fn total(a: &Attribution, kind: CauseKind) -> u64 {
    (a.causes.iter())
        .filter(|c| c.kind == kind)
        .map(|c| c.total_ns)
        .sum()
}

fn idle_ns(a: &Attribution) -> u64 {
    (a.causes.iter())
        .filter(|c| c.cause.starts_with("idle"))
        .map(|c| c.total_ns)
        .sum()
}

/// A 28.2 ms RT-throttle window of `noise -a 1 -p 10` recorded on the guest (trace
/// stamps less the gap's start, 1892171861373): the loop (FIFO 10) switched out
/// runnable to idle at 70018; a task woke and slept; two builds' rustc took turns;
/// the loop came back at 73118500.
fn rt_window(s: &mut Script) -> ((Gap, u64), u64) {
    let me = s.task("measure-cpu1", ME, 89);
    let idle = s.task("swapper/1", 0, 120);
    let memfd = s.task("memfd:sealed-91", 9103, 120);
    let (a, b) = (s.task("rustc", 21099, 120), s.task("rustc", 22706, 120));
    s.tick(18_772, 38_012);
    s.switch(70_018, me, 0, idle);
    s.wakeup(4_576_962, memfd);
    s.switch(4_656_288, memfd, 1, idle);
    s.tick(20_849_686, 20_899_918);
    s.reschedule(20_914_972, 20_918_066);
    s.switch(20_928_310, a, 0, b);
    let turns = [
        (31_188_196, 31_220_254, 31_230_914),
        (41_613_520, 41_647_268, 41_658_214),
        (51_961_962, 51_991_680, 52_004_056),
        (62_386_194, 62_428_340, 62_439_364),
        (72_750_600, 72_782_658, 72_792_720),
    ];
    for (i, (entry, exit, switch)) in turns.into_iter().enumerate() {
        s.tick(entry, exit);
        let (prev, next) = if i % 2 == 0 { (b, a) } else { (a, b) };
        s.switch(switch, prev, 0, next);
    }
    s.reschedule(73_103_784, 73_106_124);
    s.switch(73_118_500, a, 0, me);
    let gap = Gap {
        start: 0,
        end: 73_118_500 + 2_000,
    };
    (
        (gap, 28_169_752),
        Scale::from_hz(GUEST_HZ).to_ns(4_656_288 - 38_012),
    )
}

/// Issue 29: the RT-throttle window above with the loop's own switch out removed
/// (the kernel here loses a few): a loop that spins, found not running when another
/// task switches out, was switched out runnable. What follows is RT throttling, not
/// idle; the stretch before the first recorded switch is unknowable, unaccounted.
#[test]
fn issue29_a_throttle_window_whose_switch_out_was_lost_is_still_named() {
    let mut s = Script::default();
    let (gap, blind) = rt_window(&mut s);
    let (whole, lost) = (s.without(&[]), s.without(&[70_018]));
    // The same, with the loop's switch in seen first: a thread thought to run.
    let (me, idle) = (s.task("measure-cpu1", ME, 89), s.task("swapper/1", 0, 120));
    s.switch(0, idle, 0, me);
    let seen_in = s.without(&[70_018]);
    let (names, symbols) = (&s.names, &s.symbols);
    let cx = guest_cx(names, symbols);
    let rt = "real-time throttling (kernel.sched_rt_runtime_us = 950000 of 1000000)";
    // With the switch: all of it but the interrupts is the throttle.
    let a = attribute(&[gap], &whole, &cx);
    assert_eq!(a.causes[0].cause, rt);
    assert_eq!(idle_ns(&a), 0);
    assert!(
        total(&a, CauseKind::Unaccounted) < 100_000,
        "{:?}",
        rows(&a)
    );
    // Without it: the same, but for what came before the first recorded switch.
    let a = attribute(&[gap], &lost, &cx);
    assert_eq!(a.causes[0].cause, rt, "{:?}", rows(&a));
    assert_eq!(idle_ns(&a), 0, "{:?}", rows(&a));
    assert!(total(&a, CauseKind::Task) == 0, "{:?}", rows(&a));
    let unaccounted = total(&a, CauseKind::Unaccounted);
    assert!(
        unaccounted.abs_diff(blind) < 50_000,
        "{unaccounted} vs {blind}"
    );
    let named = total(&a, CauseKind::Throttling) + total(&a, CauseKind::Vector);
    assert_eq!(named + unaccounted, gap.1);
    let held: Vec<&str> = a.causes[0].tasks.iter().map(|t| t.task.as_str()).collect();
    assert!(held.contains(&"idle (swapper/1)"), "{held:?}");
    // A measurer that sleeps (a timer) may be off its CPU with nothing lost: seen
    // switched in, then another task switching out, the rule is not applied, and the
    // idle stays idle.
    let sleeper = Context {
        measurer_kind: MeasurerKind::Sleeps,
        ..guest_cx(names, symbols)
    };
    let a = attribute(&[gap], &seen_in, &sleeper);
    assert!(a.top_of(CauseKind::Throttling).is_none(), "{:?}", rows(&a));
    assert!(idle_ns(&a) > 5_000_000, "{:?}", rows(&a));
}

/// Issue 29: streamed, a batch may hold no switch of the loop at all (the shape seen
/// twice in CI: its switch out to a kworker lost, the kworker's 13.7 ms known from its
/// own switch out (issue 36), then idle until the loop came back, with no switch out of idle recorded); the tally remembers its
/// priority from an earlier batch, so the idle is still judged against it.
#[test]
fn issue29_the_loop_is_remembered_across_batches() {
    let mut s = Script::default();
    let me = s.task("measure-cpu1", ME, 89);
    let kw = s.task("kworker/1:1", 41, 120);
    let idle = s.task("swapper/1", 0, 120);
    // Batch 1: a kworker's turn while the loop was runnable, both switches seen.
    s.switch(1_000, me, 0, kw);
    s.switch(60_000, kw, 1, me);
    let first = s.take();
    // Batch 2: the loop's switch out to the kworker lost.
    s.tick(10_018_772, 10_038_012);
    s.switch(45_600_000, kw, 1, idle);
    for at in [
        50_000_000,
        60_400_000,
        70_800_000,
        81_200_000,
        91_600_000,
        102_000_000,
    ] {
        s.tick(at, at + 40_000);
    }
    s.reschedule(139_900_000, 139_903_000);
    let later = s.take();
    let (names, symbols) = (&s.names, &s.symbols);
    let cx = guest_cx(names, symbols);
    let gap = |start: u64, end: u64| (Gap { start, end }, cx.scale.to_ns(end - start));
    let mut tally = Tally::new(3);
    tally.add(&[gap(900, 61_000)], &first, &cx);
    tally.add(&[gap(10_000_000, 140_000_000)], &later, &cx);
    let a = tally.finish(cx.scale);
    assert_eq!(idle_ns(&a), 0, "{:?}", rows(&a));
    let rt = a.top_of(CauseKind::Throttling).unwrap();
    assert!(
        rt.cause.starts_with("real-time throttling"),
        "{:?}",
        rows(&a)
    );
    // The kworker's switch out says it held the CPU since the tick before (issue 36):
    // the window begins there, the loop runnable and held off.
    let want = cx.scale.to_ns(139_900_000 - 10_038_012) - 6 * 15_408;
    assert!(rt.total_ns.abs_diff(want) < 10, "{} vs {want}", rt.total_ns);
    // Without the first batch, the loop's priority is unknown: nothing is named a
    // throttle by guess.
    let mut fresh = Tally::new(3);
    fresh.add(&[gap(10_000_000, 140_000_000)], &later, &cx);
    let a = fresh.finish(cx.scale);
    assert!(a.top_of(CauseKind::Throttling).is_none(), "{:?}", rows(&a));
}

fn quota(v2: bool) -> CfsQuota {
    let setting = match v2 {
        true => "cpu.max 35000 100000",
        false => "cpu.cfs_quota_us 35000, cpu.cfs_period_us 100000",
    };
    CfsQuota {
        setting: setting.into(),
        group: "/jsq-test-7".into(),
    }
}

/// The guest's settings, the measurer's group at 35 ms per 100 ms (v1).
static QUOTA: std::sync::LazyLock<Throttle> = std::sync::LazyLock::new(|| Throttle {
    cfs_quota: Some(quota(false)),
    ..GUEST
});

fn quota_cx<'a>(names: &'a Names, symbols: &'a HashMap<u64, String>) -> Context<'a> {
    Context {
        throttle: &QUOTA,
        ..guest_cx(names, symbols)
    }
}

/// A 24 ms window of a SCHED_OTHER `noise -a 1` in a v1 group at 35 ms per 100 ms,
/// recorded on the guest beside a build (stamps less the loop's switch out,
/// 2622067167708): a rustc ran throughout, and the group's period timer fired on the
/// CPU 0.9 ms before the loop came back.
fn quota_window(s: &mut Script) -> (Gap, u64) {
    let me = s.task("measure-cpu1", ME, 120);
    let rustc = s.task("rustc", 29358, 120);
    s.switch(0, me, 0x100, rustc);
    for (entry, exit) in [
        (10_260_952, 10_309_624),
        (20_625_228, 20_677_904),
        (31_024_994, 31_074_706),
        (41_411_162, 41_457_208),
        (51_798_916, 51_851_436),
    ] {
        s.tick(entry, exit);
    }
    s.timer(61_247_706, "sched_cfs_period_timer", 61_326_174);
    s.tick(62_140_078, 62_170_498);
    s.switch(62_189_114, rustc, 0, me);
    let gap = Gap {
        start: 0,
        end: 62_191_000,
    };
    (gap, Scale::from_hz(GUEST_HZ).to_ns(62_191_000))
}

/// A 16 ms wait of the same loop, recorded in the same run: two rustc took their
/// turns by the tick, and no bandwidth timer fired. Ordinary time-sharing.
fn time_shared(s: &mut Script) -> (Gap, u64) {
    let me = s.task("measure-cpu1", ME, 120);
    let (a, b) = (s.task("rustc", 30867, 120), s.task("rustc", 30862, 120));
    s.switch(0, me, 0, a);
    s.tick(10_314_356, 10_377_744);
    s.switch(10_397_998, a, 0, b);
    s.tick(20_689_396, 20_767_552);
    s.switch(20_787_286, b, 0, a);
    s.tick(31_088_564, 31_167_344);
    s.switch(31_184_998, a, 0, b);
    s.tick(41_484_586, 41_552_212);
    s.switch(41_572_128, b, 0, me);
    let gap = Gap {
        start: 0,
        end: 41_574_000,
    };
    (gap, Scale::from_hz(GUEST_HZ).to_ns(41_574_000))
}

/// Issue 30: a window the group's quota made is named the quota, with its setting
/// and group, the tasks that ran listed under it, until the period timer
/// unthrottled the group (the 0.3 ms after it, the loop waited its turn); the
/// time-sharing wait of the same run stays the tasks'; no quota, no such name.
#[test]
fn issue30_a_window_the_cfs_quota_made_is_named_with_its_setting() {
    let mut s = Script::default();
    let q = quota_window(&mut s);
    let q_events = s.take();
    let o = time_shared(&mut s);
    let o_events = s.take();
    let (names, symbols) = (&s.names, &s.symbols);
    let cx = quota_cx(names, symbols);
    let label = "CFS quota: cpu.cfs_quota_us 35000, cpu.cfs_period_us 100000 of /jsq-test-7";
    let a = attribute(&[q], &q_events, &cx);
    let row = &a.causes[0];
    assert_eq!(
        (row.kind, row.cause.as_str()),
        (CauseKind::Throttling, label)
    );
    // All but the ticks up to the period timer's interrupt.
    let ticks = [48_672, 52_676, 49_712, 46_046, 52_520].iter().sum::<u64>();
    let want = cx.scale.to_ns(61_247_706 - ticks);
    assert!(
        row.total_ns.abs_diff(want) < 5,
        "{} vs {want}",
        row.total_ns
    );
    let after = cx.scale.to_ns(62_189_114 - 61_326_174 - 30_420);
    let rustc = "task rustc:29358 (SCHED_OTHER nice 0)";
    assert!(
        rows(&a)
            .iter()
            .any(|r| r.0 == rustc && r.1.abs_diff(after) < 5)
    );
    assert_eq!(row.tasks[0].task, rustc);
    assert!(a.method.contains("sched_cfs_period_timer"), "{}", a.method);
    // The period timer fires every period, throttled or not: in a wait the loop
    // began at a return to user ("R", time-sharing) it is no evidence (20 such waits,
    // 222 ms, in a 6 s run beside a build).
    let mut shared = q_events.clone();
    if let Kind::Switch { prev, next, .. } = shared[0].kind {
        shared[0].kind = Kind::Switch {
            prev,
            prev_state: 0,
            next,
        };
    }
    let a = attribute(&[q], &shared, &cx);
    assert!(a.top_of(CauseKind::Throttling).is_none(), "{:?}", rows(&a));
    // Ordinary time-sharing: no evidence, no quota.
    let a = attribute(&[o], &o_events, &cx);
    assert!(a.top_of(CauseKind::Throttling).is_none(), "{:?}", rows(&a));
    assert!(total(&a, CauseKind::Task) as f64 > 0.99 * o.1 as f64);
    assert!(!a.method.contains("CFS quota"));
    // The same window where the chain has no quota: never named one.
    let none = Context {
        throttle: &GUEST,
        ..guest_cx(names, symbols)
    };
    let a = attribute(&[q], &q_events, &none);
    assert!(a.top_of(CauseKind::Throttling).is_none(), "{:?}", rows(&a));
    // cgroup v2's file, and the stable name.
    let v2 = Context {
        throttle: &Throttle {
            cfs_quota: Some(quota(true)),
            ..GUEST
        },
        ..guest_cx(names, symbols)
    };
    let a = attribute(&[q], &q_events, &v2);
    assert_eq!(
        a.causes[0].cause,
        "CFS quota: cpu.max 35000 100000 of /jsq-test-7"
    );
    let stable = Context {
        naming: Naming::Stable,
        ..quota_cx(names, symbols)
    };
    assert_eq!(
        attribute(&[q], &q_events, &stable).causes[0].cause,
        "CFS quota"
    );
}

/// Issue 36: the quota's window ends at the first refill after the loop was dequeued.
/// Beside a build the loop, unthrottled, can wait its turn past the next period's timer,
/// which fires throttled or not: that wait is the tasks'. (A fresh-clone run named 810.7 ms
/// the quota where the kernel counted 617.9 ms throttled, the loop getting 185 ms of 2 s.)
#[test]
fn issue36_a_quota_window_ends_at_its_first_refill_not_a_later_period() {
    let mut s = Script::default();
    quota_window(&mut s);
    let mut events = s.take();
    // The same window, the loop not back until after the next period's timer, 100 ms on.
    let me = s.task("measure-cpu1", ME, 120);
    let rustc = s.task("rustc", 29358, 120);
    let back = events.pop().unwrap();
    assert!(matches!(back.kind, Kind::Switch { next, .. } if next == me));
    s.tick(72_140_078, 72_170_498);
    s.timer(161_247_706, "sched_cfs_period_timer", 161_326_174);
    s.switch(162_189_114, rustc, 0, me);
    events.extend(s.take());
    let gap = Gap {
        start: 0,
        end: 162_191_000,
    };
    let (names, symbols) = (&s.names, &s.symbols);
    let cx = quota_cx(names, symbols);
    let a = attribute(&[(gap, cx.scale.to_ns(162_191_000))], &events, &cx);
    let quota = a.top_of(CauseKind::Throttling).expect("the quota named");
    let ticks = [48_672, 52_676, 49_712, 46_046, 52_520].iter().sum::<u64>();
    let want = cx.scale.to_ns(61_247_706 - ticks);
    assert!(
        quota.total_ns.abs_diff(want) < 5,
        "{} ns named the quota, {want} ns before its first refill: {:?}",
        quota.total_ns,
        rows(&a)
    );
}

/// Issue 30: a 13.5 ms wait of the loop in a run whose group's period timer was on
/// the other CPU (recorded on the guest beside a build; the loop's switch out at 0,
/// "R"): a group was unthrottled here by a cross-CPU call 1.76 ms in, and the loop
/// waited its turn behind the CPU's tasks (one of them another thread of its group,
/// which may have used the quota up here). It left at a return to user, as
/// time-sharing makes it, so the call is no evidence that its own throttle held it:
/// the tasks'. Had it been dequeued in the kernel ("R+", as its throttle does), the
/// quota until the call, the tasks after.
#[test]
fn issue30_a_quota_lifted_from_another_cpu_ends_where_its_call_ran() {
    let mut s = Script::default();
    let me = s.task("measure-cpu1", ME, 120);
    let memfd = s.task("memfd:sealed-91", 9054, 120);
    let (r1, r2, r3) = (
        s.task("rustc", 12612, 120),
        s.task("rustc", 12882, 120),
        s.task("rustc", 12891, 120),
    );
    let rcu = s.task("rcu_preempt", 15, 120);
    let js = s.task("jitterscope", 12780, 120);
    s.switch(0, me, 0, memfd);
    s.switch(79_638, memfd, 1, r1);
    s.switch(3_955_042, r1, 0, r2);
    let name = s.names.intern("call_function_single");
    s.symbols.insert(0xc5d, "__cfsb_csd_unthrottle".into());
    s.events.push(ev(4_560_036, Kind::VectorEntry { name }));
    s.events
        .push(ev(4_564_950, Kind::CsdEntry { function: 0xc5d }));
    s.events.push(ev(4_571_138, Kind::VectorExit { name }));
    s.switch(14_339_234, r2, 0, r3);
    s.switch(24_767_496, r3, 0, rcu);
    s.switch(24_789_596, rcu, 1, js);
    s.switch(35_088_586, js, 0, me);
    let mut events = s.take();
    let (names, symbols) = (&s.names, &s.symbols);
    let cx = quota_cx(names, symbols);
    let gap = (
        Gap {
            start: 0,
            end: 35_090_000,
        },
        cx.scale.to_ns(35_090_000),
    );
    let a = attribute(&[gap], &events, &cx);
    assert!(a.top_of(CauseKind::Throttling).is_none(), "{:?}", rows(&a));
    events[0].kind = Kind::Switch {
        prev: me,
        prev_state: 0x100,
        next: memfd,
    };
    let a = attribute(&[gap], &events, &cx);
    let quota = a.top_of(CauseKind::Throttling).unwrap();
    assert!(
        quota.total_ns.abs_diff(cx.scale.to_ns(4_560_036)) < 5,
        "{:?}",
        rows(&a)
    );
    let tasks: Vec<&str> = quota.tasks.iter().map(|t| t.task.as_str()).collect();
    assert_eq!(tasks.len(), 3, "{tasks:?}");
    let after = cx.scale.to_ns(35_088_586 - 4_571_138);
    assert!(
        total(&a, CauseKind::Task).abs_diff(after) < 5,
        "{:?}",
        rows(&a)
    );
    assert!(a.method.contains("__cfsb_csd_unthrottle"), "{}", a.method);
}

/// Issue 30: on a quiet CPU the quota's window is idle with the loop runnable, which
/// ordinary scheduling never does to it; with its switch out lost, the spinning loop
/// found off its CPU is taken as switched out runnable, as for RT throttling. A
/// real-time loop in the same group is not subject to the quota.
#[test]
fn issue30_idle_while_the_loop_is_runnable_is_the_quota() {
    let mut s = Script::default();
    let me = s.task("measure-cpu1", ME, 120);
    let idle = s.task("swapper/1", 0, 120);
    let kw = s.task("kworker/1:1", 41, 120);
    // The loop's last switch in, before the gap.
    s.switch(200, kw, 1, me);
    s.switch(1_000, me, 0, kw);
    s.switch(21_000, kw, 1, idle);
    s.tick(10_000_000, 10_040_000);
    s.timer(149_000_000, "sched_cfs_period_timer", 149_050_000);
    // The loop back, no switch out of idle recorded (as on the guest).
    let gap = (
        Gap {
            start: 500,
            end: 150_000_000,
        },
        Scale::from_hz(GUEST_HZ).to_ns(149_999_500),
    );
    let fifo = s.task("measure-cpu1", ME, 89);
    let (names, symbols) = (&s.names, &s.symbols);
    let cx = quota_cx(names, symbols);
    for lost in [vec![], vec![1_000]] {
        let a = attribute(&[gap], &s.without(&lost), &cx);
        assert_eq!(a.causes[0].kind, CauseKind::Throttling, "{:?}", rows(&a));
        assert!(a.causes[0].cause.starts_with("CFS quota: "));
        assert_eq!(idle_ns(&a), 0, "{:?}", rows(&a));
        assert!(
            a.causes[0].total_ns as f64 > 0.99 * gap.1 as f64,
            "{:?}",
            rows(&a)
        );
    }
    let mut events = s.without(&[200]);
    events[0].kind = Kind::Switch {
        prev: fifo,
        prev_state: 0,
        next: kw,
    };
    let a = attribute(&[gap], &events, &cx);
    assert!(
        a.causes[0].cause.starts_with("real-time throttling"),
        "{:?}",
        rows(&a)
    );
}

/// Issue 36: the shape a loaded guest left in `watch`'s hog test. The measurer's switch
/// out and the hog's switch in were not recorded; the hog woke, then the measurer, and
/// 164 µs later a switch took the hog off the CPU. The hog held it since the event
/// before that switch, and is named for it by every kind of measurer: a thread that
/// sleeps (`timer --trace`, `watch`) and a loop that spins (`noise --trace`). Before,
/// the time was the thread thought to run's, left unaccounted.
#[test]
fn issue36_a_task_switched_out_held_the_cpu_since_the_event_before() {
    let mut s = Script::default();
    let me = s.task("measure-cpu1", ME, 89);
    let hog = s.task("js-hog", 77, 89 - 5);
    let idle = s.task("swapper/1", 0, 120);
    s.switch(0, idle, 0, me);
    s.reschedule(1_000, 1_030);
    s.wakeup(1_010, hog);
    s.reschedule(5_000, 5_020);
    s.wakeup(5_010, me);
    s.switch(169_020, hog, 1, me);
    let events = s.without(&[]);
    let (names, symbols) = (&s.names, &s.symbols);
    for kind in [MeasurerKind::Sleeps, MeasurerKind::Spins] {
        let cx = Context {
            measurer_kind: kind,
            ..cx(names, symbols)
        };
        // From the deadline (a timer) or the loop's last read (noise).
        let start = match kind {
            MeasurerKind::Sleeps => 5_000,
            MeasurerKind::Spins => 1_000,
        };
        let gap = (
            Gap {
                start,
                end: 169_020,
            },
            169_020 - start,
        );
        let a = attribute(&[gap], &events, &cx);
        let top = a
            .top_of(CauseKind::Task)
            .map(|c| (c.cause.as_str(), c.total_ns));
        assert_eq!(
            top,
            Some(("task js-hog:77 (real-time 15)", 164_000)),
            "{kind:?}: {:?}",
            rows(&a)
        );
        assert_eq!(
            a.causes[0].largest_in, 1,
            "{kind:?}: the hog is the main cause"
        );
    }
}

/// Issue 48: on PREEMPT_RT an IRQ's handler, the timer softirqs and the RCU softirq's
/// work run in kernel threads. Each is named as the work it runs, of that work's kind,
/// never as another task: the IRQ thread beside its IRQ's own (primary) handler, the
/// thread's name and priority kept where the naming keeps them.
#[test]
fn issue48_rt_kernel_threads_are_named_as_the_work_they_run() {
    let mut names = Names::default();
    let me = task(&mut names, "measure-cpu1", ME, 120);
    let threads = [
        task(&mut names, "irq/4-ttyS0", 102, 49),
        task(&mut names, "ktimers/1", 30, 98),
        task(&mut names, "rcuc/1", 29, 98),
        task(&mut names, "ksoftirqd/1", 31, 120),
        task(&mut names, "stress-ng", 400, 120),
    ];
    let tty = names.intern("ttyS0");
    let switch = |prev, next| Kind::Switch {
        prev,
        prev_state: 0,
        next,
    };
    let (mut events, mut gaps) = (Vec::new(), Vec::new());
    for (i, t) in threads.iter().enumerate() {
        let at = 10_000 * (i as u64 + 1);
        if i == 0 {
            // The primary handler wakes the thread.
            events.push(ev(at + 5, Kind::IrqEntry { irq: 4, name: tty }));
            events.push(ev(at + 15, Kind::IrqExit { irq: 4 }));
        }
        events.push(ev(at + 20, switch(me, *t)));
        events.push(ev(at + 120, switch(*t, me)));
        gaps.push((
            Gap {
                start: at,
                end: at + 130,
            },
            130,
        ));
    }
    let symbols = HashMap::new();
    let a = attribute(&gaps, &events, &cx(&names, &symbols));
    let row = |label: &str| {
        (a.causes.iter())
            .find(|c| c.cause == label)
            .unwrap_or_else(|| panic!("no row {label}: {:#?}", a.causes))
    };
    let irq = row("irq 4 ttyS0 (its thread irq/4-ttyS0, real-time 50)");
    assert_eq!((irq.kind, irq.total_ns), (CauseKind::Irq, 100));
    assert_eq!(row("irq 4 ttyS0").kind, CauseKind::Irq);
    let timers = row("softirqs TIMER and HRTIMER (their thread ktimers/1, real-time 1)");
    assert_eq!(timers.kind, CauseKind::Softirq);
    let rcu = row("softirq RCU (its thread rcuc/1, real-time 1)");
    assert_eq!(rcu.kind, CauseKind::Softirq);
    let soft = row("softirqs (their thread ksoftirqd/1, SCHED_OTHER nice 0)");
    assert_eq!(soft.kind, CauseKind::Softirq);
    // Another task is still a task.
    assert_eq!(
        row("task stress-ng:400 (SCHED_OTHER nice 0)").kind,
        CauseKind::Task
    );
    assert_eq!(
        (a.causes.iter())
            .filter(|c| c.kind == CauseKind::Task)
            .count(),
        1
    );
    let stable = Context {
        naming: Naming::Stable,
        ..cx(&names, &symbols)
    };
    let s = attribute(&gaps, &events, &stable);
    let labels: Vec<&str> = s.causes.iter().map(|c| c.cause.as_str()).collect();
    assert!(
        labels.contains(&"irq 4 ttyS0 (its thread irq/4-ttyS0)"),
        "{labels:?}"
    );
    assert!(
        labels.contains(&"softirq RCU (its thread rcuc/1)"),
        "{labels:?}"
    );
}

/// The tick's vector, run at `at` inside a gap of the loop, naming the tick's hrtimer.
fn tick_at(events: &mut Vec<Event>, gaps: &mut Vec<(Gap, u64)>, timer: NameId, at: u64) {
    events.push(ev(at + 10, Kind::VectorEntry { name: timer }));
    events.push(ev(at + 12, Kind::HrtimerEntry { function: 0x71c }));
    events.push(ev(at + 60, Kind::VectorExit { name: timer }));
    gaps.push((
        Gap {
            start: at,
            end: at + 70,
        },
        70,
    ));
}

/// Issue 48: on a nohz_full CPU the trace's tick_stop says what each tick was. One that
/// ran while a second task kept the tick on is named with that dependency; once the tick
/// stopped (with the loop running: only nohz_full stops it there), the tick that still
/// comes is the residual one, batches later and with no event between. A stop seen only
/// on entering idle (any NOHZ kernel's, restarted unseen) names nothing.
#[test]
fn issue48_ticks_are_named_by_what_tick_stop_said() {
    let mut names = Names::default();
    let me = task(&mut names, "measure-cpu1", ME, 120);
    let idle = task(&mut names, "swapper/1", 0, 120);
    let timer = names.intern("local_timer");
    let mut symbols = HashMap::new();
    symbols.insert(0x71c, "tick_sched_timer".to_string());
    let stop = |success, dependency| Kind::TickStop {
        success,
        dependency,
    };
    let (mut events, mut gaps) = (Vec::new(), Vec::new());
    // The loop is seen running; a second task became runnable.
    events.push(ev(
        50,
        Kind::Switch {
            prev: me,
            prev_state: 0,
            next: me,
        },
    ));
    events.push(ev(900, stop(false, 4)));
    tick_at(&mut events, &mut gaps, timer, 1_000);
    tick_at(&mut events, &mut gaps, timer, 5_000);
    events.push(ev(5_065, stop(true, 0)));
    // The residual tick, far later.
    tick_at(&mut events, &mut gaps, timer, 1_000_000);
    let cx = cx(&names, &symbols);
    let mut t = Tally::new(cx.top);
    for batch in gaps.chunks(1) {
        let from = batch[0].0.start.saturating_sub(200);
        let first = events.partition_point(|e| e.ts < from);
        let last = events.partition_point(|e| e.ts < batch[0].0.end);
        t.add(batch, &events[first..last], &cx);
    }
    let a = t.finish(cx.scale);
    let kept = "vector local_timer: tick_sched_timer (tick kept on: SCHED: more than one task \
                was runnable)";
    let residual = "vector local_timer: tick_sched_timer (residual tick: nohz_full stopped the \
                    tick)";
    let gaps_of = |label: &str| (a.causes.iter()).find(|c| c.cause == label).map(|c| c.gaps);
    assert_eq!(gaps_of(kept), Some(2), "{:#?}", a.causes);
    assert_eq!(gaps_of(residual), Some(1), "{:#?}", a.causes);
    let stable = Context {
        naming: Naming::Stable,
        ..cx
    };
    let s = attribute(&gaps, &events, &stable);
    assert!(
        (s.causes.iter())
            .any(|c| c.cause == "vector local_timer: tick_sched_timer (tick kept on: SCHED)"),
        "{:#?}",
        s.causes
    );

    // Idle stops the tick on any NOHZ CPU; the next tick, after a task ran, is plain.
    let (mut events, mut gaps) = (Vec::new(), Vec::new());
    let switch = |prev, next| Kind::Switch {
        prev,
        prev_state: 1,
        next,
    };
    events.push(ev(100, switch(me, idle)));
    events.push(ev(150, stop(true, 0)));
    events.push(ev(400, switch(idle, me)));
    tick_at(&mut events, &mut gaps, timer, 1_000);
    let a = attribute(&gaps, &events, &cx);
    assert_eq!(a.causes[0].cause, "vector local_timer: tick_sched_timer");
}

/// Issue 50: the kernel recorded no switch from a kworker to the hog (a second reader of
/// its buffer lacked it too); the hog woke, a tick ran, and the hog switched out to the
/// measurer. The hog held the CPU since the tick; before it, the kworker or the hog ran,
/// the trace cannot say which: that time is named as the switch the kernel did not
/// record, of its own kind, not unaccounted (what no event covers) nor given by guess.
/// With the switch recorded, the hog is named for all of it and nothing is unrecorded.
#[test]
fn issue50_time_a_missing_switch_leaves_unplaced_is_named_so() {
    let mut s = Script::default();
    let me = s.task("measure-cpu1", ME, 89);
    let hog = s.task("js-hog", 77, 84);
    let kw = s.task("kworker/1:1", 57, 120);
    s.switch(0, me, 1, kw);
    s.wakeup(10_000, hog);
    s.switch(10_500, kw, 0, hog);
    s.wakeup(20_000, me);
    s.tick(100_000, 110_000);
    s.switch(200_000, hog, 1, me);
    let (names, symbols) = (&s.names, &s.symbols);
    let cx = Context {
        measurer_kind: MeasurerKind::Sleeps,
        ..cx(names, symbols)
    };
    let gap = (
        Gap {
            start: 20_000,
            end: 200_000,
        },
        180_000,
    );
    let a = attribute(&[gap], &s.without(&[10_500]), &cx);
    let row = a.top_of(CauseKind::Unrecorded).expect("an unrecorded row");
    assert_eq!(
        (row.cause.as_str(), row.total_ns),
        (UNRECORDED, 80_000),
        "{:?}",
        rows(&a)
    );
    assert_eq!(total(&a, CauseKind::Unaccounted), 0, "{:?}", rows(&a));
    let hog_row = a
        .top_of(CauseKind::Task)
        .map(|c| (c.cause.as_str(), c.total_ns));
    assert_eq!(hog_row, Some(("task js-hog:77 (real-time 15)", 90_000)));
    let a = attribute(&[gap], &s.without(&[]), &cx);
    assert_eq!(total(&a, CauseKind::Unrecorded), 0, "{:?}", rows(&a));
    let hog_row = a
        .top_of(CauseKind::Task)
        .map(|c| (c.cause.as_str(), c.total_ns));
    assert_eq!(hog_row, Some(("task js-hog:77 (real-time 15)", 170_000)));
}
