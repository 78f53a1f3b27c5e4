//! The control socket: how `mpio status`, `mpio message` and the other
//! CLI verbs reach a running daemon.
//!
//! - [`protocol`]: the request and response types (JSON lines).
//! - [`server`]: the daemon's listener thread.
//! - [`client`]: the CLI's side.
//! - [`fuzz`]: the control fuzzer's check (any bytes from a client).

pub mod client;
pub mod fuzz;
pub mod protocol;
pub mod server;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The process's effective user id (the owner of `/proc/self`; 0 if that
/// cannot be read, which only makes [`default_socket`] pick root's path).
pub fn effective_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |metadata| metadata.uid())
}

/// Whether `socket` sits where only we (or root) can put a socket: its
/// directory must be owned by us or root and writable by nobody else
/// (group and others), and the socket, if it exists, owned by us or
/// root. Checked by the daemon before it binds, and by the CLI before it
/// connects, so that another local user who created the directory first
/// (`/tmp/mpio-UID` is a name anyone can take) can neither answer our
/// commands nor read the tables we send.
///
/// # Errors
/// What is wrong, naming the directory or socket and what to do.
pub fn private_dir(socket: &Path) -> Result<(), String> {
    let uid = effective_uid();
    let trusted = |owner: u32| owner == uid || owner == 0;
    let directory = match socket.parent() {
        Some(directory) if !directory.as_os_str().is_empty() => directory,
        _ => Path::new("."),
    };
    let metadata = match std::fs::metadata(directory) {
        Ok(metadata) => metadata,
        // Nothing to trust or distrust: connecting fails with its own
        // error (the daemon creates the directory before it checks).
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(format!("its directory {}: {error}", directory.display())),
    };
    if !trusted(metadata.uid()) {
        return Err(format!(
            "its directory {} belongs to user {}, not to us (user {uid}) or root: another user \
             could answer in our daemon's place; remove it or choose another socket (--control)",
            directory.display(),
            metadata.uid()
        ));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(format!(
            "its directory {} is writable by other users (mode {:o}): one could put its own \
             socket there; make it 0700 (chmod go-w) or choose another socket (--control)",
            directory.display(),
            metadata.mode() & 0o7777
        ));
    }
    if let Ok(metadata) = std::fs::symlink_metadata(socket) {
        if !trusted(metadata.uid()) {
            return Err(format!(
                "the socket belongs to user {}, not to us (user {uid}) or root",
                metadata.uid()
            ));
        }
    }
    Ok(())
}

/// The socket used when neither the command line nor the config names one:
/// `$MPIO_CONTROL`; else, for root, `/run/mpio/control.sock` (a system
/// daemon's); else the user's own: `$XDG_RUNTIME_DIR/mpio/control.sock`, or
/// `/tmp/mpio-<uid>/control.sock` without a runtime directory. The daemon
/// and the CLI of one user thus meet without naming the socket.
pub fn default_socket() -> PathBuf {
    if let Some(path) = std::env::var_os("MPIO_CONTROL") {
        return PathBuf::from(path);
    }
    let uid = effective_uid();
    if uid == 0 {
        return PathBuf::from("/run/mpio/control.sock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(runtime) => PathBuf::from(runtime).join("mpio/control.sock"),
        None => std::env::temp_dir().join(format!("mpio-{uid}/control.sock")),
    }
}
