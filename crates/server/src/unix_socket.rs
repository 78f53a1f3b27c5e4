//! Claiming a unix socket path before binding it: a socket file a dead
//! process left behind (after `kill -9`, a crash, or a second SIGTERM,
//! which exits at once) is removed; a socket something still answers on,
//! or a path that is not a socket, is left alone and refused. Shared by
//! the NBD export and the daemon's control socket.

use std::io::{Error, ErrorKind};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Makes `path` free to bind: nothing there, or a stale socket (one that
/// refuses connections) removed.
///
/// # Errors
/// `AddrInUse` if a process answers on the socket, `AlreadyExists` if the
/// path is not a socket, or the error removing a stale one.
pub fn claim(path: &Path) -> std::io::Result<()> {
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !metadata.file_type().is_socket() {
        return Err(Error::new(
            ErrorKind::AlreadyExists,
            "the path exists and is not a socket",
        ));
    }
    if UnixStream::connect(path).is_ok() {
        return Err(Error::new(
            ErrorKind::AddrInUse,
            "another process is listening there",
        ));
    }
    std::fs::remove_file(path)
}
