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
/// `$MPIO_CONTROL`; else, for root, `/run/mpio/control.sock` (a system
/// daemon's); else the user's own: `$XDG_RUNTIME_DIR/mpio/control.sock`, or
/// `/tmp/mpio-<uid>/control.sock` without a runtime directory. The daemon
/// and the CLI of one user thus meet without naming the socket.
pub fn default_socket() -> PathBuf {
    if let Some(path) = std::env::var_os("MPIO_CONTROL") {
        return PathBuf::from(path);
    }
    // The owner of /proc/self is the process's effective user.
    let uid = std::fs::metadata("/proc/self").map_or(0, |metadata| {
        use std::os::unix::fs::MetadataExt;
        metadata.uid()
    });
    if uid == 0 {
        return PathBuf::from("/run/mpio/control.sock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(runtime) => PathBuf::from(runtime).join("mpio/control.sock"),
        None => std::env::temp_dir().join(format!("mpio-{uid}/control.sock")),
    }
}
