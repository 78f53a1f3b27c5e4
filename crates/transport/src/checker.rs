//! The path checker: probes every path of a map on an interval, reinstates
//! the failed paths whose probe succeeds, fails the active paths whose
//! probe fails, and fails back to the preferred group under the map's
//! failback policy ([`mpio_core::failback`]), as multipathd's checker loop
//! does.
//!
//! # Probes
//! A probe is a one-block read at offset 0 (the block: 4 KiB, or the
//! largest minimum block size of the map's paths if larger, so that no
//! path refuses it for its size without reaching the storage; at most the
//! map's size) through the path's own
//! transport, on a queue of depth 1 that the checker opens from the path's
//! [`PathHandle`] and keeps between probes: a file read through io_uring
//! for `file` paths, an NBD round trip for `nbd` paths (its connect, on a
//! fresh queue, runs in the background and counts against the probe's
//! timeout: nothing in a checker poll waits on a server), a port read for
//! `memory` paths. A probe that ends in a path error marks the path down
//! and drops the probe queue, so the next probe opens a fresh one (a new
//! connection, for transports that have one).
//!
//! A probe that does not end within the probe timeout marks the path down
//! too. If the transport hands the probe back (it never reached the
//! storage), the queue is dropped as above. If it cannot (the kernel holds
//! a file read, an NBD connection is being severed), the path is
//! *stalled*, as multipathd's async checker keeps a pending check: the
//! queue is kept and polled, no new probe of the path starts until the old
//! one comes back, and then the queue is dropped and the next round probes
//! afresh. A hung path thus costs one probe buffer and one queue, never a
//! wait in the checker or a queue leaked every round.
//!
//! A target error counts as up: the storage answered through this path,
//! and failing every path over an error every path would give helps
//! nobody. A path failed by a `fail_path` message is reinstated by its
//! next good probe, as multipathd does.
//!
//! # Rounds
//! Every `interval_ns` a round starts one probe per path, all in flight
//! together. A path is reinstated (or failed) as soon as its probe ends;
//! when the last probe of the round ended, the failback policy decides
//! with the paths that returned in that round, and a deferred failback is
//! decided again at its deadline.
//!
//! # Time
//! [`Checker`] is a pollable object with no thread and no clock: the caller
//! passes `now_ns` and is told when to poll again, so tests drive it with
//! a clock of their own. [`CheckerThread`] runs one on a thread with an
//! injected clock.
//!
//! # Status
//! [`Checker::path_checks`] (and [`CheckerThread::path_checks`]) give each
//! path's checker state (up, down, pending), its last probe and its
//! counts, for `show topology`-style output.

use crate::{AnyQueue, Device, PathHandle};
use mpio_core::failback::{Decision, Failback, FailbackState, PathView, Round};
use mpio_core::io::Op;
use mpio_core::io::{Buffer, PathError, PathOutcome, BUFFER_ALIGN};
use mpio_core::map::Map;
use mpio_core::message::Message;
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_core::status::{GroupState, PathState};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The shortest probe interval and timeout: a checker must not spin.
pub const MIN_INTERVAL_NS: u64 = 1_000_000;

/// How the checker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckerOptions {
    /// Time from the start of one round to the start of the next
    /// (multipathd's `polling_interval`, 5 s by default); at least
    /// [`MIN_INTERVAL_NS`], a smaller value is raised to it.
    pub interval_ns: u64,
    /// A probe not done within this time fails (multipathd's
    /// `checker_timeout`); at least [`MIN_INTERVAL_NS`], a smaller value is
    /// raised to it.
    pub probe_timeout_ns: u64,
    /// When to switch back to the preferred group.
    pub failback: Failback,
    /// Fail an active path whose probe fails, before I/O finds out.
    pub fail_active_paths: bool,
}

impl Default for CheckerOptions {
    fn default() -> Self {
        CheckerOptions {
            interval_ns: 5_000_000_000,
            probe_timeout_ns: 5_000_000_000,
            failback: Failback::default(),
            fail_active_paths: true,
        }
    }
}

/// A path's health as its checker last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeState {
    /// No probe of the path has ended yet.
    Pending,
    /// The last probe succeeded.
    Up,
    /// The last probe failed or timed out.
    Down,
}

/// The checker's record of one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathCheck {
    /// The last verdict.
    pub state: ProbeState,
    /// A probe is in flight now.
    pub probing: bool,
    /// When the last ended probe started (the caller's clock).
    pub last_probe_ns: Option<u64>,
    /// How the last ended probe ended (`Path(Timeout)` for a timeout).
    pub last_outcome: Option<PathOutcome>,
    /// Probes ended.
    pub probes: u64,
    /// Probes that failed or timed out.
    pub failed_probes: u64,
    /// Times the checker reinstated the path.
    pub reinstated: u64,
    /// A timed-out probe the transport still holds: no new probe starts
    /// until it comes back (see the module docs).
    pub stalled: bool,
}

impl Default for PathCheck {
    fn default() -> Self {
        PathCheck {
            state: ProbeState::Pending,
            probing: false,
            last_probe_ns: None,
            last_outcome: None,
            probes: 0,
            failed_probes: 0,
            reinstated: 0,
            stalled: false,
        }
    }
}

/// One path's probe machinery.
#[derive(Debug)]
struct Probe {
    handle: PathHandle,
    /// Opened at the first probe, dropped after a failed one.
    queue: Option<AnyQueue>,
    /// The probe's buffer while no probe is in flight.
    buf: Option<Buffer>,
    /// Start of the probe in flight.
    started_ns: Option<u64>,
    /// Tag of a timed-out probe the transport kept (the path is stalled).
    stalled_tag: Option<u64>,
    /// Reinstated since the last failback decision.
    returned: bool,
}

/// Probes a map's paths and reinstates them; see the module docs.
#[derive(Debug)]
pub struct Checker {
    map: Arc<Map>,
    options: CheckerOptions,
    probes: Vec<Probe>,
    checks: Vec<PathCheck>,
    failback: FailbackState,
    probe_bytes: u32,
    /// Start of the next round.
    next_round_ns: u64,
    /// A round's probes are (or were, until this poll) in flight.
    round_open: bool,
    /// Tag of the current round's probes.
    round: u64,
    /// Failbacks sent.
    failbacks: u64,
    scratch: Vec<PathCompletion>,
}

impl Checker {
    /// A checker over `device`'s paths; its first round starts at the
    /// first poll.
    pub fn new(device: &Device, mut options: CheckerOptions) -> Self {
        options.interval_ns = options.interval_ns.max(MIN_INTERVAL_NS);
        options.probe_timeout_ns = options.probe_timeout_ns.max(MIN_INTERVAL_NS);
        // One block: at least BUFFER_ALIGN, and a multiple of the largest
        // minimum block size of the paths, so that no path refuses the
        // probe for its size without reaching the storage.
        let min_block = device
            .paths
            .iter()
            .map(PathHandle::min_block)
            .fold(BUFFER_ALIGN as u64, |bytes, block| {
                bytes.div_ceil(u64::from(block)) * u64::from(block)
            });
        let probe_bytes = device.map.size_bytes().min(min_block) as u32;
        Checker {
            map: Arc::clone(&device.map),
            options,
            probes: device
                .paths
                .iter()
                .map(|handle| Probe {
                    handle: handle.clone(),
                    queue: None,
                    buf: Some(Buffer::zeroed(probe_bytes as usize)),
                    started_ns: None,
                    stalled_tag: None,
                    returned: false,
                })
                .collect(),
            checks: vec![PathCheck::default(); device.paths.len()],
            failback: FailbackState::new(options.failback),
            probe_bytes,
            next_round_ns: 0,
            round_open: false,
            round: 0,
            failbacks: 0,
            scratch: Vec::with_capacity(1),
        }
    }

    /// Each path's checker record, in [`Map::paths`] order.
    pub fn path_checks(&self) -> &[PathCheck] {
        &self.checks
    }

    /// The failback policy and its pending deadline.
    pub fn failback(&self) -> &FailbackState {
        &self.failback
    }

    /// `switch_group` messages the checker sent.
    pub fn failbacks(&self) -> u64 {
        self.failbacks
    }

    /// True while probes are in flight (their transports need polling).
    pub fn probing(&self) -> bool {
        self.checks.iter().any(|check| check.probing)
    }

    /// Does what is due at `now_ns`: starts a round, collects probe
    /// results, reinstates and fails paths, fails back. Returns the time it
    /// next has something due; while [`Checker::probing`], poll more often
    /// than that to collect probe results as they come.
    pub fn poll(&mut self, now_ns: u64) -> u64 {
        if !self.round_open && now_ns >= self.next_round_ns {
            self.start_round(now_ns);
        }
        for path in 0..self.probes.len() {
            self.collect(path, now_ns);
        }
        let deadline_passed = self
            .failback
            .deadline_ns()
            .is_some_and(|deadline_ns| now_ns >= deadline_ns);
        if self.round_open && !self.probing() {
            self.round_open = false;
            self.decide_failback(now_ns);
        } else if deadline_passed {
            self.decide_failback(now_ns);
        }
        let mut next_ns = self.next_round_ns;
        if let Some(deadline_ns) = self.failback.deadline_ns() {
            next_ns = next_ns.min(deadline_ns);
        }
        for probe in &self.probes {
            if let Some(started_ns) = probe.started_ns {
                next_ns = next_ns.min(started_ns.saturating_add(self.options.probe_timeout_ns));
            }
        }
        next_ns.max(now_ns)
    }

    fn start_round(&mut self, now_ns: u64) {
        self.round += 1;
        self.round_open = true;
        self.next_round_ns = now_ns.saturating_add(self.options.interval_ns);
        for (probe, check) in self.probes.iter_mut().zip(&mut self.checks) {
            if probe.started_ns.is_some() || probe.stalled_tag.is_some() {
                continue;
            }
            let queue = probe.queue.get_or_insert_with(|| probe.handle.open(1));
            let buf = probe
                .buf
                .take()
                .unwrap_or_else(|| Buffer::zeroed(self.probe_bytes as usize));
            queue.submit(
                PathIo {
                    tag: self.round,
                    op: Op::Read,
                    offset: 0,
                    len: self.probe_bytes,
                    buf,
                    fua: false,
                },
                now_ns,
            );
            probe.started_ns = Some(now_ns);
            check.probing = true;
        }
    }

    /// Collects path `path`'s probe result, or times it out.
    fn collect(&mut self, path: usize, now_ns: u64) {
        self.collect_stalled(path, now_ns);
        let probe = &mut self.probes[path];
        let (Some(started_ns), Some(queue)) = (probe.started_ns, probe.queue.as_mut()) else {
            return;
        };
        queue.poll(now_ns, &mut self.scratch);
        let mut outcome = None;
        for completion in self.scratch.drain(..) {
            if completion.tag == self.round {
                probe.buf = Some(completion.buf);
                outcome = Some(completion.outcome);
            }
        }
        if outcome.is_none() && now_ns.saturating_sub(started_ns) >= self.options.probe_timeout_ns {
            match queue.abort(self.round) {
                Some(io) => probe.buf = Some(io.buf),
                None => {
                    probe.stalled_tag = Some(self.round);
                    self.checks[path].stalled = true;
                }
            }
            outcome = Some(PathOutcome::Path(PathError::Timeout));
        }
        if let Some(outcome) = outcome {
            self.finish(path, started_ns, outcome);
        }
    }

    /// Polls a stalled path's queue for its timed-out probe; once it is
    /// back, drops the queue and ends the stall.
    fn collect_stalled(&mut self, path: usize, now_ns: u64) {
        let probe = &mut self.probes[path];
        let Some(tag) = probe.stalled_tag else {
            return;
        };
        if let Some(queue) = probe.queue.as_mut() {
            queue.poll(now_ns, &mut self.scratch);
            for completion in self.scratch.drain(..) {
                if completion.tag == tag {
                    probe.buf = Some(completion.buf);
                    probe.stalled_tag = None;
                }
            }
        } else {
            probe.stalled_tag = None;
        }
        if probe.stalled_tag.is_none() {
            probe.queue = None;
            self.checks[path].stalled = false;
        }
    }

    /// Records how path `path`'s probe ended and acts on it.
    fn finish(&mut self, path: usize, started_ns: u64, outcome: PathOutcome) {
        let probe = &mut self.probes[path];
        let check = &mut self.checks[path];
        probe.started_ns = None;
        check.probing = false;
        check.probes += 1;
        check.last_probe_ns = Some(started_ns);
        check.last_outcome = Some(outcome);
        match outcome {
            PathOutcome::Ok | PathOutcome::Target(_) => {
                check.state = ProbeState::Up;
                if self.map.reinstate_path(path) {
                    probe.returned = true;
                    check.reinstated += 1;
                }
            }
            PathOutcome::Path(error) => {
                check.state = ProbeState::Down;
                check.failed_probes += 1;
                // A fresh queue (a fresh connection) for the next probe,
                // unless it still holds a timed-out probe (stalled).
                if probe.stalled_tag.is_none() {
                    probe.queue = None;
                }
                if self.options.fail_active_paths {
                    self.map.fail_path(path, error);
                }
            }
        }
    }

    /// Runs the failback policy on the map as it is now.
    fn decide_failback(&mut self, now_ns: u64) {
        let status = self.map.status();
        let disabled: Vec<bool> = status
            .groups
            .iter()
            .map(|group| group.state == GroupState::Disabled)
            .collect();
        let paths: Vec<PathView> = status
            .groups
            .iter()
            .enumerate()
            .flat_map(|(group, group_status)| {
                group_status.paths.iter().map(move |path| (group, path))
            })
            .zip(&mut self.probes)
            .map(|((group, path), probe)| PathView {
                group,
                usable: path.state == PathState::Active && path.access.carries_io(),
                returned: std::mem::take(&mut probe.returned),
            })
            .collect();
        let round = Round {
            now_ns,
            current_group: status.current_group.map(|group| group - 1),
            disabled: &disabled,
            paths: &paths,
        };
        if let Decision::SwitchGroup(group) = self.failback.decide(&round) {
            // The group index came from the map's own status: it exists.
            if self
                .map
                .message(&Message::SwitchGroup(group as u32 + 1))
                .is_ok()
            {
                self.failbacks += 1;
            }
        }
    }
}

/// A clock for [`CheckerThread`]: monotonic ns.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// What the checker thread shares with its owner.
#[derive(Debug, Default)]
struct Shared {
    stop: Mutex<bool>,
    wake: Condvar,
    checks: Mutex<Vec<PathCheck>>,
}

/// A [`Checker`] running on its own thread until stopped or dropped.
#[derive(Debug)]
pub struct CheckerThread {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl CheckerThread {
    /// Runs `checker` on a new thread, reading time from `clock`, and
    /// polling probes in flight every `probe_poll` (transports complete
    /// only when polled).
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub fn spawn(
        mut checker: Checker,
        clock: Clock,
        probe_poll: Duration,
    ) -> std::io::Result<CheckerThread> {
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("mpio-checker".into())
            .spawn(move || {
                let shared = thread_shared;
                let mut stop = lock(&shared.stop);
                while !*stop {
                    drop(stop);
                    let now_ns = clock();
                    let next_ns = checker.poll(now_ns);
                    *lock(&shared.checks) = checker.path_checks().to_vec();
                    let mut wait = Duration::from_nanos(next_ns.saturating_sub(now_ns));
                    if checker.probing() {
                        wait = wait.min(probe_poll);
                    }
                    stop = lock(&shared.stop);
                    if !*stop {
                        stop = shared
                            .wake
                            .wait_timeout(stop, wait)
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .0;
                    }
                }
            })?;
        Ok(CheckerThread {
            shared,
            handle: Some(handle),
        })
    }

    /// Each path's checker record as of the thread's last poll.
    pub fn path_checks(&self) -> Vec<PathCheck> {
        lock(&self.shared.checks).clone()
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        *lock(&self.shared.stop) = true;
        self.shared.wake.notify_all();
        if let Some(handle) = self.handle.take() {
            // A panic in the checker thread has already been reported.
            let _ = handle.join();
        }
    }
}

impl Drop for CheckerThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
