//! `numa`: send each I/O down the candidate nearest to the submitting
//! CPU's NUMA node (Linux NVMe multipath's default iopolicy `numa`).
//!
//! # Rule
//! The candidate with the smallest `numa.distance(pick.node, path node)`;
//! ties go to the lowest group position (the kernel's `__nvme_find_path`
//! keeps the first path at the smallest distance). A path's node is
//! [`PathSetup::node`](super::PathSetup::node); a path whose node is
//! unknown, or a node the topology lacks, is farther than any known
//! distance, so it is used only when no path with a known distance is a
//! candidate. Optimized paths come before non-optimized ones because the
//! candidates are already of the best access class.
//!
//! The kernel keeps the answer per node (`current_path[node]`) and clears
//! it when paths change. Here each thread keeps it keyed on
//! `(pick.generation, pick.node)`: a new snapshot or a move to another
//! node recomputes it, so the common case is one compare and one load.
//!
//! # Arguments
//! None, neither for the selector nor per path.
//!
//! # Concurrency
//! Nothing shared is written: the preference order of each node is built
//! in `new` and immutable. Per thread: the cached answer.

use super::{ArgError, PathSelector, Pick, Setup};

/// The numa selector.
#[derive(Debug)]
pub struct Numa {
    /// By node of the topology: every path position, nearest first, ties
    /// by position.
    preference: Vec<Vec<u16>>,
}

/// One thread's cached answer.
#[derive(Debug, Default)]
pub struct NumaThread {
    /// `(generation, node)` the answer is for; `None` before the first pick.
    key: Option<(u64, u16)>,
    /// The nearest candidate for `key`.
    position: u16,
}

impl Numa {
    /// The nearest candidate of `pick`, the slow way.
    fn nearest(&self, pick: &Pick<'_>) -> u16 {
        match self.preference.get(usize::from(pick.node)) {
            Some(order) => order
                .iter()
                .copied()
                .find(|&position| pick.usable[usize::from(position)])
                .expect("the candidates are never empty"),
            // Every distance is unknown, so all are equally far.
            None => pick.candidates[0],
        }
    }
}

impl PathSelector for Numa {
    const NAME: &'static str = "numa";
    const TABLE_PATH_ARGS: usize = 0;
    const STATUS_INFO_ARGS: usize = 0;
    type ThreadState = NumaThread;

    fn new(setup: &Setup<'_>) -> Result<Self, ArgError> {
        if !setup.args.is_empty() {
            return Err(ArgError::selector(0, "numa takes no selector arguments"));
        }
        if let Some(position) = setup.paths.iter().position(|path| !path.args.is_empty()) {
            return Err(ArgError::path(position, 0, "numa takes no path arguments"));
        }
        let preference = (0..setup.numa.node_count())
            .map(|node| {
                let distance = |position: u16| match setup.paths[usize::from(position)].node {
                    Some(path_node) => setup.numa.distance(node as u16, path_node),
                    None => u32::MAX,
                };
                let mut order: Vec<u16> = (0..setup.paths.len() as u16).collect();
                // Stable: equal distances keep position order.
                order.sort_by_key(|&position| distance(position));
                order
            })
            .collect();
        Ok(Numa { preference })
    }

    #[inline]
    fn select(&self, thread: &mut NumaThread, pick: &Pick<'_>) -> u16 {
        let key = Some((pick.generation, pick.node));
        if thread.key != key {
            thread.position = self.nearest(pick);
            thread.key = key;
        }
        debug_assert!(
            pick.usable[usize::from(thread.position)],
            "stale numa cache"
        );
        thread.position
    }

    fn table_path_args(&self, _position: usize) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numa::NumaTopology;
    use crate::selector::testing::{build, build_on, no_args, usable_sets, Harness};
    use proptest::prelude::*;

    #[test]
    fn takes_no_arguments() {
        assert!(build::<Numa>(&[], &no_args(2)).is_ok());
        let error = build::<Numa>(&["1"], &no_args(2)).unwrap_err();
        assert_eq!((error.path, error.index), (None, 0));
        let error = build::<Numa>(&[], &[&[], &["1"]]).unwrap_err();
        assert_eq!((error.path, error.index), (Some(1), 0));
    }

    fn two_nodes() -> NumaTopology {
        NumaTopology::new(vec![0, 1], vec![vec![10, 20], vec![20, 10]]).unwrap()
    }

    /// Four nodes in a ring: neighbours at 20, the opposite node at 30.
    fn four_nodes() -> NumaTopology {
        let distance = vec![
            vec![10, 20, 30, 20],
            vec![20, 10, 20, 30],
            vec![30, 20, 10, 20],
            vec![20, 30, 20, 10],
        ];
        NumaTopology::new(vec![0, 1, 2, 3], distance).unwrap()
    }

    #[test]
    fn picks_the_nearest_path_on_two_nodes() {
        let nodes = [Some(1), None, Some(0), Some(1)];
        let selector: Numa = build_on(&[], &no_args(4), &nodes, &two_nodes()).unwrap();
        let mut harness = Harness::new(4);
        // (usable, node, expected)
        let cases: [(&[u16], u16, u16); 6] = [
            (&[0, 1, 2, 3], 0, 2),
            (&[0, 1, 2, 3], 1, 0),
            (&[1, 2, 3], 1, 3),
            (&[0, 1, 3], 0, 0),
            // Only the path of unknown node left.
            (&[1], 0, 1),
            // A node the topology lacks: all equally far, lowest position.
            (&[1, 2, 3], 7, 1),
        ];
        for (usable, node, expected) in cases {
            harness.set_usable(usable);
            harness.node = node;
            assert_eq!(harness.pick(&selector), expected, "{usable:?} node {node}");
        }
    }

    #[test]
    fn picks_the_nearest_path_on_four_nodes() {
        let nodes = [Some(2), Some(3), Some(1), Some(0), Some(2)];
        let selector: Numa = build_on(&[], &no_args(5), &nodes, &four_nodes()).unwrap();
        let mut harness = Harness::new(5);
        let cases: [(&[u16], u16, u16); 6] = [
            (&[0, 1, 2, 3, 4], 0, 3),
            (&[0, 1, 2, 3, 4], 2, 0),
            // Node 0 without its own path: neighbours 1 and 3 tie at 20;
            // the lower position (path 1, on node 3) wins.
            (&[0, 1, 2, 4], 0, 1),
            // Node 1 without paths on 1: neighbours 0 and 2 at 20.
            (&[0, 1, 3, 4], 1, 0),
            (&[1, 3, 4], 1, 3),
            // Only the opposite node is left.
            (&[0, 4], 0, 0),
        ];
        for (usable, node, expected) in cases {
            harness.set_usable(usable);
            harness.node = node;
            assert_eq!(harness.pick(&selector), expected, "{usable:?} node {node}");
        }
    }

    #[test]
    fn cache_follows_generation_and_node() {
        let nodes = [Some(0), Some(1)];
        let selector: Numa = build_on(&[], &no_args(2), &nodes, &two_nodes()).unwrap();
        let mut harness = Harness::new(2);
        assert_eq!(harness.pick(&selector), 0);
        assert_eq!(harness.thread.key, Some((harness.generation, 0)));
        harness.node = 1;
        assert_eq!(harness.pick(&selector), 1);
        // Same generation and node: the cached answer, without a lookup
        // (a planted answer shows it is not recomputed).
        harness.thread.position = 0;
        assert_eq!(harness.pick(&selector), 0);
        // A new generation (path 0 gone) recomputes.
        harness.set_usable(&[1]);
        harness.node = 0;
        assert_eq!(harness.pick(&selector), 1);
        harness.set_usable(&[0, 1]);
        assert_eq!(harness.pick(&selector), 0);
    }

    proptest! {
        #[test]
        fn picks_a_nearest_candidate(
            nodes in prop::collection::vec(prop::option::of(0u16..5), 6),
            sets in usable_sets(6),
            node in 0u16..5,
        ) {
            let topology = four_nodes();
            let selector: Numa = build_on(&[], &no_args(6), &nodes, &topology).unwrap();
            let mut harness = Harness::new(6);
            harness.node = node;
            let distance = |p: u16| nodes[usize::from(p)].map_or(u32::MAX, |n| topology.distance(node, n));
            for set in sets {
                harness.set_usable(&set);
                let position = harness.pick(&selector);
                let nearest = set.iter().copied().min_by_key(|&p| distance(p)).unwrap();
                prop_assert_eq!(position, nearest);
            }
        }
    }
}
