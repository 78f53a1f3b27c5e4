//! Test support for selectors: build one from word lists, and pick with a
//! chosen set of usable paths and chosen counters.

use super::{ArgError, PathSelector, PathSetup, Pick, Setup};
use crate::load::PathLoad;
use crate::numa::NumaTopology;

/// Builds selector `S` from selector args and per-path args (paths on no
/// known NUMA node, on a one-node host).
pub(crate) fn build<S: PathSelector>(args: &[&str], paths: &[&[&str]]) -> Result<S, ArgError> {
    build_on(
        args,
        paths,
        &vec![None; paths.len()],
        &NumaTopology::default(),
    )
}

/// Like [`build`], with each path's node and the host's layout.
pub(crate) fn build_on<S: PathSelector>(
    args: &[&str],
    paths: &[&[&str]],
    nodes: &[Option<u16>],
    numa: &NumaTopology,
) -> Result<S, ArgError> {
    let args: Vec<String> = args.iter().map(|word| word.to_string()).collect();
    let path_args: Vec<Vec<String>> = paths
        .iter()
        .map(|words| words.iter().map(|word| word.to_string()).collect())
        .collect();
    let setups: Vec<PathSetup<'_>> = path_args
        .iter()
        .zip(nodes)
        .map(|(args, &node)| PathSetup { args, node })
        .collect();
    S::new(&Setup {
        args: &args,
        paths: &setups,
        numa,
    })
}

/// One thread's view of a group: which paths are usable, its load on
/// them, its selector state and its CPU.
pub(crate) struct Harness<S: PathSelector> {
    pub(crate) loads: Vec<PathLoad>,
    pub(crate) candidates: Vec<u16>,
    pub(crate) usable: Vec<bool>,
    pub(crate) thread: S::ThreadState,
    pub(crate) bytes: u64,
    pub(crate) cpu: u32,
    pub(crate) node: u16,
    pub(crate) now_ns: u64,
    pub(crate) generation: u64,
}

impl<S: PathSelector> Harness<S> {
    /// `path_count` paths, all usable.
    pub(crate) fn new(path_count: usize) -> Self {
        Harness {
            loads: (0..path_count).map(|_| PathLoad::default()).collect(),
            candidates: (0..path_count as u16).collect(),
            usable: vec![true; path_count],
            thread: S::ThreadState::default(),
            bytes: 4096,
            cpu: 0,
            node: 0,
            now_ns: 0,
            generation: 1,
        }
    }

    /// Makes exactly `positions` the candidates (a new snapshot generation).
    pub(crate) fn set_usable(&mut self, positions: &[u16]) {
        self.usable.iter_mut().for_each(|usable| *usable = false);
        for &position in positions {
            self.usable[usize::from(position)] = true;
        }
        self.candidates = (0..self.loads.len() as u16)
            .filter(|&position| self.usable[usize::from(position)])
            .collect();
        self.generation += 1;
    }

    /// Asks `selector` for a path and checks it is a candidate.
    pub(crate) fn pick(&mut self, selector: &S) -> u16 {
        let pick = Pick {
            candidates: &self.candidates,
            usable: &self.usable,
            loads: &self.loads,
            bytes: self.bytes,
            cpu: self.cpu,
            node: self.node,
            now_ns: self.now_ns,
            generation: self.generation,
        };
        let position = selector.select(&mut self.thread, &pick);
        assert!(
            self.usable[usize::from(position)],
            "{} picked unusable path {position}",
            S::NAME
        );
        position
    }

    /// Starts an I/O of `self.bytes` on the path at `position` the way a
    /// queue does: counts it, then tells a selector that observes load.
    pub(crate) fn start_io(&mut self, selector: &S, position: u16) {
        let position = usize::from(position);
        let load = &self.loads[position];
        load.start_io(self.bytes);
        if S::OBSERVES_LOAD {
            selector.started(&mut self.thread, position, load, self.now_ns);
        }
    }

    /// Ends an I/O of `bytes` started at `start_ns` on the path at
    /// `position`, at `self.now_ns`, the way a queue does.
    pub(crate) fn end_io(&mut self, selector: &S, position: u16, bytes: u64, start_ns: u64) {
        let position = usize::from(position);
        end_io(
            selector,
            &mut self.thread,
            position,
            &self.loads[position],
            bytes,
            start_ns,
            self.now_ns,
        );
    }

    /// Sets every path's in-flight count (no bytes, nothing learnt).
    pub(crate) fn set_in_flight(&mut self, counts: &[u32]) {
        for (load, &count) in self.loads.iter_mut().zip(counts) {
            *load = PathLoad::with(count, 0, 0, 0);
        }
    }
}

/// Ends an I/O of `bytes` on the path at `position`, whose load is
/// `load`, the way a queue does: uncounts it, then tells a selector that
/// observes load (with `thread`, the calling thread's state).
pub(crate) fn end_io<S: PathSelector>(
    selector: &S,
    thread: &mut S::ThreadState,
    position: usize,
    load: &PathLoad,
    bytes: u64,
    start_ns: u64,
    now_ns: u64,
) {
    load.end_io(bytes);
    if S::OBSERVES_LOAD {
        selector.completed(thread, position, load, start_ns, now_ns);
    }
}

/// Random non-empty usable sets over `path_count` paths, as sorted
/// positions: one per new snapshot generation.
pub(crate) fn usable_sets(
    path_count: usize,
) -> impl proptest::strategy::Strategy<Value = Vec<Vec<u16>>> {
    use proptest::prelude::*;
    let all = (1u32 << path_count) - 1;
    prop::collection::vec(1..=all, 1..20).prop_map(move |masks| {
        masks
            .into_iter()
            .map(|mask| {
                (0..path_count as u16)
                    .filter(|&p| mask & (1 << p) != 0)
                    .collect()
            })
            .collect()
    })
}

/// Drives `selector` through `ops` on `path_count` (<= 16) paths:
/// `(true, _, bytes)` picks a path and starts an I/O of `bytes` on it,
/// `(false, which, _)` ends the in-flight I/O `which` (modulo their
/// number); a `which` divisible by 8 first makes a new usable set out of
/// the bits of `bytes`. Then it ends all the rest. Every pick is checked to
/// be a candidate; at the end every path's `in_flight` and
/// `in_flight_bytes` must be back to zero.
pub(crate) fn assert_balanced_io<S: PathSelector>(
    selector: &S,
    path_count: usize,
    ops: &[(bool, u16, u32)],
) {
    let mut harness = Harness::<S>::new(path_count);
    let mut in_flight: Vec<(u16, u64, u64)> = Vec::new();
    for &(start, which, bytes) in ops {
        harness.now_ns += 1_000 + u64::from(which);
        if which % 8 == 0 {
            let mask = bytes as usize % ((1 << path_count) - 1) + 1;
            let usable: Vec<u16> = (0..path_count as u16)
                .filter(|&p| mask & (1 << p) != 0)
                .collect();
            harness.set_usable(&usable);
        }
        if start || in_flight.is_empty() {
            harness.bytes = u64::from(bytes);
            let position = harness.pick(selector);
            harness.start_io(selector, position);
            in_flight.push((position, harness.bytes, harness.now_ns));
        } else {
            let (position, bytes, start_ns) =
                in_flight.swap_remove(usize::from(which) % in_flight.len());
            harness.end_io(selector, position, bytes, start_ns);
        }
    }
    for (position, bytes, start_ns) in in_flight {
        harness.end_io(selector, position, bytes, start_ns);
    }
    for (position, load) in harness.loads.iter().enumerate() {
        assert_eq!(load.in_flight(), 0, "in_flight of path {position}");
        assert_eq!(
            load.in_flight_bytes(),
            0,
            "in_flight_bytes of path {position}"
        );
    }
}

/// Per-path argument lists for `path_count` paths that take none.
pub(crate) fn no_args(path_count: usize) -> Vec<&'static [&'static str]> {
    vec![&[]; path_count]
}
