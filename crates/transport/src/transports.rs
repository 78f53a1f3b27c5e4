//! [`Transports`]: the registry that turns a table's path words into a
//! [`Device`] (the map and a [`PathHandle`] per path), keeping the shared
//! objects behind them (memory disks and their ports) by name, and that
//! reloads a [`DeviceSlot`] with a new table.

use crate::file::FilePath;
use crate::limits::Limits;
use crate::memory::{MemoryDisk, PortControl};
use crate::nbd::handshake::Export;
use crate::nbd::{self, NbdTarget, Shared};
use crate::uri::Endpoint;
use crate::{blockdev, host, lock, paths_limits, Device, DeviceSlot, PathHandle, SetupError};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::table::Table;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Path names a table may use in place of transport URIs, each with the
/// URI it stands for (see [`Transports::build_named`]).
pub type PathNames = BTreeMap<String, String>;

/// The transports' shared state: memory disks and their ports by name.
#[derive(Debug, Default)]
pub struct Transports {
    disks: Mutex<HashMap<String, Arc<MemoryDisk>>>,
    ports: Mutex<HashMap<(String, String), Arc<PortControl>>>,
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
    /// they share (`nbd::target`).
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
            // A build that failed leaves no disk behind: a reload that
            // fails must not keep the memory of the disks it made.
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
    /// state carried over by word, and installed. Threads'
    /// [`DeviceQueue`](crate::DeviceQueue)s move to it at their next submit
    /// or poll; I/O in flight finishes on the old map. Returns the old map.
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
    pub(crate) fn existing_disk(&self, name: &str) -> Option<Arc<MemoryDisk>> {
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
