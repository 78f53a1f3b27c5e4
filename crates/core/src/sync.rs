//! Synchronisation primitives behind one name, so that `--cfg loom` swaps in
//! loom's model-checked versions (crossbeam's shim pattern).
//!
//! Everything in the core that is shared between I/O threads uses these
//! types, never `std::sync` directly.

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    Arc, Mutex, MutexGuard,
};

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    Arc, Mutex, MutexGuard,
};

/// Locks `mutex`.
///
/// # Panics
/// If a thread panicked holding it: whatever it was changing cannot be
/// trusted, and the process is meant to end on the first panic anyway
/// (the daemon aborts from its panic hook, so a supervisor restarts it).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(_) => panic!("a lock was poisoned: a thread panicked holding it"),
    }
}
