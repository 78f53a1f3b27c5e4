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
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
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
/// `mode` and, if given, group `group`, with no moment at which another
/// user could reach it with other bits: in a directory that is ours and
/// open to no one else (no group or other bits), nobody else can reach
/// the socket before its mode is set, so it is bound in place; otherwise
/// it is bound in a new directory of mode 0700 beside `path`, given its
/// mode and group there, and only then renamed into place. (The staging
/// costs a directory made and removed per socket: for a daemon binding a
/// thousand exports, most of its start.)
///
/// # Errors
/// The staging directory, the bind, the mode, the group (we must belong
/// to it, or be root) or the rename failed.
pub fn bind(path: &Path, mode: u32, group: Option<u32>) -> std::io::Result<UnixListener> {
    let directory = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if is_private(directory) {
        let listener = UnixListener::bind(path)?;
        let moded = set_mode_and_group(path, mode, group);
        if let Err(error) = moded {
            let _ = std::fs::remove_file(path);
            return Err(error);
        }
        return Ok(listener);
    }
    let staging = directory.join(format!(".mpio-bind-{}", std::process::id()));
    // Left by an earlier start of this same pid that died mid-bind.
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::DirBuilder::new().mode(0o700).create(&staging)?;
    let staged = staging.join("socket");
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        set_mode_and_group(&staged, mode, group)?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_dir_all(&staging);
    bound
}

/// True when `directory` is ours and grants no one else anything: a
/// socket in it is out of every other user's reach whatever its mode.
/// "Ours" is the owner of `/proc/self`, our effective user; without
/// `/proc` the answer is no (and the socket is staged).
fn is_private(directory: &Path) -> bool {
    let Ok(us) = std::fs::metadata("/proc/self").map(|metadata| metadata.uid()) else {
        return false;
    };
    std::fs::metadata(directory)
        .is_ok_and(|metadata| metadata.uid() == us && metadata.mode() & 0o077 == 0)
}

/// Gives the socket at `path` permission bits `mode` and, if given, group
/// `group`.
fn set_mode_and_group(path: &Path, mode: u32, group: Option<u32>) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    if let Some(group) = group {
        std::os::unix::fs::chown(path, None, Some(group)).map_err(|error| {
            Error::new(
                error.kind(),
                format!("cannot give the socket group {group}: {error}"),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpio_test_support::TempDir;

    /// The socket gets its mode and group whether it is bound in place
    /// (a private directory) or staged (one others may enter), and no
    /// staging directory is left behind.
    #[test]
    fn bound_sockets_get_their_mode_in_private_and_shared_directories() {
        let dir = TempDir::new("unix-socket");
        let private = dir.join("private");
        let shared = dir.join("shared");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .unwrap();
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&shared)
            .unwrap();
        assert!(is_private(&private) && !is_private(&shared));
        for directory in [&private, &shared] {
            let our_group = std::fs::metadata(directory).unwrap().gid();
            for (name, mode, group) in [("a", 0o600, None), ("b", 0o660, Some(our_group))] {
                let path = directory.join(name);
                let _listener = bind(&path, mode, group).unwrap();
                let metadata = std::fs::symlink_metadata(&path).unwrap();
                assert!(metadata.file_type().is_socket());
                assert_eq!(metadata.mode() & 0o777, mode, "{}", path.display());
                assert_eq!(metadata.gid(), our_group);
                UnixStream::connect(&path).unwrap();
            }
            let entries = std::fs::read_dir(directory).unwrap().count();
            assert_eq!(entries, 2, "staging left in {}", directory.display());
        }
    }
}
