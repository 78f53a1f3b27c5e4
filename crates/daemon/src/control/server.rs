//! The daemon side of the control socket: a unix socket, mode 0600, in a
//! directory only its owner may change ([`super::private_dir`]). Each
//! client is answered on a thread of its own ([`crate::clients`]), so a
//! silent client delays no other; the handler runs requests one at a time
//! (control verbs are serialized, as dm serializes table loads and
//! messages).
//!
//! A connection gets [`CONNECTION_TIMEOUT`] in all to send its request
//! line, and as long again to take the answer; stopping the server cuts
//! every connection at once and needs nothing from the socket file
//! (removed or replaced by someone, the server still stops). The file is
//! removed at stop only if it is still the socket the server bound.

use super::protocol::{Request, Response, MAX_REQUEST_BYTES};
use crate::clients::Clients;
use crate::deadline::Deadline;
use mpio_transport::lock;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// How long one client may take to send its request and read the answer.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// Most bytes read and dropped after refusing an oversize request, before
/// closing (so that the client reads the refusal instead of a reset).
const LINGER_BYTES: usize = 4 << 20;

/// Answers requests.
pub type Handler = Box<dyn Fn(Request) -> Response + Send>;

/// Why the control socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Another process answers on the socket.
    #[error("control socket {0}: another mpio daemon is listening there")]
    InUse(PathBuf),
    /// The path exists and is not a socket.
    #[error("control socket {0}: the path exists and is not a socket")]
    NotASocket(PathBuf),
    /// The socket's directory may be changed by another user.
    #[error("control socket {path}: {reason}")]
    Unsafe {
        /// The socket path.
        path: PathBuf,
        /// What is wrong with its directory ([`super::private_dir`]).
        reason: String,
    },
    /// Binding, or setting the mode, failed.
    #[error("control socket {path}: {source}")]
    Io {
        /// The socket path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// The control socket's threads. Stops (and removes the socket) when
/// stopped or dropped.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    /// The bound socket's device and inode, to remove only our own file.
    bound: (u64, u64),
    clients: Clients,
}

impl ControlServer {
    /// Binds `path` (mode 0600; its directory is created, mode 0700, if
    /// missing, and refused if another user may change it; a stale socket
    /// left by a dead daemon is replaced:
    /// [`mpio_server::unix_socket::claim`]) and answers each request with
    /// `handler`.
    ///
    /// # Errors
    /// A directory another user may change, a live daemon on the socket, a
    /// path that is not a socket, or an I/O error naming the path.
    pub fn start(path: &Path, handler: Handler) -> Result<ControlServer, ControlError> {
        let io_error = |source| ControlError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(directory) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            if !directory.exists() {
                std::fs::create_dir_all(directory).map_err(io_error)?;
                std::fs::set_permissions(directory, std::fs::Permissions::from_mode(0o700))
                    .map_err(io_error)?;
            }
        }
        super::private_dir(path).map_err(|reason| ControlError::Unsafe {
            path: path.to_path_buf(),
            reason,
        })?;
        mpio_server::unix_socket::claim(path).map_err(|error| match error.kind() {
            std::io::ErrorKind::AlreadyExists => ControlError::NotASocket(path.to_path_buf()),
            std::io::ErrorKind::AddrInUse => ControlError::InUse(path.to_path_buf()),
            _ => io_error(error),
        })?;
        let listener = mpio_server::unix_socket::bind(path, 0o600, None).map_err(io_error)?;
        let metadata = std::fs::symlink_metadata(path).map_err(io_error)?;
        let handler = Mutex::new(handler);
        let clients = Clients::start("mpio-control", listener, move |stream: UnixStream| {
            answer(&stream, &handler);
        })
        .map_err(io_error)?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            bound: (metadata.dev(), metadata.ino()),
            clients,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops answering (cutting every client), joins the threads and
    /// removes the socket if it is still the one bound.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.clients.stop();
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|metadata| (metadata.dev(), metadata.ino()) == self.bound);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Reads one request line from `stream`, answers it, and closes.
pub(super) fn answer(stream: &UnixStream, handler: &Mutex<Handler>) {
    let deadline = Deadline::after(CONNECTION_TIMEOUT);
    let (response, unread) = match read_request(stream, deadline) {
        Ok(request) => (lock(handler)(request), false),
        Err(Refused { message, unread }) => (Response::Error { message }, unread),
    };
    let mut line = serde_json::to_string(&response).unwrap_or_else(|error| {
        format!(r#"{{"outcome":"error","message":"cannot encode the answer: {error}"}}"#)
    });
    line.push('\n');
    let answered = write_answer(stream, line.as_bytes());
    if let Err(error) = &answered {
        tracing::debug!(%error, "control socket: the client did not take its answer");
    }
    if answered.is_ok() && unread {
        linger(stream, deadline);
    }
}

/// Writes `bytes` to `stream` within [`CONNECTION_TIMEOUT`] in all.
fn write_answer(mut stream: &UnixStream, bytes: &[u8]) -> std::io::Result<()> {
    Deadline::after(CONNECTION_TIMEOUT).write_all(&mut stream, bytes)
}

/// After refusing a request the client is still sending: reads and drops
/// what it sends (at most [`LINGER_BYTES`], by `deadline`) until it
/// closes, so that its write completes and it reads the refusal, where
/// closing at once would break its pipe.
fn linger(mut stream: &UnixStream, deadline: Deadline) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 64 * 1024];
    let mut dropped = 0;
    while dropped < LINGER_BYTES {
        match deadline.read(&mut stream, &mut sink) {
            Ok(0) | Err(_) => return,
            Ok(count) => dropped += count,
        }
    }
}

/// A request refused before the handler saw it.
struct Refused {
    /// Why, for the client.
    message: String,
    /// The client may still be sending the rest of it.
    unread: bool,
}

/// Reads one request line by `deadline` (not per read: a client trickling
/// bytes gets no more) and at most [`MAX_REQUEST_BYTES`].
fn read_request(mut stream: &UnixStream, deadline: Deadline) -> Result<Request, Refused> {
    let refuse = |message: String| Refused {
        message,
        unread: false,
    };
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = match deadline.read(&mut stream, &mut chunk) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                return Err(refuse(format!(
                    "no complete request line within {CONNECTION_TIMEOUT:?}"
                )))
            }
            Err(error) => return Err(refuse(format!("cannot read the request: {error}"))),
        };
        if read == 0 {
            return Err(refuse("request not terminated by a newline".into()));
        }
        let end = chunk[..read].iter().position(|byte| *byte == b'\n');
        line.extend_from_slice(&chunk[..end.unwrap_or(read)]);
        if line.len() as u64 >= MAX_REQUEST_BYTES {
            return Err(Refused {
                message: super::protocol::too_long(line.len() as u64),
                unread: end.is_none(),
            });
        }
        if end.is_some() {
            break;
        }
    }
    serde_json::from_slice(&line).map_err(|error| refuse(format!("bad request: {error}")))
}
