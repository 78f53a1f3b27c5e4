//! The daemon side of the control socket: a unix socket, mode 0600, served
//! by one thread that answers one connection at a time (control verbs are
//! serialized, as dm serializes table loads and messages).
//!
//! A connection gets [`CONNECTION_TIMEOUT`] to send its request line and
//! take the answer, so a client that connects and says nothing holds the
//! socket for at most that long.

use super::protocol::{Request, Response, MAX_REQUEST_BYTES};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `path` (mode 0600; its directory is created, mode 0700, if
    /// missing; a stale socket left by a dead daemon is replaced) and
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
        match std::fs::symlink_metadata(path) {
            Ok(metadata) if !metadata.file_type().is_socket() => {
                return Err(ControlError::NotASocket(path.to_path_buf()))
            }
            Ok(_) => {
                if UnixStream::connect(path).is_ok() {
                    return Err(ControlError::InUse(path.to_path_buf()));
                }
                std::fs::remove_file(path).map_err(io_error)?;
            }
            Err(_) => {}
        }
        let listener = UnixListener::bind(path).map_err(io_error)?;
        // Nobody but the owner (root, for a system daemon) may steer maps.
        // The socket is bound before its mode is set; a client that
        // connected in between is still subject to the directory's mode.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_error)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("mpio-control".into())
            .spawn(move || serve(&listener, &handler, &thread_stop))
            .map_err(io_error)?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
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
        // Wake the blocking accept; if the connect fails the thread is not
        // in accept (it ended, or is answering and will see the flag).
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

fn serve(listener: &UnixListener, handler: &Handler, stop: &AtomicBool) {
    for stream in listener.incoming() {
        // Acquire: see `ControlServer::shutdown`.
        if stop.load(Ordering::Acquire) {
            return;
        }
        match stream {
            Ok(stream) => answer(stream, handler),
            Err(error) => {
                tracing::warn!(%error, "control socket: accept failed");
                // An accept error (out of descriptors) must not spin.
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Reads one request line from `stream`, answers it, and closes.
fn answer(stream: UnixStream, handler: &Handler) {
    let response = match read_request(&stream) {
        Ok(request) => handler(request),
        Err(message) => Response::Error { message },
    };
    let mut line = serde_json::to_string(&response).unwrap_or_else(|error| {
        format!(r#"{{"outcome":"error","message":"cannot encode the answer: {error}"}}"#)
    });
    line.push('\n');
    if let Err(error) = (&stream).write_all(line.as_bytes()) {
        tracing::debug!(%error, "control socket: the client left before its answer");
    }
}

fn read_request(stream: &UnixStream) -> Result<Request, String> {
    stream
        .set_read_timeout(Some(CONNECTION_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(CONNECTION_TIMEOUT)))
        .map_err(|error| format!("cannot set a timeout: {error}"))?;
    let mut line = String::new();
    BufReader::new(stream.take(MAX_REQUEST_BYTES))
        .read_line(&mut line)
        .map_err(|error| format!("cannot read the request: {error}"))?;
    if !line.ends_with('\n') {
        return Err(if line.len() as u64 >= MAX_REQUEST_BYTES {
            format!("request longer than {MAX_REQUEST_BYTES} bytes")
        } else {
            "request not terminated by a newline".into()
        });
    }
    serde_json::from_str(&line).map_err(|error| format!("bad request: {error}"))
}
