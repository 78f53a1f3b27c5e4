//! The mpio daemon: what `mpio serve` runs.
//!
//! - [`config`]: the TOML config (maps, paths, groups, exports, checker,
//!   failback, marginal paths, metrics), checked into a [`config::DaemonConfig`].
//! - [`daemon`]: the running maps, their exports and checkers, and the
//!   answers to control requests.
//! - [`control`]: the control socket and its protocol, for the CLI verbs.
//! - [`view`]: what the read verbs show (status, table, topology, paths).
//! - [`metrics`]: Prometheus text format of the maps, and its loopback HTTP server.
//! - `notify`: the service manager's notify protocol (`READY=1`,
//!   `STATUS=`, `RELOADING=1`, `STOPPING=1`, `WATCHDOG=1`).
//! - [`fail_fast`]: the failure policy: a panic anywhere aborts the daemon.
//! - [`open_files`]: the open-file limit, raised to its hard value at start.
//! - [`clients`]: the accepting thread both servers share, a thread per client.
//! - `links`: `/dev/mpio/NAME` and `/dev/disk/by-id/mpio-WWID` links
//!   to the maps' ublk devices, and the record the udev rule reads.
//! - `devices`: block-device paths kept current (access states, maps by
//!   WWID found again) every round.
//! - `holders`: who holds a block device open (mounts, swap, stacked
//!   devices, processes), so that a map in use is not removed.

#![warn(unreachable_pub)]

pub mod clients;
pub mod config;
pub mod control;
pub mod daemon;
mod deadline;
mod devices;
pub mod fail_fast;
mod holders;
mod links;
pub mod metrics;
mod notify;
pub mod open_files;
pub mod running;
pub mod ublk;
pub mod view;
