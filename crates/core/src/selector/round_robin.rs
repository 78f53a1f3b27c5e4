//! `round-robin [repeat_count]`: each thread walks the usable paths in
//! order, staying `repeat_count` I/Os on each.
//!
//! Unlike the kernel's request-based dm, which forces `repeat_count` to 1,
//! the count is honoured: with `repeat_count` 4 a thread sends four
//! consecutive I/Os down one path before moving on. The cursor is per
//! thread (dm's per-cpu current path), so threads never contend on it.

use super::{parse_u32_arg, ArgError, PathSelector, Pick, Setup};

/// Largest `repeat_count` accepted.
pub(crate) const MAX_REPEAT_COUNT: u32 = 1 << 20;

/// Parses the optional `repeat_count` that leads the per-path args of the
/// dm selectors (default 1); `args_allowed` is how many args the selector
/// takes in all.
pub(crate) fn parse_repeat_count(
    position: usize,
    args: &[String],
    args_allowed: usize,
) -> Result<u32, ArgError> {
    if args.len() > args_allowed {
        return Err(ArgError::path(
            position,
            args_allowed,
            format!("too many path arguments: at most {args_allowed}"),
        ));
    }
    match args.first() {
        None => Ok(1),
        Some(word) => parse_u32_arg(word, "repeat_count", 1, MAX_REPEAT_COUNT)
            .map_err(|message| ArgError::path(position, 0, message)),
    }
}

/// The round-robin selector.
#[derive(Debug)]
pub struct RoundRobin {
    /// `repeat_count` of each path, by group position.
    repeat_count: Vec<u32>,
}

/// One thread's place in the rotation.
#[derive(Debug, Default)]
pub struct RoundRobinThread {
    /// Position of the path last picked (`None` before the first pick).
    current: Option<u16>,
    /// Index of `current` in the candidates of snapshot `generation`, so
    /// that stepping on is O(1) until the candidates change.
    index: usize,
    /// The snapshot generation `index` belongs to (`None`: not yet found).
    generation: Option<u64>,
    /// I/Os still to send down `current` before moving on.
    remaining: u32,
}

impl RoundRobinThread {
    /// Finds the thread's place in new candidates: `current` itself if it
    /// is still a candidate (keeping its remaining count), else just
    /// before the first candidate after it, so the next step lands there.
    ///
    /// Takes the two fields it needs rather than the `Pick`: a reference
    /// to the pick passed out of line would make the caller build the
    /// whole pick in memory on every I/O.
    #[cold]
    fn anchor(&mut self, candidates: &[u16], generation: u64) {
        self.generation = Some(generation);
        let Some(current) = self.current else {
            self.index = candidates.len() - 1;
            self.remaining = 0;
            return;
        };
        let at = candidates.partition_point(|&position| position < current);
        if candidates.get(at) == Some(&current) {
            self.index = at;
        } else {
            self.index = at.checked_sub(1).unwrap_or(candidates.len() - 1);
            self.remaining = 0;
        }
    }
}

impl PathSelector for RoundRobin {
    const NAME: &'static str = "round-robin";
    const TABLE_PATH_ARGS: usize = 1;
    const STATUS_INFO_ARGS: usize = 0;
    type ThreadState = RoundRobinThread;

    fn new(setup: &Setup<'_>) -> Result<Self, ArgError> {
        if !setup.args.is_empty() {
            return Err(ArgError::selector(0, "round-robin takes no selector arguments"));
        }
        let repeat_count = setup
            .paths
            .iter()
            .enumerate()
            .map(|(position, path)| parse_repeat_count(position, path.args, 1))
            .collect::<Result<_, _>>()?;
        Ok(RoundRobin { repeat_count })
    }

    #[inline]
    fn select(&self, thread: &mut RoundRobinThread, pick: &Pick<'_>) -> u16 {
        if thread.generation != Some(pick.generation) {
            thread.anchor(pick.candidates, pick.generation);
        }
        let candidates = pick.candidates;
        if thread.remaining > 0 {
            thread.remaining -= 1;
            return candidates[thread.index];
        }
        // The candidate after the current one, wrapping around.
        thread.index = if thread.index + 1 < candidates.len() {
            thread.index + 1
        } else {
            0
        };
        let next = candidates[thread.index];
        thread.current = Some(next);
        thread.remaining = self.repeat_count[usize::from(next)] - 1;
        next
    }

    fn table_path_args(&self, position: usize) -> Vec<String> {
        vec![self.repeat_count[position].to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::testing::{build, usable_sets, Harness};
    use proptest::prelude::*;

    #[test]
    fn parses_and_prints_repeat_count() {
        let selector: RoundRobin = build(&[], &[&[], &["3"]]).unwrap();
        assert_eq!(selector.table_path_args(0), ["1"]);
        assert_eq!(selector.table_path_args(1), ["3"]);
        assert!(build::<RoundRobin>(&["1"], &[&[]]).is_err());
        let error = build::<RoundRobin>(&[], &[&["0"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(0), 0));
        assert!(build::<RoundRobin>(&[], &[&["x"]]).is_err());
        assert!(build::<RoundRobin>(&[], &[&["1", "2"]]).is_err());
    }

    #[test]
    fn rotates_and_honours_repeat_count() {
        let selector: RoundRobin = build(&[], &[&["2"], &["1"], &["3"]]).unwrap();
        let mut harness = Harness::new(3);
        let picks: Vec<u16> = (0..12).map(|_| harness.pick(&selector)).collect();
        assert_eq!(picks, [0, 0, 1, 2, 2, 2, 0, 0, 1, 2, 2, 2]);
    }

    #[test]
    fn skips_unusable_paths_and_wraps() {
        let selector: RoundRobin = build(&[], &[&[], &[], &[], &[]]).unwrap();
        let mut harness = Harness::new(4);
        harness.set_usable(&[0, 2]);
        let picks: Vec<u16> = (0..4).map(|_| harness.pick(&selector)).collect();
        assert_eq!(picks, [0, 2, 0, 2]);
        // The current path (2) fails: move on to the next after it.
        harness.set_usable(&[1, 3]);
        assert_eq!(harness.pick(&selector), 3);
        assert_eq!(harness.pick(&selector), 1);
    }

    /// The rule stated plainly, for checking the O(1) stepping against:
    /// stay on the current path while it is usable and has I/Os left, else
    /// take the first candidate after it, wrapping around.
    fn reference_pick(
        repeat_count: &[u32],
        state: &mut (Option<u16>, u32),
        candidates: &[u16],
        usable: &[bool],
    ) -> u16 {
        let (current, remaining) = state;
        if let Some(position) = *current {
            if *remaining > 0 && usable[usize::from(position)] {
                *remaining -= 1;
                return position;
            }
        }
        let next = match *current {
            None => candidates[0],
            Some(position) => *candidates
                .iter()
                .find(|&&candidate| candidate > position)
                .unwrap_or(&candidates[0]),
        };
        *current = Some(next);
        *remaining = repeat_count[usize::from(next)] - 1;
        next
    }

    proptest! {
        #[test]
        fn follows_the_reference_rule_as_candidates_change(
            sets in usable_sets(6),
            repeat in prop::collection::vec(1u32..4, 6),
            picks_per_set in 1usize..12,
        ) {
            let words: Vec<String> = repeat.iter().map(u32::to_string).collect();
            let path_args: Vec<[&str; 1]> = words.iter().map(|word| [word.as_str()]).collect();
            let args: Vec<&[&str]> = path_args.iter().map(|args| &args[..]).collect();
            let selector: RoundRobin = build(&[], &args).unwrap();
            let mut harness = Harness::new(6);
            let mut reference = (None, 0);
            for set in sets {
                harness.set_usable(&set);
                for _ in 0..picks_per_set {
                    let expected =
                        reference_pick(&repeat, &mut reference, &harness.candidates, &harness.usable);
                    prop_assert_eq!(harness.pick(&selector), expected);
                }
            }
        }

        #[test]
        fn spreads_evenly_within_repeat_count(
            repeat in 1u32..5,
            path_count in 1usize..9,
            io_count in 0usize..200,
        ) {
            let repeat_word = repeat.to_string();
            let path_args = [repeat_word.as_str()];
            let args: Vec<&[&str]> = vec![&path_args[..]; path_count];
            let selector: RoundRobin = build(&[], &args).unwrap();
            let mut harness = Harness::new(path_count);
            let mut counts = vec![0u32; path_count];
            for _ in 0..io_count {
                counts[usize::from(harness.pick(&selector))] += 1;
            }
            let most = counts.iter().max().unwrap();
            let least = counts.iter().min().unwrap();
            prop_assert!(most - least <= repeat);
        }
    }
}
