//! The control socket: how `mpio status`, `mpio message` and the other
//! CLI verbs reach a running daemon.
//!
//! - [`protocol`]: the request and response types (JSON lines).
//! - [`server`]: the daemon's listener thread.
//! - [`client`]: the CLI's side.

pub mod client;
pub mod protocol;
pub mod server;

use std::path::PathBuf;

/// The socket used when neither the command line nor the config names one:
/// `$MPIO_CONTROL`, else `/run/mpio/control.sock`.
pub fn default_socket() -> PathBuf {
    std::env::var_os("MPIO_CONTROL")
        .map_or_else(|| PathBuf::from("/run/mpio/control.sock"), PathBuf::from)
}
