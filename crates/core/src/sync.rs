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

/// Locks `mutex`, recovering the data if a panicking thread poisoned it: the
/// state it guards is rebuilt from scratch on every change, so a panic mid
/// update leaves nothing half-written that a later reader could trust.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(loom)]
    {
        mutex.lock().unwrap()
    }
    #[cfg(not(loom))]
    {
        mutex
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
