//! mpio's NBD server: exports one multipath map to NBD clients (fio's
//! `nbd` engine, qemu, nbdcopy, nbdinfo, the kernel's nbd client), which
//! use it without knowing it is one.
//!
//! [`Server::start_on`] binds an export's listeners (a unix socket and/or
//! TCP, loopback unless another address is given) and serves the export
//! on an [`Engine`]: one acceptor thread and a fixed set of event loops
//! (one per CPU by default) that serve every export started on it, so a
//! thousand exports run on as many threads as one (`src/engine.rs`).
//! [`Server::start`] does the same on an engine of its own, sized by
//! [`ServerConfig::loops`]. [`Server::shutdown`] drains and flushes the
//! export before it stops serving it (`src/shutdown.rs`), [`Server::stop`] (or
//! dropping the handle) stops at once; the engine's threads end with the
//! engine's last holder.
//!
//! The server exports a [`DeviceSlot`], not a fixed map: [`Server::reload`]
//! (or [`mpio_transport::Transports::reload`] on [`Server::device`]) gives
//! it a new table while clients run, and each loop's queue moves to the
//! new map at its next request (I/O in flight finishes on the old one).
//!
//! # Design
//! - The acceptor hands connections to the loops round-robin; at an
//!   export's [`ServerConfig::max_connections`] a new one takes the place
//!   of the longest-idle connection to that export on its loop, or is
//!   refused (see `src/acceptor.rs`).
//! - Each loop (`src/event_loop/`) is one thread, pinned to its CPU, with its
//!   own `mio` poller (epoll), its own connections and, per export it
//!   serves, its own [`mpio_core::queue::Queue`] over the export's map:
//!   loops share nothing on the I/O path.
//! - The handshake (`src/handshake/`) and the judgement of each request
//!   (`src/request.rs`) are pure functions of bytes, fuzzed in `fuzz/`.
//! - Buffers are bounded over the whole server: each connection's, and
//!   all of them together by [`ServerConfig::max_buffered_bytes`]
//!   ([`budget`]).
//! - Many requests per connection are in flight at once and are answered
//!   as they complete, in any order; replies are batched into vectored
//!   writes and buffers are pooled per loop (`src/pool.rs`).
//!
//! # Concurrency
//! Each export's `Shared` is its state as the threads see it:
//! `Shared::connections` counts open connections against the maximum
//! (claimed by the acceptor, released by the loops); `Shared::draining`
//! tells a loop to serve no connection that arrives after the export
//! began to shut down. Everything else reaches the threads by message
//! (`src/engine.rs`). See each field for its ordering.

#![warn(unreachable_pub)]

mod acceptor;
pub mod budget;
mod connection;
mod engine;
mod event_loop;
pub mod export;
pub mod fuzz;
mod handshake;
pub mod log_limit;
mod loop_message;
mod pool;
mod reply;
mod request;
mod shutdown;
mod stats;
mod stream;
pub mod unix_socket;

use acceptor::Listener;
pub use connection::INPUT_LEN;
pub use engine::{Engine, EngineConfig, HostedLoops};
pub use export::Export;
use loop_message::LoopMessage;
use mpio_core::map::Map;
use mpio_core::table::Table;
use mpio_transport::clock::now_ns;
use mpio_transport::{DeviceSlot, SetupError, Transports};
pub use shutdown::{flush_map, FlushOutcome, ShutdownReport};
use shutdown::{DrainProgress, LoopExit};
use stats::Counters;
pub use stats::ServerStats;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long [`Server::stop`] lets the loops wait for I/O at the map.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// How the server listens and what it exports.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Listen on this unix socket (created; must not exist).
    pub unix_socket: Option<PathBuf>,
    /// The unix socket's permission bits (default 0600: whoever can
    /// connect can write the disk).
    pub socket_mode: u32,
    /// The unix socket's group (by id), to let its members connect with a
    /// `socket_mode` such as 0660; `None`: ours.
    pub socket_group: Option<u32>,
    /// Listen on this TCP address (port 0: any free port).
    pub tcp: Option<SocketAddr>,
    /// The export's name.
    pub export_name: String,
    /// Refuse writes.
    pub read_only: bool,
    /// Event loops of the engine [`Server::start`] makes; 0 means one per
    /// available CPU. ([`Server::start_on`] uses its engine's.)
    pub loops: usize,
    /// Depth of each loop's queue over the map.
    pub queue_depth: usize,
    /// Most connections open at once; at the maximum a new one replaces
    /// an idle one, or is closed (see `acceptor`).
    pub max_connections: usize,
    /// After work, how long (µs) an event loop of the engine
    /// [`Server::start`] makes polls before sleeping; 0: sleep at once.
    /// See `event_loop`.
    pub idle_spin_us: u64,
    /// A client that has not chosen the export this long (ms) after it
    /// connected is disconnected.
    pub handshake_timeout_ms: u64,
    /// How long (ms) a connection must have been idle (nothing in flight,
    /// nothing to send, no byte from its client) to be closed for a new
    /// one at the maximum (`acceptor`): long enough that a client
    /// between two requests is never taken for idle.
    pub evict_idle_ms: u64,
    /// Most request and reply buffer bytes held at once over every
    /// connection, past each one's first small request ([`budget`]);
    /// default: an eighth of the host's memory, 256 MiB to 16 GiB.
    pub max_buffered_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            unix_socket: None,
            socket_mode: 0o600,
            socket_group: None,
            tcp: None,
            export_name: "mpio".into(),
            read_only: false,
            loops: 0,
            queue_depth: 256,
            max_connections: 128,
            idle_spin_us: 25,
            handshake_timeout_ms: 30_000,
            evict_idle_ms: 1_000,
            max_buffered_bytes: budget::default_max_buffered_bytes(),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Neither a unix socket nor a TCP address was given.
    #[error("no listener: give a unix socket, a TCP address, or both")]
    NoListener,
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    Invalid(String),
    /// A socket could not be bound.
    #[error("cannot listen on {what}: {source}")]
    Listen {
        /// The address.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A poller or thread could not be created.
    #[error("cannot start: {0}")]
    Start(#[from] std::io::Error),
}

/// Why [`Server::reload`] refused a table; the device keeps its map.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The table's size differs from the export's: clients were told the
    /// size at their handshake and keep it for the connection's life.
    #[error(
        "the table is {table_bytes} bytes but the export is {export_bytes}: a reload keeps an \
         exported map's size (a resize grows it, once every path has grown)"
    )]
    Size {
        /// The new table's size.
        table_bytes: u64,
        /// The export's size.
        export_bytes: u64,
    },
    /// The new map could not be built.
    #[error(transparent)]
    Setup(#[from] SetupError),
}

/// One export as the engine's threads see it.
#[derive(Debug)]
pub struct Shared {
    /// The export's id in its engine.
    id: u64,
    export: Export,
    device: Arc<DeviceSlot>,
    /// Depth of each loop's queue over the map.
    queue_depth: usize,
    /// See [`ServerConfig::handshake_timeout_ms`].
    handshake_timeout_ms: u64,
    /// See [`ServerConfig::evict_idle_ms`].
    evict_idle_ms: u64,
    /// Shutting down or stopped: a connection that reaches a loop now is
    /// closed.
    draining: AtomicBool,
    /// Each loop's drain, by loop index.
    drain: Vec<DrainProgress>,
    /// I/Os waiting for a usable path in each loop's queue, by loop index
    /// (stored by the loop when it changes: rarely, so loops sharing the
    /// line cost nothing). Relaxed: a gauge, read on its own.
    waiting_for_path: Vec<AtomicUsize>,
    connections: AtomicUsize,
    max_connections: usize,
    /// Buffered bytes over every loop ([`budget`]).
    budget: Arc<budget::Budget>,
    counters: Counters,
}

impl Shared {
    /// Counts a new connection; false (and nothing counted) at the max.
    fn claim_connection(&self) -> bool {
        // Relaxed: the count only bounds how many connections are open;
        // it orders no other memory.
        self.connections
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                (open < self.max_connections).then_some(open + 1)
            })
            .is_ok()
    }

    /// Counts a new connection beyond the maximum, while fewer than
    /// `slack` are (see [`acceptor`]: one making room per loop).
    fn claim_beyond_max(&self, slack: usize) -> bool {
        // Relaxed: as in `claim_connection`.
        self.connections
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                (open < self.max_connections + slack).then_some(open + 1)
            })
            .is_ok()
    }

    /// Uncounts a closed connection.
    fn release_connection(&self) {
        // Relaxed: as in `claim_connection`.
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A running export. Stops when dropped.
#[derive(Debug)]
pub struct Server {
    engine: Arc<Engine>,
    shared: Arc<Shared>,
    /// Its listeners are open (closed by the first shutdown or stop).
    listening: bool,
    /// The loops serve it (until it is stopped).
    served: bool,
    unix_socket: Option<PathBuf>,
    tcp_address: Option<SocketAddr>,
}

impl Server {
    /// Starts an engine of its own ([`ServerConfig::loops`] loops) and
    /// serves the export on it: [`Server::start_on`].
    ///
    /// # Errors
    /// As [`Server::start_on`], or the engine cannot start.
    pub fn start(config: &ServerConfig, device: Arc<DeviceSlot>) -> Result<Server, ServerError> {
        validate(config)?;
        let engine = Engine::start(&EngineConfig {
            loops: config.loops,
            idle_spin_us: config.idle_spin_us,
        })?;
        Server::serve(&engine, config, device)
    }

    /// Binds the listeners and serves, on `engine`'s threads, the map
    /// `device` serves, and whatever map it serves after a reload. (A
    /// plain [`mpio_transport::Device`] becomes a slot with
    /// [`mpio_transport::Device::into_slot`].) `config`'s `loops` and
    /// `idle_spin_us` are the engine's business and are not read.
    ///
    /// # Errors
    /// No listener, a bad setting, or a socket that cannot be bound (a
    /// unix socket path something else answers on or that is not a
    /// socket included; a stale socket is replaced, see [`unix_socket`]).
    pub fn start_on(
        engine: &Arc<Engine>,
        config: &ServerConfig,
        device: Arc<DeviceSlot>,
    ) -> Result<Server, ServerError> {
        validate(config)?;
        Server::serve(engine, config, device)
    }

    /// [`Server::start_on`] for a `config` already validated.
    fn serve(
        engine: &Arc<Engine>,
        config: &ServerConfig,
        device: Arc<DeviceSlot>,
    ) -> Result<Server, ServerError> {
        let mut listeners = Vec::new();
        let mut tcp_address = None;
        if let Some(address) = config.tcp {
            let listener =
                std::net::TcpListener::bind(address).map_err(|source| ServerError::Listen {
                    what: address.to_string(),
                    source,
                })?;
            tcp_address = Some(listener.local_addr()?);
            listener.set_nonblocking(true)?;
            listeners.push(Listener::Tcp(mio::net::TcpListener::from_std(listener)));
        }
        if let Some(path) = &config.unix_socket {
            let listen_error = |source| ServerError::Listen {
                what: path.display().to_string(),
                source,
            };
            unix_socket::claim(path).map_err(listen_error)?;
            let listener = unix_socket::bind(path, config.socket_mode, config.socket_group)
                .map_err(listen_error)?;
            listener.set_nonblocking(true)?;
            listeners.push(Listener::Unix(mio::net::UnixListener::from_std(listener)));
        }
        let map = device.map();
        let loop_count = engine.loop_count();
        let shared = Arc::new(Shared {
            id: engine.export_id(),
            export: Export {
                name: config.export_name.clone(),
                description: format!("mpio map {}", map.name()),
                read_only: config.read_only,
            },
            device,
            queue_depth: config.queue_depth,
            handshake_timeout_ms: config.handshake_timeout_ms,
            evict_idle_ms: config.evict_idle_ms,
            draining: AtomicBool::new(false),
            drain: (0..loop_count).map(|_| DrainProgress::default()).collect(),
            waiting_for_path: (0..loop_count).map(|_| AtomicUsize::new(0)).collect(),
            connections: AtomicUsize::new(0),
            max_connections: config.max_connections,
            budget: Arc::new(budget::Budget::new(config.max_buffered_bytes)),
            counters: Counters::default(),
        });
        engine.listen(Arc::clone(&shared), listeners);
        Ok(Server {
            engine: Arc::clone(engine),
            shared,
            listening: true,
            served: true,
            unix_socket: config.unix_socket.clone(),
            tcp_address,
        })
    }

    /// The unix socket listened on.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unix_socket.as_deref()
    }

    /// The TCP address listened on (with the port chosen, for port 0).
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.tcp_address
    }

    /// What is exported.
    pub fn export(&self) -> &Export {
        &self.shared.export
    }

    /// The NBD URIs clients use (unix first).
    pub fn uris(&self) -> Vec<String> {
        let name = &self.shared.export.name;
        let mut uris = Vec::new();
        if let Some(path) = &self.unix_socket {
            uris.push(format!("nbd+unix:///{name}?socket={}", path.display()));
        }
        if let Some(address) = self.tcp_address {
            uris.push(format!("nbd://{address}/{name}"));
        }
        uris
    }

    /// The device served: its map now, for status, messages and
    /// [`Transports::reload`].
    pub fn device(&self) -> &Arc<DeviceSlot> {
        &self.shared.device
    }

    /// The engine the export is served on.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Refuses `table` if its size is not the export's (its map's now):
    /// clients were told the size at their handshake. What a reload
    /// checks first, for callers that reload the slot themselves too. A
    /// resize is no reload: a caller that grows the map (every path grew)
    /// installs the larger table itself, and connections made after that
    /// are told the new size.
    ///
    /// # Errors
    /// [`ReloadError::Size`].
    pub fn check_size(&self, table: &Table) -> Result<(), ReloadError> {
        let table_bytes = table.size_bytes();
        let export_bytes = self.shared.device.map().size_bytes();
        if table_bytes != export_bytes {
            return Err(ReloadError::Size {
                table_bytes,
                export_bytes,
            });
        }
        Ok(())
    }

    /// Serves `table` from now on, as dm's `reload` + `resume`: builds the
    /// new map over `transports` (the registry the first map was built
    /// with, so memory disks and ports are the same), carries the old
    /// map's path states over, installs it and wakes every event loop so
    /// that even an idle one moves to it at once (dropping its queues to
    /// paths the table removed). Requests in flight finish on the old map;
    /// none is paused or lost. Returns the map replaced.
    ///
    /// # Errors
    /// A table of another size than the export, or one that cannot be
    /// built ([`Transports::reload`]); the old map stays.
    pub fn reload(&self, transports: &Transports, table: &Table) -> Result<Arc<Map>, ReloadError> {
        self.check_size(table)?;
        let old = transports.reload(&self.shared.device, table)?;
        self.notice_reload();
        Ok(old)
    }

    /// Wakes every event loop so that each moves to the device's current
    /// map now, rather than at its next request: for a caller that
    /// reloaded [`Server::device`] itself.
    pub fn notice_reload(&self) {
        let id = self.shared.id;
        self.engine
            .tell_loops("follow a reload", || LoopMessage::Follow(id));
    }

    /// What the server counted so far.
    pub fn stats(&self) -> ServerStats {
        self.shared.counters.snapshot()
    }

    /// I/Os waiting for a usable path now, over every event loop (held by
    /// `queue_if_no_path` while no path is usable): for metrics. Each loop
    /// updates its count once per turn.
    pub fn waiting_for_path(&self) -> u64 {
        self.shared
            .waiting_for_path
            .iter()
            // Relaxed: see `Shared::waiting_for_path`.
            .map(|waiting| waiting.load(Ordering::Relaxed) as u64)
            .sum()
    }

    /// Request and reply buffer bytes taken from the server's budget now
    /// ([`budget`]; each connection's first small request is outside it).
    pub fn buffered_bytes(&self) -> usize {
        self.shared.budget.used()
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        // Relaxed: a glance at a tally (see `Shared::claim_connection`).
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Shuts down cleanly within `deadline` (see `shutdown` for the
    /// steps): stops accepting (the listeners close, the unix socket file
    /// goes), reads no new request, completes and answers every request
    /// already read, sends a FLUSH through the map and waits for it, then
    /// closes every connection and joins every thread. Past the deadline
    /// it stops waiting and closes what is left; the report says what was
    /// abandoned.
    pub fn shutdown(mut self, deadline: Duration) -> ShutdownReport {
        let started = Instant::now();
        let give_up = started + deadline;
        let completed_before = self.stats().requests_completed;
        // Release: a loop that sees `draining` sees everything done before.
        self.shared.draining.store(true, Ordering::Release);
        self.stop_accepting();
        let shared = &self.shared;
        self.engine
            .tell_loops("drain", || LoopMessage::Drain(Arc::clone(shared)));
        let progress = &self.shared.drain;
        let map_idle = shutdown::wait_for(progress, give_up, DrainProgress::map_idle);
        let flush = if !map_idle {
            FlushOutcome::NotSent
        } else if self.shared.export.read_only {
            FlushOutcome::ReadOnly
        } else {
            shutdown::flush_map(&self.shared.device, give_up)
        };
        let drained = shutdown::wait_for(progress, give_up, DrainProgress::is_drained);
        let exits = self.stop_serving(shutdown::clock_ns_at(give_up));
        ShutdownReport {
            drained,
            requests_completed: self.stats().requests_completed - completed_before,
            requests_unanswered: exits.iter().map(|exit| exit.unanswered).sum(),
            io_left_at_map: exits.iter().map(|exit| exit.left_at_map).sum(),
            flush,
            connections_closed: exits.iter().map(|exit| exit.connections_closed).sum(),
            elapsed: started.elapsed(),
        }
    }

    /// Stops at once: stops accepting, closes every connection (requests
    /// in flight go unanswered), waits (bounded) for I/O at the map, and
    /// leaves the engine. Also done on drop.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop_accepting();
        self.stop_serving(now_ns().saturating_add(STOP_WAIT.as_nanos() as u64));
    }

    /// Closes the export's listeners and removes the unix socket file.
    fn stop_accepting(&mut self) {
        if std::mem::take(&mut self.listening) {
            self.engine.close_listeners(self.shared.id);
        }
        if let Some(path) = self.unix_socket.take() {
            // The socket file is ours: we created it in `start_on`.
            let _ = std::fs::remove_file(path);
        }
    }

    /// Ends the export on every loop: each closes its connections and
    /// waits for the map until `exit_by_ns`. Returns what each left
    /// behind.
    fn stop_serving(&mut self, exit_by_ns: u64) -> Vec<LoopExit> {
        if !std::mem::take(&mut self.served) {
            return Vec::new();
        }
        // Release: as in `shutdown` (a stop without a drain sets it here).
        self.shared.draining.store(true, Ordering::Release);
        self.engine.stop_export(self.shared.id, exit_by_ns)
    }
}

/// Refuses settings no export can run with.
fn validate(config: &ServerConfig) -> Result<(), ServerError> {
    if config.unix_socket.is_none() && config.tcp.is_none() {
        return Err(ServerError::NoListener);
    }
    if config.export_name.len() > mpio_nbd::consts::MAX_NAME_LEN {
        return Err(ServerError::Invalid("export name above 4096 bytes".into()));
    }
    if !(1..=mpio_core::queue::MAX_QUEUE_DEPTH).contains(&config.queue_depth) {
        return Err(ServerError::Invalid(format!(
            "queue depth {} (1 to {})",
            config.queue_depth,
            mpio_core::queue::MAX_QUEUE_DEPTH
        )));
    }
    if config.socket_mode & !0o777 != 0 {
        return Err(ServerError::Invalid(format!(
            "socket mode {:o} (permission bits 0 to 777 only)",
            config.socket_mode
        )));
    }
    if config.max_buffered_bytes < export::MAX_PAYLOAD as usize {
        // A request larger than the budget would wait for ever.
        return Err(ServerError::Invalid(format!(
            "max buffered bytes {} (at least one largest request, {})",
            config.max_buffered_bytes,
            export::MAX_PAYLOAD
        )));
    }
    if config.max_connections == 0 {
        return Err(ServerError::Invalid("max connections 0".into()));
    }
    Ok(())
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}
