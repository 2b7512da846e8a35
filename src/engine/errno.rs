//! Errno names, for what the kernel answered: PTP devices and refused settings alike,
//! and an I/O error told as the kernel's answer (`tune`'s steps and thread moves).

/// The short name of an errno the tool meets (a PTP device's answers, a refused
/// setting's); "errno N" otherwise.
pub fn name(errno: i32) -> String {
    let name = match errno {
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOTTY => "ENOTTY",
        libc::EINVAL => "EINVAL",
        libc::ENODEV => "ENODEV",
        libc::EIO => "EIO",
        libc::EBUSY => "EBUSY",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EAGAIN => "EAGAIN",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// An I/O error as the kernel gave it: "EPERM (Operation not permitted)"; an error that
/// carries no errno as its own text.
pub fn answer(e: &std::io::Error) -> String {
    let Some(errno) = e.raw_os_error() else {
        return e.to_string();
    };
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or(&text).to_string();
    format!("{} ({text})", name(errno))
}
