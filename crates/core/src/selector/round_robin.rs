//! `round-robin [repeat_count]`: each thread walks the usable paths in
//! order, staying `repeat_count` I/Os on each.
//!
//! Unlike the kernel's request-based dm, which forces `repeat_count` to 1,
//! the count is honoured: with `repeat_count` 4 a thread sends four
//! consecutive I/Os down one path before moving on. The cursor is per
//! thread (dm's per-cpu current path), so threads never contend on it.

use super::{parse_u32_arg, ArgError, PathSelector, Pick, Setup};

/// Largest `repeat_count` accepted.
pub const MAX_REPEAT_COUNT: u32 = 1 << 20;

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
    /// I/Os still to send down `current` before moving on.
    remaining: u32,
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
        if let Some(current) = thread.current {
            if thread.remaining > 0 && pick.usable[usize::from(current)] {
                thread.remaining -= 1;
                return current;
            }
        }
        // The first candidate after the current one, wrapping around.
        let next = match thread.current {
            None => pick.candidates[0],
            Some(current) => {
                let after = pick.candidates.partition_point(|&position| position <= current);
                pick.candidates[if after == pick.candidates.len() { 0 } else { after }]
            }
        };
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
    use crate::selector::testing::{build, Harness};
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

    proptest! {
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
