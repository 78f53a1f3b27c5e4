//! The daemon's limit on open files, raised at start from its soft value
//! to its hard one ([`raise_limit`]).
//!
//! Why: every file path holds a descriptor, and each ublk thread's ring
//! lends its file paths at most as many fixed-file slots as the soft
//! limit when the ring is made (the kernel refuses a larger table). Under
//! a service manager's usual soft limit (1024, kept low for programs that
//! use `select`, which mpio does not) a daemon serving more file paths
//! than that would open too few of them, and its threads would give the
//! rest rings of their own, where a zero-copy device's requests cannot
//! go. The hard limit stays what the administrator set (`LimitNOFILE=`).

#![allow(unsafe_code)]

/// The soft open-file limit before and after a raise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit before the raise.
    pub was: u64,
    /// The soft limit now: the hard limit.
    pub now: u64,
}

/// Raises the soft limit on open files (`RLIMIT_NOFILE`) to the hard
/// limit, and says what it was and is.
///
/// # Errors
/// The limit cannot be read or set.
pub fn raise_limit() -> std::io::Result<OpenFiles> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit, which `limit` is.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let was = limit.rlim_cur;
    if was < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads one rlimit, which `limit` is.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(OpenFiles {
        was,
        now: limit.rlim_max,
    })
}

#[cfg(test)]
mod tests {
    use super::raise_limit;

    /// After a raise the soft limit is the hard one: a second raise
    /// finds nothing to raise.
    #[test]
    fn the_soft_limit_becomes_the_hard_one() {
        let first = raise_limit().unwrap();
        assert!(first.now >= first.was);
        let second = raise_limit().unwrap();
        assert_eq!(second.was, second.now);
        assert_eq!(second.now, first.now);
    }
}
