//! A running daemon's life: [`Daemon::start`] (or [`Daemon::start_file`],
//! which remembers the file for [`Daemon::reload_config`]) builds every
//! map and opens the control socket, the metrics endpoint, the devices
//! thread and, when the service manager asks for one, the watchdog;
//! [`Daemon::ready`] tells the service manager it serves;
//! [`Daemon::shutdown`] says it stops and drains every export within a
//! deadline; [`Daemon::stop`] (and a drop) stops everything at once.
//! Whatever a failed start had started is stopped before it returns.

use super::dispatch::handle;
use super::error::DaemonError;
use super::health::Watchdog;
use super::reconfigure::reload_file;
use super::report::{ExportReport, ExportShutdown};
use super::rescan::{device_round, Rescans};
use super::scrape::render_metrics;
use super::service_status::service_status;
use super::settings::ServerSettings;
use super::start::start_map;
use super::state::State;
use crate::config::DaemonConfig;
use crate::control::protocol::Response;
use crate::control::server::ControlServer;
use crate::devices::Rounds;
use crate::metrics::http::MetricsServer;
use crate::notify::Notifier;
use crate::running::RunningMap;
use crate::ublk::UblkExports;
use mpio_server::Server;
use mpio_transport::probe::CheckerPool;
use mpio_transport::{lock, Transports};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a checker collects the results of probes in flight.
const PROBE_POLL: Duration = Duration::from_millis(5);

/// A running daemon. Stops its servers, checkers and control socket when
/// dropped.
#[derive(Debug)]
pub struct Daemon {
    state: Arc<State>,
    control: Option<ControlServer>,
    metrics: Option<MetricsServer>,
    devices: Option<Rounds>,
    watchdog: Option<Rounds>,
}

impl Daemon {
    /// Builds and starts every map of `config`, then opens the control
    /// socket at `control_socket` (default: the config's, else
    /// [`crate::control::default_socket`]).
    ///
    /// # Errors
    /// The first map, export or socket that cannot start; what started is
    /// stopped again.
    pub fn start(
        config: DaemonConfig,
        control_socket: Option<&Path>,
        settings: ServerSettings,
    ) -> Result<Daemon, DaemonError> {
        Daemon::start_with(config, None, control_socket, settings)
    }

    /// As [`Daemon::start`], with the maps of the config file at `path`,
    /// which [`Daemon::reload_config`] reads again.
    ///
    /// # Errors
    /// The file cannot be read or checked; else as [`Daemon::start`].
    pub fn start_file(
        path: &Path,
        control_socket: Option<&Path>,
        settings: ServerSettings,
    ) -> Result<Daemon, DaemonError> {
        let config = DaemonConfig::load(path)?;
        Daemon::start_with(config, Some(path.to_path_buf()), control_socket, settings)
    }

    fn start_with(
        config: DaemonConfig,
        config_file: Option<PathBuf>,
        control_socket: Option<&Path>,
        settings: ServerSettings,
    ) -> Result<Daemon, DaemonError> {
        let notifier = Notifier::from_env().map_err(DaemonError::Notify)?;
        if config.maps.is_empty() {
            return Err(DaemonError::NoMaps);
        }
        // Whatever fails from here drops `daemon`, which stops what
        // started: servers, checkers, and ublk devices (removed, not left
        // waiting for a server).
        let mut daemon = Daemon {
            state: Arc::new(State {
                transports: Transports::new(),
                control: Mutex::new(()),
                maps: Mutex::new(Vec::with_capacity(config.maps.len())),
                nbd: Mutex::new(None),
                ublk: UblkExports::default(),
                ublk_on_stop: Mutex::new(config.ublk_on_stop),
                checkers: CheckerPool::start(Arc::new(mpio_transport::clock::now_ns), PROBE_POLL)?,
                notifier,
                settings,
                config_file,
            }),
            control: None,
            metrics: None,
            devices: None,
            watchdog: None,
        };
        let state = &daemon.state;
        let interval_ns = config
            .maps
            .iter()
            .map(|map| map.checker.interval_ns)
            .min()
            .unwrap_or(u64::MAX);
        let has_ublk = config
            .maps
            .iter()
            .any(|map| map.exports.iter().any(|export| export.ublk.is_some()));
        if has_ublk {
            // Before any NBD export, so that NBD loops share its threads;
            // a failure is reported by each ublk export as it starts.
            let _ = state.ublk.start();
        }
        for map_config in config.maps {
            let running = start_map(state, map_config, settings)?;
            lock(&state.maps).push(running);
        }
        let round_state = Arc::clone(state);
        let mut rescans = Rescans::default();
        daemon.devices = Some(Rounds::spawn(
            "mpio-devices",
            Duration::from_nanos(interval_ns),
            move || device_round(&round_state, &mut rescans),
        )?);
        let socket = control_socket
            .map(Path::to_path_buf)
            .or(config.control_socket)
            .unwrap_or_else(crate::control::default_socket);
        let handler_state = Arc::clone(state);
        let control = ControlServer::start(
            &socket,
            Box::new(move |request| handle(&handler_state, request)),
        )?;
        daemon.control = Some(control);
        tracing::info!(socket = %socket.display(), "control socket open");
        if let Some(address) = config.metrics {
            let metrics_state = Arc::clone(&daemon.state);
            let server = MetricsServer::start(address, move || render_metrics(&metrics_state))?;
            tracing::info!(address = %server.local_addr(), "metrics served at /metrics");
            daemon.metrics = Some(server);
        }
        if let Some(interval) = state.notifier.watchdog_interval() {
            let watchdog_state = Arc::clone(state);
            let mut watchdog = Watchdog::default();
            daemon.watchdog = Some(Rounds::spawn("mpio-watchdog", interval, move || {
                watchdog.round(&watchdog_state)
            })?);
            tracing::info!(every = ?interval, "watchdog: WATCHDOG=1 while every loop turns");
        }
        Ok(daemon)
    }

    /// Tells the service manager (`READY=1`, with a `STATUS=` of the
    /// maps, paths and exports) that every map's devices and exports are
    /// up; nothing without one.
    pub fn ready(&self) {
        self.state.notifier.ready(&service_status(&self.state));
    }

    /// Reads the config file again and makes the maps match it (maps
    /// added, removed and changed; see `reconfigure.rs`), one control
    /// request at a time. Returns what changed.
    ///
    /// # Errors
    /// Why the file was refused, or which map could not follow it.
    pub fn reload_config(&self) -> Result<String, String> {
        let _control = lock(&self.state.control);
        match reload_file(&self.state) {
            Ok(Response::Ok { text, .. }) => Ok(text),
            Ok(Response::Error { message }) | Err(message) => Err(message),
        }
    }

    /// Where Prometheus metrics are served, if they are.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::local_addr)
    }

    /// The control socket's path.
    pub fn control_socket(&self) -> PathBuf {
        self.control
            .as_ref()
            .map(|control| control.path().to_path_buf())
            .unwrap_or_default()
    }

    /// Each map's name with its exports: the NBD URIs, then the ublk
    /// block devices.
    pub fn exports(&self) -> Vec<(String, Vec<String>)> {
        lock(&self.state.maps)
            .iter()
            .map(|running| {
                let uris = running.servers.iter().flat_map(Server::uris);
                let devices = running.ublk_devices.iter().map(|ublk| ublk.device.path());
                (running.config.name.clone(), uris.chain(devices).collect())
            })
            .collect()
    }

    /// Shuts the daemon down cleanly within `deadline`: tells the service
    /// manager (`STOPPING=1`), stops the watchdog, closes the control
    /// socket, drains every export at once ([`Server::shutdown`]: no new
    /// connection or request, every request read answered, a FLUSH through
    /// the map; a ublk device is removed once the block layer has its
    /// answers, then the map flushed), then stops the checkers. Returns
    /// each export's report, with its map's name and the export's.
    pub fn shutdown(mut self, deadline: Duration) -> Vec<ExportShutdown> {
        self.state.notifier.stopping();
        self.watchdog = None;
        self.stop_control();
        self.devices = None;
        let maps: Vec<RunningMap> = lock(&self.state.maps).drain(..).collect();
        let mut reports = Vec::new();
        let mut checkers = Vec::new();
        let ublk = &self.state.ublk;
        let on_stop = *lock(&self.state.ublk_on_stop);
        std::thread::scope(|scope| {
            let mut draining = Vec::new();
            for running in maps {
                for server in running.servers {
                    let map = running.config.name.clone();
                    let export = server.export().name.clone();
                    let drain = move || ExportReport::Nbd(server.shutdown(deadline));
                    draining.push((map, export, scope.spawn(drain)));
                }
                for device in running.ublk_devices {
                    let map = running.config.name.clone();
                    let slot = Arc::clone(&running.slot);
                    let export = device.export.clone();
                    let drain = move || {
                        ExportReport::Ublk(ublk.stop(device, &slot, on_stop, deadline, None))
                    };
                    draining.push((map, export, scope.spawn(drain)));
                }
                checkers.push(running.checker);
            }
            for (map, export, drain) in draining {
                match drain.join() {
                    Ok(report) => reports.push(ExportShutdown {
                        map,
                        export,
                        report,
                    }),
                    Err(_) => tracing::error!(%map, %export, "an export's shutdown panicked"),
                }
            }
        });
        for checker in checkers {
            checker.stop();
        }
        reports
    }

    /// Stops the daemon: closes the control socket, then stops every map's
    /// exports and checker.
    pub fn stop(mut self) {
        self.stop_all();
    }

    /// Closes the control socket and the metrics endpoint.
    fn stop_control(&mut self) {
        if let Some(control) = self.control.take() {
            control.stop();
        }
        if let Some(metrics) = self.metrics.take() {
            metrics.stop();
        }
    }

    fn stop_all(&mut self) {
        self.watchdog = None;
        self.stop_control();
        self.devices = None;
        for running in lock(&self.state.maps).drain(..) {
            for server in running.servers {
                server.stop();
            }
            for device in running.ublk_devices {
                if let Err(error) = self.state.ublk.remove(device.device) {
                    tracing::warn!(map = %running.config.name, export = %device.export, %error, "ublk device not removed");
                }
            }
            running.checker.stop();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop_all();
    }
}
