//! The daemon side of the control socket: a unix socket, mode 0600, served
//! by one thread that answers one connection at a time (control verbs are
//! serialized, as dm serializes table loads and messages).
//!
//! A connection gets [`CONNECTION_TIMEOUT`] in all to send its request
//! line, and as long again to take the answer, so a client that connects
//! and says nothing, or trickles its request a byte at a time, holds the
//! socket for at most that long; stopping the server cuts the connection
//! in progress at once.

use super::protocol::{Request, Response, MAX_REQUEST_BYTES};
use crate::deadline::Deadline;
use mpio_transport::lock;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one client may take to send its request and read the answer.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// Binding, or setting the mode, failed.
    #[error("control socket {path}: {source}")]
    Io {
        /// The socket path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// The control socket's thread. Stops (and removes the socket) when
/// stopped or dropped.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    /// The connection being answered, so `stop` can cut it.
    client: Arc<Mutex<Option<UnixStream>>>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `path` (mode 0600; its directory is created, mode 0700, if
    /// missing; a stale socket left by a dead daemon is replaced:
    /// [`mpio_server::unix_socket::claim`]) and
    /// answers each request with `handler`.
    ///
    /// # Errors
    /// A live daemon on the socket, a path that is not a socket, or an I/O
    /// error naming the path.
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
        mpio_server::unix_socket::claim(path).map_err(|error| match error.kind() {
            std::io::ErrorKind::AddrInUse => ControlError::InUse(path.to_path_buf()),
            std::io::ErrorKind::AlreadyExists => ControlError::NotASocket(path.to_path_buf()),
            _ => io_error(error),
        })?;
        let listener = bind_private(path).map_err(io_error)?;
        let stop = Arc::new(AtomicBool::new(false));
        let client = Arc::new(Mutex::new(None));
        let (thread_stop, thread_client) = (Arc::clone(&stop), Arc::clone(&client));
        let thread = std::thread::Builder::new()
            .name("mpio-control".into())
            .spawn(move || serve(&listener, &handler, &thread_stop, &thread_client))
            .map_err(io_error)?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            client,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops answering, waits for the thread and removes the socket.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        // Release pairs with the thread's Acquire load after `accept`
        // returns: it sees the flag set before our wake-up connection.
        self.stop.store(true, Ordering::Release);
        // Cut the connection being answered (its reads and writes fail at
        // once), then wake the blocking accept; if the connect fails the
        // thread is not in accept (it ended, or is answering and will see
        // the flag).
        if let Some(client) = lock(&self.client).as_ref() {
            let _ = client.shutdown(std::net::Shutdown::Both);
        }
        let _ = UnixStream::connect(&self.path);
        if thread.join().is_err() {
            tracing::error!("the control thread panicked");
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Binds `path` so that nobody but the owner (root, for a system daemon)
/// can ever connect: the socket is bound in a new directory of mode 0700
/// beside `path`, given mode 0600 there, and only then renamed into place,
/// so there is no moment at which it exists at `path` with the umask's
/// mode.
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    let directory = path.parent().filter(|dir| !dir.as_os_str().is_empty());
    let staging = directory
        .unwrap_or(Path::new("."))
        .join(format!(".mpio-control-{}", std::process::id()));
    // Left by an earlier start of this same pid that died mid-bind.
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::DirBuilder::new().mode(0o700).create(&staging)?;
    let staged = staging.join("control.sock");
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_dir_all(&staging);
    bound
}

fn serve(
    listener: &UnixListener,
    handler: &Handler,
    stop: &AtomicBool,
    client: &Mutex<Option<UnixStream>>,
) {
    for stream in listener.incoming() {
        // Acquire: see `ControlServer::shutdown`.
        if stop.load(Ordering::Acquire) {
            return;
        }
        match stream {
            Ok(stream) => {
                *lock(client) = stream.try_clone().ok();
                // A stop that came before the clone was published did not
                // cut this connection: look again.
                if !stop.load(Ordering::Acquire) {
                    answer(&stream, handler);
                }
                *lock(client) = None;
            }
            Err(error) => {
                tracing::warn!(%error, "control socket: accept failed");
                // An accept error (out of descriptors) must not spin.
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Reads one request line from `stream`, answers it, and closes.
fn answer(stream: &UnixStream, handler: &Handler) {
    let response = match read_request(stream) {
        Ok(request) => handler(request),
        Err(message) => Response::Error { message },
    };
    let mut line = serde_json::to_string(&response).unwrap_or_else(|error| {
        format!(r#"{{"outcome":"error","message":"cannot encode the answer: {error}"}}"#)
    });
    line.push('\n');
    if let Err(error) = write_answer(stream, line.as_bytes()) {
        tracing::debug!(%error, "control socket: the client did not take its answer");
    }
}

/// Writes `bytes` to `stream` within [`CONNECTION_TIMEOUT`] in all.
fn write_answer(mut stream: &UnixStream, bytes: &[u8]) -> std::io::Result<()> {
    Deadline::after(CONNECTION_TIMEOUT).write_all(&mut stream, bytes)
}

/// Reads one request line within [`CONNECTION_TIMEOUT`] in all (not per
/// read: a client trickling bytes gets no more) and at most
/// [`MAX_REQUEST_BYTES`].
fn read_request(mut stream: &UnixStream) -> Result<Request, String> {
    let deadline = Deadline::after(CONNECTION_TIMEOUT);
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = match deadline.read(&mut stream, &mut chunk) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                return Err(format!(
                    "no complete request line within {CONNECTION_TIMEOUT:?}"
                ))
            }
            Err(error) => return Err(format!("cannot read the request: {error}")),
        };
        if read == 0 {
            return Err("request not terminated by a newline".into());
        }
        let end = chunk[..read].iter().position(|byte| *byte == b'\n');
        line.extend_from_slice(&chunk[..end.unwrap_or(read)]);
        if line.len() as u64 >= MAX_REQUEST_BYTES {
            return Err(format!("request longer than {MAX_REQUEST_BYTES} bytes"));
        }
        if end.is_some() {
            break;
        }
    }
    serde_json::from_slice(&line).map_err(|error| format!("bad request: {error}"))
}
