//! The mpio daemon: what `mpio serve --config FILE` runs.
//!
//! - [`config`]: the TOML config (maps, paths, groups, exports, checker,
//!   failback, marginal paths, metrics), checked into a [`config::DaemonConfig`].
//! - [`metrics`]: Prometheus text format of the maps, and its loopback HTTP server.

pub mod config;
pub mod metrics;
