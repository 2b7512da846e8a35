//! Safe wrappers over the kernel and libc notification primitives `pingpong` compares:
//! pthread mutexes and condition variables, POSIX and SysV semaphores, POSIX message
//! queues and thread-directed signals. rustix covers futexes, pipes, eventfds and socket
//! pairs safely; these it does not, so the few libc calls live here, each with its
//! `// SAFETY:`.
//!
//! Every wait takes a timeout (`WaitResult::TimedOut`), so that a thread whose peer has
//! stopped can always look at its stop flag again: a run never hangs on a lost wake-up.
//! Objects that must not move once initialised (mutexes, condition variables, POSIX
//! semaphores) are boxed.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How a bounded wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitResult {
    Ready,
    TimedOut,
}

fn check(rc: libc::c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// A pthread function's own return code (they return the errno, not -1).
fn check_ret(rc: libc::c_int) -> io::Result<WaitResult> {
    match rc {
        0 => Ok(WaitResult::Ready),
        libc::ETIMEDOUT | libc::EAGAIN | libc::EINTR => Ok(WaitResult::TimedOut),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// -1 with errno from a libc call that waits.
fn check_errno(rc: libc::c_int) -> io::Result<WaitResult> {
    match rc {
        0.. => Ok(WaitResult::Ready),
        _ => {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ETIMEDOUT | libc::EAGAIN | libc::EINTR) => Ok(WaitResult::TimedOut),
                _ => Err(e),
            }
        }
    }
}

/// `now + after` on `clock`, as the absolute deadline the timed waits take.
fn deadline(clock: libc::clockid_t, after: Duration) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    let ns = ts.tv_nsec as u64 + after.subsec_nanos() as u64;
    libc::timespec {
        tv_sec: ts.tv_sec + after.as_secs() as libc::time_t + (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

fn relative(after: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: after.as_secs() as libc::time_t,
        tv_nsec: after.subsec_nanos() as libc::c_long,
    }
}

/// A default (non-recursive, non-robust) pthread mutex. It remembers which thread holds
/// it, so that `unlock` from any other thread is refused (EPERM) instead of being the
/// undefined behaviour pthreads makes it.
pub struct PthreadMutex {
    m: Box<UnsafeCell<libc::pthread_mutex_t>>,
    /// The kernel id of the holder, 0 when free.
    owner: AtomicU64,
}

// SAFETY: a pthread mutex is made to be shared between threads; it is never moved after
// init because it lives in a Box.
unsafe impl Send for PthreadMutex {}
// SAFETY: as above.
unsafe impl Sync for PthreadMutex {}

thread_local! {
    /// The calling thread's kernel id and its process id, read once per thread: both are
    /// syscalls (glibc caches neither), and they are needed inside timed hand-offs.
    static IDS: (u64, libc::c_long) = (
        rustix::thread::gettid().as_raw_nonzero().get() as u64,
        rustix::process::getpid().as_raw_nonzero().get() as libc::c_long,
    );
}

/// The calling thread's kernel id.
fn tid() -> u64 {
    IDS.with(|ids| ids.0)
}

impl PthreadMutex {
    pub fn new() -> io::Result<PthreadMutex> {
        let m = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: m points to writable, pinned storage; a null attr means the defaults.
        check(unsafe { libc::pthread_mutex_init(m.get(), std::ptr::null()) })?;
        Ok(PthreadMutex {
            m,
            owner: AtomicU64::new(0),
        })
    }

    pub fn lock(&self) -> io::Result<()> {
        // SAFETY: initialised in new(), never moved.
        check(unsafe { libc::pthread_mutex_lock(self.m.get()) })?;
        self.owner.store(tid(), Ordering::Relaxed);
        Ok(())
    }

    /// Locks, or gives up after `after`.
    pub fn lock_timeout(&self, after: Duration) -> io::Result<WaitResult> {
        let ts = deadline(libc::CLOCK_REALTIME, after);
        // SAFETY: initialised, pinned; ts lives across the call.
        let r = check_ret(unsafe { libc::pthread_mutex_timedlock(self.m.get(), &ts) })?;
        if r == WaitResult::Ready {
            self.owner.store(tid(), Ordering::Relaxed);
        }
        Ok(r)
    }

    /// Whether the calling thread holds it.
    pub fn is_held_here(&self) -> bool {
        self.owner.load(Ordering::Relaxed) == tid()
    }

    fn held_here(&self) -> io::Result<()> {
        match self.owner.load(Ordering::Relaxed) == tid() {
            true => Ok(()),
            false => Err(io::Error::from_raw_os_error(libc::EPERM)),
        }
    }

    /// Unlocks; only the thread that locked it may (EPERM otherwise).
    pub fn unlock(&self) -> io::Result<()> {
        self.held_here()?;
        self.owner.store(0, Ordering::Relaxed);
        // SAFETY: initialised, pinned, and held by this thread (checked above).
        check(unsafe { libc::pthread_mutex_unlock(self.m.get()) })
    }
}

/// A pthread condition variable that times out on CLOCK_MONOTONIC.
pub struct PthreadCond(Box<UnsafeCell<libc::pthread_cond_t>>);

// SAFETY: made to be shared between threads; boxed, so never moved after init.
unsafe impl Send for PthreadCond {}
// SAFETY: as above.
unsafe impl Sync for PthreadCond {}

impl PthreadCond {
    pub fn new() -> io::Result<PthreadCond> {
        let c = Box::new(UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER));
        // SAFETY: the attr is initialised before use and destroyed after; c is pinned.
        unsafe {
            let mut attr: libc::pthread_condattr_t = std::mem::zeroed();
            check(libc::pthread_condattr_init(&mut attr))?;
            let set = libc::pthread_condattr_setclock(&mut attr, libc::CLOCK_MONOTONIC);
            let init = libc::pthread_cond_init(c.get(), &attr);
            libc::pthread_condattr_destroy(&mut attr);
            check(set)?;
            check(init)?;
        }
        Ok(PthreadCond(c))
    }

    /// Waits on `m`, which the caller must hold (EPERM otherwise), for a signal or
    /// `after`.
    pub fn wait_timeout(&self, m: &PthreadMutex, after: Duration) -> io::Result<WaitResult> {
        m.held_here()?;
        let ts = deadline(libc::CLOCK_MONOTONIC, after);
        // SAFETY: both are initialised and pinned; this thread holds m (checked above).
        let r = check_ret(unsafe { libc::pthread_cond_timedwait(self.0.get(), m.m.get(), &ts) });
        // The wait let go of m and took it back: another thread may have held it since.
        m.owner.store(tid(), Ordering::Relaxed);
        r
    }

    /// Waits on `m`, which the caller must hold (EPERM otherwise), for a signal.
    pub fn wait(&self, m: &PthreadMutex) -> io::Result<()> {
        m.held_here()?;
        // SAFETY: both are initialised and pinned; this thread holds m (checked above).
        let r = check(unsafe { libc::pthread_cond_wait(self.0.get(), m.m.get()) });
        m.owner.store(tid(), Ordering::Relaxed);
        r
    }

    pub fn signal(&self) -> io::Result<()> {
        // SAFETY: initialised and pinned.
        check(unsafe { libc::pthread_cond_signal(self.0.get()) })
    }
}

impl Drop for PthreadCond {
    fn drop(&mut self) {
        // SAFETY: nobody waits any more: the threads that used it have been joined.
        unsafe { libc::pthread_cond_destroy(self.0.get()) };
    }
}

/// An unnamed POSIX semaphore shared between the threads of this process.
pub struct PosixSem(Box<UnsafeCell<libc::sem_t>>);

// SAFETY: made to be shared between threads; boxed, so never moved after init.
unsafe impl Send for PosixSem {}
// SAFETY: as above.
unsafe impl Sync for PosixSem {}

impl PosixSem {
    pub fn new() -> io::Result<PosixSem> {
        // SAFETY: sem_t is plain data; sem_init initialises the zeroed, pinned storage.
        let s = Box::new(UnsafeCell::new(unsafe {
            std::mem::zeroed::<libc::sem_t>()
        }));
        check(unsafe { libc::sem_init(s.get(), 0, 0) })?;
        Ok(PosixSem(s))
    }

    pub fn post(&self) -> io::Result<()> {
        // SAFETY: initialised and pinned.
        check(unsafe { libc::sem_post(self.0.get()) })
    }

    pub fn wait_timeout(&self, after: Duration) -> io::Result<WaitResult> {
        let ts = deadline(libc::CLOCK_REALTIME, after);
        // SAFETY: initialised and pinned; ts lives across the call.
        check_errno(unsafe { libc::sem_timedwait(self.0.get(), &ts) })
    }

    /// Waits for a post, however long (`TimedOut` only when a signal interrupted it).
    pub fn wait(&self) -> io::Result<WaitResult> {
        // SAFETY: initialised and pinned.
        check_errno(unsafe { libc::sem_wait(self.0.get()) })
    }
}

impl Drop for PosixSem {
    fn drop(&mut self) {
        // SAFETY: the threads that used it have been joined.
        unsafe { libc::sem_destroy(self.0.get()) };
    }
}

/// A private SysV semaphore set, removed when dropped.
pub struct SysvSems {
    id: libc::c_int,
}

impl SysvSems {
    pub fn new(count: usize) -> io::Result<SysvSems> {
        // SAFETY: plain syscall; IPC_PRIVATE makes a new set only we know.
        let id = unsafe {
            libc::semget(
                libc::IPC_PRIVATE,
                count as libc::c_int,
                libc::IPC_CREAT | 0o600,
            )
        };
        match id {
            -1 => Err(io::Error::last_os_error()),
            id => Ok(SysvSems { id }),
        }
    }

    fn op(&self, num: usize, delta: i16, timeout: Option<Duration>) -> io::Result<WaitResult> {
        let mut op = libc::sembuf {
            sem_num: num as libc::c_ushort,
            sem_op: delta,
            sem_flg: 0,
        };
        let ts = timeout.map(relative);
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: op and ts live across the call; semtimedop has no libc wrapper here.
        let rc = unsafe { libc::syscall(libc::SYS_semtimedop, self.id, &mut op, 1usize, tsp) };
        check_errno(rc as libc::c_int)
    }

    pub fn post(&self, num: usize) -> io::Result<()> {
        self.op(num, 1, None).map(|_| ())
    }

    pub fn wait_timeout(&self, num: usize, after: Duration) -> io::Result<WaitResult> {
        self.op(num, -1, Some(after))
    }

    /// Waits for a post, however long (`TimedOut` only when a signal interrupted it).
    pub fn wait(&self, num: usize) -> io::Result<WaitResult> {
        self.op(num, -1, None)
    }
}

impl Drop for SysvSems {
    fn drop(&mut self) {
        // SAFETY: removes the set we created; nobody uses it any more.
        unsafe { libc::semctl(self.id, 0, libc::IPC_RMID) };
    }
}

/// A POSIX message queue of 8-byte messages, unlinked as soon as it is open so that
/// nothing is left behind in /dev/mqueue however the process ends.
pub struct MessageQueue {
    mq: libc::mqd_t,
}

impl MessageQueue {
    pub fn new(tag: &str) -> io::Result<MessageQueue> {
        let name = std::ffi::CString::new(format!(
            "/jitterscope-{}-{tag}-{}",
            std::process::id(),
            crate::engine::clock::now()
        ))
        .map_err(io::Error::other)?;
        // SAFETY: mq_attr is plain data; unspecified fields are ignored by mq_open.
        let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
        attr.mq_maxmsg = 4;
        attr.mq_msgsize = 8;
        // SAFETY: name is a valid C string; attr lives across the call.
        let mq = unsafe {
            libc::mq_open(
                name.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600 as libc::mode_t,
                &mut attr as *mut libc::mq_attr,
            )
        };
        if mq == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: name is valid; the open descriptor keeps the queue alive.
        unsafe { libc::mq_unlink(name.as_ptr()) };
        Ok(MessageQueue { mq })
    }

    pub fn send(&self, value: u64) -> io::Result<()> {
        let bytes = value.to_ne_bytes();
        // SAFETY: bytes lives across the call; 8 bytes fit the queue's message size.
        check(unsafe { libc::mq_send(self.mq, bytes.as_ptr().cast(), 8, 0) })
    }

    /// Waits for a message, however long (`None` only when a signal interrupted it).
    pub fn receive(&self) -> io::Result<Option<u64>> {
        let mut bytes = [0u8; 8];
        // SAFETY: the buffer is as large as the queue's message size.
        let n = unsafe {
            libc::mq_receive(self.mq, bytes.as_mut_ptr().cast(), 8, std::ptr::null_mut())
        };
        match check_errno(n as libc::c_int)? {
            WaitResult::Ready => Ok(Some(u64::from_ne_bytes(bytes))),
            WaitResult::TimedOut => Ok(None),
        }
    }

    pub fn receive_timeout(&self, after: Duration) -> io::Result<Option<u64>> {
        let mut bytes = [0u8; 8];
        let ts = deadline(libc::CLOCK_REALTIME, after);
        // SAFETY: the buffer is as large as the queue's message size; ts lives across.
        let n = unsafe {
            libc::mq_timedreceive(
                self.mq,
                bytes.as_mut_ptr().cast(),
                8,
                std::ptr::null_mut(),
                &ts,
            )
        };
        match check_errno(n as libc::c_int)? {
            WaitResult::Ready => Ok(Some(u64::from_ne_bytes(bytes))),
            WaitResult::TimedOut => Ok(None),
        }
    }
}

impl Drop for MessageQueue {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor we opened.
        unsafe { libc::mq_close(self.mq) };
    }
}

/// The signal `pingpong` sends between its threads.
pub const PING_SIGNAL: libc::c_int = libc::SIGUSR1;

/// The calling thread, as `signal_thread` names it: its kernel id.
pub fn this_thread() -> u64 {
    tid()
}

/// Sends PING_SIGNAL to the thread of this process whose kernel id is `thread`, with
/// tgkill: a thread that has gone gives ESRCH (pthread_kill on a joined thread would be
/// undefined), and only a thread of this process can be reached.
pub fn signal_thread(thread: u64) -> io::Result<()> {
    let pid = IDS.with(|ids| ids.1);
    // SAFETY: tgkill takes plain integers; the kernel checks them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            pid,
            thread as libc::c_long,
            PING_SIGNAL as libc::c_long,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Waits for PING_SIGNAL, which the caller keeps blocked, however long.
pub fn wait_signal() -> io::Result<WaitResult> {
    // SAFETY: the set is initialised before use; info lives across the call.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, PING_SIGNAL);
        let mut info: libc::siginfo_t = std::mem::zeroed();
        check_errno(libc::sigwaitinfo(&set, &mut info))
    }
}

/// Waits for PING_SIGNAL, which the caller keeps blocked, for at most `after`.
pub fn wait_signal_timeout(after: Duration) -> io::Result<WaitResult> {
    let ts = relative(after);
    // SAFETY: the set is initialised before use; info and ts live across the call.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, PING_SIGNAL);
        let mut info: libc::siginfo_t = std::mem::zeroed();
        check_errno(libc::sigtimedwait(&set, &mut info, &ts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const SHORT: Duration = Duration::from_millis(20);

    #[test]
    fn waits_time_out_and_wake() {
        let s = PosixSem::new().unwrap();
        let t = Instant::now();
        assert_eq!(s.wait_timeout(SHORT).unwrap(), WaitResult::TimedOut);
        assert!(t.elapsed() >= SHORT);
        s.post().unwrap();
        assert_eq!(s.wait_timeout(SHORT).unwrap(), WaitResult::Ready);

        let v = SysvSems::new(2).unwrap();
        assert_eq!(v.wait_timeout(1, SHORT).unwrap(), WaitResult::TimedOut);
        v.post(1).unwrap();
        assert_eq!(v.wait_timeout(1, SHORT).unwrap(), WaitResult::Ready);
        assert_eq!(v.wait_timeout(0, SHORT).unwrap(), WaitResult::TimedOut);

        let q = MessageQueue::new("test").unwrap();
        assert_eq!(q.receive_timeout(SHORT).unwrap(), None);
        q.send(42).unwrap();
        assert_eq!(q.receive_timeout(SHORT).unwrap(), Some(42));

        let m = PthreadMutex::new().unwrap();
        let c = PthreadCond::new().unwrap();
        m.lock().unwrap();
        assert_eq!(c.wait_timeout(&m, SHORT).unwrap(), WaitResult::TimedOut);
        m.unlock().unwrap();
    }

    #[test]
    fn only_the_holder_may_unlock_or_wait() {
        let m = PthreadMutex::new().unwrap();
        let c = PthreadCond::new().unwrap();
        assert!(m.unlock().is_err(), "nobody holds it");
        assert!(c.wait_timeout(&m, SHORT).is_err());
        m.lock().unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(m.unlock().unwrap_err().raw_os_error(), Some(libc::EPERM));
                assert!(c.wait_timeout(&m, SHORT).is_err());
            });
        });
        m.unlock().unwrap();
        // A thread that has gone is refused, not signalled. A join returns when the
        // kernel clears the thread's id word, a moment before it releases the task, and
        // a signal in that moment is taken: so it is refused within a second.
        let gone = std::thread::spawn(this_thread).join().unwrap();
        let refused = (0..1000).find_map(|_| match signal_thread(gone) {
            Ok(()) => {
                std::thread::sleep(Duration::from_millis(1));
                None
            }
            Err(e) => Some(e.raw_os_error()),
        });
        assert_eq!(refused, Some(Some(libc::ESRCH)));
    }

    #[test]
    fn a_locked_mutex_times_out_in_another_thread() {
        let m = PthreadMutex::new().unwrap();
        m.lock().unwrap();
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(m.lock_timeout(SHORT).unwrap(), WaitResult::TimedOut));
        });
        m.unlock().unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(m.lock_timeout(SHORT).unwrap(), WaitResult::Ready);
                m.unlock().unwrap();
            });
        });
    }

    #[test]
    fn a_thread_directed_signal_is_received() {
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            let waiter = s.spawn(move || {
                crate::engine::sched::block_all_signals();
                tx.send(this_thread()).unwrap();
                wait_signal_timeout(Duration::from_secs(2)).unwrap()
            });
            let target = rx.recv().unwrap();
            signal_thread(target).unwrap();
            assert_eq!(waiter.join().unwrap(), WaitResult::Ready);
        });
    }
}
