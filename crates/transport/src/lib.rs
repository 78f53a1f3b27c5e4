//! mpio's transports: what a path is. Each transport gives a per-thread
//! queue implementing [`mpio_core::queue::PathQueue`]; [`AnyQueue`] holds
//! any of them so one map can mix transports with one `match` per I/O and
//! no `dyn` call.
//!
//! [`Transports`] turns the path words of a table into endpoints, keeps the
//! shared objects behind them (memory disks and their ports), and opens
//! per-thread queues to them.

pub mod clock;
pub mod host;
pub mod memory;
pub mod null;
pub mod uri;

use memory::{MemoryDisk, MemoryQueue, PortControl};
use mpio_core::map::{Map, MapError, MapOptions, PathInfo};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue, Queue};
use mpio_core::table::Table;
use null::NullQueue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
pub use uri::{Endpoint, UriError};

/// A per-thread queue to a path of any transport.
#[derive(Debug)]
pub enum AnyQueue {
    /// A `null` path.
    Null(NullQueue),
    /// A port of a memory disk.
    Memory(MemoryQueue),
}

impl PathQueue for AnyQueue {
    #[inline]
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        match self {
            AnyQueue::Null(queue) => queue.submit(io, now_ns),
            AnyQueue::Memory(queue) => queue.submit(io, now_ns),
        }
    }

    #[inline]
    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        match self {
            AnyQueue::Null(queue) => queue.poll(now_ns, completions),
            AnyQueue::Memory(queue) => queue.poll(now_ns, completions),
        }
    }

    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        match self {
            AnyQueue::Null(queue) => queue.abort(tag),
            AnyQueue::Memory(queue) => queue.abort(tag),
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

/// The transports' shared state: memory disks and their ports by name.
#[derive(Debug, Default)]
pub struct Transports {
    disks: Mutex<HashMap<String, Arc<MemoryDisk>>>,
    ports: Mutex<HashMap<(String, String), Arc<PortControl>>>,
}

/// A map together with the endpoints of its paths.
#[derive(Debug)]
pub struct Device {
    /// The map.
    pub map: Arc<Map>,
    /// The endpoint of each path, in [`Map::paths`] order.
    pub endpoints: Vec<Endpoint>,
}

impl Transports {
    /// No disks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a map from `table`, resolving every path word; memory disks
    /// named for the first time are created with the map's size.
    ///
    /// # Errors
    /// A [`SetupError`] naming the table word, path word or size at fault.
    pub fn build(&self, table: &Table, options: MapOptions) -> Result<Device, SetupError> {
        let map_bytes = table.length_sectors * mpio_core::io::SECTOR_SIZE;
        let endpoints = table
            .groups
            .iter()
            .flat_map(|group| &group.paths)
            .map(|path| Endpoint::parse(&path.name))
            .collect::<Result<Vec<_>, _>>()?;
        for (endpoint, path) in endpoints
            .iter()
            .zip(table.groups.iter().flat_map(|group| &group.paths))
        {
            let path_bytes = match endpoint {
                Endpoint::Null { size_bytes, .. } => *size_bytes,
                Endpoint::Memory { disk, .. } => self.disk(disk, map_bytes).size_bytes(),
            };
            if path_bytes < map_bytes {
                return Err(SetupError::TooSmall {
                    word: path.name.clone(),
                    path_bytes,
                    map_bytes,
                });
            }
        }
        let infos = vec![PathInfo::default(); endpoints.len()];
        let map = Arc::new(Map::new(table, &infos, options)?);
        Ok(Device { map, endpoints })
    }

    /// The memory disk `name`, created with `size_bytes` if new.
    pub fn disk(&self, name: &str, size_bytes: u64) -> Arc<MemoryDisk> {
        let mut disks = self
            .disks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(
            disks
                .entry(name.to_string())
                .or_insert_with(|| Arc::new(MemoryDisk::new(size_bytes))),
        )
    }

    /// The switches of port `port` of memory disk `disk`.
    pub fn port(&self, disk: &str, port: &str) -> Arc<PortControl> {
        let mut ports = self
            .ports
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(
            ports
                .entry((disk.to_string(), port.to_string()))
                .or_default(),
        )
    }

    /// Opens one thread's queue to `endpoint`, with room for `depth` I/Os.
    pub fn open(&self, endpoint: &Endpoint, depth: usize) -> AnyQueue {
        match endpoint {
            Endpoint::Null { latency_ns, .. } => AnyQueue::Null(NullQueue::new(*latency_ns, depth)),
            Endpoint::Memory { disk, port } => {
                let disk_handle = self.disk(disk, 0);
                AnyQueue::Memory(MemoryQueue::new(disk_handle, self.port(disk, port), depth))
            }
        }
    }

    /// Opens a queue of `depth` I/Os over `device` for a thread on `cpu`.
    pub fn queue(&self, device: &Device, depth: usize, cpu: u32) -> Queue<AnyQueue> {
        let path_queues = device
            .endpoints
            .iter()
            .map(|endpoint| self.open(endpoint, depth))
            .collect();
        Queue::new(Arc::clone(&device.map), path_queues, depth, cpu)
    }
}
