//! The immutable topology snapshot I/O threads route by, and the pure rule
//! that computes it from the map's control state (dm's `choose_pgpath`).
//!
//! # Contract
//! A snapshot is rebuilt under the map's control lock after every change
//! of path health, access state, group bypass or switch request, and
//! published atomically; I/O threads never see a half-made one. Its
//! [`Route`] names the group I/O goes to and that group's candidates: the
//! usable paths of the best access class. If a route exists it has at
//! least one candidate; if none exists, no path of any group is usable.

use crate::path::AccessState;

/// What I/O threads read to route one I/O.
#[derive(Debug)]
pub struct Snapshot {
    /// Bumped on every rebuild; selectors key their per-thread caches on it.
    pub generation: u64,
    /// Whether I/O waits (true) or fails (false) while there is no route.
    pub queue_if_no_path: bool,
    /// Where I/O goes now; `None` when no path of any group is usable.
    pub route: Option<Route>,
}

/// The group I/O goes to and its candidate paths.
///
/// # Invariants
/// `candidates` is non-empty and sorted; `usable[p]` is true exactly for
/// the positions in `candidates`; `usable.len()` is the group's path count.
#[derive(Debug, PartialEq, Eq)]
pub struct Route {
    /// Group index (0-based; dm numbers them from 1).
    pub group: usize,
    /// Access class of every candidate.
    pub access: AccessState,
    /// Group positions of the candidates.
    pub candidates: Box<[u16]>,
    /// Membership of `candidates`, by group position.
    pub usable: Box<[bool]>,
}

/// What the rule needs to know about one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PathHealth {
    /// Failed and not reinstated.
    pub failed: bool,
    /// ALUA/ANA access state.
    pub access: AccessState,
}

impl PathHealth {
    fn usable_as(self, access: AccessState) -> bool {
        !self.failed && self.access == access
    }
}

/// The candidates of one group: its usable optimized paths, else its usable
/// non-optimized paths; `None` if neither exists.
pub(crate) fn group_route(group: usize, paths: &[PathHealth]) -> Option<Route> {
    [AccessState::Optimized, AccessState::NonOptimized]
        .into_iter()
        .find_map(|access| group_route_as(group, paths, access))
}

/// The usable paths of one group in access class `access`, if any.
fn group_route_as(group: usize, paths: &[PathHealth], access: AccessState) -> Option<Route> {
    let usable: Box<[bool]> = paths.iter().map(|path| path.usable_as(access)).collect();
    let candidates: Box<[u16]> = (0..paths.len())
        .filter(|&position| usable[position])
        .map(|position| position as u16)
        .collect();
    (!candidates.is_empty()).then_some(Route {
        group,
        access,
        candidates,
        usable,
    })
}

/// Chooses the group I/O goes to: among the groups with a usable
/// optimized path, as dm does — the group asked for by `switch_group` (or
/// the table's initial group) if it is one; else the current group if it
/// is one; else the first such group in order that is not bypassed
/// (`disable_group`); else the first bypassed one. Only when no group has
/// a usable optimized path, the same choice among the groups with a
/// usable non-optimized path. So a non-optimized path carries I/O only
/// while no optimized path of the map is usable, whatever the grouping
/// (multipath-tools gets there by regrouping on a priority change; here
/// the rule holds between regroupings too).
pub(crate) fn choose_route(
    groups: &[&[PathHealth]],
    bypassed: &[bool],
    current: Option<usize>,
    requested: Option<usize>,
) -> Option<Route> {
    let order = || {
        let preferred = requested.into_iter().chain(current);
        let in_order = [false, true].into_iter().flat_map(|want_bypassed| {
            (0..groups.len()).filter(move |&group| bypassed[group] == want_bypassed)
        });
        preferred
            .chain(in_order)
            .filter(|&group| group < groups.len())
    };
    [AccessState::Optimized, AccessState::NonOptimized]
        .into_iter()
        .find_map(|access| order().find_map(|group| group_route_as(group, groups[group], access)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UP: PathHealth = PathHealth {
        failed: false,
        access: AccessState::Optimized,
    };
    const DOWN: PathHealth = PathHealth {
        failed: true,
        access: AccessState::Optimized,
    };
    const SLOW: PathHealth = PathHealth {
        failed: false,
        access: AccessState::NonOptimized,
    };
    const STANDBY: PathHealth = PathHealth {
        failed: false,
        access: AccessState::Standby,
    };

    fn group_of(route: Option<Route>) -> Option<usize> {
        route.map(|route| route.group)
    }

    #[test]
    fn optimized_before_non_optimized_never_standby() {
        let route = group_route(0, &[SLOW, UP, STANDBY, UP]).unwrap();
        assert_eq!(&*route.candidates, &[1, 3]);
        assert_eq!(&*route.usable, &[false, true, false, true]);
        let route = group_route(0, &[SLOW, DOWN, STANDBY]).unwrap();
        assert_eq!(
            (route.access, &*route.candidates),
            (AccessState::NonOptimized, &[0][..])
        );
        assert_eq!(group_route(0, &[DOWN, STANDBY]), None);
    }

    #[test]
    fn group_choice_follows_dm() {
        let healthy: &[PathHealth] = &[UP, UP];
        let dead: &[PathHealth] = &[DOWN];
        // Stay in the current group while it has a usable path.
        assert_eq!(
            group_of(choose_route(
                &[healthy, healthy],
                &[false, false],
                Some(1),
                None
            )),
            Some(1)
        );
        // A switch request wins when its group is usable...
        assert_eq!(
            group_of(choose_route(
                &[healthy, healthy],
                &[false, false],
                Some(1),
                Some(0)
            )),
            Some(0)
        );
        // ...and is ignored when it is not.
        assert_eq!(
            group_of(choose_route(
                &[healthy, dead],
                &[false, false],
                Some(0),
                Some(1)
            )),
            Some(0)
        );
        // Current group dead: first group in order.
        assert_eq!(
            group_of(choose_route(
                &[dead, healthy, healthy],
                &[false; 3],
                Some(0),
                None
            )),
            Some(1)
        );
        // Bypassed groups are skipped first, used as a last resort.
        assert_eq!(
            group_of(choose_route(
                &[healthy, healthy],
                &[true, false],
                None,
                None
            )),
            Some(1)
        );
        assert_eq!(
            group_of(choose_route(&[healthy, dead], &[false, true], None, None)),
            Some(0)
        );
        assert_eq!(
            group_of(choose_route(&[dead, healthy], &[false, true], None, None)),
            Some(1)
        );
        // Nothing usable anywhere.
        assert_eq!(
            group_of(choose_route(
                &[dead, dead],
                &[false, false],
                Some(0),
                Some(1)
            )),
            None
        );
        assert_eq!(group_of(choose_route(&[], &[], None, None)), None);
    }

    /// A group whose paths are all non-optimized gives way to a group
    /// with an optimized one, even when it is current or asked for; it
    /// carries I/O again once no optimized path is usable.
    #[test]
    fn an_optimized_path_anywhere_wins_over_the_current_group() {
        let slow: &[PathHealth] = &[SLOW];
        let healthy: &[PathHealth] = &[UP];
        let dead: &[PathHealth] = &[DOWN];
        let route = choose_route(&[slow, healthy], &[false, false], Some(0), Some(0));
        assert_eq!(group_of(route), Some(1));
        let route = choose_route(&[slow, dead], &[false, false], Some(1), None).unwrap();
        assert_eq!((route.group, route.access), (0, AccessState::NonOptimized));
        let standby: &[PathHealth] = &[STANDBY];
        assert_eq!(
            group_of(choose_route(&[standby, dead], &[false, false], None, None)),
            None
        );
    }

    fn health() -> impl Strategy<Value = PathHealth> {
        prop_oneof![Just(UP), Just(DOWN), Just(SLOW), Just(STANDBY)]
    }

    proptest! {
        /// A route exists exactly when some path carries I/O; its candidates
        /// are usable and of the best class its group has.
        #[test]
        fn route_iff_usable_path(
            groups in proptest::collection::vec(proptest::collection::vec(health(), 1..6), 0..5),
            bypass_bits in any::<u8>(),
            current in proptest::option::of(0usize..6),
            requested in proptest::option::of(0usize..6),
        ) {
            let views: Vec<&[PathHealth]> = groups.iter().map(Vec::as_slice).collect();
            let bypassed: Vec<bool> = (0..groups.len()).map(|group| bypass_bits >> group & 1 == 1).collect();
            let any_usable = groups.iter().flatten().any(|path| !path.failed && path.access.carries_io());
            let route = choose_route(&views, &bypassed, current, requested);
            prop_assert_eq!(route.is_some(), any_usable);
            if let Some(route) = route {
                let group = &groups[route.group];
                let has_optimized = group.iter().any(|path| path.usable_as(AccessState::Optimized));
                prop_assert_eq!(route.access == AccessState::Optimized, has_optimized);
                // Non-optimized only while no group has an optimized path.
                let map_has_optimized = groups
                    .iter()
                    .flatten()
                    .any(|path| path.usable_as(AccessState::Optimized));
                prop_assert_eq!(route.access == AccessState::Optimized, map_has_optimized);
                for &position in route.candidates.iter() {
                    prop_assert!(group[usize::from(position)].usable_as(route.access));
                }
                prop_assert_eq!(route.candidates.len(), route.usable.iter().filter(|&&usable| usable).count());
            }
        }
    }
}
