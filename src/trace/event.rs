//! The trace events attribution uses, decoded from raw records with the kernel's own
//! formats, and stamped on the trace clock (the TSC with `x86-tsc`).
//!
//! Strings (task names, IRQ names, vector names) are interned once per run in `Names`,
//! so an event stays a few dozen bytes.

use rustc_hash::FxHashMap;

use super::format::{EventFormat, Field, read_bytes, read_i64, read_u64};

/// The events enabled, as "system:event" names: only those attribution reads, since
/// each is written while the CPU is away from the loop and lengthens the gap it
/// describes (issue 22; `hrtimer_expire_exit` was one more a timer, read by nothing).
/// `irq_vectors` entries and exits are found by suffix; every one the kernel has is
/// enabled.
pub const EVENTS: &[&str] = &[
    "irq:irq_handler_entry",
    "irq:irq_handler_exit",
    "irq:softirq_entry",
    "irq:softirq_exit",
    "nmi:nmi_handler",
    "sched:sched_switch",
    "sched:sched_wakeup",
    "workqueue:workqueue_execute_start",
    "workqueue:workqueue_execute_end",
    "timer:hrtimer_expire_entry",
    // Which function a cross-CPU call ran: a CFS quota refilled on another CPU reaches
    // this one as one (issue 30). Kernels before 6.4 have no such event.
    "csd:csd_function_entry",
    // Whether a nohz_full CPU's tick stopped, or what kept it running (issue 48): once at
    // each stop, and at each interrupt's exit while a dependency holds it on.
    "timer:tick_stop",
];

/// The `dependency` bits of `timer:tick_stop` (the kernel's TICK_DEP_MASK_*), with what
/// each means for a CPU whose tick should be stopped.
pub const TICK_DEPENDENCIES: [(u32, &str, &str); 6] = [
    (1, "POSIX_TIMER", "a POSIX CPU-time timer is armed"),
    (2, "PERF_EVENTS", "a perf event needs the tick"),
    (4, "SCHED", "more than one task was runnable"),
    (8, "CLOCK_UNSTABLE", "the sched clock is unstable"),
    (16, "RCU", "RCU needed the CPU"),
    (
        32,
        "RCU_EXP",
        "an expedited RCU grace period needed the CPU",
    ),
];

/// The softirq vectors, by number.
pub const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// An interned string.
pub type NameId = u32;

/// Task name fields `Names` keeps at most, past which it starts the cache afresh.
const FIELDS_CACHED: usize = 1 << 16;

/// Interned strings of one run.
#[derive(Debug, Default, Clone)]
pub struct Names {
    list: Vec<String>,
    /// By the bytes the trace gives: a name seen before costs no UTF-8 check.
    index: FxHashMap<Box<[u8]>, NameId>,
    /// By a task name's whole 16-byte field, as one number: trimmed and looked up by its
    /// bytes, each switch's two names took a twelfth of a busy host's reading (issue 34).
    fields: FxHashMap<u128, NameId>,
}

impl Names {
    pub fn intern(&mut self, s: &str) -> NameId {
        self.intern_bytes(s.as_bytes())
    }

    /// As `intern`, from a trace's bytes; a name that is not UTF-8 is kept with its bad
    /// bytes replaced, not dropped.
    pub fn intern_bytes(&mut self, b: &[u8]) -> NameId {
        if let Some(&id) = self.index.get(b) {
            return id;
        }
        let id = self.list.len() as NameId;
        self.list.push(String::from_utf8_lossy(b).into_owned());
        self.index.insert(b.into(), id);
        id
    }

    /// As `intern_bytes`, from a fixed 16-byte field as the trace gives it (a task's
    /// name, NUL-padded): the same name whatever follows its NUL.
    pub fn intern_field(&mut self, field: [u8; 16]) -> NameId {
        let key = u128::from_ne_bytes(field);
        if let Some(&id) = self.fields.get(&key) {
            return id;
        }
        let end = field.iter().position(|&b| b == 0).unwrap_or(16);
        let id = self.intern_bytes(&field[..end]);
        // Only a cache: a kernel that leaves an old name's tail after the NUL (a thread
        // renamed shorter) gives one name many fields, which must not grow it unbounded.
        if self.fields.len() >= FIELDS_CACHED {
            self.fields.clear();
        }
        self.fields.insert(key, id);
        id
    }

    pub fn get(&self, id: NameId) -> &str {
        self.list.get(id as usize).map_or("?", String::as_str)
    }

    /// How many strings are interned.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// A task as sched_switch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Task {
    pub pid: u32,
    pub comm: NameId,
    /// The kernel's priority: 0–99 real-time (99 − rt priority), 100–139 normal
    /// (120 + nice), −1 deadline.
    pub prio: i32,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    IrqEntry {
        irq: u32,
        name: NameId,
    },
    IrqExit {
        irq: u32,
    },
    SoftirqEntry {
        vec: u32,
    },
    SoftirqExit {
        vec: u32,
    },
    /// An `irq_vectors` entry or exit: the vector's name ("local_timer", "reschedule", …).
    VectorEntry {
        name: NameId,
    },
    VectorExit {
        name: NameId,
    },
    /// An NMI handler that ran `delta_ns` before this stamp.
    Nmi {
        delta_ns: u64,
        handler: u64,
    },
    Switch {
        prev: Task,
        prev_state: i32,
        next: Task,
    },
    Wakeup {
        task: Task,
        target_cpu: i32,
        waker_pid: u32,
    },
    WorkStart {
        function: u64,
    },
    WorkEnd,
    HrtimerEntry {
        function: u64,
    },
    HrtimerExit,
    /// A cross-CPU function call (CSD) runs `function`, inside its IPI's vector.
    CsdEntry {
        function: u64,
    },
    /// `timer:tick_stop`: the tick stopped (`success`), or `dependency` (TICK_DEP_MASK_*
    /// bits) kept it running.
    TickStop {
        success: bool,
        dependency: u32,
    },
}

impl Kind {
    /// The kernel function an event names (a work item, an hrtimer callback, a
    /// cross-CPU call), by address.
    pub fn function(&self) -> Option<u64> {
        match *self {
            Kind::WorkStart { function }
            | Kind::HrtimerEntry { function }
            | Kind::CsdEntry { function } => Some(function),
            _ => None,
        }
    }

    /// The same event with each interned name it holds passed through `f` (to move it
    /// to another `Names`).
    pub fn map_names(self, f: &mut impl FnMut(NameId) -> NameId) -> Kind {
        let mut task = |t: Task| Task {
            comm: f(t.comm),
            ..t
        };
        match self {
            Kind::IrqEntry { irq, name } => Kind::IrqEntry { irq, name: f(name) },
            Kind::VectorEntry { name } => Kind::VectorEntry { name: f(name) },
            Kind::VectorExit { name } => Kind::VectorExit { name: f(name) },
            Kind::Switch {
                prev,
                prev_state,
                next,
            } => Kind::Switch {
                prev: task(prev),
                prev_state,
                next: task(next),
            },
            Kind::Wakeup {
                task: t,
                target_cpu,
                waker_pid,
            } => Kind::Wakeup {
                task: task(t),
                target_cpu,
                waker_pid,
            },
            k => k,
        }
    }
}

/// One event on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// On the trace clock (TSC ticks with `x86-tsc`).
    pub ts: u64,
    pub kind: Kind,
}

/// A `sched_switch`'s `prev_state` says the task could still run: no sleep bit among
/// the kernel's reported states (the low byte). A preempted task reports 0, or
/// TASK_REPORT_MAX (0x100, "R+") on kernels that mark preemption.
pub fn still_runnable(prev_state: i32) -> bool {
    prev_state & 0xff == 0
}

/// A `sched_switch`'s `prev_state` says the task was preempted inside the kernel
/// (TASK_REPORT_MAX, printed "R+"), not at a return to user space or by sleeping.
pub fn preempted_in_kernel(prev_state: i32) -> bool {
    prev_state & 0x100 != 0
}

/// How one event id decodes.
#[derive(Debug, Clone)]
enum Shape {
    IrqEntry {
        irq: Field,
        name: Field,
    },
    IrqExit {
        irq: Field,
    },
    Softirq {
        vec: Field,
        entry: bool,
    },
    Vector {
        name: NameId,
        entry: bool,
    },
    Nmi {
        handler: Field,
        delta: Field,
    },
    Switch(Box<SwitchFields>),
    Wakeup {
        comm: Field,
        pid: Field,
        prio: Field,
        target: Field,
        common_pid: Field,
    },
    WorkStart {
        function: Field,
    },
    WorkEnd,
    HrtimerEntry {
        function: Field,
    },
    HrtimerExit,
    CsdEntry {
        function: Field,
    },
    TickStop {
        success: Field,
        dependency: Field,
    },
}

#[derive(Debug, Clone)]
struct SwitchFields {
    prev_comm: Field,
    prev_pid: Field,
    prev_prio: Field,
    prev_state: Field,
    next_comm: Field,
    next_pid: Field,
    next_prio: Field,
}

/// Decodes raw records of the formats it was built from.
#[derive(Debug, Default)]
pub struct Decoder {
    shapes: FxHashMap<u16, Shape>,
    pub names: Names,
}

impl Decoder {
    /// A decoder for these formats; events it does not know are skipped when decoding.
    pub fn new(formats: &[EventFormat]) -> Decoder {
        let mut d = Decoder::default();
        for f in formats {
            if let Some(shape) = d.shape_of(f) {
                d.shapes.insert(f.id, shape);
            }
        }
        d
    }

    fn shape_of(&mut self, f: &EventFormat) -> Option<Shape> {
        let g = |n: &str| f.field(n).cloned();
        Some(match f.name.as_str() {
            "irq:irq_handler_entry" => Shape::IrqEntry {
                irq: g("irq")?,
                name: g("name")?,
            },
            "irq:irq_handler_exit" => Shape::IrqExit { irq: g("irq")? },
            "irq:softirq_entry" => Shape::Softirq {
                vec: g("vec")?,
                entry: true,
            },
            "irq:softirq_exit" => Shape::Softirq {
                vec: g("vec")?,
                entry: false,
            },
            "nmi:nmi_handler" => Shape::Nmi {
                handler: g("handler")?,
                delta: g("delta_ns")?,
            },
            "sched:sched_switch" => Shape::Switch(Box::new(SwitchFields {
                prev_comm: g("prev_comm")?,
                prev_pid: g("prev_pid")?,
                prev_prio: g("prev_prio")?,
                prev_state: g("prev_state")?,
                next_comm: g("next_comm")?,
                next_pid: g("next_pid")?,
                next_prio: g("next_prio")?,
            })),
            // A new thread's first wake-up has the same fields (watch follows new threads).
            "sched:sched_wakeup" | "sched:sched_wakeup_new" => Shape::Wakeup {
                comm: g("comm")?,
                pid: g("pid")?,
                prio: g("prio")?,
                target: g("target_cpu")?,
                common_pid: g("common_pid")?,
            },
            "workqueue:workqueue_execute_start" => Shape::WorkStart {
                function: g("function")?,
            },
            "workqueue:workqueue_execute_end" => Shape::WorkEnd,
            "timer:hrtimer_expire_entry" => Shape::HrtimerEntry {
                function: g("function")?,
            },
            "timer:hrtimer_expire_exit" => Shape::HrtimerExit,
            "csd:csd_function_entry" => Shape::CsdEntry {
                function: g("func")?,
            },
            "timer:tick_stop" => Shape::TickStop {
                success: g("success")?,
                dependency: g("dependency")?,
            },
            n => {
                let v = n.strip_prefix("irq_vectors:")?;
                let (name, entry) = match (v.strip_suffix("_entry"), v.strip_suffix("_exit")) {
                    (Some(b), _) => (b, true),
                    (_, Some(b)) => (b, false),
                    _ => return None,
                };
                Shape::Vector {
                    name: self.names.intern(name),
                    entry,
                }
            }
        })
    }

    /// The event in a record, if it is one of ours and well formed.
    pub fn decode(&mut self, ts: u64, data: &[u8]) -> Option<Event> {
        let id = read_u64(data, 0, 2)? as u16;
        let Decoder { shapes, names } = self;
        let shape = shapes.get(&id)?;
        let u = |f: &Field| read_u64(data, f.offset, f.size);
        let i = |f: &Field| read_i64(data, f);
        let kind = match shape {
            Shape::IrqEntry { irq, name } => {
                let (irq, name) = (u(irq)? as u32, read_bytes(data, name)?);
                Kind::IrqEntry {
                    irq,
                    name: names.intern_bytes(name),
                }
            }
            Shape::IrqExit { irq } => Kind::IrqExit {
                irq: u(irq)? as u32,
            },
            Shape::Softirq { vec, entry: true } => Kind::SoftirqEntry {
                vec: u(vec)? as u32,
            },
            Shape::Softirq { vec, entry: false } => Kind::SoftirqExit {
                vec: u(vec)? as u32,
            },
            Shape::Vector { name, entry: true } => Kind::VectorEntry { name: *name },
            Shape::Vector { name, entry: false } => Kind::VectorExit { name: *name },
            Shape::Nmi { handler, delta } => Kind::Nmi {
                delta_ns: i(delta)?.max(0) as u64,
                handler: u(handler)?,
            },
            Shape::Switch(s) => {
                let (pc, nc) = (
                    task_name(names, data, &s.prev_comm)?,
                    task_name(names, data, &s.next_comm)?,
                );
                Kind::Switch {
                    prev: Task {
                        pid: i(&s.prev_pid)? as u32,
                        comm: pc,
                        prio: i(&s.prev_prio)? as i32,
                    },
                    // The reported states fit the low bits: an event 8 bytes smaller.
                    prev_state: i(&s.prev_state)? as i32,
                    next: Task {
                        pid: i(&s.next_pid)? as u32,
                        comm: nc,
                        prio: i(&s.next_prio)? as i32,
                    },
                }
            }
            Shape::Wakeup {
                comm,
                pid,
                prio,
                target,
                common_pid,
            } => {
                let (comm, pid, prio, target, waker) = (
                    task_name(names, data, comm)?,
                    i(pid)? as u32,
                    i(prio)? as i32,
                    i(target)? as i32,
                    i(common_pid)? as u32,
                );
                Kind::Wakeup {
                    task: Task { pid, comm, prio },
                    target_cpu: target,
                    waker_pid: waker,
                }
            }
            Shape::WorkStart { function } => Kind::WorkStart {
                function: u(function)?,
            },
            Shape::WorkEnd => Kind::WorkEnd,
            Shape::HrtimerEntry { function } => Kind::HrtimerEntry {
                function: u(function)?,
            },
            Shape::HrtimerExit => Kind::HrtimerExit,
            Shape::CsdEntry { function } => Kind::CsdEntry {
                function: u(function)?,
            },
            Shape::TickStop {
                success,
                dependency,
            } => Kind::TickStop {
                success: i(success)? != 0,
                dependency: u(dependency)? as u32,
            },
        };
        Some(Event { ts, kind })
    }
}

/// A task's name field interned: a fixed 16-byte one whole, any other by its bytes.
fn task_name(names: &mut Names, data: &[u8], f: &crate::trace::format::Field) -> Option<NameId> {
    if !f.data_loc && f.size == 16 {
        // Offsets come from format files: a damaged one may point past the address space.
        let field = data.get(f.offset..f.offset.checked_add(16)?)?;
        return Some(names.intern_field(field.try_into().ok()?));
    }
    Some(names.intern_bytes(read_bytes(data, f)?))
}

/// A task's policy and priority in words, from the kernel's priority.
pub fn policy_words(prio: i32) -> String {
    match prio {
        p if p < 0 => "SCHED_DEADLINE".into(),
        p if p < 100 => format!("real-time {}", 99 - p),
        p => format!("SCHED_OTHER nice {}", p - 120),
    }
}

/// A softirq vector's name.
pub fn softirq_name(vec: u32) -> String {
    SOFTIRQS
        .get(vec as usize)
        .map_or_else(|| format!("softirq {vec}"), |s| s.to_string())
}

/// The names of the dependencies in a `tick_stop`'s `dependency` bits: "SCHED and RCU".
pub fn dependency_words(bits: u32) -> String {
    let names: Vec<String> = (TICK_DEPENDENCIES.iter())
        .filter(|(b, ..)| bits & b != 0)
        .map(|(_, n, _)| n.to_string())
        .chain((bits >> 6 != 0).then(|| format!("{:#x}", bits & !63)))
        .collect();
    match names.as_slice() {
        [] => "no dependency".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A sched_switch `format` file of id 7, as 6.x kernels write it, for tests.
#[cfg(test)]
pub(crate) const SWITCH_FORMAT: &str = "ID: 7\n\
    \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
    \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
    \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
    \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
    \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
    \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
    \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_told_apart_by_every_byte_and_their_length() {
        let mut n = Names::default();
        let long = "a-name-longer-than-16";
        let ids: Vec<NameId> = ["app", "app\0", "", long, &long[..16], "app", long]
            .iter()
            .map(|s| n.intern(s))
            .collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 0, 3]);
        assert_eq!((n.get(1), n.get(3), n.get(4)), ("app\0", long, &long[..16]));
        // A 16-byte field: its name up to the NUL, whatever follows it, or all 16.
        let field = |s: &[u8]| {
            let mut f = [0xa5u8; 16];
            f[..s.len()].copy_from_slice(s);
            f
        };
        assert_eq!(n.intern_field(field(b"app\0")), 0);
        assert_eq!(n.intern_field(field(b"app\0x")), 0);
        assert_eq!(n.intern_field(field(&long.as_bytes()[..16])), 4);
        assert_eq!(n.intern_field(field(b"new\0")), 5);
        assert_eq!((n.get(5), n.len()), ("new", 6));
    }

    /// One name under many fields (an old name's tail after its NUL): one id, and the
    /// cache of fields stays bounded.
    #[test]
    fn a_name_under_many_fields_is_one_name_in_bounded_memory() {
        let mut n = Names::default();
        for tail in 0..FIELDS_CACHED as u32 + 10 {
            let mut f = [0u8; 16];
            f[..3].copy_from_slice(b"ab\0");
            f[4..8].copy_from_slice(&tail.to_le_bytes());
            assert_eq!(n.intern_field(f), 0);
        }
        assert_eq!((n.len(), n.get(0)), (1, "ab"));
        assert!(n.fields.len() <= FIELDS_CACHED, "{}", n.fields.len());
    }

    /// Issue 35: an event is 40 bytes (a `prev_state` of 32 bits, not 64): what every
    /// window's share of the readers' budget is counted in.
    #[test]
    fn an_event_is_40_bytes() {
        assert_eq!(std::mem::size_of::<Event>(), 40);
    }
    use crate::trace::format::parse_event_format;

    /// A decoder of `sched_switch` and one of its records: `prev` (pid 42, prio 98) gives
    /// way to `next` (pid 43, prio 97).
    fn switch_record(prev: &[u8], next: &[u8]) -> (Decoder, Vec<u8>) {
        let f = parse_event_format("sched:sched_switch", SWITCH_FORMAT).unwrap();
        let mut rec = vec![0u8; 64];
        rec[0..2].copy_from_slice(&7u16.to_le_bytes());
        rec[8..8 + prev.len()].copy_from_slice(prev);
        rec[24..28].copy_from_slice(&42i32.to_le_bytes());
        rec[28..32].copy_from_slice(&98i32.to_le_bytes());
        rec[40..40 + next.len()].copy_from_slice(next);
        rec[56..60].copy_from_slice(&43i32.to_le_bytes());
        rec[60..64].copy_from_slice(&97i32.to_le_bytes());
        (Decoder::new(&[f]), rec)
    }

    #[test]
    fn a_switch_record_decodes_with_its_tasks() {
        let (mut d, mut rec) = switch_record(b"measure-cpu1", b"js-holder");
        let e = d.decode(5, &rec).unwrap();
        let Kind::Switch { prev, next, .. } = e.kind else {
            panic!("{e:?}")
        };
        assert_eq!((prev.pid, next.pid, next.prio), (42, 43, 97));
        assert_eq!(d.names.get(next.comm), "js-holder");
        assert_eq!(policy_words(next.prio), "real-time 2");
        assert_eq!(policy_words(120), "SCHED_OTHER nice 0");
        // An id it does not know is skipped.
        rec[0..2].copy_from_slice(&8u16.to_le_bytes());
        assert!(d.decode(5, &rec).is_none());
    }

    #[test]
    fn a_task_whose_name_is_not_utf8_keeps_its_switch() {
        // prctl(PR_SET_NAME) takes any bytes: a name cut inside a character, say.
        let (mut d, rec) = switch_record(b"ok-1", b"app\xe2\x82");
        let e = d.decode(5, &rec).expect("the switch is kept");
        let Kind::Switch { next, .. } = e.kind else {
            panic!("{e:?}")
        };
        assert_eq!((next.pid, d.names.get(next.comm)), (43, "app\u{fffd}"));
        // The same bytes are the same name; text interned as such meets them.
        assert_eq!(d.names.intern_bytes(b"app\xe2\x82"), next.comm);
        assert_eq!(d.names.intern("ok-1"), d.names.intern_bytes(b"ok-1"));
    }

    /// Issue 30: a cross-CPU call's function, as 6.18 formats `csd_function_entry`.
    #[test]
    fn a_cross_cpu_call_decodes_with_its_function() {
        let text = "ID: 528\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:void * func;\toffset:8;\tsize:8;\tsigned:0;\n\
            \tfield:void * csd;\toffset:16;\tsize:8;\tsigned:0;\n";
        let f = parse_event_format("csd:csd_function_entry", text).unwrap();
        let mut d = Decoder::new(&[f]);
        let mut rec = vec![0u8; 24];
        rec[0..2].copy_from_slice(&528u16.to_le_bytes());
        rec[8..16].copy_from_slice(&0xffff_ffff_8110_2030u64.to_le_bytes());
        let e = d.decode(9, &rec).unwrap();
        assert_eq!(e.kind.function(), Some(0xffff_ffff_8110_2030));
        assert!(EVENTS.contains(&"csd:csd_function_entry"));
    }

    /// Issue 48: tick_stop as Debian's 6.1 PREEMPT_RT kernel writes its format (with the
    /// RT kernel's extra common field), decoded with its dependency.
    #[test]
    fn a_tick_stop_decodes_with_its_dependency() {
        let text = "name: tick_stop\nID: 373\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
            \tfield:unsigned char common_preempt_lazy_count;\toffset:8;\tsize:1;\tsigned:0;\n\
            \n\
            \tfield:int success;\toffset:12;\tsize:4;\tsigned:1;\n\
            \tfield:int dependency;\toffset:16;\tsize:4;\tsigned:1;\n";
        let f = parse_event_format("timer:tick_stop", text).unwrap();
        let mut d = Decoder::new(&[f]);
        let mut rec = vec![0u8; 20];
        rec[0..2].copy_from_slice(&373u16.to_le_bytes());
        rec[16..20].copy_from_slice(&4i32.to_le_bytes());
        let e = d.decode(5, &rec).unwrap();
        assert_eq!(
            e.kind,
            Kind::TickStop {
                success: false,
                dependency: 4
            }
        );
        rec[12..16].copy_from_slice(&1i32.to_le_bytes());
        rec[16..20].copy_from_slice(&0i32.to_le_bytes());
        let e = d.decode(6, &rec).unwrap();
        assert_eq!(
            e.kind,
            Kind::TickStop {
                success: true,
                dependency: 0
            }
        );
        assert!(EVENTS.contains(&"timer:tick_stop"));
        assert_eq!(dependency_words(4 | 16), "SCHED and RCU");
        assert_eq!(dependency_words(0), "no dependency");
    }
}
