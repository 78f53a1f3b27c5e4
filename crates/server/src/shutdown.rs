//! A clean shutdown ([`crate::Server::shutdown`]): stop accepting, answer
//! every request already read, flush the map, then close.
//!
//! # Order
//! 1. The acceptor closes the export's listeners; the unix socket file is
//!    removed. A client connecting now is refused by the kernel.
//! 2. Each event loop drains the export ([`crate::event_loop`],
//!    "Draining"): it closes the export's connections still in their
//!    handshake, reads nothing more from its clients, and completes and
//!    answers everything it read. It publishes what is left each turn
//!    ([`DrainProgress`]); a loop that never served the export publishes
//!    that nothing is.
//! 3. Once no loop has I/O left at the map, a FLUSH goes through the map
//!    on a queue of its own (`flush_map`): the map's paths reach one
//!    storage, so a flush down any path makes every write completed before
//!    it durable (the reason the export advertises `CAN_MULTI_CONN`).
//!    Acknowledged writes are then on stable storage when the process
//!    exits. The flush does not wait for replies to be written: a client
//!    that stops reading its replies must not keep every other client's
//!    writes from being flushed.
//! 4. The server waits until every loop has answered everything, then the
//!    loops close the export's connections and forget it; the engine's
//!    threads go on serving its other exports.
//!
//! One deadline bounds steps 2 to 4 together. Past it the server stops
//! waiting: what was not answered, the I/O left at the map and a flush not
//! sent or not finished are in the [`ShutdownReport`].
//!
//! # Concurrency
//! [`DrainProgress`] is written by its loop and read by the thread shutting
//! down; see `DrainProgress::publish` for why two separate atomics are
//! enough.

use mpio_core::io::{Buffer, Io, IoError, Op};
use mpio_transport::clock::now_ns;
use mpio_transport::{device_queue, DeviceSlot};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the thread shutting down looks at the loops' progress and
/// polls its flush.
const WAIT_STEP: Duration = Duration::from_micros(200);

/// How far one event loop's drain is: requests read and not yet answered
/// in full, and I/Os at the map (those of vanished clients too). Not
/// started until the loop publishes first.
#[derive(Debug)]
pub(crate) struct DrainProgress {
    unanswered: AtomicUsize,
    at_map: AtomicUsize,
}

/// Published by no loop yet.
const NOT_STARTED: usize = usize::MAX;

impl Default for DrainProgress {
    fn default() -> Self {
        DrainProgress {
            unanswered: AtomicUsize::new(NOT_STARTED),
            at_map: AtomicUsize::new(NOT_STARTED),
        }
    }
}

impl DrainProgress {
    /// The loop's counts after a turn in drain mode.
    ///
    /// Two separate stores suffice: once a loop drains it reads no new
    /// request, so both counts only fall from the first publication on,
    /// and a reader that sees a zero sees a final one, whichever store of
    /// the other count it meets.
    pub(crate) fn publish(&self, unanswered: usize, at_map: usize) {
        // Release (both): a reader that sees a count sees the replies
        // and completions that lowered it.
        self.at_map.store(at_map, Ordering::Release);
        self.unanswered.store(unanswered, Ordering::Release);
    }

    /// The last counts published: `None` before the loop began to drain.
    pub(crate) fn read(&self) -> Option<(usize, usize)> {
        // Acquire: pairs with the Release stores in `publish`.
        let unanswered = self.unanswered.load(Ordering::Acquire);
        let at_map = self.at_map.load(Ordering::Acquire);
        (unanswered != NOT_STARTED && at_map != NOT_STARTED).then_some((unanswered, at_map))
    }

    /// True once the loop has nothing left.
    pub(crate) fn is_drained(&self) -> bool {
        self.read() == Some((0, 0))
    }

    /// True once the loop has no I/O left at the map (replies may still be
    /// waiting for a client to read them).
    pub(crate) fn map_idle(&self) -> bool {
        self.read().is_some_and(|(_, at_map)| at_map == 0)
    }
}

/// What one event loop left behind when it ended.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LoopExit {
    /// Requests read from live connections and not answered in full when
    /// the connections closed.
    pub unanswered: usize,
    /// I/Os still at the map when the loop ended (after waiting for them
    /// until the server's exit time).
    pub left_at_map: usize,
    /// Connections open when the loop ended (closed by it).
    pub connections_closed: usize,
}

/// What became of the flush sent at shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushOutcome {
    /// It completed: every write acknowledged to a client is durable on
    /// the paths' storage.
    Done,
    /// The map failed it (no usable path, say).
    Failed(IoError),
    /// It did not complete before the deadline.
    TimedOut,
    /// It was not sent: the drain did not end before the deadline, and the
    /// server gave up instead.
    NotSent,
    /// None was needed: the export is read-only, no client wrote.
    ReadOnly,
}

impl fmt::Display for FlushOutcome {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlushOutcome::Done => formatter.write_str("flushed"),
            FlushOutcome::Failed(error) => write!(formatter, "flush failed: {error}"),
            FlushOutcome::TimedOut => formatter.write_str("flush not finished by the deadline"),
            FlushOutcome::NotSent => {
                formatter.write_str("flush not sent (I/O still at the map at the deadline)")
            }
            FlushOutcome::ReadOnly => formatter.write_str("no flush (read-only export)"),
        }
    }
}

/// What [`crate::Server::shutdown`] did and what it abandoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Every request read was answered and the map held no I/O before the
    /// deadline.
    pub drained: bool,
    /// Requests the map completed during the shutdown.
    pub requests_completed: u64,
    /// Requests read and not answered in full when the connections closed:
    /// their clients saw the connection end instead of a reply.
    pub requests_unanswered: usize,
    /// I/Os still at the map when the loops ended; a write among them may
    /// or may not land.
    pub io_left_at_map: usize,
    /// The flush.
    pub flush: FlushOutcome,
    /// Connections open at the end, closed by the server.
    pub connections_closed: usize,
    /// How long the shutdown took.
    pub elapsed: Duration,
}

impl ShutdownReport {
    /// True when nothing was abandoned: drained, nothing left unanswered
    /// or at the map, and flushed (or read-only).
    pub fn is_clean(&self) -> bool {
        self.drained
            && self.requests_unanswered == 0
            && self.io_left_at_map == 0
            && matches!(self.flush, FlushOutcome::Done | FlushOutcome::ReadOnly)
    }
}

impl fmt::Display for ShutdownReport {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = if self.drained {
            "drained"
        } else {
            "gave up at the deadline"
        };
        write!(
            formatter,
            "{how} in {} ms: {} requests completed, {}, {} connections closed",
            self.elapsed.as_millis(),
            self.requests_completed,
            self.flush,
            self.connections_closed
        )?;
        if self.requests_unanswered > 0 {
            write!(
                formatter,
                ", {} requests unanswered",
                self.requests_unanswered
            )?;
        }
        if self.io_left_at_map > 0 {
            write!(
                formatter,
                ", {} I/Os left at the map (outcome unknown)",
                self.io_left_at_map
            )?;
        }
        Ok(())
    }
}

/// True once `done` holds for every loop's progress; false if `give_up`
/// comes first.
pub(crate) fn wait_for(
    progress: &[DrainProgress],
    give_up: Instant,
    done: impl Fn(&DrainProgress) -> bool,
) -> bool {
    loop {
        if progress.iter().all(&done) {
            return true;
        }
        if Instant::now() >= give_up {
            return false;
        }
        std::thread::sleep(WAIT_STEP);
    }
}

/// Sends one FLUSH through the map `device` serves, on a queue of its
/// own, and waits for it until `give_up`. (A queue dropped with the flush
/// still at a path lets the transport end it: an NBD connection closes; a
/// file's ring is reaped.)
pub fn flush_map(device: &Arc<DeviceSlot>, give_up: Instant) -> FlushOutcome {
    let mut queue = device_queue(device, 1, 0);
    let flush = Io {
        user_data: 0,
        op: Op::Flush,
        offset: 0,
        len: 0,
        buf: Buffer::empty(),
        fua: false,
    };
    if queue.submit(flush, now_ns()).is_err() {
        unreachable!("a new queue of depth 1 refused its first I/O");
    }
    loop {
        let mut outcome = None;
        queue.poll(now_ns(), &mut |completion| {
            outcome = Some(match completion.result {
                Ok(()) => FlushOutcome::Done,
                Err(error) => FlushOutcome::Failed(error),
            });
        });
        if let Some(outcome) = outcome {
            return outcome;
        }
        if Instant::now() >= give_up {
            return FlushOutcome::TimedOut;
        }
        std::thread::sleep(WAIT_STEP);
    }
}

/// `give_up` on the transports' clock ([`now_ns`]), for the loops.
pub(crate) fn clock_ns_at(give_up: Instant) -> u64 {
    let remaining = give_up.saturating_duration_since(Instant::now());
    now_ns().saturating_add(u64::try_from(remaining.as_nanos()).unwrap_or(u64::MAX))
}
