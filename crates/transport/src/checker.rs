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
//! # Marginal paths
//! With [`CheckerOptions::marginal`], each path has a
//! [`MarginalTracker`] (the rules are in [`mpio_core::marginal`]). The
//! checker tells it of the path's failures by path error (its own failed
//! probes, and the I/O failures it reads from the map's counts,
//! [`Map::path_transitions`], at each poll), of every probe result, and of
//! `reinstate_path` messages (the map counts those too); a good probe
//! reinstates a marginal path only once the tracker lets it. A path whose
//! reads keep needing hedges (sent down another path past its hedge delay,
//! [`mpio_core::stall`]) counts too: a poll that finds the path's hedged
//! reads grown since the last by at least [`HEDGED_SHARE_PER_MILLE`] (10 %) of
//! the I/O sent to it meanwhile is one failure for its tracker, however
//! many reads it hedged (one stall is one event; a read or two hedged on
//! a loaded machine is noise, not a stall).
//! [`PathCheck::marginal`] shows the state and when the path may return.
//! Failures the map counted between two polls are dated at the poll that
//! reads them; if both failures and a `reinstate_path` message came
//! between two polls, the message is taken to have come first when the
//! path is failed at the poll, and last otherwise.
//!
//! # Reloads
//! The checker runs over a [`DeviceSlot`] ([`Checker::on_slot`]). At each
//! poll, if a reload installed another map, it probes the new map's paths:
//! a path word the new map still has keeps its record, its marginal
//! tracker and its probe (one in flight is collected, and its result acts
//! on the new map); a new word starts fresh. A path the reload removed is
//! dropped, and so is its probe, unless the transport holds it: then, as
//! for a stalled path, its queue is kept and polled until the probe comes
//! back. [`Checker::new`] runs over a slot of its own that never reloads.
//! A word several paths of a map share is matched in order: the first
//! such path of the new map takes the first one's record.
//!
//! # Events
//! Through `tracing` (the map logs failures, reinstatements and group
//! switches itself, failback included): `probe failed` (warn: map, path,
//! error) when a path's probes start failing, not at every failed probe;
//! `path marginal` (warn: map, path, failures, window_ns) and
//! `path recovered` (info: map, path, cause `probes` or `message`).
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
//! a clock of their own. A [`CheckerPool`] runs the checkers of every map
//! on one thread with an injected clock, each polled when it said it next
//! has something due (`checker/pool.rs`).
//!
//! # Status
//! [`Checker::path_checks`] gives each path's checker state (up, down,
//! pending), its last probe, its counts and its marginal state;
//! [`Checker::named_path_checks`] and [`PooledChecker::path_checks`] give
//! each with the path's word, for `show topology`-style output.

use crate::{AnyQueue, Device, DeviceSlot, PathHandle};
use mpio_core::failback::{Decision, Failback, FailbackState, PathView, Round};
use mpio_core::io::{Buffer, PathError, PathOutcome, BUFFER_ALIGN};
use mpio_core::map::{Map, PathTransitions};
use mpio_core::marginal::{MarginalPolicy, MarginalTracker};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_core::status::{GroupState, PathState};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

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
    /// Hold out paths that fail again and again; `None`: off.
    pub marginal: Option<MarginalPolicy>,
}

impl Default for CheckerOptions {
    fn default() -> Self {
        CheckerOptions {
            interval_ns: 5_000_000_000,
            probe_timeout_ns: 5_000_000_000,
            failback: Failback::default(),
            fail_active_paths: true,
            marginal: None,
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
    /// Held out as marginal: good probes do not reinstate it yet.
    pub marginal: bool,
    /// While marginal and healthy: the earliest time a good probe may
    /// reinstate it, if every probe until then is good (the caller's
    /// clock). `None` while it waits for its first good probe.
    pub returns_at_ns: Option<u64>,
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
            marginal: false,
            returns_at_ns: None,
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
    /// Tag of the probe in flight.
    tag: u64,
    /// Tag of a timed-out probe the transport kept (the path is stalled).
    stalled_tag: Option<u64>,
    /// Reinstated since the last failback decision.
    returned: bool,
}

impl Probe {
    fn new(handle: &PathHandle) -> Self {
        Probe {
            handle: handle.clone(),
            queue: None,
            buf: None,
            started_ns: None,
            tag: 0,
            stalled_tag: None,
            returned: false,
        }
    }

    /// Gives up the probe of a path a reload removed. Returns the probe if
    /// its transport still holds a probe: it must be polled until that
    /// comes back (a stall), never dropped with it.
    fn retire(mut self) -> Option<Probe> {
        if self.started_ns.take().is_some() {
            let tag = self.tag;
            let handed_back = self.queue.as_mut().and_then(|queue| queue.abort(tag));
            if handed_back.is_none() && self.queue.is_some() {
                self.stalled_tag = Some(tag);
            }
        }
        (self.stalled_tag.is_some() && self.queue.is_some()).then_some(self)
    }

    /// Polls a stalled probe's queue; true once the probe is back (the
    /// queue is then dropped).
    fn poll_stalled(&mut self, now_ns: u64, scratch: &mut Vec<PathCompletion>) -> bool {
        let Some(tag) = self.stalled_tag else {
            return true;
        };
        if let Some(queue) = self.queue.as_mut() {
            queue.poll(now_ns, scratch);
            for completion in scratch.drain(..) {
                if completion.tag == tag {
                    self.buf = Some(completion.buf);
                    self.stalled_tag = None;
                }
            }
        } else {
            self.stalled_tag = None;
        }
        if self.stalled_tag.is_none() {
            self.queue = None;
            return true;
        }
        false
    }
}

/// What the checker keeps of one path of the map, besides its record.
#[derive(Debug)]
struct Watched {
    word: String,
    probe: Probe,
    marginal: Option<MarginalTracker>,
    /// The map's transition counts as last read.
    seen: PathTransitions,
    /// The path's hedged reads (`PathLoad::hedged_reads`) and I/O sent
    /// to it, as last read.
    hedged_seen: (u64, u64),
}

/// Probes a map's paths and reinstates them; see the module docs.
#[derive(Debug)]
pub struct Checker {
    slot: Arc<DeviceSlot>,
    /// The slot's epoch `map` was read at.
    epoch: u64,
    map: Arc<Map>,
    options: CheckerOptions,
    /// One per path of `map`, in [`Map::paths`] order, as `checks`.
    paths: Vec<Watched>,
    checks: Vec<PathCheck>,
    /// Probes of paths a reload removed that their transports still hold.
    retired: Vec<Probe>,
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
    /// A checker over `device`'s paths (a map that is never reloaded); its
    /// first round starts at the first poll.
    pub fn new(device: &Device, options: CheckerOptions) -> Self {
        let slot = DeviceSlot::new(Arc::clone(&device.map), Arc::new(device.paths.clone()));
        Checker::on_slot(Arc::new(slot), options)
    }

    /// A checker over whatever map `slot` serves, following its reloads
    /// (see the module docs); its first round starts at the first poll.
    pub fn on_slot(slot: Arc<DeviceSlot>, mut options: CheckerOptions) -> Self {
        options.interval_ns = options.interval_ns.max(MIN_INTERVAL_NS);
        options.probe_timeout_ns = options.probe_timeout_ns.max(MIN_INTERVAL_NS);
        let map = slot.map();
        let mut checker = Checker {
            epoch: slot.epoch(),
            slot,
            map,
            options,
            paths: Vec::new(),
            checks: Vec::new(),
            retired: Vec::new(),
            failback: FailbackState::new(options.failback),
            probe_bytes: 0,
            next_round_ns: 0,
            round_open: false,
            round: 0,
            failbacks: 0,
            scratch: Vec::with_capacity(1),
        };
        checker.follow();
        checker
    }

    /// Each path's checker record, in [`Map::paths`] order of the map
    /// the checker last polled.
    pub fn path_checks(&self) -> &[PathCheck] {
        &self.checks
    }

    /// Each path's word and checker record, in [`Map::paths`] order of the
    /// map the checker last polled.
    pub fn named_path_checks(&self) -> Vec<(String, PathCheck)> {
        self.paths
            .iter()
            .zip(&self.checks)
            .map(|(path, check)| (path.word.clone(), *check))
            .collect()
    }

    /// The map the checker last polled.
    pub fn map(&self) -> &Arc<Map> {
        &self.map
    }

    /// The failback policy and its pending deadline.
    pub fn failback(&self) -> &FailbackState {
        &self.failback
    }

    /// `switch_group` messages the checker sent.
    pub fn failbacks(&self) -> u64 {
        self.failbacks
    }

    /// True while probes are in flight (their transports need polling),
    /// or probes of removed paths are still held by their transports.
    pub fn probing(&self) -> bool {
        self.checks.iter().any(|check| check.probing) || !self.retired.is_empty()
    }

    /// Does what is due at `now_ns`: follows a reload, starts a round,
    /// collects probe results, reinstates and fails paths, fails back.
    /// Returns the time it next has something due; while
    /// [`Checker::probing`], poll more often than that to collect probe
    /// results as they come.
    pub fn poll(&mut self, now_ns: u64) -> u64 {
        if self.slot.epoch() != self.epoch {
            self.follow();
        }
        self.observe(now_ns);
        if !self.round_open && now_ns >= self.next_round_ns {
            self.start_round(now_ns);
        }
        for path in 0..self.paths.len() {
            self.collect(path, now_ns);
        }
        let scratch = &mut self.scratch;
        self.retired
            .retain_mut(|probe| !probe.poll_stalled(now_ns, scratch));
        let deadline_passed = self
            .failback
            .deadline_ns()
            .is_some_and(|deadline_ns| now_ns >= deadline_ns);
        let round_probing = self.checks.iter().any(|check| check.probing);
        if self.round_open && !round_probing {
            self.round_open = false;
            self.decide_failback(now_ns);
        } else if deadline_passed {
            self.decide_failback(now_ns);
        }
        let mut next_ns = self.next_round_ns;
        if let Some(deadline_ns) = self.failback.deadline_ns() {
            next_ns = next_ns.min(deadline_ns);
        }
        for path in &self.paths {
            if let Some(started_ns) = path.probe.started_ns {
                next_ns = next_ns.min(started_ns.saturating_add(self.options.probe_timeout_ns));
            }
        }
        next_ns.max(now_ns)
    }

    /// Takes the slot's map: keeps what it knows of every path word the map
    /// still has, starts afresh for new words, retires the rest.
    fn follow(&mut self) {
        let (map, handles, epoch) = self.slot.current();
        let transitions = map.path_transitions();
        let mut known: HashMap<String, VecDeque<(Watched, PathCheck)>> = HashMap::new();
        for (path, check) in self.paths.drain(..).zip(self.checks.drain(..)) {
            known
                .entry(path.word.clone())
                .or_default()
                .push_back((path, check));
        }
        let mut added = false;
        for (index, handle) in handles.iter().enumerate() {
            let word = map.path_name(index);
            let (path, check) = match known.get_mut(word).and_then(VecDeque::pop_front) {
                Some((mut path, check)) => {
                    path.probe.handle = handle.clone();
                    (path, check)
                }
                None => {
                    added = true;
                    (
                        Watched {
                            word: word.to_string(),
                            probe: Probe::new(handle),
                            marginal: self.options.marginal.map(MarginalTracker::new),
                            seen: transitions[index],
                            hedged_seen: hedged_and_sent(&map, index),
                        },
                        PathCheck::default(),
                    )
                }
            };
            self.paths.push(path);
            self.checks.push(check);
        }
        for (path, _) in known.into_values().flatten() {
            self.retired.extend(path.probe.retire());
        }
        // One block: at least BUFFER_ALIGN, and a multiple of the largest
        // minimum block size of the paths, so that no path refuses the
        // probe for its size without reaching the storage.
        let min_block = handles
            .iter()
            .map(PathHandle::min_block)
            .fold(BUFFER_ALIGN as u64, |bytes, block| {
                bytes.div_ceil(u64::from(block)) * u64::from(block)
            });
        self.probe_bytes = map.size_bytes().min(min_block) as u32;
        self.map = map;
        self.epoch = epoch;
        // A path the reload added is probed at once (a round starts at this
        // poll), not an interval later; a round in flight ends first.
        if added && !self.round_open {
            self.next_round_ns = 0;
        }
    }

    /// Reads the map's failures by path error and reinstatements by
    /// message since the last poll, for the marginal trackers.
    fn observe(&mut self, now_ns: u64) {
        if self.options.marginal.is_none() {
            return;
        }
        let transitions = self.map.path_transitions();
        for (index, ((path, check), now)) in self
            .paths
            .iter_mut()
            .zip(&mut self.checks)
            .zip(transitions)
            .enumerate()
        {
            let Some(tracker) = path.marginal.as_mut() else {
                continue;
            };
            let (hedged, sent) = hedged_and_sent(&self.map, index);
            let (hedged_before, sent_before) = path.hedged_seen;
            path.hedged_seen = (hedged, sent);
            let new_hedged = hedged.saturating_sub(hedged_before);
            let new_sent = sent.saturating_sub(sent_before);
            let stalled = u64::from(
                new_hedged > 0
                    && new_hedged.saturating_mul(1000)
                        >= new_sent.saturating_mul(HEDGED_SHARE_PER_MILLE),
            );
            let failures = now
                .failed_by_error
                .saturating_sub(path.seen.failed_by_error)
                .saturating_add(stalled)
                .min(u64::from(tracker.policy().failures));
            let messages = now.reinstated_by_message != path.seen.reinstated_by_message;
            path.seen = now;
            // The message first if the path is failed now (a failure came
            // after it), last otherwise.
            if messages && now.failed {
                admin_reinstated(&self.map, &path.word, tracker);
            }
            for _ in 0..failures {
                path_failed(&self.map, &path.word, tracker, now_ns);
            }
            if messages && !now.failed {
                admin_reinstated(&self.map, &path.word, tracker);
            }
            check.marginal = tracker.is_marginal();
            check.returns_at_ns = tracker.returns_at_ns();
        }
    }

    fn start_round(&mut self, now_ns: u64) {
        self.round += 1;
        self.round_open = true;
        self.next_round_ns = now_ns.saturating_add(self.options.interval_ns);
        for (path, check) in self.paths.iter_mut().zip(&mut self.checks) {
            let probe = &mut path.probe;
            if probe.started_ns.is_some() || probe.stalled_tag.is_some() {
                continue;
            }
            let queue = probe
                .queue
                .get_or_insert_with(|| probe.handle.open(1, None));
            // A reload may have changed the probe's size.
            let buf = probe
                .buf
                .take()
                .filter(|buf| buf.len() == self.probe_bytes as usize)
                .unwrap_or_else(|| Buffer::zeroed(self.probe_bytes as usize));
            // The buffer is `probe_bytes` long (taken so, or made so).
            queue.submit(PathIo::read(self.round, 0, buf), now_ns);
            probe.started_ns = Some(now_ns);
            probe.tag = self.round;
            check.probing = true;
        }
    }

    /// Collects path `path`'s probe result, or times it out.
    fn collect(&mut self, path: usize, now_ns: u64) {
        let probe = &mut self.paths[path].probe;
        if probe.stalled_tag.is_some() && probe.poll_stalled(now_ns, &mut self.scratch) {
            self.checks[path].stalled = false;
        }
        let (Some(started_ns), Some(queue)) = (probe.started_ns, probe.queue.as_mut()) else {
            return;
        };
        queue.poll(now_ns, &mut self.scratch);
        let mut outcome = None;
        for completion in self.scratch.drain(..) {
            if completion.tag == probe.tag {
                probe.buf = Some(completion.buf);
                outcome = Some(completion.outcome);
            }
        }
        if outcome.is_none() && now_ns.saturating_sub(started_ns) >= self.options.probe_timeout_ns {
            match queue.abort(probe.tag) {
                Some(io) => probe.buf = Some(io.buf),
                None => {
                    probe.stalled_tag = Some(probe.tag);
                    self.checks[path].stalled = true;
                }
            }
            outcome = Some(PathOutcome::Path(PathError::Timeout));
        }
        if let Some(outcome) = outcome {
            self.finish(path, started_ns, outcome, now_ns);
        }
    }

    /// Records how path `path`'s probe ended and acts on it.
    fn finish(&mut self, path: usize, started_ns: u64, outcome: PathOutcome, now_ns: u64) {
        let watched = &mut self.paths[path];
        let check = &mut self.checks[path];
        let probe = &mut watched.probe;
        probe.started_ns = None;
        check.probing = false;
        check.probes += 1;
        check.last_probe_ns = Some(started_ns);
        check.last_outcome = Some(outcome);
        if outcome == PathOutcome::Busy {
            // A shortage on the route says nothing of its health: the
            // verdict stands until a probe gets an answer.
            return;
        }
        let healthy = !matches!(outcome, PathOutcome::Path(_));
        if let Some(tracker) = watched.marginal.as_mut() {
            tracker.probe_ended(healthy, now_ns);
        }
        match outcome {
            PathOutcome::Busy => {}
            PathOutcome::Ok | PathOutcome::Target(_) => {
                check.state = ProbeState::Up;
                let may_reinstate = watched
                    .marginal
                    .as_ref()
                    .is_none_or(|tracker| tracker.may_reinstate(now_ns));
                if may_reinstate && self.map.reinstate_path(path) {
                    probe.returned = true;
                    check.reinstated += 1;
                    if let Some(tracker) = watched.marginal.as_mut() {
                        if tracker.reinstated(now_ns) {
                            tracing::info!(
                                map = self.map.name(),
                                path = watched.word,
                                cause = "probes",
                                "path recovered"
                            );
                        }
                    }
                }
            }
            PathOutcome::Path(error) => {
                if check.state != ProbeState::Down {
                    tracing::warn!(
                        map = self.map.name(),
                        path = watched.word,
                        error = %error,
                        "probe failed"
                    );
                }
                check.state = ProbeState::Down;
                check.failed_probes += 1;
                // A fresh queue (a fresh connection) for the next probe,
                // unless it still holds a timed-out probe (stalled).
                if probe.stalled_tag.is_none() {
                    probe.queue = None;
                }
                if self.options.fail_active_paths && self.map.fail_path(path, error) {
                    // Counted here, at its time, not at the next poll.
                    watched.seen.failed_by_error += 1;
                    if let Some(tracker) = watched.marginal.as_mut() {
                        path_failed(&self.map, &watched.word, tracker, now_ns);
                    }
                }
            }
        }
        if let Some(tracker) = &watched.marginal {
            check.marginal = tracker.is_marginal();
            check.returns_at_ns = tracker.returns_at_ns();
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
            .zip(&mut self.paths)
            .map(|((group, path), watched)| PathView {
                group,
                usable: path.state == PathState::Active && path.access.carries_io(),
                returned: std::mem::take(&mut watched.probe.returned),
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
            if self.map.fail_back(group as u32 + 1).is_ok() {
                self.failbacks += 1;
            }
        }
    }
}

/// The share (per mille) of the I/O sent to a path between two polls that
/// must have been hedged for the poll to count a failure toward marginal.
pub const HEDGED_SHARE_PER_MILLE: u64 = 100;

/// Path `index`'s hedged reads and dispatched I/O, summed over the map's
/// queues.
fn hedged_and_sent(map: &Map, index: usize) -> (u64, u64) {
    let load = map.path_load(index);
    (load.hedged_reads(), load.dispatched())
}

/// Tells `tracker` of a failure of path `word`, logging if that made it
/// marginal.
fn path_failed(map: &Map, word: &str, tracker: &mut MarginalTracker, now_ns: u64) {
    if tracker.path_failed(now_ns) {
        let policy = tracker.policy();
        tracing::warn!(
            map = map.name(),
            path = word,
            failures = policy.failures,
            window_ns = policy.window_ns,
            "path marginal"
        );
    }
}

/// Tells `tracker` an admin reinstated path `word`, logging if it was
/// marginal.
fn admin_reinstated(map: &Map, word: &str, tracker: &mut MarginalTracker) {
    if tracker.admin_reinstated() {
        tracing::info!(
            map = map.name(),
            path = word,
            cause = "message",
            "path recovered"
        );
    }
}

/// A clock for [`CheckerPool`]: monotonic ns.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

mod pool;
pub use pool::{CheckerPool, PooledChecker};

#[cfg(test)]
mod tests;
