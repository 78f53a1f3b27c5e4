//! A multipath map: its priority groups, their paths and selectors, and the
//! control state dm keeps per device (current group, bypassed groups,
//! `queue_if_no_path`).
//!
//! # Concurrency
//! Control operations (messages, path failures, access-state changes) take
//! the map's control lock, change the state, and publish a new immutable
//! `Snapshot`. I/O threads never take that lock on their fast path: they
//! compare [`Map::generation`] with the generation they routed by and only
//! fetch the new snapshot when it moved. A path error takes the control
//! lock once per path that is failed; threads that see the path already
//! failed ([`PathShared::is_failed`]) skip it.
//!
//! # Events
//! Each state change is logged through `tracing` where it is made, under
//! the control lock: path failed and reinstated, group switched, no usable
//! path, group disabled or enabled, `queue_if_no_path` set (`events.rs`
//! lists the events and their fields). A replaced map logs nothing.

use crate::events::{self, Cause};
use crate::io::PathError;
use crate::load::PathLoad;
use crate::message::Message;
use crate::numa::NumaTopology;
use crate::path::{AccessState, PathShared};
use crate::selector::{PathSetup, Selector, Setup};
use crate::snapshot::{choose_route, group_route, PathHealth, Snapshot};
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::table::{Table, TableError};

/// Most paths in one map, over all its groups.
pub const MAX_PATHS: usize = 1024;

/// How a map behaves, beyond what its table says.
#[derive(Clone, Debug)]
pub struct MapOptions {
    /// The map's name (`mpatha`).
    pub name: String,
    /// The host's NUMA layout, for `io-affinity` and `numa`.
    pub numa: NumaTopology,
    /// An I/O not completed by its path within this time fails the path
    /// and is retried elsewhere. `None`: never time out.
    pub io_timeout_ns: Option<u64>,
    /// A write (or write-zeroes, discard, flush) that timed out on a path
    /// which cannot take it back waits this long past its I/O timeout for
    /// the path to be fenced (its reply, or the transport's word that it
    /// can no longer land) before it fails with
    /// [`crate::io::IoError::Unfenced`]; it is never retried elsewhere
    /// before. `None`: wait for the fence however long it takes.
    pub fence_timeout_ns: Option<u64>,
    /// A read its path has not answered within that path's hedge delay
    /// (`crate::stall::HEDGE_MULTIPLE`) is taken back, if the transport
    /// can let go of it, and sent down another usable path.
    pub hedge_reads: bool,
    /// With `queue_if_no_path`, an I/O that has waited this long for a
    /// path fails. `None`: wait until a path returns or `fail_if_no_path`.
    pub no_path_timeout_ns: Option<u64>,
    /// Most attempts of one I/O (the first and its retries after path
    /// errors) before it fails with [`crate::io::IoError::RetryLimit`].
    pub max_attempts: u32,
    /// NUMA nodes given to paths by word (a config's `numa_node`), over
    /// what their transports report.
    pub path_nodes: std::collections::BTreeMap<String, u16>,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions {
            name: "mpatha".into(),
            numa: NumaTopology::default(),
            io_timeout_ns: Some(30_000_000_000),
            fence_timeout_ns: Some(30_000_000_000),
            hedge_reads: true,
            no_path_timeout_ns: None,
            max_attempts: 64,
            path_nodes: std::collections::BTreeMap::new(),
        }
    }
}

/// What the map is told about each path when it is built.
#[derive(Clone, Copy, Debug, Default)]
pub struct PathInfo {
    /// NUMA node of the path's transport, if known.
    pub node: Option<u16>,
    /// Initial ALUA/ANA access state.
    pub access: AccessState,
}

/// A map that cannot be built, or a control operation that cannot be done.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// The table is malformed.
    #[error("table: {0}")]
    Table(#[from] TableError),
    /// The caller described a different number of paths than the table has.
    #[error("the table has {table} paths but {given} were described")]
    PathCount {
        /// Paths in the table.
        table: usize,
        /// Paths described.
        given: usize,
    },
    /// Too many paths.
    #[error("the table has {0} paths; a map holds at most {MAX_PATHS}")]
    TooManyPaths(usize),
    /// A message names a path the map does not have.
    #[error("no path named {0:?} in this map")]
    NoSuchPath(String),
    /// A message names a group the map does not have.
    #[error("no group {group}: the map has {count}")]
    NoSuchGroup {
        /// The group asked for (1-based).
        group: u32,
        /// Groups in the map.
        count: usize,
    },
}

/// What a map counted of one path's changes of state: the path checker
/// compares the counts between its polls to learn of the failures and
/// reinstatements it did not make itself (for marginal paths). Counted
/// since the path word joined the device: a reload carries them over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathTransitions {
    /// The path is failed now.
    pub failed: bool,
    /// Times a path error failed the path ([`Map::fail_path`]: an I/O's or
    /// a probe's); `fail_path` messages do not count.
    pub failed_by_error: u64,
    /// Times a `reinstate_path` message put the failed path back in use.
    pub reinstated_by_message: u64,
}

/// One priority group.
#[derive(Debug)]
pub struct Group {
    /// The group's selector instance, shared by every I/O thread.
    pub selector: Selector,
    /// Index in [`Map::paths`] of the group's first path; its paths are
    /// contiguous.
    pub first_path: usize,
    /// Number of paths in the group.
    pub path_count: usize,
}

impl Group {
    /// The group's paths' indices in [`Map::paths`].
    pub fn path_range(&self) -> std::ops::Range<usize> {
        self.first_path..self.first_path + self.path_count
    }
}

/// Control state, changed only under the control lock.
#[derive(Debug)]
struct Control {
    current: Option<usize>,
    requested: Option<usize>,
    bypassed: Vec<bool>,
    access: Vec<AccessState>,
    last_error: Vec<Option<PathError>>,
    /// Path health as published. Each path's [`PathShared`] flag follows
    /// it only after the snapshot that reflects it is published.
    failed: Vec<bool>,
    queue_if_no_path: bool,
    generation: u64,
    path_failures: u64,
    /// The group of the last published route (messages clear `current`
    /// before the route is chosen again; this is what I/O saw).
    published_group: Option<usize>,
    /// Per path: see [`PathTransitions`].
    failed_by_error: Vec<u64>,
    reinstated_by_message: Vec<u64>,
    /// The load records of the queues built on this map, one entry per
    /// path each; dropped queues leave dead entries, pruned when summed.
    /// std's `Weak`: loom has none, and the models do not check reference
    /// counts.
    queue_loads: Vec<std::sync::Weak<[PathLoad]>>,
    /// Each path's running totals taken over from the maps this one
    /// replaced (`carry_over_from`), so that they never go back.
    carried_loads: Vec<PathLoad>,
    /// The map a reload replaced this one with, which every later path
    /// failure here is passed on to.
    successor: Option<Arc<Map>>,
}

/// One multipath device.
#[derive(Debug)]
pub struct Map {
    options: MapOptions,
    table: Table,
    groups: Box<[Group]>,
    paths: Box<[PathShared]>,
    path_names: Box<[String]>,
    generation: AtomicU64,
    published: Mutex<Arc<Snapshot>>,
    control: Mutex<Control>,
    /// Set (under the control lock) once a reload replaced the map: its
    /// `successor` is then set.
    replaced: AtomicBool,
}

/// A map a reload replaced holds the map that replaced it, and so on
/// down the chain of every later reload, for as long as anything holds
/// the first. Dropping such a chain map by map would recurse once per
/// reload (a stack overflow past some 20,000); this unlinks it in a loop
/// instead, stopping at the first map someone else still holds.
impl Drop for Map {
    fn drop(&mut self) {
        let mut next = lock(&self.control).successor.take();
        while let Some(map) = next {
            next = match Arc::try_unwrap(map) {
                // Dropped at the end of this turn, its successor taken.
                Ok(map) => lock(&map.control).successor.take(),
                Err(_) => None,
            };
        }
    }
}

impl Map {
    /// Builds a map from a table and one [`PathInfo`] per path, in table
    /// order (group by group).
    ///
    /// # Errors
    /// A [`MapError`] naming what is wrong with the table or the paths.
    pub fn new(table: &Table, paths: &[PathInfo], options: MapOptions) -> Result<Map, MapError> {
        let table = table.canonical(&options.numa)?;
        let path_count: usize = table.groups.iter().map(|group| group.paths.len()).sum();
        if path_count > MAX_PATHS {
            return Err(MapError::TooManyPaths(path_count));
        }
        if path_count != paths.len() {
            return Err(MapError::PathCount {
                table: path_count,
                given: paths.len(),
            });
        }
        let mut groups = Vec::with_capacity(table.groups.len());
        let mut first_path = 0;
        for spec in &table.groups {
            let setups: Vec<PathSetup<'_>> = spec
                .paths
                .iter()
                .zip(&paths[first_path..])
                .map(|(path, info)| PathSetup {
                    args: &path.args,
                    node: info.node,
                })
                .collect();
            let setup = Setup {
                args: &spec.selector_args,
                paths: &setups,
                numa: &options.numa,
            };
            let selector = match Selector::build(&spec.selector, &setup) {
                Some(Ok(selector)) => selector,
                // `canonical` built this very selector from these arguments.
                _ => unreachable!("a canonical table's selector builds"),
            };
            groups.push(Group {
                selector,
                first_path,
                path_count: spec.paths.len(),
            });
            first_path += spec.paths.len();
        }
        let path_names = table
            .groups
            .iter()
            .flat_map(|group| group.paths.iter().map(|path| path.name.clone()))
            .collect();
        let requested = table
            .initial_group
            .checked_sub(1)
            .map(|group| group as usize);
        let control = Control {
            current: None,
            requested,
            bypassed: vec![false; groups.len()],
            access: paths.iter().map(|info| info.access).collect(),
            last_error: vec![None; path_count],
            failed: vec![false; path_count],
            queue_if_no_path: table.features.queue_if_no_path,
            generation: 0,
            path_failures: 0,
            published_group: None,
            failed_by_error: vec![0; path_count],
            reinstated_by_message: vec![0; path_count],
            queue_loads: Vec::new(),
            carried_loads: (0..paths.len()).map(|_| PathLoad::default()).collect(),
            successor: None,
        };
        let map = Map {
            options,
            table,
            groups: groups.into_boxed_slice(),
            paths: (0..path_count).map(|_| PathShared::default()).collect(),
            path_names,
            generation: AtomicU64::new(0),
            published: Mutex::new(Arc::new(Snapshot {
                generation: 0,
                queue_if_no_path: false,
                route: None,
            })),
            control: Mutex::new(control),
            replaced: AtomicBool::new(false),
        };
        map.publish(&mut lock(&map.control), Cause::Build);
        Ok(map)
    }

    /// The map's name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// The options the map was built with.
    pub fn options(&self) -> &MapOptions {
        &self.options
    }

    /// Size of the device in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.table.size_bytes()
    }

    /// The priority groups.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// Every path's shared health, group by group.
    pub fn paths(&self) -> &[PathShared] {
        &self.paths
    }

    /// A new queue's load records, one per path, which
    /// [`Map::path_load`] counts for as long as the queue holds them.
    /// Takes the control lock: for building queues, not per I/O.
    pub(crate) fn register_queue_loads(&self) -> std::sync::Arc<[PathLoad]> {
        let loads: std::sync::Arc<[PathLoad]> =
            (0..self.paths.len()).map(|_| PathLoad::default()).collect();
        let mut control = lock(&self.control);
        control.queue_loads.retain(|weak| weak.strong_count() > 0);
        control.queue_loads.push(std::sync::Arc::downgrade(&loads));
        loads
    }

    /// Path `index`'s load summed over every live queue: I/Os and bytes in
    /// flight, and the service-time estimate of the queue that completed on
    /// it last. Takes the control lock: for status, not per I/O.
    ///
    /// # Panics
    /// If `index` is not a path of the map.
    pub fn path_load(&self, index: usize) -> PathLoad {
        assert!(index < self.paths.len(), "path {index} out of range");
        Self::path_load_locked(&lock(&self.control), index)
    }

    fn path_load_locked(control: &Control, index: usize) -> PathLoad {
        let total = PathLoad::default();
        total.accumulate_totals(&control.carried_loads[index]);
        for loads in control.queue_loads.iter().filter_map(|weak| weak.upgrade()) {
            total.accumulate(&loads[index]);
        }
        total
    }

    /// The path word of path `index` as the table names it.
    pub fn path_name(&self, index: usize) -> &str {
        &self.path_names[index]
    }

    /// The canonical table, with the current `queue_if_no_path` setting.
    pub fn table(&self) -> Table {
        let mut table = self.table.clone();
        table.features.queue_if_no_path = lock(&self.control).queue_if_no_path;
        table
    }

    /// The generation of the newest snapshot. I/O threads poll this.
    #[inline]
    pub fn generation(&self) -> u64 {
        // Acquire pairs with the Release store in `publish`: whoever sees
        // the new number finds the snapshot that carries it published.
        self.generation.load(Ordering::Acquire)
    }

    /// The newest snapshot. Takes a lock held only for an `Arc` clone;
    /// I/O threads call it only when [`Map::generation`] has moved.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&lock(&self.published))
    }

    /// Applies a control message.
    ///
    /// # Errors
    /// [`MapError::NoSuchPath`] or [`MapError::NoSuchGroup`].
    pub fn message(&self, message: &Message) -> Result<(), MapError> {
        self.apply(message, Cause::Message(message))
    }

    /// Sends I/O to group `number` (1-based) as `switch_group` does, for
    /// the checker's failback: the same change, logged as a failback.
    ///
    /// # Errors
    /// [`MapError::NoSuchGroup`].
    pub fn fail_back(&self, number: u32) -> Result<(), MapError> {
        self.apply(&Message::SwitchGroup(number), Cause::Failback)
    }

    fn apply(&self, message: &Message, cause: Cause<'_>) -> Result<(), MapError> {
        let mut control = lock(&self.control);
        let logs = control.successor.is_none();
        match message {
            Message::FailPath(name) => {
                for index in self.paths_named(name)? {
                    if !control.failed[index] {
                        control.failed[index] = true;
                        control.path_failures += 1;
                        if logs {
                            events::path_failed(self.name(), name, self.group_of(index), None);
                        }
                    }
                }
            }
            Message::ReinstatePath(name) => {
                for index in self.paths_named(name)? {
                    if self.reinstate(&mut control, index) {
                        control.reinstated_by_message[index] += 1;
                        if logs {
                            events::path_reinstated(self.name(), name, self.group_of(index), true);
                        }
                    }
                }
            }
            Message::SwitchGroup(number) => {
                let group = self.group_index(*number)?;
                control
                    .bypassed
                    .iter_mut()
                    .for_each(|bypassed| *bypassed = false);
                control.current = None;
                control.requested = Some(group);
            }
            Message::EnableGroup(number) | Message::DisableGroup(number) => {
                let group = self.group_index(*number)?;
                let disabled = matches!(message, Message::DisableGroup(_));
                if logs && control.bypassed[group] != disabled {
                    events::group_bypassed(self.name(), group, disabled);
                }
                control.bypassed[group] = disabled;
                control.current = None;
            }
            Message::QueueIfNoPath | Message::FailIfNoPath => {
                let queue_if_no_path = matches!(message, Message::QueueIfNoPath);
                if logs && control.queue_if_no_path != queue_if_no_path {
                    events::queue_if_no_path_set(self.name(), queue_if_no_path);
                }
                control.queue_if_no_path = queue_if_no_path;
            }
        }
        self.publish(&mut control, cause);
        Ok(())
    }

    /// Fails path `index` because an I/O on it ended with `error`. Returns
    /// false (and takes no lock) if the path was already failed or does
    /// not exist.
    pub fn fail_path(&self, index: usize, error: PathError) -> bool {
        let failed_here = self.fail_path_here(index, error);
        // A map a reload replaced passes every failure on to the map that
        // replaced it (its I/O still drains here, and the path is the new
        // map's too), even one it had failed already: the new map may have
        // reinstated it since. Acquire pairs with the Release in
        // `carry_over_from`.
        if self.replaced.load(Ordering::Acquire) {
            let successor = lock(&self.control).successor.clone();
            if let (Some(successor), Some(word)) = (successor, self.path_names.get(index)) {
                successor.fail_path_word(word, error);
            }
        }
        failed_here
    }

    /// [`Map::fail_path`] on this map alone.
    fn fail_path_here(&self, index: usize, error: PathError) -> bool {
        if self.paths.get(index).is_none_or(PathShared::is_failed) {
            return false;
        }
        let mut control = lock(&self.control);
        if control.failed[index] {
            return false;
        }
        control.failed[index] = true;
        control.last_error[index] = Some(error);
        control.path_failures += 1;
        control.failed_by_error[index] += 1;
        if control.successor.is_none() {
            let name = self.path_name(index);
            events::path_failed(self.name(), name, self.group_of(index), Some(error));
        }
        self.publish(&mut control, Cause::PathFailed);
        true
    }

    /// Fails every path whose word is `word`, as [`Map::fail_path`] does:
    /// for a path error seen on another map of the same device (one that a
    /// reload replaced, while its I/O drains). Returns how many it failed.
    pub(crate) fn fail_path_word(&self, word: &str, error: PathError) -> usize {
        self.indices_named(word)
            .filter(|&index| self.fail_path(index, error))
            .count()
    }

    /// Reinstates every path whose word is `word`, as [`Map::reinstate_path`]
    /// does (for a reinstatement a replaced map passes on). Returns how many
    /// it reinstated.
    fn reinstate_path_word(&self, word: &str) -> usize {
        self.indices_named(word)
            .filter(|&index| self.reinstate_path(index))
            .count()
    }

    /// The paths whose word is `word`, in map order.
    fn indices_named<'a>(&'a self, word: &'a str) -> impl Iterator<Item = usize> + 'a {
        (0..self.paths.len()).filter(move |&index| self.path_names[index] == word)
    }

    /// Puts path `index` back in use (a checker found it healthy). Returns
    /// false if it was failed neither here nor, for a map a reload
    /// replaced, in its successor, or does not exist.
    ///
    /// A replaced map passes the reinstatement on to the map that replaced
    /// it, by path word, as it passes failures on: a checker whose probe
    /// ended just as a reload landed acts on the map it probed for, and the
    /// path's endpoint is the new map's too (a word keeps its endpoint
    /// across a reload). The reasoning about the race is `fail_path`'s.
    pub fn reinstate_path(&self, index: usize) -> bool {
        let reinstated_here = self.reinstate_path_here(index);
        // Acquire pairs with the Release in `carry_over_from`.
        if self.replaced.load(Ordering::Acquire) {
            let successor = lock(&self.control).successor.clone();
            if let (Some(successor), Some(word)) = (successor, self.path_names.get(index)) {
                return successor.reinstate_path_word(word) > 0 || reinstated_here;
            }
        }
        reinstated_here
    }

    /// [`Map::reinstate_path`] on this map alone.
    fn reinstate_path_here(&self, index: usize) -> bool {
        if index >= self.paths.len() {
            return false;
        }
        let mut control = lock(&self.control);
        let changed = self.reinstate(&mut control, index);
        if changed {
            if control.successor.is_none() {
                let name = self.path_name(index);
                events::path_reinstated(self.name(), name, self.group_of(index), false);
            }
            self.publish(&mut control, Cause::PathReinstated);
        }
        changed
    }

    /// Sets the ALUA/ANA access state of path `index` (no path: nothing).
    pub fn set_access_state(&self, index: usize, access: AccessState) {
        let mut control = lock(&self.control);
        if control
            .access
            .get(index)
            .is_some_and(|&current| current != access)
        {
            let from = std::mem::replace(&mut control.access[index], access);
            let name = self.path_name(index);
            events::access_changed(self.name(), name, self.group_of(index), from, access);
            self.publish(&mut control, Cause::AccessChanged);
        }
    }

    fn reinstate(&self, control: &mut Control, index: usize) -> bool {
        let changed = control.failed[index];
        if changed {
            control.failed[index] = false;
            control.last_error[index] = None;
        }
        changed
    }

    /// Makes `new` take over, path word by path word, what `old` (the map
    /// it replaces in a reload) knows of its paths: which are failed, by what
    /// error, how often they failed, their ALUA/ANA access state and their
    /// [`PathTransitions`] counts, and its running totals (I/Os, bytes,
    /// path errors, latencies: [`Map::path_load`] never goes back across a
    /// reload), and the map's count of path failures. A word this map has
    /// several times (several paths through one endpoint) takes, for its
    /// nth path, the state of the nth path of `old` with that word.
    /// Control state (current group, disabled groups,
    /// `queue_if_no_path`) comes from the new table, as in dm. Publishes
    /// the result, and makes `new` `old`'s successor: from then on `old`
    /// passes every path failure and reinstatement on to it
    /// ([`Map::fail_path`], [`Map::reinstate_path`]).
    ///
    /// Both control locks are held across the copy (`new`'s first;
    /// `fail_path` never holds one while taking another), so a failure
    /// `old` sees is either in the copy or passed on after it, never lost
    /// between the two.
    pub fn carry_over_from(new: &Arc<Map>, old: &Map) {
        let mut control = lock(&new.control);
        let mut fail_counts = Vec::with_capacity(new.paths.len());
        {
            let mut old_control = lock(&old.control);
            control.path_failures = old_control.path_failures;
            for index in 0..new.paths.len() {
                // A word used by several paths: the nth with it takes over
                // from the nth with it in the old map.
                let name = &new.path_names[index];
                let nth = new.path_names[..index]
                    .iter()
                    .filter(|other| *other == name)
                    .count();
                let Some(old_index) = old.indices_named(name).nth(nth) else {
                    continue;
                };
                control.carried_loads[index]
                    .accumulate_totals(&Self::path_load_locked(&old_control, old_index));
                control.failed[index] = old_control.failed[old_index];
                control.last_error[index] = old_control.last_error[old_index];
                control.access[index] = old_control.access[old_index];
                control.failed_by_error[index] = old_control.failed_by_error[old_index];
                control.reinstated_by_message[index] = old_control.reinstated_by_message[old_index];
                fail_counts.push((index, old.paths[old_index].fail_count()));
            }
            old_control.successor = Some(Arc::clone(new));
            // Release: see `fail_path`.
            old.replaced.store(true, Ordering::Release);
        }
        new.publish(&mut control, Cause::Reload);
        // After `publish`, whose marking a path failed counts one failure.
        for (index, count) in fail_counts {
            new.paths[index].restore_fail_count(count);
        }
    }

    fn paths_named(&self, name: &str) -> Result<Vec<usize>, MapError> {
        let indices: Vec<usize> = self.indices_named(name).collect();
        if indices.is_empty() {
            return Err(MapError::NoSuchPath(name.to_string()));
        }
        Ok(indices)
    }

    /// The 0-based group of path `index`.
    fn group_of(&self, index: usize) -> usize {
        self.groups
            .iter()
            .position(|group| group.path_range().contains(&index))
            .unwrap_or(0)
    }

    /// Each path's [`PathTransitions`], in [`Map::paths`] order. Takes the
    /// control lock: for the checker, not per I/O.
    pub fn path_transitions(&self) -> Vec<PathTransitions> {
        let control = lock(&self.control);
        (0..self.paths.len())
            .map(|index| PathTransitions {
                failed: control.failed[index],
                failed_by_error: control.failed_by_error[index],
                reinstated_by_message: control.reinstated_by_message[index],
            })
            .collect()
    }

    fn group_index(&self, number: u32) -> Result<usize, MapError> {
        let count = self.groups.len();
        match (number as usize).checked_sub(1) {
            Some(group) if group < count => Ok(group),
            _ => Err(MapError::NoSuchGroup {
                group: number,
                count,
            }),
        }
    }

    /// Recomputes the route from the control state and publishes it; logs
    /// a change of route with its `cause`.
    fn publish(&self, control: &mut Control, cause: Cause<'_>) {
        let health: Vec<PathHealth> = (0..self.paths.len())
            .map(|index| PathHealth {
                failed: control.failed[index],
                access: control.access[index],
            })
            .collect();
        let views: Vec<&[PathHealth]> = self
            .groups
            .iter()
            .map(|group| &health[group.path_range()])
            .collect();
        let route = choose_route(
            &views,
            &control.bypassed,
            control.current,
            control.requested,
        );
        control.current = route.as_ref().map(|route| route.group);
        let from = control.published_group;
        if from != control.current && control.successor.is_none() && !matches!(cause, Cause::Build)
        {
            let from_lost_paths =
                from.is_some_and(|group| group_route(group, views[group]).is_none());
            events::route_changed(
                self.name(),
                from,
                control.current,
                from_lost_paths,
                control.queue_if_no_path,
                cause,
            );
        }
        control.published_group = control.current;
        if route.is_some() {
            control.requested = None;
        }
        control.generation += 1;
        let snapshot = Arc::new(Snapshot {
            generation: control.generation,
            queue_if_no_path: control.queue_if_no_path,
            route,
        });
        *lock(&self.published) = snapshot;
        // Release: see `generation`.
        self.generation.store(control.generation, Ordering::Release);
        // Only now the paths' flags: a thread that sees a path failed
        // (`fail_path`'s lock-free check) must find the snapshot that
        // excludes it already published, or its retry would route by the
        // old one, back to the failed path.
        for (path, &failed) in self.paths.iter().zip(&control.failed) {
            path.set_failed(failed);
        }
    }

    /// A consistent view of the control state, for status output.
    pub(crate) fn control_view(&self) -> ControlView {
        let control = lock(&self.control);
        ControlView {
            current: control.current,
            bypassed: control.bypassed.clone(),
            access: control.access.clone(),
            last_error: control.last_error.clone(),
            failed: control.failed.clone(),
            queue_if_no_path: control.queue_if_no_path,
            path_failures: control.path_failures,
        }
    }
}

/// A copy of the control state for status output.
#[derive(Debug)]
pub(crate) struct ControlView {
    pub(crate) current: Option<usize>,
    pub(crate) bypassed: Vec<bool>,
    pub(crate) access: Vec<AccessState>,
    pub(crate) last_error: Vec<Option<PathError>>,
    pub(crate) failed: Vec<bool>,
    pub(crate) queue_if_no_path: bool,
    pub(crate) path_failures: u64,
}
