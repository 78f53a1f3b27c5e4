//! The daemon: the maps of a config, each built over its transports,
//! exported over NBD or as ublk devices, watched by a path checker (all
//! maps' checkers run on one thread, a [`CheckerPool`]), and steered
//! through the control socket.
//!
//! # Shape
//! [`Daemon::start`] builds every map (a map that cannot be built stops the
//! start, naming the map and why), adds its checker to the pool and starts
//! its NBD servers, then opens the control socket. Control requests are answered
//! one at a time by [`Daemon`]'s handler, so a reload and a message never
//! interleave; a reload builds its map without holding the list of maps,
//! so a metrics scrape never waits behind it. The I/O path takes no part
//! in either lock (each NBD event loop follows its map's
//! [`DeviceSlot`]).
//!
//! # Reload
//! A reload builds the new map from a dm table or a config section and
//! installs it in the map's slot ([`Transports::reload_named`]): path
//! state carries over by path name, threads move to the new map at their
//! next submit or poll, and I/O in flight finishes where it is. The
//! exports and the checker settings stay those the daemon started with;
//! a reload from a config that changes them says so in its answer.

use crate::config::{DaemonConfig, MapConfig};
use crate::control::protocol::{ReloadSource, Request, Response};
use crate::control::server::{ControlError, ControlServer};
use crate::devices::{self, Rounds};
use crate::metrics::http::{MetricsError, MetricsServer};
use crate::metrics::{self, MapMetrics};
use crate::running::{RunningMap, RunningUblk};
use crate::ublk::{UblkExports, UblkShutdown};
use crate::view;
use mpio_core::map::Map;
use mpio_core::message::Message;
use mpio_core::table::Table;
use mpio_server::{Engine, EngineConfig, Server, ServerConfig, ServerError, ShutdownReport};
use mpio_transport::checker::{Checker, CheckerPool};
use mpio_transport::limits::Limits;
use mpio_transport::lock;
use mpio_transport::{DeviceSlot, PathNames, SetupError, Transports};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a checker collects the results of probes in flight.
const PROBE_POLL: Duration = Duration::from_millis(5);

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The config names no map.
    #[error("the config defines no map")]
    NoMaps,
    /// A map could not be built over its transports.
    #[error("map {map:?}: {source}")]
    Setup {
        /// The map.
        map: String,
        /// Why (boxed: a setup error is large, and rare).
        source: Box<SetupError>,
    },
    /// An export could not start.
    #[error("map {map:?} export {export:?}: {source}")]
    Export {
        /// The map.
        map: String,
        /// The export's name.
        export: String,
        /// Why.
        source: ServerError,
    },
    /// The control socket could not be opened.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The metrics endpoint could not be opened.
    #[error("metrics: {0}")]
    Metrics(#[from] MetricsError),
    /// A thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// How every export's NBD server runs (the [`ServerConfig`] fields that are
/// not per export).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    /// Event loops serving every NBD export; 0: one per CPU.
    pub loops: usize,
    /// Depth of each event loop's queue over the map.
    pub queue_depth: usize,
    /// Most client connections at once, per export.
    pub max_connections: usize,
    /// How long (µs) an event loop polls after work before sleeping.
    pub idle_spin_us: u64,
    /// Most request and reply buffer bytes each export holds past its
    /// connections' first small requests ([`mpio_server::budget`]).
    pub max_buffered_bytes: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        let server = ServerConfig::default();
        ServerSettings {
            loops: server.loops,
            queue_depth: server.queue_depth,
            max_connections: server.max_connections,
            idle_spin_us: server.idle_spin_us,
            max_buffered_bytes: server.max_buffered_bytes,
        }
    }
}

/// What one export's clean shutdown did ([`Daemon::shutdown`]).
#[derive(Clone, Debug)]
pub struct ExportShutdown {
    /// The map exported.
    pub map: String,
    /// The export's name.
    pub export: String,
    /// What it did and abandoned.
    pub report: ExportReport,
}

/// An NBD server's or a ublk device's shutdown.
#[derive(Clone, Debug)]
pub enum ExportReport {
    /// The NBD server drained, flushed and closed.
    Nbd(ShutdownReport),
    /// The ublk device was removed and the map flushed.
    Ublk(UblkShutdown),
}

impl ExportReport {
    /// Nothing was abandoned.
    pub fn is_clean(&self) -> bool {
        match self {
            ExportReport::Nbd(report) => report.is_clean(),
            ExportReport::Ublk(report) => report.is_clean(),
        }
    }
}

impl std::fmt::Display for ExportReport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportReport::Nbd(report) => report.fmt(formatter),
            ExportReport::Ublk(report) => report.fmt(formatter),
        }
    }
}

/// What the daemon shares between the control threads, the metrics
/// endpoint and its owner.
///
/// # Locks
/// `control` is held for a whole control request, so verbs run one at a
/// time; `maps` only while a request or a scrape reads or changes the
/// list, never across a map's build (a reload may connect to NBD servers
/// for seconds), so a scrape never waits behind a reload. Order: `control`
/// before `maps`.
#[derive(Debug)]
struct State {
    transports: Transports,
    control: Mutex<()>,
    maps: Mutex<Vec<RunningMap>>,
    /// The event loops and acceptor of every NBD export, started with the
    /// first one; its loops run on the ublk engine's threads when that
    /// runs. (Before `ublk`: dropped first, it tells hosted loops to end
    /// while their threads still run.)
    nbd: Mutex<Option<Arc<Engine>>>,
    ublk: UblkExports,
    /// Every map's checker, on one thread.
    checkers: CheckerPool,
}

impl State {
    /// The NBD engine, started (with `settings`' loops) at the first call.
    fn nbd_engine(&self, settings: ServerSettings) -> std::io::Result<Arc<Engine>> {
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

/// A running daemon. Stops its servers, checkers and control socket when
/// dropped.
#[derive(Debug)]
pub struct Daemon {
    state: Arc<State>,
    control: Option<ControlServer>,
    metrics: Option<MetricsServer>,
    devices: Option<Rounds>,
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
                checkers: CheckerPool::start(Arc::new(mpio_transport::clock::now_ns), PROBE_POLL)?,
            }),
            control: None,
            metrics: None,
            devices: None,
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
        Ok(daemon)
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

    /// Shuts the daemon down cleanly within `deadline`: closes the control
    /// socket, drains every export at once ([`Server::shutdown`]: no new
    /// connection or request, every request read answered, a FLUSH through
    /// the map; a ublk device is removed once the block layer has its
    /// answers, then the map flushed), then stops the checkers. Returns
    /// each export's report, with its map's name and the export's.
    pub fn shutdown(mut self, deadline: Duration) -> Vec<ExportShutdown> {
        self.stop_control();
        self.devices = None;
        let maps: Vec<RunningMap> = lock(&self.state.maps).drain(..).collect();
        let mut reports = Vec::new();
        let mut checkers = Vec::new();
        let ublk = &self.state.ublk;
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
                    let drain = move || {
                        let report = ublk.remove(device.device, &slot, device.read_only, deadline);
                        ExportReport::Ublk(report)
                    };
                    draining.push((map, device.export, scope.spawn(drain)));
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
        self.stop_control();
        self.devices = None;
        for running in lock(&self.state.maps).drain(..) {
            for server in running.servers {
                server.stop();
            }
            for device in running.ublk_devices {
                let _ = self
                    .state
                    .ublk
                    .remove(device.device, &running.slot, true, Duration::ZERO);
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

/// What the last rescan of each map by WWID could not do, so that it is
/// logged once, not every round.
#[derive(Debug, Default)]
struct Rescans {
    failed: std::collections::HashMap<String, String>,
}

/// One round of [`crate::devices`]: every map's block-device paths get
/// their access state; every map by WWID is checked again from its
/// config text, and reloaded when the devices with its WWID (or their
/// priorities, under `group_by_prio`) changed. A rescan that finds no
/// device leaves the map as it is: its paths fail by themselves.
fn device_round(state: &State, rescans: &mut Rescans) {
    let sysfs = mpio_transport::blockdev::Sysfs::host();
    /// What a round needs of one map, copied out of the list.
    struct Watched {
        name: String,
        slot: Arc<DeviceSlot>,
        source: Option<Arc<str>>,
        table: String,
    }
    let maps: Vec<Watched> = lock(&state.maps)
        .iter()
        .map(|running| Watched {
            name: running.config.name.clone(),
            slot: Arc::clone(&running.slot),
            source: running.config.source.clone(),
            table: running.config.table.to_string(),
        })
        .collect();
    for Watched {
        name,
        slot,
        source,
        table,
    } in maps
    {
        let (map, handles, _) = slot.current();
        devices::refresh_access(&map, &handles, &sysfs);
        let Some(text) = source else {
            continue;
        };
        let found = DaemonConfig::parse(&text)
            .map_err(|error| error.to_string())
            .and_then(|config| {
                config
                    .map(&name)
                    .map(|map| map.table.to_string())
                    .ok_or_else(|| format!("no map named {name:?}"))
            });
        let outcome = match found {
            Ok(found) if found == table => Ok(()),
            Ok(_) => {
                let _control = lock(&state.control);
                let reload_source = ReloadSource::Config {
                    origin: "rescan".into(),
                    text: text.to_string(),
                };
                reload(state, &name, reload_source).map(|_| ())
            }
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => {
                rescans.failed.remove(&name);
            }
            Err(error) => {
                if rescans.failed.get(&name) != Some(&error) {
                    tracing::warn!(map = %name, %error, "rescan by wwid: the map keeps its paths");
                    rescans.failed.insert(name, error);
                }
            }
        }
    }
}

fn names_of(config: &MapConfig) -> PathNames {
    config
        .paths
        .iter()
        .map(|path| (path.name.clone(), path.uri.clone()))
        .collect()
}

fn map_options(config: &MapConfig) -> mpio_core::map::MapOptions {
    mpio_core::map::MapOptions {
        numa: mpio_transport::host::host_topology(),
        ..config.options()
    }
}

/// The Prometheus text for every map, with the I/O its exports hold
/// waiting for a path.
fn render_metrics(state: &State) -> String {
    let maps = lock(&state.maps);
    let current: Vec<(Arc<Map>, u64)> = maps
        .iter()
        .map(|running| {
            let waiting = running.servers.iter().map(Server::waiting_for_path).sum();
            (running.map(), waiting)
        })
        .collect();
    let metrics: Vec<MapMetrics<'_>> = maps
        .iter()
        .zip(&current)
        .map(|(running, (map, waiting))| MapMetrics {
            name: &running.config.name,
            map,
            waiting_for_path: Some(*waiting),
        })
        .collect();
    metrics::render(&metrics)
}

/// Builds one map and starts its checker and exports. A ublk device that
/// cannot be made is logged and left out, and the other exports serve.
fn start_map(
    state: &State,
    config: MapConfig,
    settings: ServerSettings,
) -> Result<RunningMap, DaemonError> {
    let (transports, ublk) = (&state.transports, &state.ublk);
    let setup = |source| DaemonError::Setup {
        map: config.name.clone(),
        source: Box::new(source),
    };
    let device = transports
        .build_named(&config.table, map_options(&config), &names_of(&config))
        .map_err(setup)?;
    let slot = device.into_slot();
    let checker = state
        .checkers
        .add(Checker::on_slot(Arc::clone(&slot), config.checker));
    let mut servers = Vec::with_capacity(config.exports.len());
    let mut ublk_devices = Vec::new();
    for export in &config.exports {
        if let Some(number) = export.ublk {
            match ublk.add(&slot, number, export.read_only) {
                Ok(device) => {
                    tracing::info!(map = %config.name, export = %export.name, device = %device.path(), "ublk device ready");
                    ublk_devices.push(RunningUblk {
                        export: export.name.clone(),
                        read_only: export.read_only,
                        device,
                    });
                }
                Err(error) => {
                    tracing::error!(map = %config.name, export = %export.name, %error, "no ublk device");
                }
            }
        }
        if export.socket.is_none() && export.tcp.is_none() {
            continue;
        }
        let server_config = ServerConfig {
            unix_socket: export.socket.clone(),
            socket_mode: export.socket_mode,
            socket_group: export.socket_group,
            tcp: export.tcp,
            export_name: export.name.clone(),
            read_only: export.read_only,
            queue_depth: settings.queue_depth,
            max_connections: export.max_connections.unwrap_or(settings.max_connections),
            max_buffered_bytes: settings.max_buffered_bytes,
            ..ServerConfig::default()
        };
        let export_error = |source| DaemonError::Export {
            map: config.name.clone(),
            export: export.name.clone(),
            source,
        };
        let engine = state
            .nbd_engine(settings)
            .map_err(|error| export_error(ServerError::Start(error)))?;
        let server =
            Server::start_on(&engine, &server_config, Arc::clone(&slot)).map_err(export_error)?;
        servers.push(server);
    }
    tracing::info!(map = %config.name, paths = slot.map().paths().len(), "map started");
    Ok(RunningMap {
        config,
        slot,
        checker,
        servers,
        ublk_devices,
    })
}

/// Answers one control request, one at a time (under `control`).
fn handle(state: &State, request: Request) -> Response {
    let _control = lock(&state.control);
    let outcome = match request {
        Request::Status { map } => {
            let maps = lock(&state.maps);
            select(&maps, map.as_deref()).map(|chosen| view::status(&chosen, map.is_some()))
        }
        Request::Table { map } => {
            let maps = lock(&state.maps);
            select(&maps, map.as_deref()).map(|chosen| view::table(&chosen, map.is_some()))
        }
        Request::Topology { map } => {
            let maps = lock(&state.maps);
            select(&maps, map.as_deref()).map(|chosen| view::topology(&chosen))
        }
        Request::Paths { map } => {
            let maps = lock(&state.maps);
            select(&maps, map.as_deref()).map(|chosen| view::paths(&chosen))
        }
        Request::Message { map, message } => {
            let mut maps = lock(&state.maps);
            find(&mut maps, &map).and_then(|running| send_message(running, &message))
        }
        Request::Reload { map, source } => reload(state, &map, source),
    };
    outcome.unwrap_or_else(|message| Response::Error { message })
}

/// The maps a read verb shows: the one named, or all.
fn select<'a>(maps: &'a [RunningMap], name: Option<&str>) -> Result<Vec<&'a RunningMap>, String> {
    match name {
        None => Ok(maps.iter().collect()),
        Some(name) => maps
            .iter()
            .find(|running| running.config.name == name)
            .map(|running| vec![running])
            .ok_or_else(|| no_such_map(maps, name)),
    }
}

fn find<'a>(maps: &'a mut [RunningMap], name: &str) -> Result<&'a mut RunningMap, String> {
    match maps.iter().position(|running| running.config.name == name) {
        Some(index) => Ok(&mut maps[index]),
        None => Err(no_such_map(maps, name)),
    }
}

fn no_such_map(maps: &[RunningMap], name: &str) -> String {
    let names: Vec<&str> = maps
        .iter()
        .map(|running| running.config.name.as_str())
        .collect();
    format!("no map named {name:?} (maps: {})", names.join(", "))
}

fn send_message(running: &RunningMap, text: &str) -> Result<Response, String> {
    let message = Message::parse(text).map_err(|error| error.to_string())?;
    let map = running.map();
    map.message(&message)
        .map_err(|error| format!("map {:?}: {error}", running.config.name))?;
    Ok(Response::Ok {
        text: String::new(),
        json: serde_json::json!({ "map": running.config.name, "message": message }),
    })
}

/// Reloads map `name` from `source`. The caller holds `control`; `maps`
/// is taken to read the map's config and slot, released while the new
/// map is built and installed, and taken again to record it.
fn reload(state: &State, name: &str, source: ReloadSource) -> Result<Response, String> {
    let (new_config, kind, slot, notes, served_as) = {
        let mut maps = lock(&state.maps);
        let running = find(&mut maps, name)?;
        let (new_config, kind) = reload_config(running, source)?;
        let notes = reload_notes(running, &new_config)?;
        let served_as: Vec<Limits> = running
            .ublk_devices
            .iter()
            .map(|ublk| ublk.device.limits())
            .collect();
        (
            new_config,
            kind,
            Arc::clone(&running.slot),
            notes,
            served_as,
        )
    };
    let old = state
        .transports
        .reload_named(
            &slot,
            &new_config.table,
            map_options(&new_config),
            &names_of(&new_config),
            &served_as,
        )
        .map_err(|error| format!("map {name:?}: {error}; the map keeps its table"))?;
    let mut maps = lock(&state.maps);
    // Only a shutdown removes maps, and it stops the control socket first.
    let running = find(&mut maps, name)?;
    // Idle event loops move to the new map now (dropping their queues to
    // paths it removed), not at their next request.
    for server in &running.servers {
        server.notice_reload();
    }
    // The checker lists and probes the new map's paths now, not at its
    // next round.
    running.checker.wake();
    let map = running.slot.map();
    tracing::info!(
        map = %name,
        from = %old.table(),
        to = %map.table(),
        "map reloaded"
    );
    running.config = MapConfig {
        exports: running.config.exports.clone(),
        checker: running.config.checker,
        ..new_config
    };
    Ok(Response::Ok {
        text: notes.iter().map(|note| format!("note: {note}\n")).collect(),
        json: serde_json::json!({
            "map": name,
            "from": kind,
            "table": map.table().to_string(),
            "notes": notes,
        }),
    })
}

/// The config a reload of `running` from `source` gives the map, and
/// which kind of source it was.
fn reload_config(
    running: &RunningMap,
    source: ReloadSource,
) -> Result<(MapConfig, &'static str), String> {
    let name = &running.config.name;
    match source {
        ReloadSource::Table(text) => {
            let table = Table::parse(&text).map_err(|error| format!("table: {error}"))?;
            let mut config = running.config.clone();
            config.table = table;
            Ok((config, "table"))
        }
        ReloadSource::Config { origin, text } => {
            let daemon_config =
                DaemonConfig::parse(&text).map_err(|error| format!("{origin}: {error}"))?;
            let config = daemon_config
                .map(name)
                .cloned()
                .ok_or_else(|| format!("{origin}: no map named {name:?}"))?;
            Ok((config, "config"))
        }
    }
}

/// Refuses a reload of `running` to `new_config` that would move a path
/// word or resize the export; else the notes for what it leaves as is.
fn reload_notes(running: &RunningMap, new_config: &MapConfig) -> Result<Vec<&'static str>, String> {
    let name = &running.config.name;
    // Path state, counters and the checker's records follow the path word
    // across a reload: a word must keep leading where it led.
    let old_map = running.map();
    for path in &new_config.paths {
        let before = running.config.uri_of(&path.name);
        let in_use = (0..old_map.paths().len()).any(|index| old_map.path_name(index) == path.name);
        if in_use && before != path.uri {
            return Err(format!(
                "map {name:?}: path {:?} leads to {before:?}; the reload points it at {:?}: a path \
                 keeps its endpoint across a reload (give the new endpoint a new name); the map \
                 keeps its table",
                path.name, path.uri
            ));
        }
    }
    let mut notes = Vec::new();
    if new_config.exports != running.config.exports {
        notes.push("the exports differ and stay as started (restart the daemon to change them)");
    }
    if new_config.checker != running.config.checker {
        notes.push("the checker settings differ and stay as started");
    }
    // Clients were told the export's size at their handshake.
    if let Some(server) = running.servers.first() {
        server
            .check_size(&new_config.table)
            .map_err(|error| format!("map {name:?}: {error}; the map keeps its table"))?;
    }
    Ok(notes)
}
