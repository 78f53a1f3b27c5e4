//! One event loop: a thread with its own poller, its own connections and
//! its own [`DeviceQueue`] over the device (the core's per-thread queue,
//! which follows the device's map across reloads: no lock shared with the
//! other loops on the I/O path).
//!
//! Each turn: wait for socket events (or not at all while the map holds
//! I/O that must be polled), read every ready connection and submit what
//! it asked, poll the map once for every completion, then send each
//! touched connection's replies in one vectored write. Requests of one
//! connection complete in whatever order the map finishes them.
//!
//! # Polling before sleeping
//! After a turn with work the loop polls its sockets without sleeping for
//! [`LoopSettings::idle_spin_ns`] (25 µs by default) before it blocks: a
//! client that answers a batch of replies with its next requests within
//! that time finds the loop awake, saving a sleep and a wake-up per
//! batch (qemu's adaptive `poll-max-ns` does the same). A loop with no
//! client traffic stops spinning after that time; 0 turns it off.
//!
//! # Bounds
//! When the queue holds its depth of I/Os, further requests wait in the
//! loop (in arrival order) until completions free slots; each connection
//! bounds what it has at the map ([`crate::connection::MAX_IN_FLIGHT`]).
//! For a while after a reload the queue holds more than its depth (the
//! old map's I/O finishing beside up to `depth` new ones; see
//! [`mpio_core::reload`]); the connections' bounds still hold.
//! A connection still in its handshake [`LoopSettings::handshake_timeout_ms`]
//! after it arrived is closed (checked every 100 ms while any is), and at
//! the server's maximum a new connection takes the place of the loop's
//! connection idle the longest ([`crate::acceptor`]), so idle clients
//! cannot hold the server's connection slots.
//!
//! # Draining
//! When the server shuts down ([`crate::Server::shutdown`]) a loop stops
//! taking work: it closes connections still in their handshake, drops
//! connections the acceptor hands it, and reads no more from its clients
//! (a request counts as read once its header, and a WRITE's payload, has
//! been parsed; bytes behind it stay unread). Everything read is still
//! completed and answered. Each turn it publishes what is left
//! ([`DrainProgress`]) for the server to wait on.
//!
//! # Clients that vanish
//! A connection whose socket or protocol fails is closed at once; it
//! leaves the loop's [`Slab`] of connections, so the key its I/O still in
//! flight carries finds no connection, and those completions are dropped
//! (their buffers reused).

use crate::acceptor::Arrival;
use crate::budget::Hold;
use crate::connection::{Connection, Ending, Incoming};
use crate::export::{nbd_error, Export};
use crate::log_limit::LimitedLog;
use crate::pool::BufferPool;
use crate::reply::ReplyHeader;
use crate::shutdown::{DrainProgress, LoopExit};
use crate::stats::Counters;
use crate::Shared;
use mio::{Events, Interest, Poll, Token};
use mpio_core::io::{Completion, Io, Op};
use mpio_core::slab::Slab;
use mpio_transport::clock::now_ns;
use mpio_transport::{device_queue, DeviceQueue, DeviceSlot};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

/// The token of the loop's waker (new connections, stop).
pub const WAKER: Token = Token(usize::MAX);
/// Turns without a completion during which the loop polls the map
/// without sleeping, while I/O is in flight.
const SPIN_TURNS: u32 = 64;
/// How long the loop sleeps between map polls after spinning.
const BUSY_SLEEP: Duration = Duration::from_micros(100);
/// How often a loop with connections in their handshake checks their age.
const SCAN_INTERVAL: Duration = Duration::from_millis(100);
/// How often a connection whose next request waits for room in the
/// server's budget ([`crate::budget`]) tries again.
pub const STARVED_RETRY: Duration = Duration::from_millis(1);

/// A connection of the loop, under its key in the loop's slab (also its
/// poller token).
#[derive(Debug)]
struct Slot {
    connection: Connection,
    /// On the `active` list (to be read and sent this turn).
    active: bool,
    /// When the connection arrived (for the handshake timeout).
    arrived_ns: u64,
    /// When its client last sent something (or it arrived).
    heard_ns: u64,
}

/// A request at the map.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    /// The key of the connection that asked.
    connection: u64,
    cookie: u64,
    offset: u64,
    length: u32,
    op: Op,
    structured: bool,
    /// What its buffer holds of the connection's bound and the budget.
    hold: Hold,
}

/// How one loop runs.
#[derive(Clone, Copy, Debug)]
pub struct LoopSettings {
    /// The loop's index among the server's loops (its [`DrainProgress`]).
    pub index: usize,
    /// The CPU the loop's queue is for (its NUMA node).
    pub cpu: u32,
    /// Depth of the loop's queue over the map.
    pub queue_depth: usize,
    /// After a turn with work, how long the loop keeps polling without
    /// sleeping before it blocks in the poller (see the module docs).
    pub idle_spin_ns: u64,
    /// A connection still in the handshake this long after it arrived
    /// is closed.
    pub handshake_timeout_ms: u64,
    /// How long a connection must have been idle to be closed for a new
    /// one at the server's maximum ([`crate::ServerConfig::evict_idle_ms`]).
    pub evict_idle_ms: u64,
}

/// One loop's state. See the module docs.
pub struct EventLoop {
    poll: Poll,
    events: Events,
    queue: DeviceQueue,
    export: Arc<Export>,
    shared: Arc<Shared>,
    incoming: Receiver<Arrival>,
    slots: Slab<Slot>,
    /// Requests at the map, under their I/O's `user_data`.
    requests: Slab<InFlight>,
    waiting: VecDeque<Io>,
    arrivals: Vec<Incoming>,
    completions: Vec<Completion>,
    active: Vec<u64>,
    /// Connections whose next request waits for room in the budget: read
    /// again every [`STARVED_RETRY`].
    starved: Vec<u64>,
    /// The list `active` is swapped with while a turn sends (see `turn`).
    sending: Vec<u64>,
    /// Requests refused and connections closed for their clients' faults,
    /// logged at most once a second each.
    refusals_log: LimitedLog,
    closes_log: LimitedLog,
    pool: BufferPool,
    idle_turns: u32,
    /// After work, poll without sleeping for this long before blocking.
    idle_spin_ns: u64,
    last_work_ns: u64,
    handshake_timeout_ms: u64,
    /// See [`LoopSettings::evict_idle_ms`].
    evict_idle_ms: u64,
    /// Some connection was in the handshake at the last scan (or arrived
    /// since): the loop wakes to scan again.
    handshaking: bool,
    next_scan_ns: u64,
    /// The server is shutting down: read nothing more (module docs).
    draining: bool,
    /// Where this loop says how far its drain is.
    progress: Arc<DrainProgress>,
    /// The loop's index among the server's loops.
    index: usize,
    /// I/Os waiting for a path, as last published.
    waiting_for_path: usize,
}

impl EventLoop {
    /// A loop for `cpu` over the map `device` serves (and any it serves
    /// later), taking new connections from `incoming` (announced through
    /// its waker).
    pub fn new(
        poll: Poll,
        device: &Arc<DeviceSlot>,
        settings: LoopSettings,
        export: Arc<Export>,
        shared: Arc<Shared>,
        incoming: Receiver<Arrival>,
    ) -> Self {
        let depth = settings.queue_depth;
        let progress = Arc::clone(&shared.drain[settings.index]);
        EventLoop {
            poll,
            events: Events::with_capacity(256),
            queue: device_queue(device, depth, settings.cpu),
            export,
            shared,
            incoming,
            slots: Slab::default(),
            requests: Slab::with_capacity(depth),
            waiting: VecDeque::with_capacity(depth),
            arrivals: Vec::with_capacity(64),
            completions: Vec::with_capacity(depth),
            active: Vec::with_capacity(64),
            starved: Vec::new(),
            sending: Vec::with_capacity(64),
            refusals_log: LimitedLog::default(),
            closes_log: LimitedLog::default(),
            pool: BufferPool::default(),
            idle_turns: 0,
            idle_spin_ns: settings.idle_spin_ns,
            last_work_ns: 0,
            handshake_timeout_ms: settings.handshake_timeout_ms,
            evict_idle_ms: settings.evict_idle_ms,
            handshaking: false,
            next_scan_ns: 0,
            draining: false,
            progress,
            index: settings.index,
            waiting_for_path: 0,
        }
    }

    /// Runs until the server stops; says what it left behind.
    pub fn run(mut self) -> LoopExit {
        loop {
            let busy = self.queue.in_flight() > 0 || !self.waiting.is_empty();
            let timeout = match (busy, self.idle_turns < SPIN_TURNS) {
                // Connections to read on (room freed by replies sent).
                _ if !self.active.is_empty() => Some(Duration::ZERO),
                // Connections waiting for room in the budget.
                _ if !self.starved.is_empty() => Some(STARVED_RETRY),
                (false, _) if now_ns().saturating_sub(self.last_work_ns) < self.idle_spin_ns => {
                    Some(Duration::ZERO)
                }
                (false, _) if self.handshaking => Some(SCAN_INTERVAL),
                (false, _) => None,
                (true, true) => Some(Duration::ZERO),
                (true, false) => Some(BUSY_SLEEP),
            };
            if let Err(error) = self.poll.poll(&mut self.events, timeout) {
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(%error, "event loop stops: poll failed");
                break;
            }
            // One clock read serves the turn's bookkeeping and submissions.
            let now = now_ns();
            if !self.events.is_empty() {
                self.last_work_ns = now;
            }
            let mut woken = false;
            for event in self.events.iter() {
                if event.token() == WAKER {
                    woken = true;
                    continue;
                }
                let key = event.token().0 as u64;
                let Some(slot) = self.slots.get_mut(key) else {
                    continue;
                };
                let connection = &mut slot.connection;
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    connection.readable = true;
                    slot.heard_ns = now;
                }
                if event.is_read_closed() || event.is_error() {
                    connection.peer_closed = true;
                }
                if event.is_writable() || event.is_write_closed() || event.is_error() {
                    connection.writable = true;
                }
                mark_active(&mut self.slots, &mut self.active, key);
            }
            if woken {
                // Acquire: pairs with the Release store in `Server::stop`.
                if self.shared.stop.load(Ordering::Acquire) {
                    break;
                }
                // Acquire: pairs with the Release store in
                // `Server::shutdown`.
                if !self.draining && self.shared.draining.load(Ordering::Acquire) {
                    self.start_draining();
                }
                self.adopt(now);
            }
            for key in std::mem::take(&mut self.starved) {
                mark_active(&mut self.slots, &mut self.active, key);
            }
            if self.handshaking && now >= self.next_scan_ns {
                self.next_scan_ns = now + SCAN_INTERVAL.as_nanos() as u64;
                self.time_out_handshakes(now);
            }
            self.turn(now);
            self.publish_waiting_for_path();
            if self.draining {
                self.publish_progress();
            }
        }
        self.shut_down()
    }

    /// Stops taking work (see the module docs): connections still in
    /// their handshake close now; the others are read no more.
    fn start_draining(&mut self) {
        self.draining = true;
        let in_handshake: Vec<u64> = self
            .slots
            .iter()
            .filter(|(_, slot)| slot.connection.in_handshake())
            .map(|(key, _)| key)
            .collect();
        for key in in_handshake {
            self.close(key);
        }
        self.handshaking = false;
    }

    /// Requests read and not yet answered in full, and I/Os at the map
    /// (or waiting for room in its queue), over this loop.
    fn left(&self) -> (usize, usize) {
        let unanswered = self
            .slots
            .iter()
            .map(|(_, slot)| slot.connection.unanswered())
            .sum();
        let at_map = self.requests.len();
        (unanswered, at_map)
    }

    /// Publishes how many I/Os wait for a path here, if that changed.
    fn publish_waiting_for_path(&mut self) {
        let waiting = self.queue.waiting_for_path();
        if waiting != self.waiting_for_path {
            self.waiting_for_path = waiting;
            // Relaxed: see `Shared::waiting_for_path`.
            self.shared.waiting_for_path[self.index].store(waiting, Ordering::Relaxed);
        }
    }

    fn publish_progress(&self) {
        let (unanswered, at_map) = self.left();
        self.progress.publish(unanswered, at_map);
    }

    /// Reads, submits (at `now`), completes and sends, once.
    fn turn(&mut self, now: u64) {
        if !self.draining {
            for at in 0..self.active.len() {
                let key = self.active[at];
                self.receive(key, now);
            }
        }
        let completed = self.complete();
        self.idle_turns = if completed > 0 {
            0
        } else {
            self.idle_turns + 1
        };
        // Swapped with a spare list (both keep their capacity): a
        // connection `send` marks active again (room freed, more to read)
        // goes on the fresh list, for the next turn.
        let mut sending = std::mem::take(&mut self.sending);
        std::mem::swap(&mut sending, &mut self.active);
        for &key in &sending {
            // A connection closed since it was listed is gone: no send.
            if let Some(slot) = self.slots.get_mut(key) {
                slot.active = false;
                self.send(key);
            }
        }
        sending.clear();
        self.sending = sending;
    }

    /// Ends the handshakes older than the limit; notes whether any
    /// connection is still in its handshake.
    fn time_out_handshakes(&mut self, now: u64) {
        let limit_ns = self.handshake_timeout_ms.saturating_mul(1_000_000);
        self.handshaking = false;
        for (key, slot) in self.slots.iter_mut() {
            let connection = &mut slot.connection;
            if !connection.in_handshake() || connection.ending().is_some() {
                continue;
            }
            if now.saturating_sub(slot.arrived_ns) >= limit_ns {
                connection.time_out(self.handshake_timeout_ms);
                if !slot.active {
                    slot.active = true;
                    self.active.push(key);
                }
            } else {
                self.handshaking = true;
            }
        }
    }

    /// Takes the connections the acceptor handed over (at `now`), making
    /// room for those it says the server is full for.
    fn adopt(&mut self, now: u64) {
        while let Ok(Arrival {
            mut stream,
            make_room,
        }) = self.incoming.try_recv()
        {
            if make_room && !self.draining && !self.evict_longest_idle(now) {
                // Counted before the client can see the close.
                Counters::add(&self.shared.counters.refused);
                drop(stream);
                self.shared.release_connection();
                self.closes_log.note(|| {
                    format!(
                        "connection refused: the server holds its maximum of {} connections, \
                         none idle for {} ms",
                        self.shared.max_connections, self.evict_idle_ms
                    )
                });
                continue;
            }
            if self.draining {
                // Accepted just before the listeners closed: not served.
                drop(stream);
                self.shared.release_connection();
                Counters::add(&self.shared.counters.closed);
                continue;
            }
            // The key is the poller's token: a slab index stays below
            // `u32::MAX`, so no key is the waker's `usize::MAX`.
            let key = self.slots.next_key();
            let registered = self.poll.registry().register(
                &mut stream,
                Token(key as usize),
                Interest::READABLE | Interest::WRITABLE,
            );
            if let Err(error) = registered {
                tracing::warn!(%error, "cannot watch a new connection; closed");
                self.shared.release_connection();
                continue;
            }
            let mut connection = Connection::new(stream, Arc::clone(&self.shared.budget));
            connection.writable = true;
            let inserted = self.slots.insert(Slot {
                connection,
                active: false,
                arrived_ns: now,
                heard_ns: now,
            });
            debug_assert_eq!(inserted, key);
            self.handshaking = true;
            mark_active(&mut self.slots, &mut self.active, key);
        }
    }

    /// Closes this loop's connection idle the longest, if one has been
    /// idle for [`LoopSettings::evict_idle_ms`] at `now` (see
    /// [`crate::acceptor`]); says whether it did.
    fn evict_longest_idle(&mut self, now: u64) -> bool {
        let idle_ns = self.evict_idle_ms.saturating_mul(1_000_000);
        let longest = self
            .slots
            .iter()
            .filter(|(_, slot)| {
                slot.connection.unanswered() == 0
                    && !slot.connection.has_output()
                    && now.saturating_sub(slot.heard_ns) >= idle_ns
            })
            .min_by_key(|(_, slot)| slot.heard_ns)
            .map(|(key, slot)| (key, now.saturating_sub(slot.heard_ns)));
        let Some((key, idle_ns)) = longest else {
            return false;
        };
        // Counted before the client can see the close.
        Counters::add(&self.shared.counters.evicted);
        self.close(key);
        self.closes_log.note(|| {
            format!(
                "closed a connection idle for {:?} to make room: the server holds its maximum \
                 of {} connections",
                Duration::from_nanos(idle_ns),
                self.shared.max_connections
            )
        });
        true
    }

    /// Reads connection `key` and submits its requests at `now`.
    fn receive(&mut self, key: u64, now: u64) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        let connection = &mut slot.connection;
        // Not `readable` alone: bytes already in the buffer are parsed
        // whether or not the socket has more.
        if connection.ending().is_some() {
            return;
        }
        let arrivals = &mut self.arrivals;
        let counters = &self.shared.counters;
        let refusals = &mut self.refusals_log;
        connection.receive(
            &self.export,
            &mut self.pool,
            &mut |incoming| arrivals.push(incoming),
            &mut |reason| {
                Counters::add(&counters.requests_refused);
                refusals.note(|| format!("request refused: {reason}"));
            },
        );
        if connection.is_starved() {
            self.starved.push(key);
        }
        let structured = connection.is_structured();
        let mut arrivals = std::mem::take(&mut self.arrivals);
        for incoming in arrivals.drain(..) {
            let request = InFlight {
                connection: key,
                cookie: incoming.cookie,
                offset: incoming.offset,
                length: incoming.length,
                op: incoming.op,
                structured,
                hold: incoming.hold,
            };
            let user_data = self.requests.insert(request);
            self.submit(
                Io {
                    user_data,
                    op: incoming.op,
                    offset: incoming.offset,
                    len: incoming.length,
                    buf: incoming.buf,
                    fua: incoming.fua,
                },
                now,
            );
        }
        self.arrivals = arrivals;
    }

    fn submit(&mut self, io: Io, now: u64) {
        if !self.waiting.is_empty() {
            self.waiting.push_back(io);
        } else if let Err(io) = self.queue.submit(io, now) {
            self.waiting.push_back(io);
        }
    }

    /// Polls the map, answers what completed and submits what waited for
    /// room. Returns how many I/Os completed.
    fn complete(&mut self) -> usize {
        let mut total = 0;
        loop {
            let now = now_ns();
            let mut completions = std::mem::take(&mut self.completions);
            let handed = self
                .queue
                .poll(now, &mut |completion| completions.push(completion));
            for completion in completions.drain(..) {
                self.finish(completion);
            }
            self.completions = completions;
            total += handed;
            // One shared add per batch, not per I/O: every loop writes
            // this counter's cache line.
            if handed > 0 {
                Counters::add_many(&self.shared.counters.requests_completed, handed as u64);
            }
            while let Some(io) = self.waiting.pop_front() {
                if let Err(io) = self.queue.submit(io, now) {
                    self.waiting.push_front(io);
                    break;
                }
            }
            // Completions freed room and waiting I/O went in: the map may
            // have finished it already (null and memory paths do).
            if handed == 0 || self.queue.in_flight() == 0 {
                return total;
            }
        }
    }

    /// Answers one completed I/O.
    fn finish(&mut self, completion: Completion) {
        let request = self
            .requests
            .remove(completion.user_data)
            .expect("a completion answers a request at the map");
        let connection = match self.slots.get_mut(request.connection) {
            Some(slot) => &mut slot.connection,
            None => {
                Counters::add(&self.shared.counters.replies_dropped);
                self.shared.budget.release(request.hold);
                self.pool.give(completion.buf);
                return;
            }
        };
        let is_read = request.op == Op::Read;
        let (header, data) = match completion.result {
            Ok(()) if is_read => (
                ReplyHeader::read(
                    request.cookie,
                    request.structured,
                    request.offset,
                    request.length,
                ),
                Some(completion.buf),
            ),
            Ok(()) => {
                self.pool.give(completion.buf);
                (ReplyHeader::done(request.cookie), None)
            }
            Err(error) => {
                self.pool.give(completion.buf);
                let error = nbd_error(error);
                let structured_read = request.structured && is_read;
                (
                    ReplyHeader::error(request.cookie, structured_read, error),
                    None,
                )
            }
        };
        connection.reply(header, data, request.hold, &mut self.pool);
        mark_active(&mut self.slots, &mut self.active, request.connection);
    }

    /// Sends connection `key`'s replies; closes it if it is finished or
    /// broken.
    fn send(&mut self, key: u64) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        let connection = &mut slot.connection;
        if connection.has_output() {
            connection.send(&mut self.pool);
        }
        if connection.is_broken() || connection.is_done() {
            self.close(key);
        } else if !self.draining && connection.wants_to_read() {
            // Replies going out made room under its bounds: read on at the
            // next turn (which does not wait: `active` is not empty).
            mark_active(&mut self.slots, &mut self.active, key);
        }
    }

    fn close(&mut self, key: u64) {
        let Some(Slot { mut connection, .. }) = self.slots.remove(key) else {
            return;
        };
        match connection.ending() {
            None | Some(Ending::Finished) => {}
            Some(ending) => {
                Counters::add(&self.shared.counters.protocol_errors);
                self.closes_log
                    .note(|| format!("connection closed: {ending}"));
            }
        }
        // The socket closes when dropped; a failed deregistration only
        // means it is already gone from the poller.
        let _ = self.poll.registry().deregister(&mut connection.stream);
        connection.recycle(&mut self.pool);
        self.shared.release_connection();
        Counters::add(&self.shared.counters.closed);
    }

    /// Closes every connection and waits, until the server's exit time,
    /// for the map to finish what is in flight; says what was left.
    fn shut_down(mut self) -> LoopExit {
        let (unanswered, _) = self.left();
        let keys: Vec<u64> = self.slots.iter().map(|(key, _)| key).collect();
        let connections_closed = keys.len();
        for key in keys {
            self.close(key);
        }
        // Waiting for room in the queue: counted in `unanswered`.
        for io in self.waiting.drain(..) {
            self.pool.give(io.buf);
        }
        // Relaxed: the exit time was stored before `stop` (Release), whose
        // Acquire load brought the loop here (or the poller failed, and
        // any exit time will do).
        let exit_by_ns = self.shared.exit_by_ns.load(Ordering::Relaxed);
        while self.queue.in_flight() > 0 && now_ns() < exit_by_ns {
            self.queue.poll(now_ns(), &mut |_| {});
            std::thread::sleep(Duration::from_micros(100));
        }
        LoopExit {
            unanswered,
            left_at_map: self.queue.in_flight(),
            connections_closed,
        }
    }
}

fn mark_active(slots: &mut Slab<Slot>, active: &mut Vec<u64>, key: u64) {
    let Some(slot) = slots.get_mut(key) else {
        return;
    };
    if !slot.active {
        slot.active = true;
        active.push(key);
    }
}
