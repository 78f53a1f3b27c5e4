//! One NBD path's server and what the map needs of it: [`NbdTarget`]
//! connects, runs the handshake under one deadline and checks the export.
//!
//! # What an export must be
//! - At least as large as the map.
//! - Read-only, or advertising `NBD_FLAG_CAN_MULTI_CONN`. mpio opens one
//!   connection per I/O thread per path (and a new one at each reconnect)
//!   and sends a map's flush down one of them; without the flag a server
//!   promises a `FLUSH` only for the writes its own connection carried,
//!   so a flush that returned success could leave acknowledged writes
//!   volatile. Such an export is refused at [`Transports::build`] with
//!   [`NbdError::NoMultiConn`] (serve it with `qemu-nbd --shared=N`, N > 1,
//!   or an nbdkit plugin that allows it).
//!
//! # What every later connection must find
//! [`Transports::build`] probes each path once and [settles](NbdTarget::settle)
//! its target with what it found. Every later connection (each thread's,
//! each reconnect's) must find the same size, read-only flag, command
//! flags and block sizes; a server that comes back different is refused
//! with [`NbdError::Changed`] and its path stays failed (a path error),
//! rather than turning I/O into errors that depend on which path the
//! selector picked.
//!
//! # Capabilities shared by a map's paths
//! [`Transports::build`] also settles every NBD path of a map with the
//! capabilities all of them share: `TRIM` and `WRITE_ZEROES` only if every
//! path has them, the largest minimum block size, the smallest maximum
//! payload. A connection's [`Export`] is narrowed to them, so that a
//! discard refused as not supported, or an I/O refused for its size, is
//! refused the same way whichever path carries it.
//!
//! # A path whose server is down when the map is built
//! Its probe's error is kept ([`NbdTarget::unready`]) and the path starts
//! failed; its queues connect in the background as for any reconnect.
//! The first connection that reaches the server settles it then: the
//! export must hold the map, agree with the map's other NBD paths on
//! being read-only, offer at least the capabilities the map settled on
//! (the first path to settle sets them when none could at build), and
//! take what the map's block devices send ([`NbdTarget::require`]). An
//! export that falls short is refused with [`NbdError::Disagrees`] and
//! the path stays failed.
//!
//! [`Transports::build`]: crate::Transports::build

use super::handshake::{handshake, Export, HandshakeError};
use super::stream::Stream;
use crate::limits::{Limits, ServedAs};
use crate::unready::Unready;
use mpio_nbd::consts::*;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Default bound on a connect and the whole handshake after it.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The transmission flags that change what the client sends.
const COMMAND_FLAGS: u16 =
    FLAG_READ_ONLY | FLAG_SEND_FLUSH | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;

/// Why a connection to an NBD path could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NbdError {
    /// The socket did not connect.
    #[error("connecting to {address}: {source}")]
    Connect {
        /// The server.
        address: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The handshake failed.
    #[error("{address}: {source}")]
    Handshake {
        /// The server.
        address: String,
        /// What went wrong.
        #[source]
        source: HandshakeError,
    },
    /// The export is smaller than the map.
    #[error("{address}: the export holds {export_bytes} bytes but the map needs {map_bytes}")]
    TooSmall {
        /// The server.
        address: String,
        /// The export's size.
        export_bytes: u64,
        /// The map's size.
        map_bytes: u64,
    },
    /// A writable export without `NBD_FLAG_CAN_MULTI_CONN`.
    #[error(
        "{address}: the export is writable but does not advertise NBD_FLAG_CAN_MULTI_CONN; \
         mpio opens a connection per I/O thread and per reconnect, and without the flag a \
         flush does not cover the other connections' writes (serve it read-only, or allow \
         multi-conn: qemu-nbd --shared=N with N > 1)"
    )]
    NoMultiConn {
        /// The server.
        address: String,
    },
    /// A path that settled after its map was built offers less than the
    /// map's other paths settled on, or than its block devices need.
    #[error("{address}: the export cannot join the map: {what}")]
    Disagrees {
        /// The server.
        address: String,
        /// What it lacks.
        what: String,
    },
    /// A new connection found the export different from the first one.
    #[error("{address}: the export changed since the path was set up: {what}")]
    Changed {
        /// The server.
        address: String,
        /// What differs.
        what: String,
    },
}

/// What a map requires of its NBD paths, and what they share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Settled {
    /// The export as the path's first connection found it.
    export: Export,
    /// Capabilities every NBD path of the map shares.
    shared: Shared,
}

/// Capabilities every NBD path of a map shares; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shared {
    /// `FLAG_SEND_TRIM` and `FLAG_SEND_WRITE_ZEROES`, if all paths have them.
    pub flags: u16,
    /// The largest minimum block size.
    pub min_block: u32,
    /// The smallest maximum payload.
    pub max_payload: u32,
}

impl Shared {
    /// What `exports` all share.
    pub fn of<'a>(exports: impl IntoIterator<Item = &'a Export>) -> Option<Shared> {
        exports.into_iter().fold(None, |shared, export| {
            let own = Shared::own(export);
            Some(match shared {
                None => own,
                Some(shared) => Shared {
                    flags: shared.flags & own.flags,
                    min_block: shared.min_block.max(own.min_block),
                    max_payload: shared.max_payload.min(own.max_payload),
                },
            })
        })
    }

    /// What `export` alone offers.
    pub fn own(export: &Export) -> Shared {
        Shared {
            flags: export.flags & (FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES),
            min_block: export.min_block,
            max_payload: export.max_payload,
        }
    }
}

/// What every NBD path of one map agreed on: whether the export is
/// read-only, and the capabilities they share. Set once, by
/// [`Transports::build`] from the paths it reached, or by the first path
/// to settle when it reached none.
///
/// [`Transports::build`]: crate::Transports::build
#[derive(Debug, Default)]
pub(crate) struct Agreement(OnceLock<(bool, Shared)>);

impl Agreement {
    /// Records what the map's paths agreed on; only the first call counts.
    pub(crate) fn set(&self, read_only: bool, shared: Shared) {
        let _ = self.0.set((read_only, shared));
    }
}

/// One NBD path: the server, the export and what the map needs of it.
/// Shared by every thread's queue to the path. See the module docs.
#[derive(Debug)]
pub struct NbdTarget {
    address: super::address::Address,
    map_bytes: u64,
    connect_timeout: Duration,
    settled: OnceLock<Settled>,
    /// What the map's NBD paths agreed on (shared by them).
    agreement: Arc<Agreement>,
    /// The block devices serving the map: a path settling from now on
    /// must take what they send.
    served_as: ServedAs,
    /// Why the path has not settled yet: its last connection's error.
    unready: Unready,
    /// Connections set up so far: a queue waiting out a backoff after a
    /// failed connect tries again at once when another queue (say, the
    /// checker's) connected since.
    connects: AtomicU64,
}

impl NbdTarget {
    /// A path to `address` for a map of `map_bytes`, with the default
    /// `CONNECT_TIMEOUT`.
    pub fn new(address: super::address::Address, map_bytes: u64) -> Self {
        NbdTarget {
            address,
            map_bytes,
            connect_timeout: CONNECT_TIMEOUT,
            settled: OnceLock::new(),
            agreement: Arc::default(),
            served_as: ServedAs::default(),
            unready: Unready::default(),
            connects: AtomicU64::new(0),
        }
    }

    /// Makes the path one of the map whose NBD paths share `agreement`,
    /// served as `served_as` (block devices' limits).
    pub(crate) fn in_map(mut self, agreement: Arc<Agreement>, served_as: &[Limits]) -> Self {
        self.agreement = agreement;
        self.served_as = ServedAs::new(served_as);
        self
    }

    /// Why the path cannot serve yet (no connection has settled it);
    /// `None` once settled.
    pub fn unready(&self) -> Option<String> {
        self.unready
            .reason(self.settled.get().is_some(), "not connected yet")
    }

    /// Notes why the path could not settle (a failed connection).
    fn note_unready(&self, error: &NbdError) {
        if self.settled.get().is_none() {
            self.unready.note(error.to_string());
        }
    }

    /// Adds `limits` to what the path must take if it settles from now
    /// on: a block device advertising them now serves the map.
    pub fn require(&self, limits: Limits) {
        self.served_as.require(limits);
    }

    /// Bounds each connect and its handshake by `timeout` instead.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The server and export.
    pub fn address(&self) -> &super::address::Address {
        &self.address
    }

    /// Connections set up so far.
    pub fn connects(&self) -> u64 {
        // Acquire: pairs with the Release in `connect`; only a hint for
        // when to retry, no data depends on it.
        self.connects.load(Ordering::Acquire)
    }

    /// The smallest I/O every NBD path of the map takes (1 before the
    /// target is settled).
    pub fn min_block(&self) -> u32 {
        self.settled
            .get()
            .map_or(1, |settled| settled.shared.min_block.max(1))
    }

    /// What the path takes, once settled: its shared block and payload
    /// limits, its export's operations and cache (a server that takes
    /// flushes has a cache to flush). `None` before.
    pub fn limits(&self) -> Option<Limits> {
        self.settled.get().map(settled_limits)
    }

    /// Records what the path's export is and what the map's NBD paths
    /// share (see the module docs). Only the first call counts.
    pub fn settle(&self, export: Export, shared: Shared) {
        let _ = self.settled.set(Settled { export, shared });
    }

    /// Settles a path that reached its server after the map was built
    /// with `export`, its first connection's (see the module docs).
    fn settle_late(&self, export: &Export) -> Result<Settled, NbdError> {
        let disagrees = |what: String| NbdError::Disagrees {
            address: self.address.to_string(),
            what,
        };
        let own = Shared::own(export);
        let read_only = export.has(FLAG_READ_ONLY);
        let (agreed_read_only, shared) = *self.agreement.0.get_or_init(|| (read_only, own));
        if read_only != agreed_read_only {
            return Err(disagrees(format!(
                "it is {}, the map's other paths are not",
                if read_only { "read-only" } else { "writable" }
            )));
        }
        let missing = shared.flags & !own.flags;
        if missing != 0 {
            return Err(disagrees(format!(
                "it lacks {} that the map's other paths offer",
                flag_names(missing)
            )));
        }
        if own.min_block > shared.min_block || own.max_payload < shared.max_payload {
            return Err(disagrees(format!(
                "it takes blocks of {}..{} bytes, the map's other paths {}..{}",
                own.min_block, own.max_payload, shared.min_block, shared.max_payload
            )));
        }
        let settled = Settled {
            export: *export,
            shared,
        };
        if let Some(refused) = self.served_as.refusal(&settled_limits(&settled)) {
            return Err(disagrees(refused));
        }
        Ok(*self.settled.get_or_init(|| settled))
    }

    /// Connects, runs the handshake (the whole of it bounded by the
    /// connect timeout) and checks the export: against the map, and
    /// against what the target was settled with (settling it first if it
    /// was not, see the module docs). The export returned is narrowed to
    /// what the map's paths share.
    ///
    /// # Errors
    /// An `NbdError` naming the server and the step that failed; a
    /// target not settled yet keeps it as its reason.
    pub fn connect(&self) -> Result<(Stream, Export), NbdError> {
        let connected = self.open().and_then(|(stream, export)| {
            let settled = match self.settled.get() {
                Some(settled) => *settled,
                None => {
                    self.check(&export)?;
                    self.settle_late(&export)?
                }
            };
            if let Some(what) = difference(&settled.export, &export) {
                return Err(NbdError::Changed {
                    address: self.address.to_string(),
                    what,
                });
            }
            Ok((stream, narrow(export, &settled.shared)))
        });
        match &connected {
            // Release: see `connects`.
            Ok(_) => drop(self.connects.fetch_add(1, Ordering::Release)),
            Err(error) => self.note_unready(error),
        }
        connected
    }

    /// Connects and runs the handshake, the whole of it bounded by the
    /// connect timeout.
    fn open(&self) -> Result<(Stream, Export), NbdError> {
        let address = || self.address.to_string();
        let connect_error = |source| NbdError::Connect {
            address: address(),
            source,
        };
        let deadline = Instant::now() + self.connect_timeout;
        let mut stream =
            Stream::connect(&self.address.socket, self.connect_timeout).map_err(connect_error)?;
        let export = handshake(
            &mut Deadlined {
                stream: &mut stream,
                deadline,
            },
            &self.address.export,
        )
        .map_err(|source| NbdError::Handshake {
            address: address(),
            source,
        })?;
        Ok((stream, export))
    }

    /// Checks a first connection's export against the map.
    fn check(&self, export: &Export) -> Result<(), NbdError> {
        if export.size_bytes < self.map_bytes {
            return Err(NbdError::TooSmall {
                address: self.address.to_string(),
                export_bytes: export.size_bytes,
                map_bytes: self.map_bytes,
            });
        }
        if !export.has(FLAG_READ_ONLY) && !export.has(FLAG_CAN_MULTI_CONN) {
            return Err(NbdError::NoMultiConn {
                address: self.address.to_string(),
            });
        }
        Ok(())
    }

    /// Connects once to check the export against the map, then
    /// disconnects politely; settles nothing ([`Transports::build`] settles
    /// the map's paths together from their probes).
    ///
    /// # Errors
    /// As [`NbdTarget::connect`]; the target keeps it as its reason.
    ///
    /// [`Transports::build`]: crate::Transports::build
    pub fn probe(&self) -> Result<Export, NbdError> {
        let (mut stream, export) = self
            .open()
            .and_then(|(stream, export)| self.check(&export).map(|()| (stream, export)))
            .inspect_err(|error| self.note_unready(error))?;
        let disconnect = mpio_nbd::request::Request {
            flags: 0,
            command: CMD_DISC,
            cookie: 0,
            offset: 0,
            length: 0,
        };
        // The server may already be gone; the export was checked anyway.
        let _ = stream.set_timeouts(Some(self.connect_timeout));
        let _ = stream.write_all(&disconnect.encode());
        stream.shutdown();
        Ok(export)
    }
}

/// What a settled path takes (see [`NbdTarget::limits`]).
fn settled_limits(settled: &Settled) -> Limits {
    let logical_block = settled.shared.min_block.max(512).next_power_of_two();
    Limits {
        logical_block,
        physical_block: logical_block.max(4096),
        max_io_bytes: settled.shared.max_payload,
        discard: settled.shared.flags & FLAG_SEND_TRIM != 0,
        write_zeroes: settled.shared.flags & FLAG_SEND_WRITE_ZEROES != 0,
        volatile_cache: settled.export.has(FLAG_SEND_FLUSH),
        // The data crosses a socket from mpio's own buffers.
        dma_alignment: 1,
    }
}

/// How `now` differs from `then` in what the client relies on, if it does.
pub(crate) fn difference(then: &Export, now: &Export) -> Option<String> {
    if now.size_bytes != then.size_bytes {
        return Some(format!(
            "size {} bytes, was {}",
            now.size_bytes, then.size_bytes
        ));
    }
    let changed = (now.flags ^ then.flags) & COMMAND_FLAGS;
    if changed != 0 {
        return Some(format!(
            "transmission flags {:#06x}, were {:#06x} ({})",
            now.flags & COMMAND_FLAGS,
            then.flags & COMMAND_FLAGS,
            flag_names(changed)
        ));
    }
    if (now.min_block, now.max_payload) != (then.min_block, then.max_payload) {
        return Some(format!(
            "block sizes {}..{}, were {}..{}",
            now.min_block, now.max_payload, then.min_block, then.max_payload
        ));
    }
    None
}

/// The names of the command flags in `flags`.
pub(crate) fn flag_names(flags: u16) -> String {
    [
        (FLAG_READ_ONLY, "READ_ONLY"),
        (FLAG_SEND_FLUSH, "SEND_FLUSH"),
        (FLAG_SEND_TRIM, "SEND_TRIM"),
        (FLAG_SEND_WRITE_ZEROES, "SEND_WRITE_ZEROES"),
        (FLAG_CAN_MULTI_CONN, "CAN_MULTI_CONN"),
    ]
    .iter()
    .filter(|(flag, _)| flags & flag != 0)
    .map(|(_, name)| format!("NBD_FLAG_{name}"))
    .collect::<Vec<_>>()
    .join(", ")
}

/// `export` with only the capabilities the map's paths share.
fn narrow(export: Export, shared: &Shared) -> Export {
    let optional = FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;
    Export {
        flags: export.flags & !optional | export.flags & shared.flags,
        min_block: shared.min_block,
        max_payload: shared.max_payload,
        ..export
    }
}

/// A stream whose every read and write gives up at one deadline.
struct Deadlined<'a> {
    stream: &'a mut Stream,
    deadline: Instant,
}

impl Deadlined<'_> {
    /// Bounds the next socket call by the time left.
    fn arm(&self) -> io::Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        self.stream.set_timeouts(Some(left))
    }
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the handshake outlived the connect timeout",
    )
}

/// A socket timeout (`EAGAIN` from a timed read or write) as the
/// deadline's error.
fn at_deadline<T>(result: io::Result<T>) -> io::Result<T> {
    result.map_err(|error| match error.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => timed_out(),
        _ => error,
    })
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        at_deadline(self.stream.read(buf))
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        at_deadline(self.stream.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
