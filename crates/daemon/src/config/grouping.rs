//! A map's priority groups, from one of the three forms a config gives
//! them in, into a [`Table`] that the core accepts:
//!
//! - a `path_grouping_policy` ([`by_policy`]): `failover` (a group per
//!   path, in file order), `multibus` (one group), `group_by_prio` (a group
//!   per distinct `prio`, highest first, paths in file order within it);
//! - explicit `[[map.group]]`s (checked in [`super::check`]);
//! - a dm table string.
//!
//! [`validate`] builds the table the way the core will, with
//! [`Map::new`], so a selector's refusal of its arguments is found here
//! and reported at the config key that gave the argument.

use super::error::{Located, Place};
use super::settings::Policy;
use mpio_core::map::{Map, MapError, MapOptions, PathInfo};
use mpio_core::table::{Features, GroupSpec, PathSpec, Table, TableError};

/// The paths of each group (indices into the map's paths), by `policy`;
/// `prios` is each path's `prio`. Every path is in exactly one group;
/// no group is empty; `paths` must not be empty.
pub(super) fn by_policy(policy: Policy, prios: &[u32]) -> Vec<Vec<usize>> {
    match policy {
        Policy::Failover => (0..prios.len()).map(|path| vec![path]).collect(),
        Policy::Multibus => vec![(0..prios.len()).collect()],
        Policy::GroupByPrio => {
            let mut distinct: Vec<u32> = prios.to_vec();
            distinct.sort_unstable_by(|a, b| b.cmp(a));
            distinct.dedup();
            distinct
                .into_iter()
                .map(|prio| {
                    (0..prios.len())
                        .filter(|&path| prios[path] == prio)
                        .collect()
                })
                .collect()
        }
    }
}

/// One group as the config gave it, with the places to report it at.
#[derive(Clone, Debug)]
pub(super) struct GroupPlan {
    /// The selector's name and where it was written.
    pub selector: Located<String>,
    /// The selector's arguments, each where it was written.
    pub selector_args: Vec<Located<String>>,
    /// The group's paths: indices into [`PathPlan`]s.
    pub paths: Vec<usize>,
}

/// One named path as the config gave it.
#[derive(Clone, Debug)]
pub(super) struct PathPlan {
    /// The name the table uses.
    pub name: String,
    /// The path's table (`map "m" path "a"`), for errors about it as a whole.
    pub place: Place,
    /// Its `prio`, for `group_by_prio`.
    pub prio: u32,
    /// Its per-path selector arguments, each where it was written.
    pub args: Vec<Located<String>>,
    /// Where `args` was written, when it was.
    pub args_place: Option<Place>,
}

/// The table of `groups` over `paths`: `length_sectors` long, starting on
/// `initial_group`, with `queue_if_no_path` as given.
pub(super) fn table_of(
    groups: &[GroupPlan],
    paths: &[PathPlan],
    length_sectors: u64,
    initial_group: u32,
    queue_if_no_path: bool,
) -> Table {
    Table {
        start_sector: 0,
        length_sectors,
        features: Features {
            queue_if_no_path,
            ..Features::default()
        },
        hardware_handler: Vec::new(),
        initial_group,
        groups: groups
            .iter()
            .map(|group| GroupSpec {
                selector: group.selector.value.clone(),
                selector_args: group
                    .selector_args
                    .iter()
                    .map(|arg| arg.value.clone())
                    .collect(),
                paths: group
                    .paths
                    .iter()
                    .map(|&path| PathSpec {
                        name: paths[path].name.clone(),
                        args: paths[path]
                            .args
                            .iter()
                            .map(|arg| arg.value.clone())
                            .collect(),
                        word: 0,
                    })
                    .collect(),
                word: 0,
            })
            .collect(),
    }
}

/// A refusal from [`validate`]: the 1-based word of the table's text it
/// is at, and the core's error.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The table's words do not fit the grammar or a selector's rules.
    Table(TableError),
    /// Anything else the core refused (too many paths).
    Map(MapError),
}

/// Builds `table` into a map as the core would (no paths opened, default
/// NUMA layout) and returns its canonical form, with no word positions.
///
/// # Errors
/// The core's refusal; a [`TableError`]'s position counts words in `text`,
/// the text `table` was parsed from.
pub(super) fn validate(table: &Table) -> Result<Table, Refusal> {
    let path_count: usize = table.groups.iter().map(|group| group.paths.len()).sum();
    let paths = vec![PathInfo::default(); path_count];
    match Map::new(table, &paths, MapOptions::default()) {
        Ok(map) => {
            let mut canonical = map.table();
            for group in &mut canonical.groups {
                group.word = 0;
                for path in &mut group.paths {
                    path.word = 0;
                }
            }
            Ok(canonical)
        }
        Err(MapError::Table(error)) => Err(Refusal::Table(error)),
        Err(error) => Err(Refusal::Map(error)),
    }
}

/// Validates a table built from groups: prints it, parses the print back
/// (so every word has its position) and builds it. A refusal comes back
/// with the place of the config key that gave the refused word.
pub(super) fn validate_plan(
    table: &Table,
    groups: &[GroupPlan],
    paths: &[PathPlan],
    map_place: &Place,
) -> Result<Table, (Place, Option<String>, String)> {
    let printed = table.to_string();
    let parsed = Table::parse(&printed).map_err(|error| {
        (
            map_place.clone(),
            None,
            format!("the table {printed:?} it makes: {error}"),
        )
    })?;
    match validate(&parsed) {
        Ok(canonical) => Ok(canonical),
        Err(Refusal::Map(error)) => Err((map_place.clone(), None, error.to_string())),
        Err(Refusal::Table(error)) => {
            // The refused word is quoted, unless the refusal is at a
            // path's name (an argument it lacks): the key names the path.
            let (place, at_argument) = place_of_word(&parsed, groups, paths, error.position)
                .unwrap_or_else(|| (map_place.clone(), false));
            let value = at_argument.then_some(error.found);
            Err((place, value, format!("expected {}", error.expected)))
        }
    }
}

/// The config key that gave word `position` of the parsed print of a
/// table built from `groups`, and whether that word is an argument (or
/// a selector name) rather than a path's name.
fn place_of_word(
    parsed: &Table,
    groups: &[GroupPlan],
    paths: &[PathPlan],
    position: usize,
) -> Option<(Place, bool)> {
    for (group, plan) in parsed.groups.iter().zip(groups) {
        if position == group.word {
            return Some((plan.selector.place.clone(), true));
        }
        if let Some(arg) = position.checked_sub(group.word + 2) {
            if arg < group.selector_args.len() {
                return plan
                    .selector_args
                    .get(arg)
                    .map(|arg| (arg.place.clone(), true));
            }
        }
        for (path, &index) in group.paths.iter().zip(&plan.paths) {
            let path_plan = &paths[index];
            if position == path.word {
                let place = path_plan.args_place.as_ref().unwrap_or(&path_plan.place);
                return Some((place.clone(), false));
            }
            if let Some(arg) = position.checked_sub(path.word + 1) {
                if arg < path.args.len() {
                    return path_plan.args.get(arg).map(|arg| (arg.place.clone(), true));
                }
            }
        }
    }
    None
}

/// Byte offset in `text` of its 1-based word `position` (words split on
/// ASCII whitespace, as the table parser splits them).
pub(super) fn word_offset(text: &str, position: usize) -> Option<usize> {
    let mut count = 0;
    let mut in_word = false;
    for (offset, byte) in text.bytes().enumerate() {
        if byte.is_ascii_whitespace() {
            in_word = false;
        } else if !in_word {
            in_word = true;
            count += 1;
            if count == position {
                return Some(offset);
            }
        }
    }
    None
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn policies_group_paths() {
        let prios = [10, 50, 10, 0, 50];
        assert_eq!(
            by_policy(Policy::Failover, &prios),
            vec![vec![0], vec![1], vec![2], vec![3], vec![4]]
        );
        assert_eq!(
            by_policy(Policy::Multibus, &prios),
            vec![vec![0, 1, 2, 3, 4]]
        );
        assert_eq!(
            by_policy(Policy::GroupByPrio, &prios),
            vec![vec![1, 4], vec![0, 2], vec![3]]
        );
        assert_eq!(by_policy(Policy::GroupByPrio, &[7]), vec![vec![0]]);
    }

    #[test]
    fn word_offsets() {
        assert_eq!(word_offset("0 8 multipath", 1), Some(0));
        assert_eq!(word_offset("0  8\tmultipath", 3), Some(5));
        assert_eq!(word_offset("  a", 1), Some(2));
        assert_eq!(word_offset("a b", 3), None);
    }
}
