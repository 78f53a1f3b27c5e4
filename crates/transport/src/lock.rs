//! [`lock`]: how the transports and the daemon take a mutex, and why a
//! poisoned one ends the process.

use std::sync::{Mutex, MutexGuard};

/// Takes `mutex`. Shared by the transports and the daemon.
///
/// # Panics
/// If a thread panicked holding it: what it guards (registries, memory
/// chunks, the checker's records, the daemon's maps) may be half changed,
/// and the daemon's policy is to end on the first panic (see
/// `mpio_daemon::fail_fast`), never to run on over state it cannot trust.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(_) => panic!("a lock was poisoned: a thread panicked holding it"),
    }
}
