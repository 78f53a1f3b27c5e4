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
//! # Files
//! - `lifecycle.rs`: [`Daemon`]: start, the exports' list, clean shutdown
//!   and stop.
//! - `state.rs`: what the daemon's threads share, its locks and their
//!   order, and the NBD engine started with the first NBD export.
//! - `start.rs`: one map built and its checker and exports started.
//! - `dispatch.rs`: a control request answered.
//! - `reload.rs`: a map reloaded from a table or a config.
//! - `reconfigure.rs`: the config file read again, maps added, removed
//!   and changed to match it.
//! - `removal.rs`: a map taken out (`mpio remove`, or by a reload), not
//!   while its device is held open.
//! - `resize.rs`: a map grown to what its paths hold now (`mpio resize`),
//!   its ublk devices and new NBD connections with it.
//! - `health.rs`: the watchdog (`WATCHDOG=1` while every loop turns).
//! - `service_status.rs`: the service manager's one-line `STATUS=`.
//! - `rescan.rs`: the devices thread's round (access states, maps by WWID).
//! - `scrape.rs`: the metrics endpoint's text.
//! - `settings.rs`, `error.rs`, `report.rs`: [`ServerSettings`],
//!   [`DaemonError`], and what a shutdown reports ([`ExportShutdown`]).
//!
//! [`CheckerPool`]: mpio_transport::probe::CheckerPool
//! [`DeviceSlot`]: mpio_transport::DeviceSlot

mod dispatch;
mod error;
mod health;
mod lifecycle;
mod reconfigure;
mod reload;
mod removal;
mod report;
mod rescan;
mod resize;
mod scrape;
mod service_status;
mod settings;
mod start;
mod state;

pub use error::DaemonError;
pub use lifecycle::Daemon;
pub use report::{ExportReport, ExportShutdown};
pub use settings::ServerSettings;
