//! The control protocol: one JSON request per line from the client, one
//! JSON response per line from the daemon, then the daemon closes the
//! connection. Both sides use these types, so the CLI and the daemon
//! cannot disagree on a field.

use serde::{Deserialize, Serialize};

/// Longest request line the daemon reads (a reload carries a whole config).
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// The refusal of a request line of `bytes` (at least
/// [`MAX_REQUEST_BYTES`]; the daemon may stop counting there): one text
/// for the daemon's answer and the client's own check.
pub fn too_long(bytes: u64) -> String {
    format!(
        "request of {bytes} bytes or more: the control socket takes at most \
         {MAX_REQUEST_BYTES} bytes (a reload's table or config included)"
    )
}

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// dm status of one map, or of every map.
    Status {
        /// The map; `None`: all.
        map: Option<String>,
    },
    /// The canonical dm table of one map, or of every map.
    Table {
        /// The map; `None`: all.
        map: Option<String>,
    },
    /// A `multipath -ll`-style tree of groups and paths.
    Topology {
        /// The map; `None`: all.
        map: Option<String>,
    },
    /// One row per path.
    Paths {
        /// The map; `None`: all.
        map: Option<String>,
    },
    /// A `dmsetup message` verb for a map.
    Message {
        /// The map.
        map: String,
        /// The message (`fail_path a`).
        message: String,
    },
    /// A new table for a map, given as a dm table or as a config.
    Reload {
        /// The map.
        map: String,
        /// What to load.
        source: ReloadSource,
    },
    /// Read the daemon's config file again and make the maps match it:
    /// maps added, removed and changed.
    ReloadConfig,
    /// Take a map out of the daemon: its exports drained, its devices
    /// removed, unless one is held open and not `force`.
    Remove {
        /// The map.
        map: String,
        /// Remove its devices even while held open.
        force: bool,
    },
    /// Grow a map, its ublk devices and its exports to what its paths
    /// hold now.
    Resize {
        /// The map.
        map: String,
    },
}

/// What a reload loads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ReloadSource {
    /// A dm table; its path words are the map's path names or URIs.
    Table(String),
    /// A config file's text; the map's section gives the new table,
    /// paths and options.
    Config {
        /// Where the text came from, for error messages.
        origin: String,
        /// The file's text.
        text: String,
    },
}

/// The daemon's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum Response {
    /// Done: the answer for people and the same facts for machines.
    Ok {
        /// What `mpio` prints.
        text: String,
        /// What `mpio --json` prints.
        json: serde_json::Value,
    },
    /// Refused or failed; nothing changed.
    Error {
        /// Why, naming what was wrong.
        message: String,
    },
}
