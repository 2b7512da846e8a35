//! Errno names, for what the kernel answered: PTP devices and refused settings alike.

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
