//! Stalled paths: one queue's view of which paths hold I/O and have made
//! no progress for far longer than they usually take, so that no selector
//! sends them more.
//!
//! A hung path (a paused server, a stalled controller) is failed only by
//! the I/O timeout, seconds away. Until then every selector would keep
//! feeding it — round-robin its share, queue-length whenever its count
//! looks low — and one hung path gathers the whole queue depth while the
//! healthy ones idle. So each queue notes, per path, the last *progress*:
//! the last completion of an attempt there, or the moment the path went
//! from idle to busy. At every poll it checks (one compare per path) each
//! path with attempts in flight: one whose last progress is older than
//! its limit — [`STALL_MULTIPLE`] times that path's p99 latency as this
//! queue learnt it ([`PathLoad`]'s histogram, re-read every
//! [`LIMIT_REFRESH_NS`]), at least [`STALL_FLOOR_NS`], at most half the
//! I/O timeout — is *stalled*: the queue routes with a copy of the
//! route's candidates without it. The path is not failed (the timeout
//! decides that) and its attempts go on; it is taken back at its next
//! completion. If every candidate of the route is stalled, the route is
//! used whole: holding I/O back would not make a path answer sooner.
//!
//! A path that completes some attempts while one is lost is not stalled:
//! the I/O timeout finds that one.
//!
//! # Fast read failover
//! A read that waits on a path longer than that path's hedge delay
//! ([`HEDGE_MULTIPLE`] times its p99, at least the
//! floor, at most half the I/O timeout), on a path that answered nothing
//! for as long, is taken back with
//! `PathQueue::abandon` (a read has nothing to fence) and sent down
//! another usable path, and the path counts as stalled until it next
//! answers or [`HOLD_OUT_NS`] passed (with no I/O it could not answer).
//! This is a hedge that cancels its first attempt instead of racing it:
//! the read needs no second buffer and the queue no books for a losing
//! attempt (no allocation, nothing per I/O); what it gives up is a first
//! answer that comes just after the delay.
//!
//! A read is taken back at most once; its second attempt waits for its
//! answer or the I/O timeout. The abandoned attempt still costs its
//! server the work, so when every path is slow at once a second attempt
//! queues behind it: were it taken back again, each round would add to
//! the servers' backlog, no read would be answered, no path would learn
//! how slow it had become, and no read would ever complete. For the same
//! reason one scan never sends reads both ways between two paths: a path
//! given up on counts as held out at once. Only transports that
//! can let go of a read's buffer take part (NBD; not io_uring, whose
//! kernel owns the buffer until it completes).
//!
//! # Cost
//! Per I/O: a branch on whether a view is active, a load and compare of
//! the path's in-flight count at dispatch (is it newly busy), one store at
//! completion. Per poll: a compare per path with I/O in flight. Per
//! change of the stalled set or the snapshot: the candidate list copied
//! into storage sized when the queue was built (no allocation). Selectors
//! that cache per candidate set (round-robin's anchor, numa,
//! historical-service-time's ranks) see a new generation whenever the
//! view changes.

use crate::load::PathLoad;
use crate::snapshot::Route;

/// The least time a busy path must go without progress before it counts
/// as stalled: below it, scheduling noise on a loaded machine.
pub const STALL_FLOOR_NS: u64 = 1_000_000;

/// How many times its p99 latency a busy path may go without progress
/// before it counts as stalled.
pub(crate) const STALL_MULTIPLE: u64 = 8;

/// How often a queue re-reads each path's latency histogram for its
/// limits.
pub(crate) const LIMIT_REFRESH_NS: u64 = 10_000_000;

/// How many times its p99 latency a read may wait on a path before the
/// queue sends it down another (the hedge delay, at least
/// [`STALL_FLOOR_NS`], at most half the I/O timeout).
pub(crate) const HEDGE_MULTIPLE: u64 = 4;

/// How long a path the queue took a read back from is held out, unless it
/// answers first: it gets no new I/O (so none waits on it), and after this
/// it is tried again (a read it holds too long is taken back again).
pub(crate) const HOLD_OUT_NS: u64 = 100_000_000;

/// How often a queue looks for reads past their hedge delay.
pub(crate) const HEDGE_SCAN_NS: u64 = STALL_FLOOR_NS / 4;

/// Generations of views carry this bit, so they never equal a snapshot's
/// (a map's generation counts changes from 0 and never reaches 2^63).
const VIEW_GENERATION: u64 = 1 << 63;

/// `multiple` times a path's p99 latency (none learnt yet: 0), at least
/// [`STALL_FLOOR_NS`], at most half the I/O timeout.
fn p99_multiple_ns(p99_ns: Option<u64>, multiple: u64, io_timeout_ns: Option<u64>) -> u64 {
    let learnt = p99_ns.map_or(0, |p99| p99.saturating_mul(multiple));
    let bounded = learnt.max(STALL_FLOOR_NS);
    match io_timeout_ns {
        Some(timeout) => bounded.min((timeout / 2).max(1)),
        None => bounded,
    }
}

/// One queue's stalled paths and the route it dispatches with. See the
/// module docs.
///
/// # Invariants
/// `active` only while some path is stalled and the current route has a
/// candidate that is not; then `candidates` and `usable` are that route's
/// without the stalled paths, under `generation`.
#[derive(Debug)]
pub(crate) struct Stalls {
    /// Per path of the map: stalled now.
    stalled: Box<[bool]>,
    stalled_count: usize,
    /// Per path of the map: the last completion there, or when it last
    /// went from idle to busy.
    progress_ns: Box<[u64]>,
    /// Per path of the map: when the queue last took a read back from it
    /// for being slow (0: never); stalled until its next progress.
    gave_up_ns: Box<[u64]>,
    /// Per path of the map: its limit ([`STALL_MULTIPLE`] times its p99), as last read.
    limit_ns: Box<[u64]>,
    /// Per path of the map: its hedge delay ([`HEDGE_MULTIPLE`]), as last
    /// read.
    hedge_delay_ns: Box<[u64]>,
    next_refresh_ns: u64,
    next_hedge_scan_ns: u64,
    active: bool,
    candidates: Vec<u16>,
    usable: Vec<bool>,
    generation: u64,
}

impl Stalls {
    /// No path stalled, for a map of `path_count` paths whose largest
    /// group has `group_size` paths.
    pub(crate) fn new(path_count: usize, group_size: usize) -> Self {
        Stalls {
            stalled: vec![false; path_count].into_boxed_slice(),
            stalled_count: 0,
            progress_ns: vec![0; path_count].into_boxed_slice(),
            gave_up_ns: vec![0; path_count].into_boxed_slice(),
            limit_ns: vec![STALL_FLOOR_NS; path_count].into_boxed_slice(),
            hedge_delay_ns: vec![STALL_FLOOR_NS; path_count].into_boxed_slice(),
            next_refresh_ns: 0,
            next_hedge_scan_ns: 0,
            active: false,
            candidates: Vec::with_capacity(group_size),
            usable: Vec::with_capacity(group_size),
            generation: VIEW_GENERATION,
        }
    }

    /// The route's candidates without the stalled paths, their `usable`
    /// flags and the generation selectors key their caches by; `None`
    /// when the route is to be used whole.
    #[inline(always)]
    pub(crate) fn view(&self) -> Option<(&[u16], &[bool], u64)> {
        self.active
            .then_some((&self.candidates[..], &self.usable[..], self.generation))
    }

    /// Path `path` made progress at `now_ns`: an attempt there completed,
    /// or it went from idle to busy.
    #[inline(always)]
    pub(crate) fn progress(&mut self, path: usize, now_ns: u64) {
        self.progress_ns[path] = now_ns;
    }

    /// Path `path` kept a read past its hedge delay at `now_ns`, and the
    /// queue took it back: the path counts as stalled until its next
    /// progress (its other reads would wait as long), for at most
    /// [`HOLD_OUT_NS`] (it gets no I/O that could make progress).
    pub(crate) fn gave_up(&mut self, path: usize, now_ns: u64) {
        self.gave_up_ns[path] = now_ns.max(1);
    }

    /// True if a read that started at `start_ns` on `path` is due for a
    /// hedge at `now_ns`: it and the path's last progress are both older
    /// than the path's hedge delay. A path that answered other reads
    /// meanwhile is not hung (and a queue whose thread was descheduled
    /// collects those answers in the same poll, before it looks here).
    pub(crate) fn hedge_due(&self, path: usize, start_ns: u64, now_ns: u64) -> bool {
        let delay_ns = self.hedge_delay_ns[path];
        now_ns.saturating_sub(start_ns) >= delay_ns
            && now_ns.saturating_sub(self.progress_ns[path]) >= delay_ns
    }

    /// True if a hedge scan is due at `now_ns`; if so, the next is due
    /// [`HEDGE_SCAN_NS`] later.
    pub(crate) fn hedge_scan_due(&mut self, now_ns: u64) -> bool {
        if now_ns < self.next_hedge_scan_ns {
            return false;
        }
        self.next_hedge_scan_ns = now_ns.saturating_add(HEDGE_SCAN_NS);
        true
    }

    /// True if `route` (its group's first path `first_path`) has a
    /// candidate other than `path` that is neither stalled nor held out at
    /// `now_ns`: somewhere to send a read taken back from `path`. A path
    /// given up on earlier in the same hedge scan counts as held out
    /// already, so one scan never sends reads both ways between two slow
    /// paths.
    pub(crate) fn has_alternative(
        &self,
        path: usize,
        route: &Route,
        first_path: usize,
        now_ns: u64,
    ) -> bool {
        route.candidates.iter().any(|&position| {
            let other = first_path + usize::from(position);
            other != path && !self.stalled[other] && !self.held_out(other, now_ns)
        })
    }

    /// True if the queue gave up on a read of `path` since its last
    /// progress, less than [`HOLD_OUT_NS`] before `now_ns`.
    fn held_out(&self, path: usize, now_ns: u64) -> bool {
        let gave_up_ns = self.gave_up_ns[path];
        gave_up_ns > self.progress_ns[path] && now_ns.saturating_sub(gave_up_ns) < HOLD_OUT_NS
    }

    /// Looks again at which paths stall, from each path's `loads`;
    /// rebuilds the view over `route` (with its group's first path) if
    /// that changed. Once per poll.
    #[inline]
    pub(crate) fn check(
        &mut self,
        now_ns: u64,
        loads: &[PathLoad],
        io_timeout_ns: Option<u64>,
        route: Option<(&Route, usize)>,
    ) {
        if now_ns >= self.next_refresh_ns {
            self.next_refresh_ns = now_ns.saturating_add(LIMIT_REFRESH_NS);
            for (path, load) in loads.iter().enumerate() {
                // One quantile read serves both bounds.
                let p99_ns = load.latency_quantile_upper_ns(990);
                self.limit_ns[path] = p99_multiple_ns(p99_ns, STALL_MULTIPLE, io_timeout_ns);
                self.hedge_delay_ns[path] = p99_multiple_ns(p99_ns, HEDGE_MULTIPLE, io_timeout_ns);
            }
        }
        let mut changed = false;
        let mut stalled_count = 0;
        for (path, load) in loads.iter().enumerate() {
            let now_stalled = self.held_out(path, now_ns)
                || (load.in_flight() > 0
                    && now_ns.saturating_sub(self.progress_ns[path]) > self.limit_ns[path]);
            changed |= now_stalled != self.stalled[path];
            self.stalled[path] = now_stalled;
            stalled_count += usize::from(now_stalled);
        }
        self.stalled_count = stalled_count;
        if changed {
            self.rebuild(route);
        }
    }

    /// Builds the view over `route` (its group's first path
    /// `first_path`): after a check changed the stalled set, or a new
    /// snapshot.
    pub(crate) fn rebuild(&mut self, route: Option<(&Route, usize)>) {
        self.active = false;
        let Some((route, first_path)) = route.filter(|_| self.stalled_count > 0) else {
            return;
        };
        self.candidates.clear();
        self.usable.clear();
        self.usable.resize(route.usable.len(), false);
        for &position in route.candidates.iter() {
            if !self.stalled[first_path + usize::from(position)] {
                self.candidates.push(position);
                self.usable[usize::from(position)] = true;
            }
        }
        if self.candidates.is_empty() || self.candidates.len() == route.candidates.len() {
            return;
        }
        self.generation = self.generation.wrapping_add(1) | VIEW_GENERATION;
        self.active = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How old the oldest attempt on a path with `load` may be before the
    /// path counts as stalled, as `Stalls` reads it.
    fn stall_limit_ns(load: &PathLoad, io_timeout_ns: Option<u64>) -> u64 {
        p99_multiple_ns(
            load.latency_quantile_upper_ns(990),
            STALL_MULTIPLE,
            io_timeout_ns,
        )
    }

    #[test]
    fn the_limit_scales_with_the_paths_own_latency_between_floor_and_timeout() {
        let load = PathLoad::default();
        assert_eq!(
            stall_limit_ns(&load, None),
            STALL_FLOOR_NS,
            "nothing learnt"
        );
        for _ in 0..100 {
            load.record_latency(1_000_000); // p99 below 2^20 ns
        }
        assert_eq!(stall_limit_ns(&load, None), 8 * (1 << 20));
        assert_eq!(stall_limit_ns(&load, Some(10_000_000)), 5_000_000);
        let fast = PathLoad::default();
        fast.record_latency(10_000);
        assert_eq!(stall_limit_ns(&fast, None), STALL_FLOOR_NS);
    }

    fn route(usable: &[bool]) -> Route {
        Route {
            group: 0,
            access: crate::path::AccessState::Optimized,
            candidates: (0..usable.len() as u16)
                .filter(|&position| usable[usize::from(position)])
                .collect(),
            usable: usable.into(),
        }
    }

    fn busy(loads: &[PathLoad], paths: &[usize]) {
        for &path in paths {
            loads[path].start_io(0);
        }
    }

    #[test]
    fn a_busy_path_without_progress_leaves_the_view_until_it_completes() {
        let loads: Vec<PathLoad> = (0..3).map(|_| PathLoad::default()).collect();
        let route = route(&[true, true, true]);
        let mut stalls = Stalls::new(3, 3);
        let now = 10 * STALL_FLOOR_NS;
        busy(&loads, &[0, 1]);
        stalls.progress(0, now - 1);
        stalls.progress(1, 0);
        stalls.check(now, &loads, None, Some((&route, 0)));
        let (candidates, usable, generation) = stalls.view().unwrap();
        assert_eq!(candidates, [0, 2]);
        assert_eq!(usable, [true, false, true]);
        assert!(generation & VIEW_GENERATION != 0);
        // A new snapshot: rebuilt under a new generation.
        stalls.rebuild(Some((&route, 0)));
        assert_ne!(stalls.view().unwrap().2, generation);
        // It answered: back in the route.
        stalls.progress(1, now + 1);
        stalls.check(now + 1, &loads, None, Some((&route, 0)));
        assert_eq!(stalls.view(), None);
    }

    #[test]
    fn a_path_given_up_on_is_held_out_until_it_answers_or_the_hold_out_ends() {
        let loads: Vec<PathLoad> = (0..2).map(|_| PathLoad::default()).collect();
        let route = route(&[true, true]);
        let mut stalls = Stalls::new(2, 2);
        let now = 10 * STALL_FLOOR_NS;
        stalls.gave_up(0, now);
        stalls.check(now, &loads, None, Some((&route, 0)));
        assert_eq!(stalls.view().map(|view| view.0.to_vec()), Some(vec![1]));
        stalls.check(now + HOLD_OUT_NS - 1, &loads, None, Some((&route, 0)));
        assert!(stalls.view().is_some(), "idle, yet held out");
        stalls.check(now + HOLD_OUT_NS, &loads, None, Some((&route, 0)));
        assert_eq!(stalls.view(), None, "tried again");
        stalls.gave_up(0, now + HOLD_OUT_NS + 1);
        stalls.progress(0, now + HOLD_OUT_NS + 2);
        stalls.check(now + HOLD_OUT_NS + 2, &loads, None, Some((&route, 0)));
        assert_eq!(stalls.view(), None, "it answered");
    }

    #[test]
    fn an_idle_path_never_stalls_and_all_stalled_uses_the_route_whole() {
        let loads: Vec<PathLoad> = (0..2).map(|_| PathLoad::default()).collect();
        let route = route(&[true, true]);
        let mut stalls = Stalls::new(2, 2);
        let now = 10 * STALL_FLOOR_NS;
        stalls.check(now, &loads, None, Some((&route, 0)));
        assert_eq!(stalls.view(), None, "idle for long is not stalled");
        busy(&loads, &[0, 1]);
        stalls.check(now, &loads, None, Some((&route, 0)));
        assert_eq!(stalls.view(), None, "every candidate stalled");
        // A stalled path outside the route's candidates changes nothing.
        let only_first = self::route(&[true, false]);
        stalls.progress(0, now);
        stalls.check(now, &loads, None, Some((&only_first, 0)));
        assert_eq!(stalls.view(), None);
    }
}
