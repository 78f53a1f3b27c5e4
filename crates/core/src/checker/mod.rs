//! The path checker's decisions: probes every path of a map on an
//! interval, reinstates the failed paths whose probe succeeds, fails the
//! active paths whose probe fails, and fails back to the preferred group
//! under the map's failback policy ([`crate::failback`]), as multipathd's
//! checker loop does. Pure logic over an injected clock and injected
//! probes: the transport layer carries the probes ([`ProbePath`]) and
//! runs the checkers (one thread for every map, in the daemon), and the
//! simulator drives this same checker over its simulated paths.
//!
//! # Probes
//! A probe is a one-block read at offset 0 (the block: 4 KiB, or the
//! largest minimum block size of the map's paths if larger, so that no
//! path refuses it for its size without reaching the storage; at most the
//! map's size) through the path's own transport, on a queue of depth 1
//! that the checker opens from the path ([`ProbePath::open_probe`]) and
//! keeps between probes. A probe that ends in a path error marks the path
//! down and drops the probe queue, so the next probe opens a fresh one (a
//! new connection, for transports that have one).
//!
//! A probe that does not end within the probe timeout marks the path down
//! too. If the transport hands the probe back ([`PathQueue::abort`]: it
//! never reached the storage), the queue is dropped as above. If it cannot
//! (the kernel holds a file read, an NBD connection is being severed), the
//! path is *stalled*, as multipathd's async checker keeps a pending check:
//! the queue is kept and polled, no new probe of the path starts until the
//! old one comes back, and then the queue is dropped and the next round
//! probes afresh. A hung path thus costs one probe buffer and one queue,
//! never a wait in the checker or a queue leaked every round.
//!
//! A target error counts as up: the storage answered through this path,
//! and failing every path over an error every path would give helps
//! nobody. A busy answer ([`PathOutcome::Busy`]: a shortage on the route)
//! says nothing of the path's health: the verdict stands until a probe
//! gets an answer. A path failed by a `fail_path` message is reinstated
//! by its next good probe, as multipathd does.
//!
//! # Marginal paths
//! With [`CheckerOptions::marginal`], each path has a
//! `MarginalTracker` (the rules are in [`crate::marginal`]). The
//! checker tells it of the path's failures by path error (its own failed
//! probes, and the I/O failures it reads from the map's counts,
//! [`Map::path_transitions`], at each poll), of every probe result, and of
//! `reinstate_path` messages (the map counts those too); a good probe
//! reinstates a marginal path only once the tracker lets it. A path whose
//! reads keep needing hedges (sent down another path past its hedge delay,
//! `crate::stall`) counts too: a poll that finds the path's hedged
//! reads grown since the last by at least `observe::HEDGED_SHARE_PER_MILLE` (10 %) of
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
//! The checker runs over a [`MapSource`] (a [`MapSlot`] of the paths'
//! handles, in the daemon). At each poll, if a reload installed another
//! map (the source's epoch moved), it probes the new map's paths: a path
//! word the new map still has keeps its record, its marginal tracker and
//! its probe (one in flight is collected, and its result acts on the new
//! map); a new word starts fresh. A path the reload removed is dropped,
//! and so is its probe, unless the transport holds it: then, as for a
//! stalled path, its queue is kept and polled until the probe comes back.
//! [`Checker::new`] runs over a slot of its own that never reloads. A word
//! several paths of a map share is matched in order: the first such path
//! of the new map takes the first one's record.
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
//! passes `now_ns` and is told when to poll again, so tests and the
//! simulator drive it with a clock of their own.
//!
//! # Determinism
//! Given the same source, probe results and `now_ns` values, a checker
//! makes the same calls in the same order: no hash-map iteration.
//!
//! # Status
//! [`Checker::path_checks`] gives each path's checker state (up, down,
//! pending), its last probe, its counts and its marginal state;
//! [`Checker::named_path_checks`] gives each with the path's word, for
//! `show topology`-style output.

use crate::failback::{Decision, Failback, FailbackState, PathView, Round};
use crate::io::{Buffer, PathError, PathOutcome, BUFFER_ALIGN};
use crate::map::{Map, PathTransitions};
use crate::marginal::{MarginalPolicy, MarginalTracker};
use crate::queue::{PathCompletion, PathIo, PathQueue};
use crate::reload::MapSlot;
use crate::status::{GroupState, PathState};
use crate::sync::Arc;
use probe::Probe;
use std::collections::{BTreeMap, VecDeque};

mod observe;
mod probe;

/// A path as the checker probes it: the transport's handle to it.
pub trait ProbePath: Clone + std::fmt::Debug {
    /// The transport's queue to the path.
    type Queue: PathQueue + std::fmt::Debug;

    /// Opens a queue of depth 1 to the path, for probes. It must not wait
    /// on the storage: a connection it needs is made in the background,
    /// and counts against the probe's timeout.
    fn open_probe(&self) -> Self::Queue;

    /// The smallest I/O the path takes: every offset and length must be a
    /// multiple of it (1 where the transport has no such limit).
    fn min_block(&self) -> u32;
}

/// Where the checker finds the map to check and its paths, across
/// reloads.
pub trait MapSource: std::fmt::Debug {
    /// The paths' handles.
    type Path: ProbePath;

    /// The epoch of the map [`MapSource::current`] gives: it moves exactly
    /// when the map does. Read at every poll, so cheap.
    fn epoch(&self) -> u64;

    /// The map now, its paths in [`Map::paths`] order, and its epoch, read
    /// together.
    fn current(&self) -> (Arc<Map>, Vec<Self::Path>, u64);
}

impl<P: ProbePath> MapSource for Arc<MapSlot<Vec<P>>> {
    type Path = P;

    fn epoch(&self) -> u64 {
        MapSlot::epoch(self)
    }

    fn current(&self) -> (Arc<Map>, Vec<P>, u64) {
        let (map, paths, epoch) = MapSlot::current(self);
        (map, (*paths).clone(), epoch)
    }
}

/// The shortest probe interval and timeout: a checker must not spin.
pub(crate) const MIN_INTERVAL_NS: u64 = 1_000_000;

/// How the checker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckerOptions {
    /// Time from the start of one round to the start of the next
    /// (multipathd's `polling_interval`, 5 s by default); at least
    /// `MIN_INTERVAL_NS`, a smaller value is raised to it.
    pub interval_ns: u64,
    /// A probe not done within this time fails (multipathd's
    /// `checker_timeout`); at least `MIN_INTERVAL_NS`, a smaller value is
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

/// What the checker keeps of one path of the map, besides its record.
#[derive(Debug)]
struct Watched<P: ProbePath> {
    word: String,
    probe: Probe<P>,
    marginal: Option<MarginalTracker>,
    /// The map's transition counts as last read.
    seen: PathTransitions,
    /// The path's hedged reads (`PathLoad::hedged_reads`) and I/O sent
    /// to it, as last read.
    hedged_seen: (u64, u64),
}

/// What the checker knew of the paths of one word before a reload, in
/// the old map's order.
type Known<P> = VecDeque<(Watched<P>, PathCheck)>;

/// Probes a map's paths and reinstates them; see the module docs.
#[derive(Debug)]
pub struct Checker<S: MapSource> {
    source: S,
    /// The source's epoch `map` was read at.
    epoch: u64,
    map: Arc<Map>,
    options: CheckerOptions,
    /// One per path of `map`, in [`Map::paths`] order, as `checks`.
    paths: Vec<Watched<S::Path>>,
    checks: Vec<PathCheck>,
    /// Probes of paths a reload removed that their transports still hold.
    retired: Vec<Probe<S::Path>>,
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

impl<P: ProbePath> Checker<Arc<MapSlot<Vec<P>>>> {
    /// A checker over `map` and its `paths` (in [`Map::paths`] order), a
    /// map that is never reloaded; its first round starts at the first
    /// poll.
    pub fn new(map: Arc<Map>, paths: Vec<P>, options: CheckerOptions) -> Self {
        Checker::on_slot(Arc::new(MapSlot::new(map, Arc::new(paths))), options)
    }
}

impl<S: MapSource> Checker<S> {
    /// A checker over whatever map `source` serves, following its reloads
    /// (see the module docs); its first round starts at the first poll.
    pub fn on_slot(source: S, mut options: CheckerOptions) -> Self {
        options.interval_ns = options.interval_ns.max(MIN_INTERVAL_NS);
        options.probe_timeout_ns = options.probe_timeout_ns.max(MIN_INTERVAL_NS);
        let (map, paths, epoch) = source.current();
        let mut checker = Checker {
            source,
            epoch,
            map: Arc::clone(&map),
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
        checker.follow(map, &paths, epoch);
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

    /// What the checker runs over.
    pub fn source(&self) -> &S {
        &self.source
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
        if self.source.epoch() != self.epoch {
            let (map, paths, epoch) = self.source.current();
            self.follow(map, &paths, epoch);
        }
        if self.options.marginal.is_some() {
            observe::observe(&self.map, &mut self.paths, &mut self.checks, now_ns);
        }
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

    /// Takes `map` (read at `epoch`, with its `paths`): keeps what it
    /// knows of every path word the map still has, starts afresh for new
    /// words, retires the rest.
    fn follow(&mut self, map: Arc<Map>, paths: &[S::Path], epoch: u64) {
        let transitions = map.path_transitions();
        // Ordered by word, so that retiring is deterministic.
        let mut known: BTreeMap<String, Known<S::Path>> = BTreeMap::new();
        for (path, check) in self.paths.drain(..).zip(self.checks.drain(..)) {
            known
                .entry(path.word.clone())
                .or_default()
                .push_back((path, check));
        }
        let mut added = false;
        for (index, handle) in paths.iter().enumerate() {
            let word = map.path_name(index);
            let (path, check) = match known.get_mut(word).and_then(VecDeque::pop_front) {
                Some((mut path, check)) => {
                    path.probe.path = handle.clone();
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
                            hedged_seen: observe::hedged_and_sent(&map, index),
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
        let min_block = paths
            .iter()
            .map(ProbePath::min_block)
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

    fn start_round(&mut self, now_ns: u64) {
        self.round += 1;
        self.round_open = true;
        self.next_round_ns = now_ns.saturating_add(self.options.interval_ns);
        for (path, check) in self.paths.iter_mut().zip(&mut self.checks) {
            let probe = &mut path.probe;
            if probe.started_ns.is_some() || probe.stalled_tag.is_some() {
                continue;
            }
            let queue = probe.queue.get_or_insert_with(|| probe.path.open_probe());
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
                        observe::path_failed(&self.map, &watched.word, tracker, now_ns);
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
