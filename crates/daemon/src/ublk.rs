//! The daemon's ublk exports: one [`Engine`] (its per-CPU I/O threads)
//! for every ublk device of every map, started with the first one, so
//! the thread count does not grow with the maps.
//!
//! # Errors
//! A device that cannot be made (no `ublk_drv`, not root, its number
//! taken) is logged with what to do, and the daemon goes on serving its
//! other exports.

use crate::config::UblkNumber;
use crate::links::DeviceLinks;
use mpio_server::{flush_map, Engine as NbdEngine, EngineConfig as NbdEngineConfig, FlushOutcome};
use mpio_transport::{lock, DeviceSlot};
use mpio_ublk::{DeviceOptions, Engine, EngineConfig, UblkDevice, UblkError};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The engine, once a map asked for a ublk device; and each device's
/// `/dev/mpio/NAME` links, removed with it.
#[derive(Debug, Default)]
pub struct UblkExports {
    engine: Mutex<Option<Engine>>,
    links: Mutex<HashMap<u32, DeviceLinks>>,
}

/// What removing one ublk device at shutdown did.
#[derive(Clone, Debug)]
pub struct UblkShutdown {
    /// The device, `/dev/ublkbN`.
    pub device: String,
    /// Why removal failed, if it did.
    pub removal_error: Option<String>,
    /// The flush sent through the map once the disk was gone.
    pub flush: FlushOutcome,
    /// How long it took.
    pub elapsed: Duration,
}

impl UblkShutdown {
    /// Removed, and flushed (or read-only).
    pub fn is_clean(&self) -> bool {
        self.removal_error.is_none()
            && matches!(self.flush, FlushOutcome::Done | FlushOutcome::ReadOnly)
    }
}

impl fmt::Display for UblkShutdown {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.removal_error {
            None => write!(formatter, "{} removed", self.device)?,
            Some(error) => write!(formatter, "{} not removed: {error}", self.device)?,
        }
        write!(
            formatter,
            " in {} ms, {}",
            self.elapsed.as_millis(),
            self.flush
        )
    }
}

impl UblkExports {
    /// Each I/O thread's heartbeat, if the engine runs.
    pub fn heartbeats(&self) -> Vec<Arc<mpio_io_loop::Heartbeat>> {
        lock(&self.engine)
            .as_ref()
            .map(Engine::heartbeats)
            .unwrap_or_default()
    }
}

/// The engine in `engine`, started first if it is not running.
fn start_once(engine: &mut Option<Engine>) -> Result<&Engine, UblkError> {
    if engine.is_none() {
        let started = Engine::start(EngineConfig::default())?;
        tracing::info!(threads = started.threads(), "ublk engine started");
        *engine = Some(started);
    }
    Ok(engine.as_ref().expect("started above"))
}

impl UblkExports {
    /// Makes `slot`'s map the ublk device `number`, starting the engine
    /// if this is the first.
    ///
    /// # Errors
    /// The engine or the device could not start; the error says why and
    /// what to do.
    pub fn add(
        &self,
        slot: &Arc<DeviceSlot>,
        number: UblkNumber,
        read_only: bool,
    ) -> Result<UblkDevice, UblkError> {
        let mut engine = lock(&self.engine);
        let engine = start_once(&mut engine)?;
        let options = DeviceOptions {
            id: match number {
                UblkNumber::Any => None,
                UblkNumber::Fixed(id) => Some(id),
            },
            read_only,
        };
        engine.add(slot, options)
    }

    /// Makes `links` to `device` (logging what failed), to be removed
    /// when [`UblkExports::remove`] removes it.
    pub(crate) fn link(&self, map: &str, device: &UblkDevice, links: DeviceLinks) {
        for problem in links.make() {
            tracing::warn!(%map, device = %device.path(), "device link not made: {problem}");
        }
        lock(&self.links).insert(device.id(), links);
    }

    /// Starts the engine now if it is not running, so that the NBD
    /// engine can be hosted on its threads ([`UblkExports::host_nbd`]).
    ///
    /// # Errors
    /// The engine could not start.
    pub fn start(&self) -> Result<(), UblkError> {
        start_once(&mut lock(&self.engine)).map(|_| ())
    }

    /// An NBD engine whose loops run on the ublk engine's threads, one
    /// per CPU, if the ublk engine is running (`None` if not).
    ///
    /// # Errors
    /// The NBD engine's acceptor could not start, or a ublk thread is
    /// gone.
    pub fn host_nbd(&self, config: &NbdEngineConfig) -> Option<std::io::Result<Arc<NbdEngine>>> {
        let engine = lock(&self.engine);
        let engine = engine.as_ref()?;
        Some(
            NbdEngine::start_hosted(config, &engine.cpus()).and_then(|(nbd, loops)| {
                engine.host(loops).map_err(std::io::Error::other)?;
                Ok(nbd)
            }),
        )
    }

    /// Removes `device` (the block layer first waits for the requests
    /// it holds), then flushes the map it served, within `deadline`.
    pub fn remove(
        &self,
        device: UblkDevice,
        slot: &Arc<DeviceSlot>,
        read_only: bool,
        deadline: Duration,
    ) -> UblkShutdown {
        let started = Instant::now();
        let path = device.path();
        if let Some(links) = lock(&self.links).remove(&device.id()) {
            for problem in links.remove() {
                tracing::warn!(device = %path, "device link not removed: {problem}");
            }
        }
        let removal_error = match lock(&self.engine).as_ref() {
            Some(engine) => engine.remove(device).err().map(|error| error.to_string()),
            None => Some("the ublk engine is gone".into()),
        };
        let flush = if read_only {
            FlushOutcome::ReadOnly
        } else {
            flush_map(slot, started + deadline)
        };
        UblkShutdown {
            device: path,
            removal_error,
            flush,
            elapsed: started.elapsed(),
        }
    }
}
