//! The daemon's config: a TOML file that names maps, their paths (by
//! transport URI), how the paths are grouped, the selector, the features,
//! the checker and failback, marginal-path detection, and the NBD exports;
//! or a dm table per map. [`DaemonConfig`] is what the daemon runs from:
//! every value checked, every map's table built.
//!
//! `docs/CONFIG.md` is the admin's reference (every key, its type, default
//! and meaning); this page is the contract for the code.
//! [`import`] writes this format from a multipath.conf.
//!
//! # Format
//!
//! ```toml
//! control_socket = "/run/mpio/control.sock"   # optional; absolute
//! user_friendly_names = false      # a map by wwid without name: mpathN from the bindings file, else its WWID
//! bindings_file = "/etc/mpio/bindings"         # multipath-tools' format; written atomically
//!
//! [links]                          # optional: DEV/mpio/NAME, DEV/disk/by-id/mpio-WWID to each ublk device
//! enabled = true
//! dev_dir = "/dev"
//!
//! [metrics]                        # optional; metrics are off without it
//! listen = "127.0.0.1:9642"        # a loopback address only
//!
//! [defaults]                       # optional: keys every map takes unless it sets them
//! selector = "service-time"        # default service-time
//! selector_args = []               # go with `selector`
//! path_grouping_policy = "failover"    # failover | multibus | group_by_prio; default failover
//! failback = "manual"              # immediate | manual | followover | seconds; default manual
//! no_path_retry = "fail"           # "queue" | "fail" | N checker intervals; default "fail"
//! # queue_if_no_path = false       # alias: true is "queue", false "fail"; must agree with no_path_retry
//! checker_interval_ms = 5000       # 1 ms to one hour
//! checker_timeout_ms = 5000        # 1 ms to one day
//! io_timeout_ms = 30000            # 0: never; at most one day
//! fence_timeout_ms = 30000         # past io_timeout, a held write waits for its fence; 0: no limit
//! hedge_reads = true               # a read held past its path's hedge delay goes down another
//! max_attempts = 64                # 1 to 1024
//! [defaults.marginal]              # marginal-path detection: on when the table is there
//! failures = 3                     # 2 to 1000 failures ...
//! window_ms = 60000                # ... within this window make a path marginal
//! recovery_ms = 60000              # healthy this long to be let back
//! # enabled = false                # switch off what the defaults switched on
//!
//! [[map]]
//! name = "mpatha"                  # letters, digits, '.', '_', '-'
//! size = "1G"                      # bytes, or "512K", "1G", "2097152s" (sectors); a multiple of 512
//! selector = "round-robin"         # any [defaults] key may be set per map
//! path_grouping_policy = "group_by_prio"
//! no_path_retry = 12
//!
//! [[map.path]]
//! name = "a"
//! uri = "nbd+unix:///mpatha?socket=/run/a.sock"
//! prio = 50                        # for group_by_prio; default 0; higher first
//! args = [1]                       # per-path selector args; one count per group
//!
//! [[map.path]]
//! name = "b"
//! uri = "memory:disk0#b"
//! numa_node = 1                    # the path's NUMA node, for numa/io-affinity; default: sysfs's, for block devices
//! args = [1]
//!
//! [[map.export]]
//! socket = "/run/mpio/mpatha.sock" # socket, tcp, or both
//! tcp = "127.0.0.1:10809"
//! name = "mpatha"                  # default: the map's name
//! read_only = false
//!
//! [[map]]
//! name = "mpathb"
//! size = 1073741824
//! initial_group = 2                # 1-based; for groups and policies
//! [[map.path]]
//! name = "c"
//! uri = "null:1G"
//! [[map.path]]
//! name = "d"
//! uri = "null:1G?latency_ns=1000"
//! [[map.group]]                    # explicit groups: every path in exactly one
//! selector = "queue-length"        # default: the map's selector
//! paths = ["c"]
//! [[map.group]]
//! paths = ["d"]
//!
//! [[map]]
//! name = "mpathd"                  # optional for a map by wwid (see user_friendly_names)
//! wwid = "naa.6001405abcdef0123456789abcdef012"  # paths: the block devices with this WWID
//! path_grouping_policy = "group_by_prio"         # prio: the ALUA/ANA state's (50, 10, 1, 0)
//!
//! [blacklist]                      # never paths of a map by WWID, beside the built-in list
//! devnode = ["^sda$"]              # regular expressions over the kernel name
//! wwid = ["^t10\\."]               # ... and over the WWID
//!
//! [blacklist_exceptions]           # taken back from every pattern above, built-in too
//! devnode = ["^sdb$"]              # by kernel name
//! wwid = ["^t10\\.LIO"]            # ... or by WWID (a device without one stays out)
//!
//! [[map]]
//! name = "mpathc"                  # a dm table; path words are names or URIs
//! table = "0 2097152 multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 1 e 1 null:1G 1"
//! [[map.path]]
//! name = "e"
//! uri = "file:/var/lib/mpio/e.img"
//! ```
//!
//! A map's groups come from exactly one of: a `table`, `[[map.group]]`s,
//! or a `path_grouping_policy` (its own, else the defaults', else
//! `failover`). A `table` gives the size (`size` may be given if it
//! agrees) and the `queue_if_no_path` feature (a map's own
//! `no_path_retry` must agree with it). For the other forms the table is
//! built with `queue_if_no_path` exactly when `no_path_retry` is not
//! `"fail"`. Each map's table is then built by [`mpio_core::map::Map::new`]
//! with no path opened, so a selector's argument errors are found here,
//! and [`MapConfig::table`] holds its canonical form.
//!
//! A map's name is its `name`, else (a map by WWID) the one `names.rs`
//! settles from the bindings file (`user_friendly_names`) or the WWID,
//! before any other check, so that every error names the map.
//!
//! # Errors
//! Every refusal is a [`ConfigError`] naming the line and column, the key
//! (`map "mpatha" path "b": uri`), the value when there is one, and why:
//! toml's own errors (syntax, unknown keys, wrong types, missing keys)
//! and every check above. Parsing never panics, whatever the text.

mod bindings;
mod check;
mod error;
pub mod fuzz;
mod grouping;
pub mod import;
mod links;
mod listen;
mod names;
#[cfg(test)]
mod names_tests;
mod raw;
mod settings;
#[cfg(test)]
mod tests;
mod ublk_stop;
pub mod wwid;
#[cfg(test)]
mod wwid_tests;

pub use bindings::DEFAULT_BINDINGS_FILE;
pub use check::{MAX_EXPORTS, MAX_MAPS, MAX_NAME_BYTES, MAX_NUMA_NODE};
pub use error::ConfigError;
pub use links::DEFAULT_DEV_DIR;
pub use listen::DEFAULT_SOCKET_MODE;
pub use listen::MAX_EXPORT_NAME_BYTES;
pub use settings::{
    DEFAULT_SELECTOR, MAX_ATTEMPTS, MAX_CHECKER_INTERVAL_MS, MAX_MARGINAL_FAILURES,
    MAX_NO_PATH_RETRY, MAX_TIMEOUT_MS,
};
pub use ublk_stop::{UblkOnStop, DEFAULT_KEEP_TIMEOUT_MS, MAX_KEEP_TIMEOUT_MS};

use mpio_core::checker::CheckerOptions;
use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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
    /// Devices that are never paths of a map by WWID (`[blacklist]` over
    /// the built-in list, less what `[blacklist_exceptions]` takes back).
    pub blacklist: mpio_transport::blockdev::blacklist::Blacklist,
    /// What a clean stop does with the ublk devices (`[ublk]`).
    pub ublk_on_stop: UblkOnStop,
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
    /// For a map by WWID (`wwid = "..."`), the WWID: its paths are the
    /// devices found with it when the config was checked.
    pub wwid: Option<String>,
    /// For a map by WWID, the config text it was checked from: checked
    /// again each round to find the devices now (the daemon's rescan).
    pub source: Option<std::sync::Arc<str>>,
    /// The map's table. Its path words are the names of [`MapConfig::paths`]
    /// entries or transport URIs.
    pub table: Table,
    /// Path name to transport URI, for the names the table uses.
    pub paths: Vec<NamedPath>,
    /// An I/O its path has not completed within this time fails the path.
    pub io_timeout_ns: Option<u64>,
    /// A write its path holds past its I/O timeout waits this much longer
    /// for the path to be fenced, then fails with EIO; `None`: no limit.
    pub fence_timeout_ns: Option<u64>,
    /// A read its path holds past its hedge delay is sent down another.
    pub hedge_reads: bool,
    /// `no_path_retry`; the table's `queue_if_no_path` agrees with it.
    pub no_path_retry: NoPathRetry,
    /// Most attempts of one I/O over its paths.
    pub max_attempts: u32,
    /// The checker's interval, probe timeout and failback policy.
    pub checker: CheckerOptions,
    /// The NBD exports of the map.
    pub exports: Vec<ExportConfig>,
    /// The directory (`/dev`) its ublk devices get their `mpio/NAME` and
    /// `disk/by-id/mpio-WWID` links in (`[links]`); `None`: no links.
    pub device_links: Option<PathBuf>,
}

/// A path name and the URI it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedPath {
    /// The name the table uses.
    pub name: String,
    /// The transport URI (`nbd+unix:///?socket=/run/a.sock`).
    pub uri: String,
    /// NUMA node given in the config (`numa_node`), over the transport's.
    pub numa_node: Option<u16>,
}

/// One NBD export of a map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportConfig {
    /// The export's name (default: the map's name).
    pub name: String,
    /// Listen on this unix socket.
    pub socket: Option<PathBuf>,
    /// The unix socket's permission bits (default 0600).
    pub socket_mode: u32,
    /// The unix socket's group id, if not ours.
    pub socket_group: Option<u32>,
    /// Listen on this TCP address.
    pub tcp: Option<SocketAddr>,
    /// Serve the map as a ublk block device too.
    pub ublk: Option<UblkNumber>,
    /// Most client connections at once; `None`: the daemon's
    /// `--max-connections`.
    pub max_connections: Option<usize>,
    /// Refuse writes.
    pub read_only: bool,
}

/// Which ublk device an export is: `/dev/ublkbN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UblkNumber {
    /// The kernel picks N (`ublk = true`).
    Any,
    /// This N (`ublk = N`).
    Fixed(u32),
}

impl DaemonConfig {
    /// Parses and checks a config's text; maps by WWID take the host's
    /// devices with their WWID as paths.
    ///
    /// # Errors
    /// The first [`ConfigError`] found, with its line and key.
    pub fn parse(text: &str) -> Result<DaemonConfig, ConfigError> {
        DaemonConfig::parse_with(text, &wwid::HostPaths)
    }

    /// As [`DaemonConfig::parse`], with maps by WWID finding their paths
    /// in `found`.
    ///
    /// # Errors
    /// As [`DaemonConfig::parse`].
    pub fn parse_with(
        text: &str,
        found: &dyn wwid::PathSource,
    ) -> Result<DaemonConfig, ConfigError> {
        check::check(text, found)
    }

    /// Reads and checks the config file at `path`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file: that it could not be read (line
    /// 0), or what [`DaemonConfig::parse`] refused.
    pub fn load(path: &Path) -> Result<DaemonConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
            file: Some(path.to_path_buf()),
            line: 0,
            column: 0,
            key: String::new(),
            value: None,
            reason: format!("cannot read the config: {error}"),
        })?;
        DaemonConfig::parse(&text).map_err(|error| ConfigError {
            file: Some(path.to_path_buf()),
            ..error
        })
    }

    /// The map called `name` (for `mpio reload MAP CONFIG`).
    pub fn map(&self, name: &str) -> Option<&MapConfig> {
        self.maps.iter().find(|map| map.name == name)
    }
}

impl MapConfig {
    /// The core's options for this map: its name, I/O and fence timeouts, the time
    /// `no_path_retry = N` queues for (N checker intervals) and the attempt
    /// limit. The NUMA layout is left at its default for the daemon to fill.
    pub fn options(&self) -> MapOptions {
        let no_path_timeout_ns = match self.no_path_retry {
            NoPathRetry::Checks(count) => {
                Some(u64::from(count).saturating_mul(self.checker.interval_ns))
            }
            NoPathRetry::Fail | NoPathRetry::Queue => None,
        };
        MapOptions {
            name: self.name.clone(),
            io_timeout_ns: self.io_timeout_ns,
            fence_timeout_ns: self.fence_timeout_ns,
            hedge_reads: self.hedge_reads,
            no_path_timeout_ns,
            max_attempts: self.max_attempts,
            path_nodes: self
                .paths
                .iter()
                .filter_map(|path| Some((path.name.clone(), path.numa_node?)))
                .collect(),
            ..MapOptions::default()
        }
    }

    /// The URI a path word of [`MapConfig::table`] stands for: the URI of
    /// the [`MapConfig::paths`] entry of that name, else the word itself
    /// (a table may name transport URIs directly).
    pub fn uri_of<'a>(&'a self, word: &'a str) -> &'a str {
        self.paths
            .iter()
            .find(|path| path.name == word)
            .map_or(word, |path| path.uri.as_str())
    }
}
