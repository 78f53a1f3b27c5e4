//! Accepting clients so that none can hold up another: shared by the
//! control socket and the metrics endpoint. One thread accepts; each
//! client is answered on a thread of its own, so a client that connects
//! and says nothing delays nobody but itself (each server bounds a
//! client's whole exchange with one deadline).
//!
//! # Bounds
//! At most [`MAX_CLIENTS`] clients are served at once. A client arriving
//! when that many are connected makes room by cutting the one connected
//! longest (its reads and writes fail at once): an honest client's
//! exchange takes milliseconds, so the longest-connected is the one most
//! likely silent, and no set of silent clients can lock out the next
//! caller (an attacker must keep connecting faster than an honest exchange
//! completes). Threads of cut clients end as soon as their current call
//! returns; should [`MAX_THREADS`] threads still be alive (cut clients
//! waiting on a handler), a new client is closed unanswered.
//!
//! # Stopping
//! The listener is non-blocking and the accepting thread looks for a stop
//! request every [`ACCEPT_INTERVAL`], so stopping needs nothing from the
//! socket file (which may have been removed or replaced). Stopping cuts
//! every client and joins every thread.

use mpio_server::log_limit::LimitedLog;
use mpio_transport::lock;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Most clients served at once.
pub const MAX_CLIENTS: usize = 32;
/// Most client threads alive at once, cut clients included.
pub const MAX_THREADS: usize = 2 * MAX_CLIENTS;
/// How often an idle accepting thread looks for a stop request.
pub const ACCEPT_INTERVAL: Duration = Duration::from_millis(25);

/// A listening socket whose clients can be cut.
pub(crate) trait Listen: Send + 'static {
    /// A client's connection.
    type Stream: Send + 'static;
    /// Makes accepts return `WouldBlock` instead of waiting.
    fn nonblocking(&self) -> io::Result<()>;
    /// Accepts one client (non-blocking listener; the stream returned
    /// blocks).
    fn accept_client(&self) -> io::Result<Self::Stream>;
    /// A second handle to `stream`, for cutting it from another thread.
    fn handle(stream: &Self::Stream) -> io::Result<Self::Stream>;
    /// Ends `stream`'s reads and writes at once.
    fn cut(stream: &Self::Stream);
}

impl Listen for UnixListener {
    type Stream = UnixStream;
    fn nonblocking(&self) -> io::Result<()> {
        self.set_nonblocking(true)
    }
    fn accept_client(&self) -> io::Result<UnixStream> {
        let (stream, _) = self.accept()?;
        stream.set_nonblocking(false)?;
        Ok(stream)
    }
    fn handle(stream: &UnixStream) -> io::Result<UnixStream> {
        stream.try_clone()
    }
    fn cut(stream: &UnixStream) {
        let _ = stream.shutdown(Shutdown::Both);
    }
}

impl Listen for TcpListener {
    type Stream = TcpStream;
    fn nonblocking(&self) -> io::Result<()> {
        self.set_nonblocking(true)
    }
    fn accept_client(&self) -> io::Result<TcpStream> {
        let (stream, _) = self.accept()?;
        stream.set_nonblocking(false)?;
        Ok(stream)
    }
    fn handle(stream: &TcpStream) -> io::Result<TcpStream> {
        stream.try_clone()
    }
    fn cut(stream: &TcpStream) {
        let _ = stream.shutdown(Shutdown::Both);
    }
}

/// The clients being served: a handle to each, oldest first.
type Live<S> = Mutex<Vec<(u64, S)>>;

/// The accepting thread. Stops (cutting every client) when stopped or
/// dropped.
#[derive(Debug)]
pub(crate) struct Clients {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Clients {
    /// Sets `listener` non-blocking and starts a thread named `name` that
    /// accepts on it and calls `serve` with each client on a thread of the
    /// client's own.
    ///
    /// # Errors
    /// The listener cannot be made non-blocking, or the thread cannot
    /// start.
    pub(crate) fn start<L: Listen>(
        name: &str,
        listener: L,
        serve: impl Fn(L::Stream) + Send + Sync + 'static,
    ) -> io::Result<Clients> {
        listener.nonblocking()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread_name = name.to_string();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || accept(&listener, &thread_name, Arc::new(serve), &thread_stop))?;
        Ok(Clients {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops accepting, cuts every client and joins every thread.
    pub(crate) fn stop(&mut self) {
        // Relaxed: a flag polled between accepts; no data rides on it.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // A panic on the thread has been reported by the panic hook
            // (see [`crate::fail_fast`]).
            let _ = thread.join();
        }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Accepts until `stop`, then cuts and joins every client.
fn accept<L: Listen>(
    listener: &L,
    name: &str,
    serve: Arc<dyn Fn(L::Stream) + Send + Sync>,
    stop: &AtomicBool,
) {
    let live: Arc<Live<L::Stream>> = Arc::new(Mutex::new(Vec::new()));
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut next_id = 0u64;
    // Clients can cause these as fast as they connect: at most one a
    // second each.
    let (mut busy_log, mut failed_log) = (LimitedLog::default(), LimitedLog::default());
    // Relaxed: see `Clients::stop`.
    while !stop.load(Ordering::Relaxed) {
        let stream = match listener.accept_client() {
            Ok(stream) => stream,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(ACCEPT_INTERVAL);
                continue;
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                // Out of file descriptors, say: try again later.
                failed_log.note(|| format!("{name}: accept failed ({error}); retrying"));
                std::thread::sleep(ACCEPT_INTERVAL);
                continue;
            }
        };
        threads.retain(|thread| !thread.is_finished());
        if threads.len() >= MAX_THREADS {
            busy_log
                .note(|| format!("{name}: {MAX_THREADS} client threads busy; a client is closed"));
            continue;
        }
        {
            let mut live = lock(&live);
            if live.len() >= MAX_CLIENTS {
                let (_, oldest) = live.remove(0);
                L::cut(&oldest);
            }
            match L::handle(&stream) {
                Ok(handle) => live.push((next_id, handle)),
                Err(error) => {
                    failed_log.note(|| {
                        format!("{name}: cannot keep a client's handle ({error}); closed")
                    });
                    continue;
                }
            }
        }
        let id = next_id;
        next_id += 1;
        let (serve, thread_live) = (Arc::clone(&serve), Arc::clone(&live));
        let spawned = std::thread::Builder::new()
            .name(format!("{name}-client"))
            .spawn(move || {
                serve(stream);
                lock(&thread_live).retain(|(client, _)| *client != id);
            });
        match spawned {
            Ok(thread) => threads.push(thread),
            Err(error) => {
                failed_log
                    .note(|| format!("{name}: cannot start a client thread ({error}); closed"));
                lock(&live).retain(|(client, _)| *client != id);
            }
        }
    }
    for (_, stream) in lock(&live).iter() {
        L::cut(stream);
    }
    for thread in threads {
        let _ = thread.join();
    }
}
