//! One I/O thread's queue to an NBD path: [`NbdQueue`]. See the module
//! docs of [`super`] for the contracts (commands, errors, timeouts,
//! reconnect). Time is the `now_ns` its caller passes to `submit` and
//! `poll` (the reconnect backoff counts on it): the queue reads no clock.

use super::connection::{Broken, Connection};
use super::handshake::Export;
use super::target::{NbdError, NbdTarget};
use mpio_core::io::{Op, PathError, PathOutcome, TargetError};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_nbd::consts::*;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Wait after the first failed connect before the next attempt.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// Longest wait between connect attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A connect running on its helper thread.
type Connecting = JoinHandle<Result<Connection, NbdError>>;

/// One thread's queue to an NBD path. See the docs of `src/nbd/mod.rs`.
#[derive(Debug)]
pub struct NbdQueue {
    target: Arc<NbdTarget>,
    depth: usize,
    /// Boxed: a connection's buffers and tables are far larger than the
    /// other transports' queues, which share `AnyQueue` with this one.
    connection: Option<Box<Connection>>,
    /// Connections cut from our side that still hold requests the server
    /// may apply: read until each reply comes or the server closes (the
    /// fence; see the module docs of [`super`]).
    cut: Vec<Connection>,
    /// The connect in progress, if any, with the target's connect count
    /// when it started.
    connecting: Option<(Connecting, u64)>,
    /// I/Os submitted while connecting, sent once connected.
    waiting: Vec<PathIo>,
    /// After a failed connect: no new attempt before this time (ns, on
    /// the caller's clock) unless the target's connect count moved from
    /// the one recorded when the failed attempt started (a connection
    /// another queue made while it ran, or since, shows the server is up).
    retry: Option<(u64, u64)>,
    /// The wait after the next failed connect.
    backoff: Duration,
    /// I/Os whose outcome is known, for the next poll.
    done: Vec<PathCompletion>,
    last_error: Option<String>,
}

impl NbdQueue {
    /// A queue of `depth` I/Os to `target`; the connect starts at once,
    /// in the background. (If no thread can be started for it, the next
    /// `submit` tries again.)
    pub fn open(target: Arc<NbdTarget>, depth: usize) -> Self {
        let mut queue = NbdQueue {
            target,
            depth,
            connection: None,
            cut: Vec::new(),
            connecting: None,
            waiting: Vec::with_capacity(depth),
            retry: None,
            backoff: FIRST_BACKOFF,
            done: Vec::with_capacity(depth),
            last_error: None,
        };
        queue.start_connect(None);
        queue
    }

    /// True while the queue holds a live connection.
    pub fn is_connected(&self) -> bool {
        self.connection.is_some()
    }

    /// True while a connect runs in the background.
    pub fn is_connecting(&self) -> bool {
        self.connecting.is_some()
    }

    /// I/Os sent on the live connection and not answered yet.
    pub fn in_flight(&self) -> usize {
        self.connection
            .as_ref()
            .map_or(0, |connection| connection.in_flight())
    }

    /// Why the last connection ended or the last connect failed.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// What the server said about the export on the live connection
    /// (narrowed to what the map's paths share).
    pub fn export(&self) -> Option<&Export> {
        self.connection.as_deref().map(Connection::export)
    }

    /// Starts a connect on a helper thread unless one runs or the backoff
    /// after a failed one has not passed at `now_ns` (`None`: at opening,
    /// before any clock was passed); false if none runs now.
    fn start_connect(&mut self, now_ns: Option<u64>) -> bool {
        if self.connecting.is_some() {
            return true;
        }
        if let (Some((retry_ns, connects)), Some(now_ns)) = (self.retry, now_ns) {
            if now_ns < retry_ns && self.target.connects() == connects {
                return false;
            }
        }
        let target = Arc::clone(&self.target);
        let depth = self.depth;
        let connects = self.target.connects();
        let spawned = std::thread::Builder::new()
            .name("mpio-nbd-connect".into())
            .spawn(move || {
                let (stream, export) = target.connect()?;
                Connection::new(stream, export, depth).map_err(|source| NbdError::Connect {
                    address: target.address().to_string(),
                    source,
                })
            });
        match spawned {
            Ok(handle) => {
                self.connecting = Some((handle, connects));
                true
            }
            Err(error) => {
                let why = format!("starting a connect thread: {error}");
                match now_ns {
                    Some(now_ns) => self.connect_failed(now_ns, connects, why),
                    None => self.last_error = Some(why),
                }
                false
            }
        }
    }

    /// Takes the finished connect's result, if it finished (at `now_ns`).
    fn finish_connect(&mut self, now_ns: u64) {
        if !self
            .connecting
            .as_ref()
            .is_some_and(|(handle, _)| handle.is_finished())
        {
            return;
        }
        let Some((handle, connects)) = self.connecting.take() else {
            return;
        };
        let result = handle.join().unwrap_or_else(|_| {
            Err(NbdError::Changed {
                address: self.target.address().to_string(),
                what: "the connect thread panicked".into(),
            })
        });
        match result {
            Ok(connection) => {
                self.connection = Some(Box::new(connection));
                self.retry = None;
                self.backoff = FIRST_BACKOFF;
                for io in std::mem::take(&mut self.waiting) {
                    self.send(io);
                }
            }
            Err(error) => {
                self.connect_failed(now_ns, connects, error.to_string());
                for io in std::mem::take(&mut self.waiting) {
                    self.finish(io, PathOutcome::Path(PathError::ConnectionLost));
                }
            }
        }
    }

    /// Records a connect that failed at `now_ns`, started when the
    /// target's connect count was `connects`.
    fn connect_failed(&mut self, now_ns: u64, connects: u64, why: String) {
        let backoff_ns = u64::try_from(self.backoff.as_nanos()).unwrap_or(u64::MAX);
        self.retry = Some((now_ns.saturating_add(backoff_ns), connects));
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        self.last_error = Some(why);
    }

    /// Sends `io` on the live connection, or completes it at once.
    fn send(&mut self, io: PathIo) {
        let Some(connection) = self.connection.as_mut() else {
            self.finish(io, PathOutcome::Path(PathError::ConnectionLost));
            return;
        };
        match command_for(&io, connection.export()) {
            Ok(command) => {
                if let Err(why) = connection.send(command, io) {
                    self.end_connection(why);
                }
            }
            Err(outcome) => self.finish(io, outcome),
        }
    }

    /// Ends the live connection. If its server's side is closed, its
    /// I/Os come back as `ConnectionLost` at once; otherwise it is cut
    /// ([`Connection::cut`]): reads come back at once, and what the server
    /// may still apply waits on the cut connection for its reply or the
    /// server's close.
    fn end_connection(&mut self, why: Broken) {
        if let Some(mut connection) = self.connection.take() {
            if connection.server_closed() {
                (*connection).sever(&mut self.done);
            } else {
                connection.cut(&mut self.done);
                if connection.holds_requests() {
                    self.cut.push(*connection);
                }
            }
        }
        self.last_error = Some(why.0);
    }

    fn finish(&mut self, io: PathIo, outcome: PathOutcome) {
        self.done.push(PathCompletion {
            tag: io.tag,
            buf: io.buf,
            outcome,
        });
    }
}

/// The command that carries `io` to `export`, or the outcome it gets
/// without reaching the server.
pub(crate) fn command_for(io: &PathIo, export: &Export) -> Result<u16, PathOutcome> {
    use PathOutcome::{Ok as Done, Target};
    if io.op == Op::Flush {
        return if export.has(FLAG_SEND_FLUSH) {
            Ok(CMD_FLUSH)
        } else {
            Err(Done)
        };
    }
    let in_range = io
        .offset
        .checked_add(u64::from(io.len))
        .is_some_and(|end| end <= export.size_bytes);
    if !in_range {
        return Err(Target(TargetError::OutOfRange));
    }
    let min_block = u64::from(export.min_block.max(1));
    if !io.offset.is_multiple_of(min_block) || !u64::from(io.len).is_multiple_of(min_block) {
        return Err(Target(TargetError::Invalid));
    }
    if io.op.is_write() && export.has(FLAG_READ_ONLY) {
        return Err(Target(TargetError::NotSupported));
    }
    // A write's payload is its buffer: one of another length would put
    // the stream out of step with the request.
    if matches!(io.op, Op::Read | Op::Write) && io.buf.len() != io.len as usize {
        return Err(Target(TargetError::Invalid));
    }
    if io.len == 0 {
        return Err(Done);
    }
    match io.op {
        Op::Read | Op::Write if io.len > export.max_payload => Err(Target(TargetError::Invalid)),
        Op::Read => Ok(CMD_READ),
        Op::Write => Ok(CMD_WRITE),
        Op::Discard if export.has(FLAG_SEND_TRIM) => Ok(CMD_TRIM),
        Op::WriteZeroes if export.has(FLAG_SEND_WRITE_ZEROES) => Ok(CMD_WRITE_ZEROES),
        Op::Discard | Op::WriteZeroes => Err(Target(TargetError::NotSupported)),
        Op::Flush => Ok(CMD_FLUSH),
    }
}

impl PathQueue for NbdQueue {
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        self.finish_connect(now_ns);
        if self.connection.is_some() {
            self.send(io);
        } else if self.start_connect(Some(now_ns)) {
            self.waiting.push(io);
        } else {
            self.finish(io, PathOutcome::Path(PathError::ConnectionLost));
        }
    }

    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        self.finish_connect(now_ns);
        if let Some(connection) = self.connection.as_mut() {
            if let Err(why) = connection.poll(&mut self.done) {
                self.end_connection(why);
            }
        }
        // Cut connections are few and rare (one per timeout or broken
        // connection): the check is a length test per poll otherwise.
        let done = &mut self.done;
        self.cut.retain_mut(|connection| !connection.poll_cut(done));
        completions.append(&mut self.done);
    }

    /// Hands back an I/O still waiting for the connect; otherwise never
    /// hands the I/O back (see the module docs): cuts the connection, so
    /// that reads come back through `poll` as `ConnectionLost` at once and
    /// everything else when answered or fenced.
    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        if let Some(at) = self.waiting.iter().position(|io| io.tag == tag) {
            return Some(self.waiting.swap_remove(at));
        }
        let in_flight = self
            .connection
            .as_ref()
            .is_some_and(|connection| connection.is_in_flight(tag));
        if in_flight {
            self.end_connection(Broken(format!(
                "I/O {tag:#x} timed out: connection cut, waiting for the server to close it"
            )));
        }
        None
    }

    /// Gives back I/O `tag` from the live or a cut connection, which
    /// drops its reply if one ever comes: a read the core hedges (sends
    /// down another path past its hedge delay), or anything past the fence
    /// timeout (a write may still take effect: the core fails a write so
    /// given back, see [`PathQueue::abandon`]).
    fn abandon(&mut self, tag: u64) -> Option<PathIo> {
        let io = self
            .connection
            .as_deref_mut()
            .into_iter()
            .chain(self.cut.iter_mut())
            .find_map(|connection| connection.abandon(tag))?;
        self.cut.retain(Connection::holds_requests);
        Some(io)
    }
}
