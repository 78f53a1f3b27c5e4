//! One thread that runs the path checkers ([`SlotChecker`]) of every
//! map: a heap of the times each next has something due, so the daemon's
//! checker threads do not grow with its maps.
//!
//! # Contract
//! - A checker added is polled at once, then whenever its
//!   [`Checker::poll`](mpio_core::checker::Checker::poll) said it next
//!   has something due, and every `probe_poll` while it has probes out
//!   (transports complete only when polled); [`PooledChecker::wake`]
//!   makes it due now.
//! - Polls run one at a time, without the pool's lock held, so adding,
//!   waking and removing never wait for a poll of another checker; a
//!   checker's path records are copied out after each of its polls.
//! - [`PooledChecker::stop`] (and its drop) returns once the checker is
//!   dropped: a checker being polled is dropped by the pool thread as the
//!   poll ends, before `stop` returns.
//! - The pool thread beats its [`Heartbeat`] once per round and marks it
//!   idle before it waits for the next checker due, for the daemon's
//!   watchdog ([`CheckerPool::heartbeat`]).
//! - Waking leaves stale entries in the heap; an entry counts only if it
//!   carries its checker's current generation.

use super::{Clock, SlotChecker};
use crate::lock;
use mpio_core::checker::PathCheck;
use mpio_io_loop::Heartbeat;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What is recorded of a checker's paths after each poll: each path's
/// word and record, in [`mpio_core::map::Map::paths`] order.
type Records = Arc<Mutex<Vec<(String, PathCheck)>>>;

/// One checker in the pool.
struct Entry {
    /// Taken by the pool thread while it polls.
    checker: Option<SlotChecker>,
    records: Records,
    /// Bumped by every reschedule: heap entries of older generations are
    /// stale.
    generation: u64,
}

/// The pool's state, under its lock.
#[derive(Default)]
struct State {
    entries: HashMap<u64, Entry>,
    /// (due time ns, checker id, generation), earliest first.
    due: BinaryHeap<Reverse<(u64, u64, u64)>>,
    next_id: u64,
    /// The checker the pool thread is polling, taken out of its entry.
    polling: Option<u64>,
    stop: bool,
}

impl State {
    /// Makes checker `id` due at `at_ns`.
    fn schedule(&mut self, id: u64, at_ns: u64) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.generation += 1;
            self.due.push(Reverse((at_ns, id, entry.generation)));
        }
    }
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled on every change the pool thread or a stopper waits for.
    changed: Condvar,
    /// The pool thread's heartbeat.
    heartbeat: Arc<Heartbeat>,
}

/// The pool thread and the checkers it runs; dropping it stops the
/// thread (and drops the checkers still in it).
pub struct CheckerPool {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for CheckerPool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let checkers = lock(&self.shared.state).entries.len();
        formatter
            .debug_struct("CheckerPool")
            .field("checkers", &checkers)
            .finish()
    }
}

impl CheckerPool {
    /// Starts the pool's thread, reading time from `clock` and polling
    /// checkers with probes out every `probe_poll`.
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub fn start(clock: Clock, probe_poll: Duration) -> std::io::Result<CheckerPool> {
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("mpio-checker".into())
            .spawn(move || run(&thread_shared, &clock, probe_poll))?;
        Ok(CheckerPool {
            shared,
            handle: Some(handle),
        })
    }

    /// The pool thread's heartbeat: beaten once per round, idle while it
    /// waits for the next checker due.
    pub fn heartbeat(&self) -> Arc<Heartbeat> {
        Arc::clone(&self.shared.heartbeat)
    }

    /// Runs `checker` in the pool from now on, polled at once.
    pub fn add(&self, checker: SlotChecker) -> PooledChecker {
        let records = Records::default();
        let mut state = lock(&self.shared.state);
        let id = state.next_id;
        state.next_id += 1;
        state.entries.insert(
            id,
            Entry {
                checker: Some(checker),
                records: Arc::clone(&records),
                generation: 0,
            },
        );
        state.schedule(id, 0);
        drop(state);
        self.shared.changed.notify_all();
        PooledChecker {
            shared: Arc::clone(&self.shared),
            id,
            records,
        }
    }
}

impl Drop for CheckerPool {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.changed.notify_all();
        if let Some(handle) = self.handle.take() {
            // A panic in the pool thread has already been reported.
            let _ = handle.join();
        }
    }
}

/// The pool thread: polls each checker when due, sleeps until the
/// earliest due time or a change.
fn run(shared: &Shared, clock: &Clock, probe_poll: Duration) {
    let mut state = lock(&shared.state);
    loop {
        shared.heartbeat.beat();
        if state.stop {
            return;
        }
        let now_ns = clock();
        let Some(&Reverse((due_ns, id, generation))) = state.due.peek() else {
            shared.heartbeat.idle();
            state = shared
                .changed
                .wait(state)
                .expect("a lock was poisoned: a thread panicked holding it");
            continue;
        };
        if due_ns > now_ns {
            shared.heartbeat.idle();
            state = shared
                .changed
                .wait_timeout(state, Duration::from_nanos(due_ns - now_ns))
                .expect("a lock was poisoned: a thread panicked holding it")
                .0;
            continue;
        }
        state.due.pop();
        let Some(entry) = state.entries.get_mut(&id) else {
            continue;
        };
        if entry.generation != generation {
            continue;
        }
        let Some(mut checker) = entry.checker.take() else {
            continue;
        };
        let records = Arc::clone(&entry.records);
        state.polling = Some(id);
        drop(state);
        let now_ns = clock();
        let mut next_ns = checker.poll(now_ns);
        if checker.probing() {
            next_ns = next_ns.min(now_ns.saturating_add(probe_poll.as_nanos() as u64));
        }
        *lock(&records) = checker.named_path_checks();
        state = lock(&shared.state);
        match state.entries.get_mut(&id) {
            Some(entry) => {
                entry.checker = Some(checker);
                // A wake during the poll left a due entry of a newer
                // generation: keep it, it is sooner.
                if entry.generation == generation {
                    state.schedule(id, next_ns);
                }
            }
            None => {
                // Stopped while polled: drop it here, before its stopper
                // learns that the poll is over.
                drop(state);
                drop(checker);
                state = lock(&shared.state);
            }
        }
        state.polling = None;
        shared.changed.notify_all();
    }
}

/// A checker running in a [`CheckerPool`] until stopped or dropped.
pub struct PooledChecker {
    shared: Arc<Shared>,
    id: u64,
    records: Records,
}

impl std::fmt::Debug for PooledChecker {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PooledChecker")
            .field("id", &self.id)
            .finish()
    }
}

impl PooledChecker {
    /// Each path's word and checker record as of the checker's last poll,
    /// in [`mpio_core::map::Map::paths`] order of the map it polled.
    pub fn path_checks(&self) -> Vec<(String, PathCheck)> {
        lock(&self.records).clone()
    }

    /// Makes the checker due now rather than when its next poll is due:
    /// after a reload, so it follows the new map (and lists its paths) at
    /// once. A wake while it is polled makes it poll again.
    pub fn wake(&self) {
        lock(&self.shared.state).schedule(self.id, 0);
        self.shared.changed.notify_all();
    }

    /// Takes the checker out of the pool and waits until it is dropped.
    pub fn stop(self) {}
}

impl Drop for PooledChecker {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        let Some(entry) = state.entries.remove(&self.id) else {
            return;
        };
        if let Some(checker) = entry.checker {
            drop(state);
            drop(checker);
            return;
        }
        // Being polled: the pool thread drops it as the poll ends.
        while state.polling == Some(self.id) {
            state = self
                .shared
                .changed
                .wait(state)
                .expect("a lock was poisoned: a thread panicked holding it");
        }
    }
}
