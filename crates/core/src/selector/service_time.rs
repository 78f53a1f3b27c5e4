//! `service-time [repeat_count [relative_throughput]]`: send each I/O down
//! the candidate that would finish it soonest (dm-ps-service-time).
//!
//! # Rule
//! A path's estimated service time for an incoming I/O of `bytes` is
//! `(in_flight_bytes + bytes) / relative_throughput`; the smallest wins.
//! Equal estimates (and equal loads) go to the higher `relative_throughput`;
//! a path with `relative_throughput` 0 is used only when every candidate
//! has 0. Among fully equal paths, each thread starts its scan just after
//! the path it picked last, so they take turns (dm moves the chosen path to
//! the tail of its list).
//!
//! # Arguments
//! No selector arguments. Per path `[repeat_count [relative_throughput]]`:
//! `repeat_count` is accepted and printed as dm does (clamped to 1, `0`
//! kept) but not honoured; `relative_throughput` is 0..=100, default 1.
//!
//! # Concurrency
//! Reads the calling queue's `in_flight_bytes` of each path (kept by the
//! queue); per thread: the [`TieCursor`]. `relative_throughput` is
//! immutable.

use super::queue_length::parse_unhonoured_repeat_count;
use super::scan::{best_from_cursor, TieCursor};
use super::{parse_u32_arg, ArgError, PathSelector, Pick, Setup};
use crate::load::PathLoad;
use std::cmp::Ordering;

/// Largest `relative_throughput`.
pub(crate) const MAX_RELATIVE_THROUGHPUT: u32 = 100;

/// `2^SHIFT > MAX_RELATIVE_THROUGHPUT`: see [`compare_load`].
const RELATIVE_THROUGHPUT_SHIFT: u32 = 7;

/// Loads at or above this are shifted down before multiplying.
const MAX_IN_FLIGHT_BYTES: u64 = u64::MAX >> RELATIVE_THROUGHPUT_SHIFT;

const _: () = assert!(MAX_RELATIVE_THROUGHPUT < 1 << RELATIVE_THROUGHPUT_SHIFT);

/// The service-time selector.
#[derive(Debug)]
pub struct ServiceTime {
    /// `repeat_count` of each path as dm keeps it (0 or 1), by position.
    repeat_count: Vec<u32>,
    /// `relative_throughput` of each path, by position.
    relative_throughput: Vec<u32>,
}

/// One path's load as [`compare_load`] sees it.
#[derive(Clone, Copy, Debug)]
struct Load {
    in_flight_bytes: u64,
    relative_throughput: u32,
}

/// Orders two paths for an incoming I/O of `incoming` bytes: `Less` when
/// `a` is the better choice, `Equal` when neither is.
fn compare_load(a: Load, b: Load, incoming: u64) -> Ordering {
    let (size_a, size_b) = (a.in_flight_bytes, b.in_flight_bytes);
    let (throughput_a, throughput_b) = (a.relative_throughput, b.relative_throughput);
    // Equal throughput: the less loaded path (the incoming I/O adds the same
    // to both sides).
    if throughput_a == throughput_b {
        return size_a.cmp(&size_b);
    }
    // Equal load, or one side has throughput 0: the higher throughput. This
    // is what keeps a 0 path out while any other candidate exists.
    if size_a == size_b || throughput_a == 0 || throughput_b == 0 {
        return throughput_b.cmp(&throughput_a);
    }
    // Both throughputs are positive here, so
    //     (size_a + incoming) / throughput_a < (size_b + incoming) / throughput_b
    // holds exactly when
    //     (size_a + incoming) * throughput_b < (size_b + incoming) * throughput_a,
    // which needs no division and loses nothing to rounding. A product can
    // overflow only if a size is at least u64::MAX >> 7 (throughput <= 100 <
    // 2^7); then both sizes are shifted right by 7 first, which keeps their
    // order (up to 127 bytes, far below any I/O) and makes every product fit.
    let mut size_a = size_a.saturating_add(incoming);
    let mut size_b = size_b.saturating_add(incoming);
    if size_a >= MAX_IN_FLIGHT_BYTES || size_b >= MAX_IN_FLIGHT_BYTES {
        size_a >>= RELATIVE_THROUGHPUT_SHIFT;
        size_b >>= RELATIVE_THROUGHPUT_SHIFT;
    }
    let time_a = size_a * u64::from(throughput_b);
    let time_b = size_b * u64::from(throughput_a);
    // Equal estimates: the higher throughput.
    time_a.cmp(&time_b).then(throughput_b.cmp(&throughput_a))
}

impl ServiceTime {
    #[inline]
    fn load(&self, pick: &Pick<'_>, position: usize) -> Load {
        Load {
            in_flight_bytes: pick.loads[position].in_flight_bytes(),
            relative_throughput: self.relative_throughput[position],
        }
    }
}

impl PathSelector for ServiceTime {
    const NAME: &'static str = "service-time";
    const TABLE_PATH_ARGS: usize = 2;
    const STATUS_INFO_ARGS: usize = 2;
    type ThreadState = TieCursor;

    fn new(setup: &Setup<'_>) -> Result<Self, ArgError> {
        if !setup.args.is_empty() {
            return Err(ArgError::selector(
                0,
                "service-time takes no selector arguments",
            ));
        }
        let mut repeat_count = Vec::with_capacity(setup.paths.len());
        let mut relative_throughput = Vec::with_capacity(setup.paths.len());
        for (position, path) in setup.paths.iter().enumerate() {
            repeat_count.push(parse_unhonoured_repeat_count(position, path.args, 2)?.min(1));
            relative_throughput.push(match path.args.get(1) {
                None => 1,
                Some(word) => {
                    parse_u32_arg(word, "relative_throughput", 0, MAX_RELATIVE_THROUGHPUT)
                        .map_err(|message| ArgError::path(position, 1, message))?
                }
            });
        }
        Ok(ServiceTime {
            repeat_count,
            relative_throughput,
        })
    }

    #[inline]
    fn select(&self, thread: &mut TieCursor, pick: &Pick<'_>) -> u16 {
        best_from_cursor(
            thread,
            pick.candidates,
            pick.loads.len(),
            |position| self.load(pick, position),
            |candidate, best| compare_load(*candidate, *best, pick.bytes) == Ordering::Less,
        )
    }

    fn table_path_args(&self, position: usize) -> Vec<String> {
        vec![
            self.repeat_count[position].to_string(),
            self.relative_throughput[position].to_string(),
        ]
    }

    fn status_path_info(&self, position: usize, load: &PathLoad) -> Vec<String> {
        vec![
            load.in_flight_bytes().to_string(),
            self.relative_throughput[position].to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::testing::{assert_balanced_io, build, usable_sets, Harness};
    use proptest::prelude::*;

    fn load(in_flight_bytes: u64, relative_throughput: u32) -> Load {
        Load {
            in_flight_bytes,
            relative_throughput,
        }
    }

    #[test]
    fn parses_defaults_ranges_and_errors() {
        let selector: ServiceTime = build(&[], &[&[], &["1"], &["3", "100"], &["0", "0"]]).unwrap();
        let printed: Vec<Vec<String>> = (0..4).map(|p| selector.table_path_args(p)).collect();
        assert_eq!(printed, [["1", "1"], ["1", "1"], ["1", "100"], ["0", "0"]]);
        let error = build::<ServiceTime>(&[], &[&[], &["1", "101"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(1), 1));
        let error = build::<ServiceTime>(&[], &[&["1", "x"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(0), 1));
        let error = build::<ServiceTime>(&[], &[&["-1"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(0), 0));
        let error = build::<ServiceTime>(&[], &[&[], &[], &["1", "1", "1"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(2), 2));
        let error = build::<ServiceTime>(&["1"], &[&[]]).unwrap_err();
        assert_eq!((error.path, error.index), (None, 0));
    }

    #[test]
    fn compares_by_cross_multiplication() {
        use Ordering::{Equal, Greater, Less};
        let huge = u64::MAX - 10;
        // (a, b, incoming bytes, how a compares to b).
        let cases = [
            // Same throughput: less loaded wins, equal is a tie.
            (load(100, 5), load(200, 5), 4096, Less),
            (load(100, 5), load(100, 5), 4096, Equal),
            // Same load: higher throughput wins.
            (load(100, 1), load(100, 2), 4096, Greater),
            // (1000 + 1000) / 1 > (3000 + 1000) / 4.
            (load(1000, 1), load(3000, 4), 1000, Greater),
            // (1000 + 0) / 1 < (5000 + 0) / 4.
            (load(1000, 1), load(5000, 4), 0, Less),
            // Equal estimates 2000/1 == 4000/2: higher throughput.
            (load(2000, 1), load(4000, 2), 0, Greater),
            // The incoming I/O tips it: 0+8/1 = 8 > (10+8)/4.
            (load(0, 1), load(10, 4), 8, Greater),
            // Throughput 0 loses to any positive one, however loaded.
            (load(0, 0), load(1 << 40, 1), 4096, Greater),
            (load(huge, 1), load(0, 0), 4096, Less),
            // Both 0: by load.
            (load(1, 0), load(2, 0), 4096, Less),
            // Huge loads: huge/100 < (huge/2)/1; unguarded, the products
            // would overflow.
            (load(huge, 100), load(huge / 2, 1), 4096, Less),
            (load(huge / 2, 1), load(huge, 100), 4096, Greater),
            // Huge equal estimates 2^60/2 == 2^61/4 survive the shift: the
            // higher throughput.
            (load(1 << 60, 2), load(1 << 61, 4), 0, Greater),
            // The incoming I/O itself overflows the sum: saturates.
            (load(1, 1), load(2, 2), u64::MAX, Greater),
        ];
        for (index, (a, b, incoming, expected)) in cases.into_iter().enumerate() {
            assert_eq!(compare_load(a, b, incoming), expected, "case {index}");
            assert_eq!(
                compare_load(b, a, incoming),
                expected.reverse(),
                "case {index} swapped"
            );
        }
    }

    #[test]
    fn select_prefers_throughput_and_uses_zero_only_as_last_resort() {
        let selector: ServiceTime = build(&[], &[&["1", "0"], &["1", "10"], &["1", "40"]]).unwrap();
        let mut harness = Harness::new(3);
        // Idle: the highest throughput, from every starting point.
        for _ in 0..3 {
            assert_eq!(harness.pick(&selector), 2);
        }
        // 40 has 3 MiB queued, 10 has none: 4 KiB / 10 beats (3 MiB + 4 KiB) / 40.
        harness.loads[2].start_io(3 << 20);
        assert_eq!(harness.pick(&selector), 1);
        // Only the zero path and one other: never the zero path.
        harness.loads[1].start_io(1 << 40);
        harness.set_usable(&[0, 1]);
        assert_eq!(harness.pick(&selector), 1);
        harness.set_usable(&[0]);
        assert_eq!(harness.pick(&selector), 0);
        assert_eq!(
            selector.status_path_info(1, &harness.loads[1]),
            [(1u64 << 40).to_string(), "10".into()]
        );
    }

    #[test]
    fn equal_paths_take_turns() {
        let selector: ServiceTime = build(&[], &[&["1", "5"], &["1", "5"], &["1", "5"]]).unwrap();
        let mut harness = Harness::new(3);
        let picks: Vec<u16> = (0..6).map(|_| harness.pick(&selector)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    }

    proptest! {
        #[test]
        fn never_picks_a_non_candidate(
            sets in usable_sets(6),
            bytes in prop::collection::vec(any::<u64>(), 6),
            throughput in prop::collection::vec(0u32..=100, 6),
        ) {
            let words: Vec<[String; 2]> = throughput.iter().map(|t| ["1".into(), t.to_string()]).collect();
            let refs: Vec<Vec<&str>> = words.iter().map(|w| w.iter().map(String::as_str).collect()).collect();
            let args: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
            let selector: ServiceTime = build(&[], &args).unwrap();
            let mut harness = Harness::new(6);
            for (load, &bytes) in harness.loads.iter().zip(&bytes) {
                load.start_io(bytes);
            }
            for set in sets {
                harness.set_usable(&set);
                let position = harness.pick(&selector);
                let has_positive = set.iter().any(|&p| throughput[usize::from(p)] > 0);
                prop_assert!(!has_positive || throughput[usize::from(position)] > 0);
            }
        }

        #[test]
        fn balanced_io_returns_counters_to_zero(ops in prop::collection::vec(any::<(bool, u16, u32)>(), 0..200)) {
            let selector: ServiceTime = build(&[], &[&["1", "3"], &["1", "1"], &[], &["1", "0"]]).unwrap();
            assert_balanced_io(&selector, 4, &ops);
        }
    }
}
