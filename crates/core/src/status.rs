//! Map status: dm's status line and a JSON document with the same facts.
//!
//! dm's format (`dmsetup status`):
//! ```text
//! <start> <len> multipath 2 <queue_io> <pg_init_count> <#hwh_args> <#PGs> <current_pg>
//!   { A|D|E <#ps_args> <#paths> <#info_args> { <path> A|F <fail_count> [info...] }+ }+
//! ```
//! A group is `A` (active: the current group), `D` (disabled: bypassed) or
//! `E` (enabled); a path `A` (active) or `F` (failed). `queue_io` is 1
//! while I/O is being held for lack of a usable path; mpio runs no
//! hardware handler, so `pg_init_count` and `#hwh_args` are 0.

use crate::io::PathError;
use crate::map::Map;
use crate::path::AccessState;
use serde::Serialize;
use std::fmt::Write;

/// A group's state: dm's letter in the status line, the word in JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupState {
    /// `A`: the group I/O goes to.
    Active,
    /// `E`: usable, not current.
    Enabled,
    /// `D`: bypassed by `disable_group`.
    Disabled,
}

/// A path's health: dm's letter in the status line, the word in JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PathState {
    /// `A`: in use.
    Active,
    /// `F`: failed, until reinstated.
    Failed,
}

impl GroupState {
    /// dm's status letter.
    pub(crate) fn letter(self) -> char {
        match self {
            GroupState::Active => 'A',
            GroupState::Enabled => 'E',
            GroupState::Disabled => 'D',
        }
    }
}

impl PathState {
    /// dm's status letter.
    pub(crate) fn letter(self) -> char {
        match self {
            PathState::Active => 'A',
            PathState::Failed => 'F',
        }
    }
}

/// The state of a map, for JSON output.
#[derive(Clone, Debug, Serialize)]
pub struct MapStatus {
    /// Map name.
    pub name: String,
    /// Device size in bytes.
    pub size_bytes: u64,
    /// Whether I/O waits while no path is usable.
    pub queue_if_no_path: bool,
    /// True while no path is usable and I/O is held.
    pub queueing: bool,
    /// The group I/O goes to (1-based), if any.
    pub current_group: Option<usize>,
    /// Paths failed since the map was built.
    pub path_failures: u64,
    /// The groups, in priority order.
    pub groups: Vec<GroupStatus>,
}

impl MapStatus {
    /// Every path's status, group by group: the map's path order
    /// ([`Map::paths`]).
    pub fn paths(&self) -> impl Iterator<Item = &PathStatus> {
        self.groups.iter().flat_map(|group| &group.paths)
    }
}

/// The state of one priority group.
#[derive(Clone, Debug, Serialize)]
pub struct GroupStatus {
    /// 1-based group number.
    pub number: usize,
    /// Active, enabled or disabled.
    pub state: GroupState,
    /// Selector name.
    pub selector: &'static str,
    /// The group's paths.
    pub paths: Vec<PathStatus>,
}

/// The state of one path.
#[derive(Clone, Debug, Serialize)]
pub struct PathStatus {
    /// Path word from the table.
    pub name: String,
    /// Active or failed.
    pub state: PathState,
    /// ALUA/ANA access state.
    pub access: AccessState,
    /// Times the path was failed.
    pub fail_count: u32,
    /// I/Os in flight, over every queue.
    pub in_flight: u32,
    /// The path error that failed it, while it is failed by one.
    pub last_error: Option<PathError>,
    /// The selector's live values for the path, as in dm's status.
    pub selector_info: Vec<String>,
}

impl Map {
    /// The map's state as a structure (serialise it for JSON).
    pub fn status(&self) -> MapStatus {
        let control = self.control_view();
        let groups = self
            .groups()
            .iter()
            .enumerate()
            .map(|(group_index, group)| GroupStatus {
                number: group_index + 1,
                state: if control.bypassed[group_index] {
                    GroupState::Disabled
                } else if control.current == Some(group_index) {
                    GroupState::Active
                } else {
                    GroupState::Enabled
                },
                selector: group.selector.name(),
                paths: group
                    .path_range()
                    .enumerate()
                    .map(|(position, index)| {
                        let path = &self.paths()[index];
                        let load = self.path_load(index);
                        PathStatus {
                            name: self.path_name(index).to_string(),
                            state: if control.failed[index] {
                                PathState::Failed
                            } else {
                                PathState::Active
                            },
                            access: control.access[index],
                            fail_count: path.fail_count(),
                            in_flight: load.in_flight(),
                            last_error: control.last_error[index],
                            selector_info: group.selector.status_path_info(position, &load),
                        }
                    })
                    .collect(),
            })
            .collect();
        MapStatus {
            name: self.name().to_string(),
            size_bytes: self.size_bytes(),
            queue_if_no_path: control.queue_if_no_path,
            queueing: control.current.is_none() && control.queue_if_no_path,
            current_group: control.current.map(|group| group + 1),
            path_failures: control.path_failures,
            groups,
        }
    }

    /// The map's state in dm's status format, with the `<start> <len>
    /// multipath` prefix `dmsetup status` prints.
    pub fn status_line(&self) -> String {
        self.status_line_of(&self.status())
    }

    /// [`Map::status_line`] for a `status` this map gave, so that a caller
    /// showing the line and the JSON shows one moment, read once.
    pub fn status_line_of(&self, status: &MapStatus) -> String {
        let mut line = String::new();
        let current = status
            .current_group
            .unwrap_or(usize::from(!status.groups.is_empty()));
        // `write!` to a String cannot fail.
        let _ = write!(
            line,
            "0 {} multipath 2 {} 0 0 {} {}",
            self.size_bytes() / crate::io::SECTOR_SIZE,
            u8::from(status.queueing),
            status.groups.len(),
            current
        );
        for (group, group_status) in self.groups().iter().zip(&status.groups) {
            let letter = group_status.state.letter();
            let _ = write!(
                line,
                " {letter} 0 {} {}",
                group_status.paths.len(),
                group.selector.status_info_arg_count()
            );
            for path in &group_status.paths {
                let letter = path.state.letter();
                let _ = write!(line, " {} {letter} {}", path.name, path.fail_count);
                for value in &path.selector_info {
                    let _ = write!(line, " {value}");
                }
            }
        }
        line
    }
}
