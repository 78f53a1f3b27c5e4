//! The mpio daemon: what `mpio serve --config FILE` runs.
//!
//! - [`config`]: the TOML config (maps, paths, groups, exports, checker,
//!   failback, marginal paths, metrics), checked into a [`config::DaemonConfig`].

pub mod config;
