//! `queue-length [repeat_count]`: send each I/O down the candidate with the
//! fewest I/Os in flight (dm-ps-queue-length).
//!
//! # Rule
//! Scan the candidates for the smallest [`PathLoad::in_flight`], stopping
//! at the first idle path. Ties go to the candidate met first, and each
//! thread starts its scan just after the path it picked last, so equally
//! loaded paths take turns (the shared scan in `selector/scan.rs`).
//!
//! # Arguments
//! No selector arguments. Per path `[repeat_count]`, accepted and printed
//! but not honoured: like dm, which clamps any value above 1 to 1 (with a
//! deprecation warning) and prints the clamped value, the canonical table
//! shows `1` (or `0` if `0` was given, which dm also accepts).
//!
//! # Concurrency
//! Reads the calling queue's `in_flight` of each path (kept by the queue);
//! per thread: the [`TieCursor`] where the next scan starts.

use super::round_robin::parse_repeat_count;
pub(super) use super::scan::TieCursor;
use super::scan::fewest_in_flight;
use super::{ArgError, PathSelector, Pick, Setup};
use crate::load::PathLoad;

/// Parses the optional leading `[repeat_count]` of the dm selectors that
/// accept it without honouring it (queue-length, service-time,
/// historical-service-time); `args_allowed` is how many path args the
/// selector takes in all. Unlike round-robin, 0 is accepted: dm accepts it,
/// and dm's historical-service-time prints `0` for every path, so tables
/// read back from dm must load.
pub(crate) fn parse_unhonoured_repeat_count(
    position: usize,
    args: &[String],
    args_allowed: usize,
) -> Result<u32, ArgError> {
    let zero = args
        .first()
        .is_some_and(|word| word.parse::<u32>() == Ok(0));
    if zero && args.len() <= args_allowed {
        return Ok(0);
    }
    parse_repeat_count(position, args, args_allowed)
}

/// The queue-length selector.
#[derive(Debug)]
pub struct QueueLength {
    /// `repeat_count` of each path as dm keeps it (0 or 1), by position.
    repeat_count: Vec<u32>,
}

impl PathSelector for QueueLength {
    const NAME: &'static str = "queue-length";
    const TABLE_PATH_ARGS: usize = 1;
    const STATUS_INFO_ARGS: usize = 1;
    type ThreadState = TieCursor;

    fn new(setup: &Setup<'_>) -> Result<Self, ArgError> {
        if !setup.args.is_empty() {
            return Err(ArgError::selector(
                0,
                "queue-length takes no selector arguments",
            ));
        }
        let repeat_count = setup
            .paths
            .iter()
            .enumerate()
            .map(|(position, path)| {
                parse_unhonoured_repeat_count(position, path.args, 1).map(|count| count.min(1))
            })
            .collect::<Result<_, _>>()?;
        Ok(QueueLength { repeat_count })
    }

    #[inline]
    fn select(&self, thread: &mut TieCursor, pick: &Pick<'_>) -> u16 {
        fewest_in_flight(thread, pick)
    }

    fn table_path_args(&self, position: usize) -> Vec<String> {
        vec![self.repeat_count[position].to_string()]
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
    fn parses_and_prints_repeat_count_as_dm() {
        let selector: QueueLength = build(&[], &[&[], &["1"], &["7"], &["0"]]).unwrap();
        let printed: Vec<Vec<String>> = (0..4).map(|p| selector.table_path_args(p)).collect();
        assert_eq!(printed, [["1"], ["1"], ["1"], ["0"]]);
        let error = build::<QueueLength>(&["1"], &[&[]]).unwrap_err();
        assert_eq!((error.path, error.index), (None, 0));
        let error = build::<QueueLength>(&[], &[&[], &["x"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(1), 0));
        let error = build::<QueueLength>(&[], &[&["1", "2"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(0), 1));
        assert!(build::<QueueLength>(&[], &[&["0", "2"]]).is_err());
    }

    #[test]
    fn picks_fewest_in_flight_and_stops_at_idle() {
        let selector: QueueLength = build(&[], &[&[], &[], &[]]).unwrap();
        let mut harness = Harness::new(3);
        // (in_flight per path, expected pick) from a fresh thread.
        let cases: [([u32; 3], u16); 5] = [
            ([3, 1, 2], 1),
            ([0, 0, 0], 0),
            ([5, 5, 4], 2),
            ([u32::MAX, u32::MAX - 1, u32::MAX], 1),
            ([2, 0, 0], 1),
        ];
        for (in_flight, expected) in cases {
            harness.thread = TieCursor::default();
            harness.set_in_flight(&in_flight);
            assert_eq!(harness.pick(&selector), expected, "{in_flight:?}");
        }
    }

    #[test]
    fn equal_paths_take_turns() {
        let selector: QueueLength = build(&[], &[&[], &[], &[], &[]]).unwrap();
        let mut harness = Harness::new(4);
        harness.set_usable(&[0, 2, 3]);
        let picks: Vec<u16> = (0..6).map(|_| harness.pick(&selector)).collect();
        assert_eq!(picks, [0, 2, 3, 0, 2, 3]);
    }

    #[test]
    fn start_and_end_io_keep_counters_and_status() {
        let selector: QueueLength = build(&[], &[&[], &[]]).unwrap();
        let mut harness = Harness::new(2);
        let picked = harness.pick(&selector);
        harness.start_io(&selector, picked);
        let first = usize::from(picked);
        assert_eq!(
            selector.status_path_info(first, &harness.loads[first]),
            ["1"]
        );
        harness.thread = TieCursor::default();
        assert_ne!(
            usize::from(harness.pick(&selector)),
            first,
            "the busy path is avoided"
        );
        harness.end_io(&selector, picked, 4096, 0);
        assert_eq!(
            selector.status_path_info(first, &harness.loads[first]),
            ["0"]
        );
        assert_eq!(harness.loads[first].in_flight_bytes(), 0);
    }

    proptest! {
        #[test]
        fn picks_an_argmin_of_candidates(
            in_flight in prop::collection::vec(0u32..4, 1..9),
            usable_bits in any::<u16>(),
            picks in 1usize..20,
        ) {
            let path_count = in_flight.len();
            let selector: QueueLength = build(&[], &no_args(path_count)).unwrap();
            let mut harness = Harness::new(path_count);
            let usable: Vec<u16> = (0..path_count as u16)
                .filter(|&p| usable_bits & (1 << p) != 0)
                .collect();
            if !usable.is_empty() {
                harness.set_usable(&usable);
            }
            harness.set_in_flight(&in_flight);
            for _ in 0..picks {
                let position = harness.pick(&selector);
                let least = harness.candidates.iter().map(|&p| in_flight[usize::from(p)]).min();
                prop_assert_eq!(Some(in_flight[usize::from(position)]), least);
            }
        }

        #[test]
        fn never_picks_a_non_candidate(sets in usable_sets(8)) {
            let selector: QueueLength = build(&[], &no_args(8)).unwrap();
            let mut harness = Harness::new(8);
            for set in sets {
                harness.set_usable(&set);
                harness.pick(&selector);
            }
        }

        #[test]
        fn balanced_io_returns_counters_to_zero(ops in prop::collection::vec(any::<(bool, u16, u32)>(), 0..200)) {
            let selector: QueueLength = build(&[], &no_args(5)).unwrap();
            assert_balanced_io(&selector, 5, &ops);
        }
    }
}
