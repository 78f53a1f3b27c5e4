//! A map as the daemon runs it: its config, the device slot that serves
//! it, its checker (in the daemon's pool) and its exports. The daemon ([`crate::daemon`])
//! owns these; the read verbs ([`crate::view`]) show them.

use crate::config::MapConfig;
use crate::config::UblkNumber;
use mpio_core::checker::PathCheck;
use mpio_core::map::Map;
use mpio_server::Server;
use mpio_transport::probe::PooledChecker;
use mpio_transport::DeviceSlot;
use mpio_ublk::UblkDevice;
use std::sync::Arc;

/// One map as the daemon runs it.
#[derive(Debug)]
pub struct RunningMap {
    /// Its config (updated by reloads from a config).
    pub config: MapConfig,
    /// The map now served, and its paths.
    pub slot: Arc<DeviceSlot>,
    /// Its path checker, in the daemon's pool.
    pub checker: PooledChecker,
    /// Its NBD exports.
    pub servers: Vec<Server>,
    /// Its ublk exports.
    pub ublk_devices: Vec<RunningUblk>,
}

/// A map's ublk export as the daemon runs it.
#[derive(Debug)]
pub struct RunningUblk {
    /// The export's name.
    pub export: String,
    /// The device number the config asked for.
    pub number: UblkNumber,
    /// Refuses writes (no flush at shutdown).
    pub read_only: bool,
    /// The device.
    pub device: UblkDevice,
}

impl RunningMap {
    /// The map now served.
    pub fn map(&self) -> Arc<Map> {
        self.slot.map()
    }

    /// The checker's record of each path, by path word.
    pub fn path_checks(&self) -> Vec<(String, PathCheck)> {
        self.checker.path_checks()
    }
}
