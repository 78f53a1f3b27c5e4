//! The daemon's config: a TOML file that names maps, their paths (by
//! transport URI), how the paths are grouped, the selector, the features,
//! the checker and failback, marginal-path detection, and the NBD exports;
//! or a dm table per map. [`DaemonConfig`] is what the daemon runs from:
//! every value checked, every map's table built.

use mpio_core::marginal::MarginalPolicy;
use mpio_core::table::Table;
use mpio_transport::checker::CheckerOptions;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The whole config, checked.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The control socket (`control_socket`); `None`: the daemon's default.
    pub control_socket: Option<PathBuf>,
    /// Serve Prometheus metrics over HTTP on this loopback address
    /// (`[metrics] listen`); `None`: off.
    pub metrics: Option<SocketAddr>,
    /// The maps, in file order, with unique names.
    pub maps: Vec<MapConfig>,
}

/// What happens to I/O when a map has no usable path (multipath.conf's
/// `no_path_retry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoPathRetry {
    /// Fail it at once (`"fail"`).
    Fail,
    /// Queue it until a path returns (`"queue"`).
    Queue,
    /// Queue it for this many checker intervals, then fail it.
    Checks(u32),
}

/// One map, checked.
#[derive(Clone, Debug)]
pub struct MapConfig {
    /// The map's name (`mpatha`).
    pub name: String,
    /// The map's table. Its path words are the names of [`MapConfig::paths`]
    /// entries or transport URIs.
    pub table: Table,
    /// Path name to transport URI, for the names the table uses.
    pub paths: Vec<NamedPath>,
    /// An I/O its path has not completed within this time fails the path.
    pub io_timeout_ns: Option<u64>,
    /// `no_path_retry`; the table's `queue_if_no_path` agrees with it.
    pub no_path_retry: NoPathRetry,
    /// Most attempts of one I/O over its paths.
    pub max_attempts: u32,
    /// The checker's interval, probe timeout and failback policy.
    pub checker: CheckerOptions,
    /// Marginal-path detection; `None`: off.
    pub marginal: Option<MarginalPolicy>,
    /// The NBD exports of the map.
    pub exports: Vec<ExportConfig>,
}

/// A path name and the URI it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedPath {
    /// The name the table uses.
    pub name: String,
    /// The transport URI (`nbd+unix:///?socket=/run/a.sock`).
    pub uri: String,
}

/// One NBD export of a map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportConfig {
    /// The export's name (default: the map's name).
    pub name: String,
    /// Listen on this unix socket.
    pub socket: Option<PathBuf>,
    /// Listen on this TCP address.
    pub tcp: Option<SocketAddr>,
    /// Refuse writes.
    pub read_only: bool,
}
mod placeholder_parse;
