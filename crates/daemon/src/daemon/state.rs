//! What the daemon shares between the control threads, the devices
//! thread, the metrics endpoint and its owner ([`super::Daemon`]).
//!
//! # Locks
//! `control` is held for a whole control request, so verbs run one at a
//! time; `maps` only while a request or a scrape reads or changes the
//! list, never across a map's build (a reload may connect to NBD servers
//! for seconds), so a scrape never waits behind a reload. Order: `control`
//! before `maps`.

use super::settings::ServerSettings;
use crate::config::UblkOnStop;
use crate::notify::Notifier;
use crate::running::RunningMap;
use crate::ublk::UblkExports;
use mpio_server::{Engine, EngineConfig};
use mpio_transport::probe::CheckerPool;
use mpio_transport::{lock, Transports};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The daemon's shared state. See the module docs.
#[derive(Debug)]
pub(super) struct State {
    pub(super) transports: Transports,
    pub(super) control: Mutex<()>,
    pub(super) maps: Mutex<Vec<RunningMap>>,
    /// The event loops and acceptor of every NBD export, started with the
    /// first one; its loops run on the ublk engine's threads when that
    /// runs. (Before `ublk`: dropped first, it tells hosted loops to end
    /// while their threads still run.)
    pub(super) nbd: Mutex<Option<Arc<Engine>>>,
    pub(super) ublk: UblkExports,
    /// What a clean stop does with the ublk devices (the config's, as
    /// last read).
    pub(super) ublk_on_stop: Mutex<UblkOnStop>,
    /// Every map's checker, on one thread.
    pub(super) checkers: CheckerPool,
    /// The service manager's notify socket (silent without one).
    pub(super) notifier: Notifier,
    /// What maps started later (by a reload of the config file) run with.
    pub(super) settings: ServerSettings,
    /// The config file the maps came from, read again by a reload of it.
    pub(super) config_file: Option<PathBuf>,
}

impl State {
    /// The NBD engine, started (with `settings`' loops) at the first call.
    pub(super) fn nbd_engine(&self, settings: ServerSettings) -> std::io::Result<Arc<Engine>> {
        let mut engine = lock(&self.nbd);
        if let Some(engine) = engine.as_ref() {
            return Ok(Arc::clone(engine));
        }
        let config = EngineConfig {
            loops: settings.loops,
            idle_spin_us: settings.idle_spin_us,
        };
        // One I/O thread per CPU for both kinds of export, unless another
        // loop count was asked for.
        let hosted = (settings.loops == 0)
            .then(|| self.ublk.host_nbd(&config))
            .flatten();
        let started = match hosted {
            Some(hosted) => {
                let started = hosted?;
                tracing::info!(
                    loops = started.loop_count(),
                    "NBD engine started on the ublk threads: every export's connections are \
                     served there"
                );
                started
            }
            None => {
                let started = Engine::start(&config)?;
                tracing::info!(
                    loops = started.loop_count(),
                    "NBD engine started: every export's connections are served on these loops"
                );
                started
            }
        };
        *engine = Some(Arc::clone(&started));
        Ok(started)
    }
}
