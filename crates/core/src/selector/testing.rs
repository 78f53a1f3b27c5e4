//! Test support for selectors: build one from word lists, and pick with a
//! chosen set of usable paths and chosen counters.

use super::{ArgError, PathSelector, PathSetup, Pick, Setup};
use crate::numa::NumaTopology;
use crate::path::PathShared;

/// Builds selector `S` from selector args and per-path args (paths on no
/// known NUMA node, on a one-node host).
pub(crate) fn build<S: PathSelector>(args: &[&str], paths: &[&[&str]]) -> Result<S, ArgError> {
    build_on(args, paths, &vec![None; paths.len()], &NumaTopology::default())
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

/// One thread's view of a group: which paths are usable, their counters,
/// the thread's selector state and its CPU.
pub(crate) struct Harness<S: PathSelector> {
    pub(crate) paths: Vec<PathShared>,
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
            paths: (0..path_count).map(|_| PathShared::default()).collect(),
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
        self.candidates = (0..self.paths.len() as u16)
            .filter(|&position| self.usable[usize::from(position)])
            .collect();
        self.generation += 1;
    }

    /// Asks `selector` for a path and checks it is a candidate.
    pub(crate) fn pick(&mut self, selector: &S) -> u16 {
        let pick = Pick {
            candidates: &self.candidates,
            usable: &self.usable,
            paths: &self.paths,
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
}
