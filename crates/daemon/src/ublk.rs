//! The daemon's ublk exports: one [`Engine`] (its per-CPU I/O threads)
//! for every ublk device of every map, started with the first one, so
//! the thread count does not grow with the maps.
//!
//! # Stop
//! At a stop a device is released for the next daemon (a numbered one,
//! when the config keeps devices: no flush, the next daemon serves the
//! filesystem's) or removed and the map flushed. A removal waits for the
//! device's deletion only when no one holds it open (it claims the
//! device first, `crate::holders`); a held device's disk goes at once
//! and it is deleted once its holders close it, so a mounted filesystem
//! never hangs a stop.
//!
//! # Errors
//! A device that cannot be made (no `ublk_drv`, not root, its number
//! taken) is logged with what to do, and the daemon goes on serving its
//! other exports.

use crate::config::{UblkNumber, UblkOnStop};
use crate::holders::Claim;
use crate::links::DeviceLinks;
use crate::running::RunningUblk;
use mpio_core::message::Message;
use mpio_server::{flush_map, Engine as NbdEngine, EngineConfig as NbdEngineConfig, FlushOutcome};
use mpio_transport::{lock, DeviceSlot};
use mpio_ublk::{DeviceOptions, Engine, EngineConfig, Released, TryStop, UblkDevice, UblkError};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The engine, once a map asked for a ublk device; and each device's
/// `/dev/mpio/NAME` links, removed with it. The engine is shared out of
/// its lock, so that devices stop in parallel (a release may wait for its
/// paths up to the shutdown deadline) while the lock only guards its
/// start.
#[derive(Debug, Default)]
pub struct UblkExports {
    engine: Mutex<Option<Arc<Engine>>>,
    links: Mutex<HashMap<u32, DeviceLinks>>,
}

/// What one ublk device's stop did.
#[derive(Clone, Debug)]
pub struct UblkShutdown {
    /// The device's number N (`/dev/ublkbN`).
    pub number: u32,
    /// Removed, kept for the next daemon, or neither.
    pub outcome: UblkOutcome,
    /// The flush sent through the map once the device was removed
    /// (`None`: kept, its flushes go to the next daemon).
    pub flush: Option<FlushOutcome>,
    /// How long it took.
    pub elapsed: Duration,
}

/// What became of a ublk device at a stop.
#[derive(Clone, Debug)]
pub enum UblkOutcome {
    /// Removed once the block layer had its answers (`why` says why, if
    /// the daemon was asked to keep its devices).
    Removed {
        /// What to know of its removal: held by someone, or numbered
        /// by the kernel although devices are kept.
        why: Option<String>,
    },
    /// Left for the next daemon, its I/O waiting in the kernel for at
    /// most `timeout` (see [`mpio_ublk::Engine::release`]).
    Kept {
        /// How long its I/O may wait for the next daemon.
        timeout: Duration,
        /// What its queues left behind.
        released: Released,
    },
    /// Could not be removed or released; why.
    Failed(String),
}

impl UblkShutdown {
    /// Removed and flushed (or read-only), or kept with nothing left at
    /// a path.
    pub fn is_clean(&self) -> bool {
        let outcome = match &self.outcome {
            UblkOutcome::Removed { .. } => true,
            UblkOutcome::Kept { released, .. } => released.at_paths == 0,
            UblkOutcome::Failed(_) => false,
        };
        outcome
            && matches!(
                self.flush,
                None | Some(FlushOutcome::Done | FlushOutcome::ReadOnly)
            )
    }

    /// How long the device's I/O waits for the next daemon, if it was
    /// kept.
    pub fn kept_for(&self) -> Option<Duration> {
        match self.outcome {
            UblkOutcome::Kept { timeout, .. } => Some(timeout),
            _ => None,
        }
    }
}

impl fmt::Display for UblkShutdown {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let device = format!("/dev/ublkb{}", self.number);
        match &self.outcome {
            UblkOutcome::Removed { why: None } => write!(formatter, "{device} removed")?,
            UblkOutcome::Removed { why: Some(why) } => {
                write!(formatter, "{device} removed ({why})")?;
            }
            UblkOutcome::Kept { timeout, released } => {
                write!(
                    formatter,
                    "{device} kept for the next daemon (its I/O waits up to {} ms, then fails); \
                     {} request(s) waiting for a path handed on",
                    timeout.as_millis(),
                    released.waiting
                )?;
                if released.at_paths > 0 {
                    write!(
                        formatter,
                        ", {} still at a path left to the kernel",
                        released.at_paths
                    )?;
                }
            }
            UblkOutcome::Failed(error) => write!(formatter, "{device} not removed: {error}")?,
        }
        write!(formatter, " in {} ms", self.elapsed.as_millis())?;
        match &self.flush {
            Some(flush) => write!(formatter, ", {flush}"),
            None => Ok(()),
        }
    }
}

impl UblkExports {
    /// Each I/O thread's heartbeat, if the engine runs.
    pub fn heartbeats(&self) -> Vec<Arc<mpio_io_loop::Heartbeat>> {
        self.running()
            .map(|engine| engine.heartbeats())
            .unwrap_or_default()
    }

    /// The engine, if it runs.
    fn running(&self) -> Option<Arc<Engine>> {
        lock(&self.engine).clone()
    }

    /// The engine, for a verb on a device it serves.
    ///
    /// # Errors
    /// [`UblkError::EngineStopped`] when it does not run.
    fn serving(&self) -> Result<Arc<Engine>, UblkError> {
        self.running().ok_or(UblkError::EngineStopped)
    }
}

/// The engine in `engine`, started first if it is not running.
fn start_once(engine: &mut Option<Arc<Engine>>) -> Result<&Engine, UblkError> {
    if engine.is_none() {
        let started = Engine::start(EngineConfig::default())?;
        tracing::info!(threads = started.threads(), "ublk engine started");
        *engine = Some(Arc::new(started));
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
    /// with the device (a device kept for the next daemon keeps them).
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

    /// Stops `ublk` (a device of the map `slot` serves) as `on_stop`
    /// says, within `deadline`: releases it for the next daemon, or
    /// removes it (see [`UblkExports::remove_device`]; `claim`: the
    /// device, claimed by the caller) and then flushes the map.
    pub(crate) fn stop(
        &self,
        ublk: RunningUblk,
        slot: &Arc<DeviceSlot>,
        on_stop: UblkOnStop,
        deadline: Duration,
        claim: Option<Claim>,
    ) -> UblkShutdown {
        let started = Instant::now();
        let id = ublk.device.id();
        let outcome = match self.running() {
            None => UblkOutcome::Failed("the ublk engine is gone".into()),
            Some(engine) => match (on_stop, ublk.number) {
                (UblkOnStop::Keep { timeout }, UblkNumber::Fixed(_)) => {
                    match engine.release(ublk.device, deadline) {
                        Ok(released) => UblkOutcome::Kept { timeout, released },
                        Err(error) => UblkOutcome::Failed(error.to_string()),
                    }
                }
                (on_stop, _) => match self.remove_device(&engine, ublk.device, claim, Some(slot)) {
                    Ok(held) => {
                        let unnumbered = matches!(on_stop, UblkOnStop::Keep { .. }).then(|| {
                            "the kernel chose its number, so no daemon could find it again: \
                             give `ublk = N` to keep a device across restarts"
                                .to_string()
                        });
                        let why: Vec<String> = unnumbered.into_iter().chain(held).collect();
                        UblkOutcome::Removed {
                            why: (!why.is_empty()).then(|| why.join("; ")),
                        }
                    }
                    Err(error) => UblkOutcome::Failed(error.to_string()),
                },
            },
        };
        // A kept device's flushes reach the next daemon, over the same
        // paths; one now would wait out an outage for nothing.
        let flush = match (&outcome, ublk.read_only) {
            (UblkOutcome::Kept { .. }, _) => None,
            (_, true) => Some(FlushOutcome::ReadOnly),
            (_, false) => Some(flush_map(slot, started + deadline)),
        };
        UblkShutdown {
            number: id,
            outcome,
            flush,
            elapsed: started.elapsed(),
        }
    }

    /// Refuses a resize of a map served by a ublk device when this
    /// kernel cannot resize a live device (checked before the map grows).
    ///
    /// # Errors
    /// [`UblkError::Unsupported`]; [`UblkError::EngineStopped`].
    pub(crate) fn check_resize(&self) -> Result<(), UblkError> {
        self.serving()?.check_resize()
    }

    /// Gives live `device` the size of its map, `size_bytes`.
    ///
    /// # Errors
    /// As [`Engine::resize`].
    pub(crate) fn resize(&self, device: &UblkDevice, size_bytes: u64) -> Result<(), UblkError> {
        self.serving()?.resize(device, size_bytes)
    }

    /// Removes `device` at once, without a flush: for a daemon whose start
    /// failed, or that is dropped.
    pub(crate) fn remove(&self, device: UblkDevice) -> Result<(), UblkError> {
        let engine = self.serving()?;
        self.remove_device(&engine, device, None, None).map(drop)
    }

    /// Removes `device` and its links. Claimed (by `claim`, else here),
    /// no one holds it and the removal waits for its deletion; held, its
    /// disk goes at once (its holders' I/O fails) and it is deleted once
    /// they close it, which is returned as what happened.
    ///
    /// A claim keeps out mounts, not a plain open, and the deletion waits
    /// for every opener. Where the kernel can stop a device only while no
    /// one has it open (TRY_STOP_DEV), the claim is let go and the stop
    /// checks for openers itself, in one step: a process that opened the
    /// device meanwhile makes it a held device, and the deletion never
    /// waits.
    ///
    /// A held device's disk goes only once the kernel has the answers to
    /// what it sent, and I/O that waits for a path (the map queues, and
    /// none is usable) would be answered only when one returns: before a
    /// held device stops, its map `slot` (the map is going) stops
    /// queueing (`fail_if_no_path`), so that I/O fails now, as
    /// `multipath -f` disables queueing before it flushes a map.
    fn remove_device(
        &self,
        engine: &Engine,
        device: UblkDevice,
        claim: Option<Claim>,
        slot: Option<&DeviceSlot>,
    ) -> Result<Option<String>, UblkError> {
        let stop_held = |device: UblkDevice| {
            if let Some(slot) = slot {
                if let Err(error) = slot.map().message(&Message::FailIfNoPath) {
                    tracing::warn!(device = %device.path(), %error, "queueing not stopped");
                }
            }
            engine.stop(device)
        };
        let path = device.path();
        // The links go with the disk; the device is not theirs to keep.
        if let Some(links) = lock(&self.links).remove(&device.id()) {
            for problem in links.remove() {
                tracing::warn!(device = %path, "device link not removed: {problem}");
            }
        }
        let claim = claim.ok_or(()).or_else(|()| Claim::take(Path::new(&path)));
        let (stopped, holders) = match claim {
            Ok(claim) if engine.can_try_stop() => {
                // The stop counts every opener, the claim too.
                drop(claim);
                match engine.try_stop(device)? {
                    TryStop::Stopped(stopped) => (stopped, None),
                    TryStop::Held(device) => {
                        let holders = Claim::take(Path::new(&path))
                            .err()
                            .unwrap_or_else(|| vec!["a process that opened it meanwhile".into()]);
                        (stop_held(device)?, Some(holders))
                    }
                }
            }
            Ok(claim) => {
                let stopped = engine.stop(device)?;
                // The disk is gone, so no one can open it now; the
                // deletion waits for every opener, the claim's too.
                drop(claim);
                (stopped, None)
            }
            Err(holders) => (stop_held(device)?, Some(holders)),
        };
        match holders {
            None => engine.delete(stopped).map(|()| None),
            Some(holders) => engine.delete_when_closed(stopped).map(|()| {
                Some(format!(
                    "held: {}; their I/O fails, and its number is free once they close it",
                    holders.join("; ")
                ))
            }),
        }
    }
}
