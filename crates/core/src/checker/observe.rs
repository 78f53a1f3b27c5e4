//! What the checker reads from the map for its marginal trackers at each
//! poll: failures by path error, reinstatements by message and hedged
//! reads since the last poll (the rules are in the [`crate::checker`]
//! module docs, the trackers' in [`crate::marginal`]), and the log events
//! of marginal paths.

use super::{PathCheck, Watched};
use crate::map::Map;
use crate::marginal::MarginalTracker;

/// The share (per mille) of the I/O sent to a path between two polls that
/// must have been hedged for the poll to count a failure toward marginal.
pub(crate) const HEDGED_SHARE_PER_MILLE: u64 = 100;

/// Path `index`'s hedged reads and dispatched I/O, summed over the map's
/// queues.
pub(super) fn hedged_and_sent(map: &Map, index: usize) -> (u64, u64) {
    let load = map.path_load(index);
    (load.hedged_reads(), load.dispatched())
}

/// Reads the map's failures by path error, hedged reads and
/// reinstatements by message since the last poll into each path's
/// tracker, and updates its record's marginal state.
pub(super) fn observe<P>(map: &Map, paths: &mut [Watched<P>], checks: &mut [PathCheck], now_ns: u64)
where
    P: super::ProbePath,
{
    let transitions = map.path_transitions();
    for (index, ((path, check), now)) in paths.iter_mut().zip(checks).zip(transitions).enumerate() {
        let Some(tracker) = path.marginal.as_mut() else {
            continue;
        };
        let (hedged, sent) = hedged_and_sent(map, index);
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
            admin_reinstated(map, &path.word, tracker);
        }
        for _ in 0..failures {
            path_failed(map, &path.word, tracker, now_ns);
        }
        if messages && !now.failed {
            admin_reinstated(map, &path.word, tracker);
        }
        check.marginal = tracker.is_marginal();
        check.returns_at_ns = tracker.returns_at_ns();
    }
}

/// Tells `tracker` of a failure of path `word`, logging if that made it
/// marginal.
pub(super) fn path_failed(map: &Map, word: &str, tracker: &mut MarginalTracker, now_ns: u64) {
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
