//! mpio's transports: what a path is. Each transport gives a per-thread
//! queue implementing [`mpio_core::queue::PathQueue`]; [`AnyQueue`] holds
//! any of them so one map can mix transports with one `match` per I/O and
//! no `dyn` call.
//!
//! [`Transports`] turns the path words of a table into [`PathHandle`]s,
//! keeping the shared objects behind them (memory disks and their ports) by
//! name; a [`Device`] opens per-thread queues from its handles.

#![warn(unreachable_pub)]

pub mod blockdev;
pub mod clock;
pub mod file;
pub mod host;
pub mod limits;
pub mod memory;
pub mod nbd;
pub mod null;
pub mod probe;
mod unready;
pub mod uri;

use file::{FileError, FilePath, FileQueue};
use limits::Limits;
use memory::{MemoryDisk, MemoryQueue, PortControl};
use mpio_core::io::PathError;
use mpio_core::map::{Map, MapError, MapOptions, PathInfo};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue, Queue};
use mpio_core::reload::{MapSlot, ReloadingQueue};
use mpio_core::table::Table;
use mpio_io_loop::{Rest, Waker};
use nbd::handshake::Export;
use nbd::{NbdQueue, NbdTarget, Shared};
use null::NullQueue;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
pub use uri::{Endpoint, UriError};

/// A per-thread queue to a path of any transport.
#[derive(Debug)]
pub enum AnyQueue {
    /// A `null` path.
    Null(NullQueue),
    /// A port of a memory disk.
    Memory(MemoryQueue),
    /// A file or block device.
    File(FileQueue),
    /// A connection to an NBD server.
    Nbd(NbdQueue),
}

impl AnyQueue {
    /// Whether a thread may sleep until the [`Waker`] this queue was
    /// opened with fires instead of polling it ([`Rest`]). A file path's
    /// ring can signal it (the waker is its eventfd); the other
    /// transports complete where only a poll sees it.
    pub fn rest(&mut self) -> Rest {
        match self {
            AnyQueue::File(queue) => queue.rest(),
            AnyQueue::Null(_) | AnyQueue::Memory(_) | AnyQueue::Nbd(_) => Rest::Poll,
        }
    }
}

impl PathQueue for AnyQueue {
    // Always inlined into the core's dispatch: one jump on the transport's
    // kind instead of a call that moves the I/O twice.
    #[inline(always)]
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        match self {
            AnyQueue::Null(queue) => queue.submit(io, now_ns),
            AnyQueue::Memory(queue) => queue.submit(io, now_ns),
            AnyQueue::File(queue) => queue.submit(io, now_ns),
            AnyQueue::Nbd(queue) => queue.submit(io, now_ns),
        }
    }

    #[inline]
    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        match self {
            AnyQueue::Null(queue) => queue.poll(now_ns, completions),
            AnyQueue::Memory(queue) => queue.poll(now_ns, completions),
            AnyQueue::File(queue) => queue.poll(now_ns, completions),
            AnyQueue::Nbd(queue) => queue.poll(now_ns, completions),
        }
    }

    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        match self {
            AnyQueue::Null(queue) => queue.abort(tag),
            AnyQueue::Memory(queue) => queue.abort(tag),
            AnyQueue::File(queue) => queue.abort(tag),
            AnyQueue::Nbd(queue) => queue.abort(tag),
        }
    }

    fn abandon(&mut self, tag: u64) -> Option<PathIo> {
        match self {
            AnyQueue::Null(queue) => queue.abandon(tag),
            AnyQueue::Memory(queue) => queue.abandon(tag),
            AnyQueue::File(queue) => queue.abandon(tag),
            AnyQueue::Nbd(queue) => queue.abandon(tag),
        }
    }
}

/// Why a map could not be set up over its transports.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A path word names no transport.
    #[error(transparent)]
    Uri(#[from] UriError),
    /// The map itself is malformed.
    #[error(transparent)]
    Map(#[from] MapError),
    /// A file path could not be opened.
    #[error("path {word:?}: {source}")]
    File {
        /// The path word.
        word: String,
        /// What failed.
        source: FileError,
    },
    /// Two NBD paths of the map disagree on whether the export is
    /// read-only: which path the selector picked would decide whether a
    /// write succeeds.
    #[error(
        "paths {first:?} and {word:?} disagree: {what} (every nbd path of a map must be \
         writable, or every one read-only)"
    )]
    NbdPathsDiffer {
        /// The first NBD path word.
        first: String,
        /// The path word that differs from it.
        word: String,
        /// What differs.
        what: String,
    },
    /// The new paths cannot take what a block device serving the map
    /// sends (its limits were fixed when the kernel made it).
    #[error("the map's block device cannot be served by these paths: {refused}")]
    Limits {
        /// What they would refuse.
        refused: limits::LimitsRefused,
    },
    /// A memory disk larger than the host's memory.
    #[error(
        "path {word:?}: a memory disk of {size_bytes} bytes cannot be held by this host \
         ({host_bytes} bytes of memory)"
    )]
    MemoryTooLarge {
        /// The path word.
        word: String,
        /// The disk's size.
        size_bytes: u64,
        /// The host's memory ([`host::memory_bytes`]).
        host_bytes: u64,
    },
    /// A path is smaller than the map.
    #[error("path {word:?} holds {path_bytes} bytes but the map needs {map_bytes}")]
    TooSmall {
        /// The path word.
        word: String,
        /// What the path holds.
        path_bytes: u64,
        /// What the map needs.
        map_bytes: u64,
    },
}

/// Takes `mutex`. Shared by the transports and the daemon.
///
/// # Panics
/// If a thread panicked holding it: what it guards (registries, memory
/// chunks, the checker's records, the daemon's maps) may be half changed,
/// and the daemon's policy is to end on the first panic (see
/// `mpio_daemon::fail_fast`), never to run on over state it cannot trust.
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(_) => panic!("a lock was poisoned: a thread panicked holding it"),
    }
}

/// Path names a table may use in place of transport URIs, each with the
/// URI it stands for (see [`Transports::build_named`]).
pub type PathNames = BTreeMap<String, String>;

/// The transports' shared state: memory disks and their ports by name.
#[derive(Debug, Default)]
pub struct Transports {
    disks: Mutex<HashMap<String, Arc<MemoryDisk>>>,
    ports: Mutex<HashMap<(String, String), Arc<PortControl>>>,
}

/// A map together with what each of its paths leads to.
#[derive(Debug)]
pub struct Device {
    /// The map.
    pub map: Arc<Map>,
    /// What each path leads to, in [`Map::paths`] order.
    pub paths: Vec<PathHandle>,
}

impl Transports {
    /// No disks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a map from `table`, resolving every path word to what it
    /// leads to; memory disks named for the first time are created with
    /// the map's size. NBD paths are probed once each, must agree on
    /// being read-only or writable, and are settled with the capabilities
    /// they share ([`nbd::target`]).
    ///
    /// # Errors
    /// A [`SetupError`] naming the table word, path word or size at fault.
    pub fn build(&self, table: &Table, options: MapOptions) -> Result<Device, SetupError> {
        self.build_named(table, options, &PathNames::new())
    }

    /// As [`Transports::build`], for a table whose path words may be names
    /// in `names` (a config's paths) as well as transport URIs: a word
    /// found in `names` leads where its URI says, and stays the path's name
    /// in the map (in status, messages and reloads).
    ///
    /// # Errors
    /// As [`Transports::build`].
    pub fn build_named(
        &self,
        table: &Table,
        options: MapOptions,
        names: &PathNames,
    ) -> Result<Device, SetupError> {
        self.build_checked(table, options, names, &[])
    }

    /// As [`Transports::build_named`], refusing paths that a block device
    /// advertising any of `served_as` sends what they cannot take
    /// ([`Limits::admits`]).
    fn build_checked(
        &self,
        table: &Table,
        options: MapOptions,
        names: &PathNames,
        served_as: &[Limits],
    ) -> Result<Device, SetupError> {
        let mut created = Vec::new();
        let built = self
            .build_recording(table, options, names, served_as, &mut created)
            .and_then(|device| {
                if let Some(paths) = paths_limits(&device.paths) {
                    for device_limits in served_as {
                        device_limits
                            .admits(&paths)
                            .map_err(|refused| SetupError::Limits { refused })?;
                    }
                }
                Ok(device)
            });
        if built.is_err() {
            // A build that failed leaves no disk behind (a failed reload
            // once kept each memory disk it had made, and its memory).
            let mut disks = lock(&self.disks);
            let mut ports = lock(&self.ports);
            for name in &created {
                disks.remove(name);
                ports.retain(|(disk, _), _| disk != name);
            }
        }
        built
    }

    /// [`Transports::build_named`], noting in `created` the memory disks
    /// it made.
    fn build_recording(
        &self,
        table: &Table,
        options: MapOptions,
        names: &PathNames,
        served_as: &[Limits],
        created: &mut Vec<String>,
    ) -> Result<Device, SetupError> {
        let words: Vec<&str> = table
            .groups
            .iter()
            .flat_map(|group| &group.paths)
            .map(|path| path.name.as_str())
            .collect();
        let endpoints = words
            .iter()
            .map(|word| Endpoint::parse(names.get(*word).map_or(word, String::as_str)))
            .collect::<Result<Vec<_>, _>>()?;
        // The map validates the table (its size in bytes included) before
        // anything is sized from it.
        let infos: Vec<PathInfo> = endpoints
            .iter()
            .zip(&words)
            .map(|(endpoint, word)| {
                let mut info = blockdev::path_info(endpoint);
                if let Some(&node) = options.path_nodes.get(*word) {
                    info.node = Some(node);
                }
                info
            })
            .collect();
        let map = Arc::new(Map::new(table, &infos, options)?);
        let map_bytes = map.size_bytes();
        let mut paths = Vec::with_capacity(endpoints.len());
        let mut nbd_paths: Vec<(Arc<NbdTarget>, Export, &str)> = Vec::new();
        let agreement = Arc::new(nbd::Agreement::default());
        for (endpoint, word) in endpoints.into_iter().zip(words) {
            // `None`: the transport checked the size itself.
            let (path, path_bytes) = match endpoint {
                Endpoint::Null {
                    size_bytes,
                    latency_ns,
                } => (PathHandle::Null { latency_ns }, Some(size_bytes)),
                Endpoint::Memory { disk, port } => {
                    let disk_handle = match self.existing_disk(&disk) {
                        Some(handle) => handle,
                        None => {
                            let host_bytes = host::memory_bytes().unwrap_or(u64::MAX);
                            if map_bytes > host_bytes {
                                return Err(SetupError::MemoryTooLarge {
                                    word: word.to_string(),
                                    size_bytes: map_bytes,
                                    host_bytes,
                                });
                            }
                            created.push(disk.clone());
                            self.disk(&disk, map_bytes)
                        }
                    };
                    let disk_bytes = disk_handle.size_bytes();
                    let port = self.port(&disk, &port);
                    (
                        PathHandle::Memory {
                            disk: disk_handle,
                            port,
                        },
                        Some(disk_bytes),
                    )
                }
                Endpoint::File { path, direct } => {
                    let file = FilePath::open_for(
                        std::path::Path::new(&path),
                        direct,
                        map_bytes,
                        served_as,
                    )
                    .map_err(|source| SetupError::File {
                        word: word.to_string(),
                        source,
                    })?;
                    // `open_for` checked the size of a file it opened.
                    (PathHandle::File(Arc::new(file)), None)
                }
                Endpoint::Nbd(address) => {
                    let target = Arc::new(
                        NbdTarget::new(address, map_bytes)
                            .in_map(Arc::clone(&agreement), served_as),
                    );
                    // A server that cannot be reached or whose export does
                    // not fit leaves the path unsettled (it keeps why):
                    // it starts failed and settles when it connects.
                    if let Ok(export) = target.probe() {
                        nbd_paths.push((Arc::clone(&target), export, word));
                    }
                    (PathHandle::Nbd(target), None)
                }
            };
            if let Some(path_bytes) = path_bytes.filter(|bytes| *bytes < map_bytes) {
                return Err(SetupError::TooSmall {
                    word: word.to_string(),
                    path_bytes,
                    map_bytes,
                });
            }
            paths.push(path);
        }
        settle_nbd_paths(&nbd_paths, &agreement)?;
        let device = Device { map, paths };
        device.fail_unready();
        Ok(device)
    }

    /// Gives the device in `slot` a new table, as dm's `reload` and
    /// `resume`: the map is built with the current map's options, its path
    /// words resolved as [`Transports::build`] does, the old map's path
    /// state carried over by word, and installed. Threads' [`DeviceQueue`]s
    /// move to it at their next submit or poll; I/O in flight finishes on
    /// the old map. Returns the old map.
    ///
    /// # Errors
    /// As [`Transports::build`]; the slot keeps its map then.
    pub fn reload(&self, slot: &DeviceSlot, table: &Table) -> Result<Arc<Map>, SetupError> {
        let options = slot.map().options().clone();
        self.reload_named(slot, table, options, &PathNames::new(), &[])
    }

    /// As [`Transports::reload`], with new map options and path names (see
    /// [`Transports::build_named`]): what a reload from a config does.
    /// The slot serves block devices advertising `served_as`: the new
    /// paths must take all they send.
    ///
    /// # Errors
    /// As [`Transports::build`], or [`SetupError::Limits`]; the slot keeps
    /// its map then.
    pub fn reload_named(
        &self,
        slot: &DeviceSlot,
        table: &Table,
        options: MapOptions,
        names: &PathNames,
        served_as: &[Limits],
    ) -> Result<Arc<Map>, SetupError> {
        let device = self.build_checked(table, options, names, served_as)?;
        let old = slot.install(Arc::clone(&device.map), Arc::new(device.paths.clone()));
        // What the old map knew of a word (healthy) does not hold for a
        // path that cannot serve now.
        device.fail_unready();
        Ok(old)
    }

    /// The memory disk `name`, if it exists.
    fn existing_disk(&self, name: &str) -> Option<Arc<MemoryDisk>> {
        lock(&self.disks).get(name).map(Arc::clone)
    }

    /// The memory disk `name`, created with `size_bytes` if new.
    pub fn disk(&self, name: &str, size_bytes: u64) -> Arc<MemoryDisk> {
        let mut disks = lock(&self.disks);
        Arc::clone(
            disks
                .entry(name.to_string())
                .or_insert_with(|| Arc::new(MemoryDisk::new(size_bytes))),
        )
    }

    /// The switches of port `port` of memory disk `disk`.
    pub fn port(&self, disk: &str, port: &str) -> Arc<PortControl> {
        let mut ports = lock(&self.ports);
        Arc::clone(
            ports
                .entry((disk.to_string(), port.to_string()))
                .or_default(),
        )
    }
}

/// Checks that a map's NBD paths agree on being read-only, then settles
/// each with its export and what they all share, and records that in the
/// map's `agreement` for paths that settle later ([`nbd::target`]).
fn settle_nbd_paths(
    nbd_paths: &[(Arc<NbdTarget>, Export, &str)],
    agreement: &nbd::Agreement,
) -> Result<(), SetupError> {
    let Some((_, first_export, first)) = nbd_paths.first() else {
        return Ok(());
    };
    let read_only = |export: &Export| export.has(mpio_nbd::consts::FLAG_READ_ONLY);
    for (_, export, word) in &nbd_paths[1..] {
        if read_only(export) != read_only(first_export) {
            let says = |export: &Export| {
                if read_only(export) {
                    "read-only (NBD_FLAG_READ_ONLY)"
                } else {
                    "writable"
                }
            };
            return Err(SetupError::NbdPathsDiffer {
                first: first.to_string(),
                word: word.to_string(),
                what: format!(
                    "the first is {}, the second {}",
                    says(first_export),
                    says(export)
                ),
            });
        }
    }
    let Some(shared) = Shared::of(nbd_paths.iter().map(|(_, export, _)| export)) else {
        return Ok(());
    };
    agreement.set(read_only(first_export), shared);
    for (target, export, _) in nbd_paths {
        target.settle(*export, shared);
    }
    Ok(())
}

/// What one path leads to, resolved: all a thread needs to open its own
/// queue to it, with no registry lookup.
#[derive(Clone, Debug)]
pub enum PathHandle {
    /// A `null` path.
    Null {
        /// Completion latency in ns.
        latency_ns: u64,
    },
    /// A port of a memory disk.
    Memory {
        /// The disk.
        disk: Arc<MemoryDisk>,
        /// The port's switches.
        port: Arc<PortControl>,
    },
    /// A file or block device, opened once for every thread.
    File(Arc<FilePath>),
    /// An NBD server's export.
    Nbd(Arc<NbdTarget>),
}

impl PathHandle {
    /// The smallest I/O the path takes: every offset and length must be a
    /// multiple of it (1 where the transport has no such limit of its
    /// own; a file's `O_DIRECT` alignment is at most [`BUFFER_ALIGN`]).
    ///
    /// [`BUFFER_ALIGN`]: mpio_core::io::BUFFER_ALIGN
    pub fn min_block(&self) -> u32 {
        match self {
            PathHandle::Nbd(target) => target.min_block(),
            PathHandle::Null { .. } | PathHandle::Memory { .. } | PathHandle::File(_) => 1,
        }
    }

    /// What the path's storage takes; `None` while the path is not open
    /// or settled ([`PathHandle::unready`]).
    pub fn limits(&self) -> Option<Limits> {
        match self {
            PathHandle::Null { .. } | PathHandle::Memory { .. } => Some(Limits::ANY),
            PathHandle::File(file) => file.limits(),
            PathHandle::Nbd(target) => target.limits(),
        }
    }

    /// Why the path cannot serve yet: a file that could not be opened,
    /// read or sized, an NBD server not reached or an export that does
    /// not fit. `None` for a path that is open (it may still fail I/O).
    pub fn unready(&self) -> Option<String> {
        match self {
            PathHandle::Null { .. } | PathHandle::Memory { .. } => None,
            PathHandle::File(file) => file.unready(),
            PathHandle::Nbd(target) => target.unready(),
        }
    }

    /// Adds `limits` to what the path must take if it opens or settles
    /// from now on: a block device advertising them serves its map.
    pub fn require(&self, limits: Limits) {
        match self {
            PathHandle::Null { .. } | PathHandle::Memory { .. } => {}
            PathHandle::File(file) => file.require(limits),
            PathHandle::Nbd(target) => target.require(limits),
        }
    }

    /// Opens one thread's queue to the path, with room for `depth` I/Os;
    /// a queue that can signals `waker` at each completion.
    pub fn open(&self, depth: usize, waker: Option<Waker>) -> AnyQueue {
        match self {
            PathHandle::Null { latency_ns } => AnyQueue::Null(NullQueue::new(*latency_ns, depth)),
            PathHandle::Memory { disk, port } => {
                AnyQueue::Memory(MemoryQueue::new(Arc::clone(disk), Arc::clone(port), depth))
            }
            PathHandle::File(file) => AnyQueue::File(file.open_queue(depth, waker)),
            PathHandle::Nbd(target) => AnyQueue::Nbd(NbdQueue::open(Arc::clone(target), depth)),
        }
    }
}

/// What every path of a map that is open or settled takes; `None` when
/// none is ([`PathHandle::limits`]).
pub fn paths_limits(paths: &[PathHandle]) -> Option<Limits> {
    Limits::of_all(paths.iter().filter_map(PathHandle::limits))
}

impl Device {
    /// The word of every path that cannot serve yet, with why
    /// ([`PathHandle::unready`]).
    pub fn unready_paths(&self) -> impl Iterator<Item = (&str, String)> + '_ {
        self.unready()
            .map(|(index, reason)| (self.map.path_name(index), reason))
    }

    /// The index of every path that cannot serve yet, with why.
    fn unready(&self) -> impl Iterator<Item = (usize, String)> + '_ {
        self.paths
            .iter()
            .enumerate()
            .filter_map(|(index, path)| Some((index, path.unready()?)))
    }

    /// Fails every path that cannot serve yet, saying why: the checker
    /// brings it back once its probe reads through it.
    fn fail_unready(&self) {
        let map = &self.map;
        for (index, reason) in self.unready() {
            tracing::warn!(
                map = map.name(),
                path = map.path_name(index),
                %reason,
                "path cannot serve yet: it starts failed, and the checker reinstates it once \
                 it answers"
            );
            map.fail_path(index, PathError::ConnectionLost);
        }
    }

    /// Opens a queue of `depth` I/Os over the device for a thread on `cpu`.
    pub fn queue(&self, depth: usize, cpu: u32) -> Queue<AnyQueue> {
        Queue::new(
            Arc::clone(&self.map),
            open_paths(&self.paths, depth, None),
            depth,
            cpu,
        )
    }

    /// The device as a slot that [`Transports::reload`] can give a new
    /// table, for the [`device_queue`]s that follow it.
    pub fn into_slot(self) -> Arc<DeviceSlot> {
        Arc::new(MapSlot::new(self.map, Arc::new(self.paths)))
    }
}

/// One transport queue per path, in [`Map::paths`] order.
fn open_paths(paths: &[PathHandle], depth: usize, waker: Option<Waker>) -> Vec<AnyQueue> {
    paths.iter().map(|path| path.open(depth, waker)).collect()
}

/// A device that takes new tables while it serves: the map now served and
/// its path handles (see [`mpio_core::reload`]).
pub type DeviceSlot = MapSlot<Vec<PathHandle>>;

/// A thread's queue on a [`DeviceSlot`], opening path queues from the
/// handles of whatever map the slot serves.
pub type DeviceQueue = ReloadingQueue<
    AnyQueue,
    Vec<PathHandle>,
    Box<dyn FnMut(&Arc<Map>, &Vec<PathHandle>) -> Vec<AnyQueue> + Send>,
>;

/// Opens a [`DeviceQueue`] of `depth` I/Os on `slot` for a thread on `cpu`.
pub fn device_queue(slot: &Arc<DeviceSlot>, depth: usize, cpu: u32) -> DeviceQueue {
    waking_device_queue(slot, depth, cpu, None)
}

/// As [`device_queue`], with path queues that signal `waker` at each
/// completion where their transport can ([`AnyQueue::rest`]).
pub fn waking_device_queue(
    slot: &Arc<DeviceSlot>,
    depth: usize,
    cpu: u32,
    waker: Option<Waker>,
) -> DeviceQueue {
    ReloadingQueue::new(
        Arc::clone(slot),
        Box::new(move |_: &Arc<Map>, paths: &Vec<PathHandle>| open_paths(paths, depth, waker)),
        depth,
        cpu,
    )
}
