//! Unix socket paths, shared by the NBD export and the daemon's control
//! socket.
//!
//! - [`claim`]: before binding, a socket file a dead process left behind
//!   (after `kill -9`, a crash, or a second SIGTERM, which exits at once)
//!   is removed; a socket something still answers on, or a path that is
//!   not a socket, is left alone and refused.
//! - [`bind`]: binds with an explicit mode and group, never with the
//!   umask's: whoever can connect to an export can write the disk.

use std::io::{Error, ErrorKind};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
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

/// Binds `path` (claimed first: see [`claim`]) with permission bits
/// `mode` and, if given, group `group`, with no moment at which it exists
/// at `path` otherwise: the socket is bound in a new directory of mode
/// 0700 beside `path`, given its mode and group there, and only then
/// renamed into place.
///
/// # Errors
/// The staging directory, the bind, the mode, the group (we must belong
/// to it, or be root) or the rename failed.
pub fn bind(path: &Path, mode: u32, group: Option<u32>) -> std::io::Result<UnixListener> {
    let directory = path.parent().filter(|dir| !dir.as_os_str().is_empty());
    let staging = directory
        .unwrap_or(Path::new("."))
        .join(format!(".mpio-bind-{}", std::process::id()));
    // Left by an earlier start of this same pid that died mid-bind.
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::DirBuilder::new().mode(0o700).create(&staging)?;
    let staged = staging.join("socket");
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))?;
        if let Some(group) = group {
            std::os::unix::fs::chown(&staged, None, Some(group)).map_err(|error| {
                Error::new(
                    error.kind(),
                    format!("cannot give the socket group {group}: {error}"),
                )
            })?;
        }
        std::fs::rename(&staged, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_dir_all(&staging);
    bound
}
