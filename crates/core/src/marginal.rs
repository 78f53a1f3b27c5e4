//! Marginal paths: a path that fails and recovers again and again (a bad
//! cable, a flapping switch port) is held out of use until it has stayed
//! healthy for a recovery time, instead of being reinstated by every good
//! probe and failing the next I/O again.
//!
//! This module is pure policy: time comes in as `now_ns`. The path
//! checker keeps one `MarginalTracker` per path and tells it what it
//! sees; the tracker only says whether the path may be reinstated.
//!
//! # Rules
//! - **Failures.** A *failure* is a path going from usable to failed by a
//!   path error: an I/O's (transport error, timeout, lost connection) or a
//!   failed probe's. An admin's `fail_path` message is not one: the admin
//!   took the path out, the path did not misbehave.
//! - **Becoming marginal.** A path with [`MarginalPolicy::failures`]
//!   failures within [`MarginalPolicy::window_ns`] (the newest minus the
//!   oldest of them at most the window) is marginal. It is failed at that
//!   moment (its last failure just failed it) and stays failed.
//! - **Recovery.** A marginal path is not reinstated by good probes until
//!   it has stayed healthy, every probe good, for
//!   [`MarginalPolicy::recovery_ns`], counted from the first good probe
//!   after its last failure or failed probe. A failed probe restarts the
//!   wait (the next good probe starts it again). The first good probe at
//!   or after the end of the wait reinstates it, and it is no longer
//!   marginal: its failure history starts afresh.
//! - **The admin knows best.** A `reinstate_path` message puts a marginal
//!   path back in use at once; the tracker forgets it was marginal and its
//!   failures (`MarginalTracker::admin_reinstated`). The tracker does
//!   not see messages: the checker learns of them from the map's count of
//!   reinstatements by message ([`crate::map::Map::path_transitions`]) and
//!   tells it.
//! - A path that is not marginal is reinstated by its next good probe,
//!   as without a policy; its failures still count towards the window.
//!
//! # multipath-tools
//! multipathd has two older mechanisms for "shaky" paths. `san_path_err_*`
//! counts path failures: more than `san_path_err_threshold` of them within
//! `san_path_err_forget_rate` *checks* (a good check decrements the count)
//! keeps the path failed for `san_path_err_recovery_time` seconds, after
//! which it is reinstated without further condition. `marginal_path_*`
//! reacts to two failures within `marginal_path_double_failed_time`
//! seconds by sending the path sample I/O at 10 Hz for
//! `marginal_path_err_sample_time`, and keeps it failed for
//! `marginal_path_err_recheck_gap_time` if its error rate exceeded
//! `marginal_path_err_rate_threshold`. With `marginal_pathgroups` the
//! marginal path is instead reinstated into a group of its own, used last.
//!
//! Ours is `san_path_err_*` with two changes: the window is a time (the
//! checker interval varies; a count of checks would tie the policy to it),
//! and the recovery time is a time spent *healthy*, not a time since the
//! failure: a path that fails its probes during the wait is not let back
//! when the wait ends, as `san_path_err_recovery_time` would. We send no
//! sample I/O (the probes are the samples: one per checker interval) and
//! do not regroup marginal paths. A marginal path is held out even when it
//! is the map's last one, as with `san_path_err_*`; with
//! `queue_if_no_path` the I/O waits for it, and the admin can
//! `reinstate_path` it.

use std::collections::VecDeque;

/// The most failures a policy may count (bounds a tracker's history).
pub(crate) const MAX_FAILURES: u32 = 1024;

/// When a path counts as marginal and when it is let back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarginalPolicy {
    /// Path failures within [`MarginalPolicy::window_ns`] that make a path
    /// marginal (at least 2).
    pub failures: u32,
    /// The window the failures are counted in.
    pub window_ns: u64,
    /// How long a marginal path must stay healthy (every probe good)
    /// before it is reinstated.
    pub recovery_ns: u64,
}

impl Default for MarginalPolicy {
    fn default() -> Self {
        MarginalPolicy {
            failures: 3,
            window_ns: 60_000_000_000,
            recovery_ns: 60_000_000_000,
        }
    }
}

/// One path's marginal state under a [`MarginalPolicy`]; see the module
/// docs for the rules.
///
/// # Invariants
/// `failures_ns` holds at most `policy.failures` times, oldest first;
/// `healthy_since_ns` is set only while `marginal_since_ns` is.
#[derive(Clone, Debug)]
pub(crate) struct MarginalTracker {
    policy: MarginalPolicy,
    /// When the latest failures happened, oldest first.
    failures_ns: VecDeque<u64>,
    /// While marginal: since when.
    marginal_since_ns: Option<u64>,
    /// While marginal: the first good probe after the last failure or
    /// failed probe.
    healthy_since_ns: Option<u64>,
}

impl MarginalTracker {
    /// A tracker for a path with no failures yet. A policy's `failures` is
    /// taken between 1 and [`MAX_FAILURES`].
    pub(crate) fn new(mut policy: MarginalPolicy) -> Self {
        policy.failures = policy.failures.clamp(1, MAX_FAILURES);
        MarginalTracker {
            policy,
            failures_ns: VecDeque::with_capacity(policy.failures as usize),
            marginal_since_ns: None,
            healthy_since_ns: None,
        }
    }

    /// The policy (with `failures` as clamped by [`MarginalTracker::new`]).
    pub(crate) fn policy(&self) -> MarginalPolicy {
        self.policy
    }

    /// True while the path is held out as marginal.
    pub(crate) fn is_marginal(&self) -> bool {
        self.marginal_since_ns.is_some()
    }

    /// While marginal and healthy: the earliest time a good probe may
    /// reinstate it (if every probe until then is good). `None` while it
    /// is not marginal, or waits for its first good probe.
    pub(crate) fn returns_at_ns(&self) -> Option<u64> {
        self.healthy_since_ns
            .map(|since_ns| since_ns.saturating_add(self.policy.recovery_ns))
    }

    /// The path went from usable to failed by a path error at `now_ns`.
    /// Returns true if that made it marginal (it was not before).
    pub(crate) fn path_failed(&mut self, now_ns: u64) -> bool {
        if self.failures_ns.len() == self.policy.failures as usize {
            self.failures_ns.pop_front();
        }
        self.failures_ns.push_back(now_ns);
        // A marginal path failing again (it was reinstated by nobody but
        // could be failed by a message race): the wait starts again.
        self.healthy_since_ns = None;
        if self.is_marginal() {
            return false;
        }
        let full = self.failures_ns.len() == self.policy.failures as usize;
        let oldest_ns = self.failures_ns.front().copied().unwrap_or(now_ns);
        if full && now_ns.saturating_sub(oldest_ns) <= self.policy.window_ns {
            self.marginal_since_ns = Some(now_ns);
            return true;
        }
        false
    }

    /// A probe of the path ended at `now_ns`: `healthy` if it succeeded.
    pub(crate) fn probe_ended(&mut self, healthy: bool, now_ns: u64) {
        if !self.is_marginal() {
            return;
        }
        if healthy {
            self.healthy_since_ns.get_or_insert(now_ns);
        } else {
            self.healthy_since_ns = None;
        }
    }

    /// Whether a good probe at `now_ns` may reinstate the path: always if
    /// it is not marginal, else once it has been healthy for the recovery
    /// time.
    pub(crate) fn may_reinstate(&self, now_ns: u64) -> bool {
        if !self.is_marginal() {
            return true;
        }
        self.returns_at_ns()
            .is_some_and(|returns_at_ns| now_ns >= returns_at_ns)
    }

    /// The checker reinstated the path (after [`MarginalTracker::may_reinstate`]
    /// said it may). Returns true if it was marginal: it has recovered, and
    /// its failure history starts afresh.
    pub(crate) fn reinstated(&mut self, now_ns: u64) -> bool {
        debug_assert!(self.may_reinstate(now_ns), "reinstated while held out");
        if self.is_marginal() {
            self.reset();
            return true;
        }
        false
    }

    /// An admin reinstated the path (a `reinstate_path` message): it is no
    /// longer marginal and its failures are forgotten. Returns true if it
    /// was marginal.
    pub(crate) fn admin_reinstated(&mut self) -> bool {
        let was_marginal = self.is_marginal();
        self.reset();
        was_marginal
    }

    fn reset(&mut self) {
        self.failures_ns.clear();
        self.marginal_since_ns = None;
        self.healthy_since_ns = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SECOND: u64 = 1_000_000_000;

    fn policy() -> MarginalPolicy {
        MarginalPolicy {
            failures: 3,
            window_ns: 60 * SECOND,
            recovery_ns: 30 * SECOND,
        }
    }

    /// A tracker made marginal by three failures at 0, 1 s and 2 s.
    fn marginal() -> MarginalTracker {
        let mut tracker = MarginalTracker::new(policy());
        assert!(!tracker.path_failed(0));
        assert!(!tracker.path_failed(SECOND));
        assert!(tracker.path_failed(2 * SECOND));
        tracker
    }

    #[test]
    fn failures_within_the_window_make_a_path_marginal() {
        let tracker = marginal();
        assert!(tracker.is_marginal());
        assert_eq!(tracker.marginal_since_ns, Some(2 * SECOND));
        assert!(!tracker.may_reinstate(2 * SECOND));
    }

    #[test]
    fn the_window_bounds_newest_minus_oldest_inclusive() {
        let mut tracker = MarginalTracker::new(policy());
        tracker.path_failed(0);
        tracker.path_failed(30 * SECOND);
        assert!(tracker.path_failed(60 * SECOND), "exactly the window");
        let mut tracker = MarginalTracker::new(policy());
        tracker.path_failed(0);
        tracker.path_failed(30 * SECOND);
        assert!(!tracker.path_failed(60 * SECOND + 1), "just outside");
        assert!(
            tracker.path_failed(61 * SECOND),
            "the oldest slid out: 30 s, 60 s, 61 s are within"
        );
    }

    #[test]
    fn spread_failures_never_make_a_path_marginal() {
        let mut tracker = MarginalTracker::new(policy());
        for failure in 0..100 {
            assert!(!tracker.path_failed(failure * 31 * SECOND));
            assert!(tracker.may_reinstate(failure * 31 * SECOND));
            tracker.reinstated(failure * 31 * SECOND);
        }
    }

    #[test]
    fn a_path_that_is_not_marginal_is_reinstated_at_once() {
        let mut tracker = MarginalTracker::new(policy());
        tracker.path_failed(0);
        tracker.probe_ended(true, 1);
        assert!(tracker.may_reinstate(1));
        assert!(!tracker.reinstated(1), "was not marginal");
    }

    #[test]
    fn a_marginal_path_waits_for_the_recovery_time_from_its_first_good_probe() {
        let mut tracker = marginal();
        tracker.probe_ended(false, 5 * SECOND);
        assert_eq!(tracker.returns_at_ns(), None, "not healthy yet");
        tracker.probe_ended(true, 10 * SECOND);
        assert_eq!(tracker.returns_at_ns(), Some(40 * SECOND));
        tracker.probe_ended(true, 20 * SECOND);
        assert_eq!(tracker.returns_at_ns(), Some(40 * SECOND), "kept");
        assert!(!tracker.may_reinstate(40 * SECOND - 1));
        assert!(tracker.may_reinstate(40 * SECOND));
    }

    #[test]
    fn a_failed_probe_restarts_the_wait() {
        let mut tracker = marginal();
        tracker.probe_ended(true, 10 * SECOND);
        tracker.probe_ended(false, 35 * SECOND);
        assert_eq!(tracker.returns_at_ns(), None);
        assert!(!tracker.may_reinstate(45 * SECOND));
        tracker.probe_ended(true, 45 * SECOND);
        assert_eq!(tracker.returns_at_ns(), Some(75 * SECOND));
        assert!(!tracker.may_reinstate(74 * SECOND));
        assert!(tracker.may_reinstate(75 * SECOND));
    }

    #[test]
    fn recovery_ends_marginal_and_restarts_the_failure_history() {
        let mut tracker = marginal();
        tracker.probe_ended(true, 10 * SECOND);
        assert!(tracker.reinstated(40 * SECOND), "recovered");
        assert!(!tracker.is_marginal());
        assert_eq!(tracker.returns_at_ns(), None);
        // The failures before the recovery no longer count: two new ones
        // within the window are not enough.
        assert!(!tracker.path_failed(41 * SECOND));
        assert!(!tracker.path_failed(42 * SECOND));
        assert!(tracker.path_failed(43 * SECOND));
    }

    #[test]
    fn an_admin_reinstate_overrides() {
        let mut tracker = marginal();
        assert!(tracker.admin_reinstated());
        assert!(!tracker.is_marginal());
        assert!(tracker.may_reinstate(2 * SECOND));
        assert!(!tracker.path_failed(3 * SECOND), "history forgotten");
        assert!(!tracker.admin_reinstated(), "was not marginal");
    }

    #[test]
    fn probes_of_a_path_that_is_not_marginal_change_nothing() {
        let mut tracker = MarginalTracker::new(policy());
        tracker.probe_ended(true, 0);
        tracker.probe_ended(false, 1);
        assert_eq!(tracker.returns_at_ns(), None);
        assert!(tracker.may_reinstate(2));
    }

    #[test]
    fn the_failure_count_is_clamped() {
        let mut tracker = MarginalTracker::new(MarginalPolicy {
            failures: 0,
            ..policy()
        });
        assert_eq!(tracker.policy().failures, 1);
        assert!(tracker.path_failed(0), "one failure is enough");
        let tracker = MarginalTracker::new(MarginalPolicy {
            failures: u32::MAX,
            ..policy()
        });
        assert_eq!(tracker.policy().failures, MAX_FAILURES);
    }

    #[derive(Clone, Copy, Debug)]
    enum Event {
        Failure,
        Probe(bool),
        Admin,
    }

    fn event() -> impl Strategy<Value = (u64, Event)> {
        (
            0..20 * SECOND,
            prop_oneof![
                3 => Just(Event::Failure),
                6 => any::<bool>().prop_map(Event::Probe),
                1 => Just(Event::Admin),
            ],
        )
    }

    proptest! {
        /// The checker's loop over any history: never reinstates a
        /// marginal path within recovery_ns of its last failure or failed
        /// probe, and a path held out is marginal.
        #[test]
        fn never_reinstated_within_the_recovery_time_of_the_last_failure(
            failures in 1u32..5,
            window_ns in 0..60 * SECOND,
            recovery_ns in 0..60 * SECOND,
            events in proptest::collection::vec(event(), 1..200),
        ) {
            let mut tracker = MarginalTracker::new(MarginalPolicy { failures, window_ns, recovery_ns });
            let mut now_ns = 0u64;
            let mut failed = false;
            let mut last_bad_ns: Option<u64> = None;
            for (step_ns, event) in events {
                now_ns += step_ns;
                match event {
                    Event::Failure if !failed => {
                        failed = true;
                        last_bad_ns = Some(now_ns);
                        tracker.path_failed(now_ns);
                    }
                    Event::Failure => {}
                    Event::Probe(healthy) => {
                        tracker.probe_ended(healthy, now_ns);
                        if !healthy {
                            last_bad_ns = Some(now_ns);
                        } else if failed {
                            let was_marginal = tracker.is_marginal();
                            if tracker.may_reinstate(now_ns) {
                                if was_marginal {
                                    let last_bad_ns = last_bad_ns.unwrap();
                                    prop_assert!(now_ns - last_bad_ns >= recovery_ns,
                                        "reinstated {} ns after the last failure", now_ns - last_bad_ns);
                                }
                                prop_assert_eq!(tracker.reinstated(now_ns), was_marginal);
                                failed = false;
                            } else {
                                prop_assert!(was_marginal, "held out but not marginal");
                            }
                        }
                    }
                    Event::Admin => {
                        tracker.admin_reinstated();
                        failed = false;
                    }
                }
                prop_assert!(!tracker.is_marginal() || failed, "marginal but in use");
            }
        }
    }
}
