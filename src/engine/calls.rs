//! The single calls `syscalls` and `work` time, as safe functions: libc's own entry
//! points where an application would use them (glibc's `clock_gettime` through the vDSO,
//! `nanosleep`), and raw syscalls where the point is the kernel's entry and exit.
#![allow(unsafe_code)]

/// A syscall number no kernel has: entry, the table lookup, ENOSYS, exit.
pub const INVALID_SYSCALL: libc::c_long = 100_000;

/// `syscall(INVALID_SYSCALL)`: the pure cost of entering and leaving the kernel.
#[inline(always)]
pub fn invalid_syscall() -> libc::c_long {
    // SAFETY: an unknown number makes the kernel return -ENOSYS without touching memory.
    unsafe { libc::syscall(INVALID_SYSCALL) }
}

/// `getppid()`: a real syscall that does almost nothing (libcs cache `getpid`, never this).
#[inline(always)]
pub fn getppid() -> libc::pid_t {
    // SAFETY: no arguments, no memory.
    unsafe { libc::getppid() }
}

/// `getuid()`.
#[inline(always)]
pub fn getuid() -> libc::uid_t {
    // SAFETY: no arguments, no memory.
    unsafe { libc::getuid() }
}

/// `close(-1)`: fails with EBADF after the fd table lookup.
#[inline(always)]
pub fn close_bad_fd() -> libc::c_int {
    // SAFETY: -1 is never an open descriptor, so nothing is closed.
    unsafe { libc::close(-1) }
}

/// `sched_yield()`.
#[inline(always)]
pub fn sched_yield() -> libc::c_int {
    // SAFETY: no arguments, no memory.
    unsafe { libc::sched_yield() }
}

/// glibc's `clock_gettime(clock)`: through the vDSO where the kernel offers it.
#[inline(always)]
pub fn clock_gettime(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts
}

/// `clock_gettime(clock)` as a real syscall, bypassing the vDSO: the reference that shows
/// what the vDSO saves.
#[inline(always)]
pub fn clock_gettime_syscall(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the kernel writes one timespec into ts, which we own.
    unsafe { libc::syscall(libc::SYS_clock_gettime, clock, &mut ts) };
    ts
}

/// `nanosleep(0)`: how long the shortest sleep really takes (the timer slack decides).
#[inline(always)]
pub fn nanosleep_zero() -> libc::c_int {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: reads ts, which lives across the call; no remainder is asked for.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) }
}

/// The calling thread's timer slack in ns (PR_GET_TIMERSLACK).
pub fn timer_slack() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer and returns the value.
    unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as u64 }
}

/// Sets the calling thread's timer slack (PR_SET_TIMERSLACK); 0 means the default again.
pub fn set_timer_slack(ns: u64) -> std::io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes the value by value.
    match unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Sets the calling thread's timer slack for as long as the guard lives.
pub struct TimerSlackGuard {
    previous: u64,
}

impl TimerSlackGuard {
    pub fn set(ns: u64) -> std::io::Result<TimerSlackGuard> {
        let previous = timer_slack();
        set_timer_slack(ns)?;
        Ok(TimerSlackGuard { previous })
    }
}

impl Drop for TimerSlackGuard {
    fn drop(&mut self) {
        let _ = set_timer_slack(self.previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_do_what_they_say() {
        assert_eq!(invalid_syscall(), -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOSYS)
        );
        assert_eq!(close_bad_fd(), -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EBADF)
        );
        assert_eq!(
            getppid(),
            rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
        );
        let a = clock_gettime(libc::CLOCK_MONOTONIC);
        let b = clock_gettime_syscall(libc::CLOCK_MONOTONIC);
        assert!((b.tv_sec, b.tv_nsec) >= (a.tv_sec, a.tv_nsec));
        assert_eq!(nanosleep_zero(), 0);
    }

    #[test]
    fn timer_slack_is_restored() {
        std::thread::spawn(|| {
            let before = timer_slack();
            {
                let _g = TimerSlackGuard::set(1).unwrap();
                assert_eq!(timer_slack(), 1);
            }
            assert_eq!(timer_slack(), before);
        })
        .join()
        .unwrap();
    }
}
