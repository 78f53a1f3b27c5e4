//! `queue-depth`: send each I/O down the candidate with the fewest I/Os in
//! flight (Linux NVMe multipath's iopolicy `queue-depth`).
//!
//! # Rule
//! The kernel's `nvme_queue_depth_path` takes the optimized path with the
//! fewest active requests, returning at once on an idle one, and falls
//! back to the least busy non-optimized path; the candidates here are
//! already the best access class, so the rule is queue-length's scan:
//! stop at the first idle path, ties to the first met from a per-thread
//! cursor that starts after the last pick, so equal paths take turns (the
//! kernel always favours the first in its list).
//!
//! The kernel counts active requests per controller, across all the
//! namespaces and CPUs it serves; ours counts the calling queue's I/Os per
//! path (see [`crate::load`]).
//!
//! # Arguments
//! None, neither for the selector nor per path.
//!
//! # Concurrency
//! Reads the calling queue's `in_flight` of each path (kept by the queue);
//! per thread: the [`TieCursor`].

use super::scan::{fewest_in_flight, TieCursor};
use super::{ArgError, PathSelector, Pick, Setup};
use crate::load::PathLoad;

/// The queue-depth selector.
#[derive(Debug)]
pub struct QueueDepth;

impl PathSelector for QueueDepth {
    const NAME: &'static str = "queue-depth";
    const TABLE_PATH_ARGS: usize = 0;
    const STATUS_INFO_ARGS: usize = 1;
    type ThreadState = TieCursor;

    fn new(setup: &Setup<'_>) -> Result<Self, ArgError> {
        if !setup.args.is_empty() {
            return Err(ArgError::selector(
                0,
                "queue-depth takes no selector arguments",
            ));
        }
        if let Some(position) = setup.paths.iter().position(|path| !path.args.is_empty()) {
            return Err(ArgError::path(
                position,
                0,
                "queue-depth takes no path arguments",
            ));
        }
        Ok(QueueDepth)
    }

    #[inline]
    fn select(&self, thread: &mut TieCursor, pick: &Pick<'_>) -> u16 {
        fewest_in_flight(thread, pick)
    }

    fn table_path_args(&self, _position: usize) -> Vec<String> {
        Vec::new()
    }

    fn status_path_info(&self, _position: usize, load: &PathLoad) -> Vec<String> {
        vec![load.in_flight().to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::testing::{assert_balanced_io, build, no_args, usable_sets, Harness};
    use proptest::prelude::*;

    #[test]
    fn takes_no_arguments() {
        let selector: QueueDepth = build(&[], &no_args(3)).unwrap();
        assert!(selector.table_path_args(0).is_empty());
        let error = build::<QueueDepth>(&["1"], &no_args(1)).unwrap_err();
        assert_eq!((error.path, error.index), (None, 0));
        let error = build::<QueueDepth>(&[], &[&[], &[], &["1"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(2), 0));
    }

    #[test]
    fn picks_the_least_busy_candidate() {
        let selector: QueueDepth = build(&[], &no_args(4)).unwrap();
        let mut harness = Harness::new(4);
        // (in flight, usable, expected) from a fresh thread.
        let cases: [([u32; 4], &[u16], u16); 5] = [
            ([4, 2, 3, 1], &[0, 1, 2, 3], 3),
            ([4, 2, 3, 1], &[0, 1, 2], 1),
            ([0, 9, 0, 9], &[1, 2, 3], 2),
            ([7, 7, 7, 7], &[1, 3], 1),
            ([1, 0, 1, 1], &[0, 2], 0),
        ];
        for (in_flight, usable, expected) in cases {
            harness.thread = TieCursor::default();
            harness.set_usable(usable);
            harness.set_in_flight(&in_flight);
            assert_eq!(
                harness.pick(&selector),
                expected,
                "{in_flight:?} {usable:?}"
            );
        }
    }

    #[test]
    fn dispatches_fill_paths_evenly() {
        let selector: QueueDepth = build(&[], &no_args(3)).unwrap();
        let mut harness = Harness::new(3);
        for _ in 0..30 {
            let position = harness.pick(&selector);
            harness.start_io(&selector, position);
        }
        let in_flight: Vec<u32> = harness.loads.iter().map(PathLoad::in_flight).collect();
        assert_eq!(in_flight, [10, 10, 10]);
        assert_eq!(selector.status_path_info(1, &harness.loads[1]), ["10"]);
    }

    proptest! {
        #[test]
        fn picks_an_argmin_of_candidates(
            in_flight in prop::collection::vec(0u32..4, 6),
            sets in usable_sets(6),
        ) {
            let selector: QueueDepth = build(&[], &no_args(6)).unwrap();
            let mut harness = Harness::new(6);
            harness.set_in_flight(&in_flight);
            for set in sets {
                harness.set_usable(&set);
                let position = harness.pick(&selector);
                let least = set.iter().map(|&p| in_flight[usize::from(p)]).min().unwrap();
                prop_assert_eq!(in_flight[usize::from(position)], least);
            }
        }

        #[test]
        fn balanced_io_returns_counters_to_zero(ops in prop::collection::vec(any::<(bool, u16, u32)>(), 0..200)) {
            let selector: QueueDepth = build(&[], &no_args(3)).unwrap();
            assert_balanced_io(&selector, 3, &ops);
        }
    }
}
