//! One event loop: a thread with its own poller and its own connections,
//! serving every export of its engine ([`crate::engine`]). For each export
//! it has served a connection of, it keeps its own [`DeviceQueue`] over
//! the export's device (the core's per-thread queue, which follows the
//! device's map across reloads), made when that export's first connection
//! reached the loop: no lock shared with the other loops on the I/O path,
//! and nothing held for an export no client of this loop uses.
//!
//! Each turn: wait for socket events (while a map holds I/O, only as long
//! as its queues and the pace all I/O loops share allow:
//! [`mpio_io_loop::Pace`]), read every ready connection and submit what
//! it asked to its export's queue, poll the queues with I/O at their maps
//! for every completion, then send each touched connection's replies in
//! one vectored write. Requests of one connection complete in whatever
//! order the map finishes them. Only queues with I/O at their maps (and
//! those told of a reload) are polled, so an idle export costs a loop
//! nothing per turn.
//!
//! # Polling before sleeping
//! After a turn with work the loop polls its sockets without sleeping for
//! [`crate::EngineConfig::idle_spin_us`] (25 µs by default) before it blocks: a
//! client that answers a batch of replies with its next requests within
//! that time finds the loop awake, saving a sleep and a wake-up per
//! batch (qemu's adaptive `poll-max-ns` does the same). A loop with no
//! client traffic stops spinning after that time; 0 turns it off.
//!
//! # Bounds
//! When an export's queue holds its depth of I/Os, further requests wait
//! in the loop (in arrival order) until completions free slots; each
//! connection bounds what it has at the map
//! ([`crate::connection::MAX_IN_FLIGHT`]). For a while after a reload the
//! queue holds more than its depth (the old map's I/O finishing beside up
//! to `depth` new ones; see [`mpio_core::ReloadingQueue`]); the connections'
//! bounds still hold. A connection still in its handshake its export's
//! [`crate::ServerConfig::handshake_timeout_ms`] after it arrived is
//! closed (checked every 100 ms while any is). That time is the loop's
//! own: a gap between two checks counts for at most 200 ms, so a loop
//! kept off the CPU past the deadline (a stalled host) first reads what
//! its clients sent meanwhile instead of closing their handshakes unread.
//! At an export's maximum
//! a new connection takes the place of the loop's connection to that
//! export idle the longest ([`crate::acceptor`]), so idle clients cannot
//! hold an export's connection slots.
//!
//! # Draining and stopping an export
//! When an export shuts down ([`crate::Server::shutdown`]) each loop is
//! told to drain it: it closes the export's connections still in their
//! handshake, drops new ones, and reads no more from its clients (a
//! request counts as read once its header, and a WRITE's payload, has
//! been parsed; bytes behind it stay unread). Everything read is still
//! completed and answered. Each turn it publishes what is left
//! ([`crate::shutdown::DrainProgress`]) for the server to wait on. When the export is then
//! stopped, the loop closes its connections and keeps polling its queue,
//! beside its other exports' work, until the map has handed back every
//! I/O or the stop's exit time passed; then it reports ([`LoopExit`]) and
//! forgets the export.
//!
//! # Clients that vanish
//! A connection whose socket or protocol fails is closed at once; it
//! leaves the loop's [`Slab`] of connections, so the key its I/O still in
//! flight carries finds no connection, and those completions are dropped
//! (their buffers reused).

use crate::budget::Hold;
use crate::connection::{Connection, Ending, Incoming};
use crate::export::nbd_error;
use crate::log_limit::LimitedLog;
use crate::loop_message::{Arrival, LoopMessage};
use crate::pool::BufferPool;
use crate::reply::ReplyHeader;
use crate::shutdown::LoopExit;
use crate::stats::Counters;
use crate::Shared;
use mio::{Events, Interest, Poll, Token, Waker};
use mpio_core::io::{Completion, Io, Op};
use mpio_core::Slab;
use mpio_io_loop::{Heartbeat, HostedLoop, Pace, Rest, Step};
use mpio_transport::clock::now_ns;
use mpio_transport::{device_queue, DeviceQueue};
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

mod ending;
use ending::Stopping;

/// The token of the loop's waker (messages).
pub(crate) const WAKER: Token = Token(usize::MAX);
/// How often a loop with connections in their handshake checks their age.
const SCAN_INTERVAL: Duration = Duration::from_millis(100);
/// The most one gap between two handshake scans adds to a connection's
/// handshake time: twice the interval, so a loop that runs late by less
/// than a scan still counts wall time, and one that did not run at all
/// counts a scan's worth.
const MAX_SCAN_GAP_NS: u64 = 2 * SCAN_INTERVAL.as_nanos() as u64;
/// How often a connection whose next request waits for room in its
/// export's budget ([`crate::budget`]) tries again.
pub(crate) const STARVED_RETRY: Duration = Duration::from_millis(1);

/// A connection of the loop, under its key in the loop's slab (also its
/// poller token).
#[derive(Debug)]
struct Slot {
    connection: Connection,
    /// The key of its export in the loop's `exports`.
    export: u64,
    /// On the `active` list (to be read and sent this turn).
    active: bool,
    /// The handshake time counted so far (see `time_out_handshakes`).
    handshake_ns: u64,
    /// Up to when `handshake_ns` is counted.
    counted_ns: u64,
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

/// One export as this loop serves it.
struct LoopExport {
    shared: Arc<Shared>,
    queue: DeviceQueue,
    /// Requests at the map, under their I/O's `user_data`.
    requests: Slab<InFlight>,
    /// Requests waiting for room in the queue.
    waiting: VecDeque<Io>,
    /// On the loop's `busy` list (its queue is polled each turn).
    busy: bool,
    /// Draining: read nothing more (module docs).
    draining: bool,
    /// Stopping: report to `done` once the map handed back every I/O or
    /// the exit time passed.
    stopping: Option<Stopping>,
    /// I/Os waiting for a path, as last published.
    waiting_for_path: usize,
}

impl LoopExport {
    /// Requests read and not yet answered in full (over `slots`, this
    /// export's connections), and I/Os at the map or waiting for room.
    fn left(&self, key: u64, slots: &Slab<Slot>) -> (usize, usize) {
        let unanswered = slots
            .iter()
            .filter(|(_, slot)| slot.export == key)
            .map(|(_, slot)| slot.connection.unanswered())
            .sum();
        (unanswered, self.requests.len())
    }

    fn has_io(&self) -> bool {
        self.queue.in_flight() > 0 || !self.waiting.is_empty()
    }
}

/// How one loop runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoopSettings {
    /// The loop's index among the engine's loops (its entry in each
    /// export's per-loop progress and gauges).
    pub(crate) index: usize,
    /// The CPU the loop runs on (its queues' CPU and NUMA node).
    pub(crate) cpu: u32,
    /// After a turn with work, how long the loop keeps polling without
    /// sleeping before it blocks in the poller (see the module docs).
    pub(crate) idle_spin_ns: u64,
}

/// One loop's state. See the module docs. Its engine runs it on a thread
/// of its own, or hands it to a host thread
/// ([`crate::Engine::start_hosted`]) as a [`HostedLoop`]: the host waits
/// on the loop's poller beside its own work and takes the loop's turns
/// when it is readable or its wait hint has passed.
pub(crate) struct EventLoop {
    poll: Poll,
    /// Its waker (the engine holds it too), kept open for as long as the
    /// loop lives: the poller drops a closed eventfd together with any
    /// event pending on it, so a quit its engine sends just before letting
    /// go of the waker would otherwise never wake a hosted loop.
    _waker: Arc<Waker>,
    events: Events,
    settings: LoopSettings,
    incoming: Receiver<LoopMessage>,
    /// The exports served, under loop-local keys.
    exports: Slab<LoopExport>,
    /// Export id to its key in `exports`.
    export_keys: HashMap<u64, u64>,
    /// Keys of the exports whose queues are polled each turn: those with
    /// I/O at the map or waiting, and those told to follow a reload.
    busy: Vec<u64>,
    /// The list `busy` is swapped with while a turn polls.
    polling: Vec<u64>,
    /// Keys of the exports draining or stopping.
    ending: Vec<u64>,
    slots: Slab<Slot>,
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
    /// Turns without a completion, for the wait while I/O is at the maps.
    pace: Pace,
    /// Beaten once per turn, for the daemon's watchdog (read only for a
    /// loop on its own thread: a host's thread beats its own).
    heartbeat: Arc<Heartbeat>,
    last_work_ns: u64,
    /// Some connection was in the handshake at the last scan (or arrived
    /// since): the loop wakes to scan again.
    handshaking: bool,
    next_scan_ns: u64,
}

impl AsRawFd for EventLoop {
    /// The loop's poller (an epoll descriptor): readable when a socket or
    /// message waits for the loop.
    fn as_raw_fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }
}

impl std::fmt::Debug for EventLoop {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("EventLoop")
            .field("index", &self.settings.index)
            .field("cpu", &self.settings.cpu)
            .finish_non_exhaustive()
    }
}

impl HostedLoop for EventLoop {
    /// The CPU the loop serves (its queues are told it).
    fn cpu(&self) -> u32 {
        self.settings.cpu
    }

    /// How long the loop's next turn may wait for socket events: `None`
    /// for as long as it takes, zero while it has work to poll.
    fn wait_hint(&mut self) -> Option<Duration> {
        let busy = !self.busy.is_empty();
        match busy {
            // Connections to read on (room freed by replies sent).
            _ if !self.active.is_empty() => Some(Duration::ZERO),
            // Connections waiting for room in the budget.
            _ if !self.starved.is_empty() => Some(STARVED_RETRY),
            // I/O at the maps: as its queues and the pace say.
            true => {
                let rest = self.rest();
                Some(self.pace.wait(rest).bound())
            }
            false if now_ns().saturating_sub(self.last_work_ns) < self.settings.idle_spin_ns => {
                Some(Duration::ZERO)
            }
            false if self.handshaking => Some(SCAN_INTERVAL),
            false => None,
        }
    }

    /// One turn: waits at most `timeout` for socket events, then reads,
    /// submits, completes and sends. Says whether the loop goes on.
    fn step(&mut self, timeout: Option<Duration>) -> Step {
        if timeout.is_none() {
            self.heartbeat.idle();
        }
        let polled = self.poll.poll(&mut self.events, timeout);
        self.heartbeat.beat();
        if let Err(error) = polled {
            if error.kind() == std::io::ErrorKind::Interrupted {
                return Step::Goes;
            }
            tracing::error!(%error, "event loop stops: poll failed");
            return Step::Ends;
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
        if woken && self.read_messages(now) {
            return Step::Ends;
        }
        // Drained, not taken: the list keeps its capacity for the next
        // starved connection instead of allocating again.
        for key in self.starved.drain(..) {
            mark_active(&mut self.slots, &mut self.active, key);
        }
        if self.handshaking && now >= self.next_scan_ns {
            self.next_scan_ns = now + SCAN_INTERVAL.as_nanos() as u64;
            self.time_out_handshakes(now);
        }
        self.turn(now);
        if !self.ending.is_empty() {
            self.publish_endings();
        }
        Step::Goes
    }

    fn quit(self: Box<Self>) {
        EventLoop::quit(*self);
    }
}

impl EventLoop {
    /// A loop with no export yet, taking its messages from `incoming`
    /// (announced through its waker).
    pub(crate) fn new(
        poll: Poll,
        waker: Arc<Waker>,
        settings: LoopSettings,
        incoming: Receiver<LoopMessage>,
    ) -> Self {
        EventLoop {
            poll,
            _waker: waker,
            events: Events::with_capacity(256),
            settings,
            incoming,
            exports: Slab::default(),
            export_keys: HashMap::new(),
            busy: Vec::with_capacity(64),
            polling: Vec::with_capacity(64),
            ending: Vec::new(),
            slots: Slab::default(),
            arrivals: Vec::with_capacity(64),
            completions: Vec::with_capacity(256),
            active: Vec::with_capacity(64),
            starved: Vec::new(),
            sending: Vec::with_capacity(64),
            refusals_log: LimitedLog::default(),
            closes_log: LimitedLog::default(),
            pool: BufferPool::default(),
            pace: Pace::default(),
            heartbeat: Arc::default(),
            last_work_ns: 0,
            handshaking: false,
            next_scan_ns: 0,
        }
    }

    /// Runs until told to quit.
    pub(crate) fn run(mut self) {
        loop {
            let hint = self.wait_hint();
            if self.step(hint) == Step::Ends {
                break;
            }
        }
        self.quit();
    }

    /// The loop's heartbeat, beaten once per turn.
    pub(crate) fn heartbeat(&self) -> Arc<Heartbeat> {
        Arc::clone(&self.heartbeat)
    }

    /// What the busy exports' queues say together about the loop resting
    /// ([`mpio_transport::DeviceQueue::rest`]). The loop opens its queues
    /// without a waker (its poller watches sockets), so they say
    /// [`Rest::Poll`] and the pace alone decides.
    fn rest(&mut self) -> Rest {
        let exports = &mut self.exports;
        Rest::of(
            self.busy
                .iter()
                .filter_map(|&key| Some(exports.get_mut(key)?.queue.rest())),
        )
    }

    /// Acts on the loop's messages; true when told to quit.
    fn read_messages(&mut self, now: u64) -> bool {
        while let Ok(message) = self.incoming.try_recv() {
            match message {
                LoopMessage::Arrival(arrival) => self.adopt(arrival, now),
                LoopMessage::Follow(id) => {
                    if let Some(&key) = self.export_keys.get(&id) {
                        mark_busy(&mut self.exports, &mut self.busy, key);
                    }
                }
                LoopMessage::Drain(shared) => self.drain(&shared),
                LoopMessage::Stop {
                    export,
                    exit_by_ns,
                    done,
                } => self.stop(export, exit_by_ns, done),
                LoopMessage::Quit => return true,
            }
        }
        false
    }

    /// Reads, submits (at `now`), completes and sends, once.
    fn turn(&mut self, now: u64) {
        for at in 0..self.active.len() {
            let key = self.active[at];
            self.receive(key, now);
        }
        let completed = self.complete();
        self.pace.turned(completed > 0);
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

    /// Ends the handshakes older than their export's limit; notes whether
    /// any connection is still in its handshake. A handshake's age is the
    /// time since it was last counted, at most [`MAX_SCAN_GAP_NS`] a
    /// scan: the scan runs before the turn that reads the sockets, so a
    /// loop that was not running must not judge clients by time it could
    /// not hear them in.
    fn time_out_handshakes(&mut self, now: u64) {
        self.handshaking = false;
        for (key, slot) in self.slots.iter_mut() {
            let connection = &mut slot.connection;
            if !connection.in_handshake() || connection.ending().is_some() {
                continue;
            }
            let limit_ms = self.exports[slot.export].shared.handshake_timeout_ms;
            let gap = now.saturating_sub(slot.counted_ns).min(MAX_SCAN_GAP_NS);
            slot.handshake_ns += gap;
            slot.counted_ns = now;
            if slot.handshake_ns >= limit_ms.saturating_mul(1_000_000) {
                connection.time_out(limit_ms);
                if !slot.active {
                    slot.active = true;
                    self.active.push(key);
                }
            } else {
                self.handshaking = true;
            }
        }
    }

    /// The key of export `shared` here, making its entry (and its queue
    /// over the export's device) at its first connection.
    fn export_key(&mut self, shared: &Arc<Shared>) -> u64 {
        if let Some(&key) = self.export_keys.get(&shared.id) {
            return key;
        }
        let depth = shared.queue_depth;
        let key = self.exports.insert(LoopExport {
            shared: Arc::clone(shared),
            queue: device_queue(&shared.device, depth, self.settings.cpu),
            requests: Slab::with_capacity(depth),
            waiting: VecDeque::with_capacity(depth),
            busy: false,
            draining: false,
            stopping: None,
            waiting_for_path: 0,
        });
        self.export_keys.insert(shared.id, key);
        key
    }

    /// Takes a connection the acceptor handed over (at `now`), making
    /// room for it if the acceptor says its export is full.
    fn adopt(&mut self, arrival: Arrival, now: u64) {
        let Arrival {
            export: shared,
            mut stream,
            make_room,
        } = arrival;
        // Acquire: pairs with the Release store in `Server::shutdown`.
        let draining = shared.draining.load(Ordering::Acquire)
            || self
                .export_keys
                .get(&shared.id)
                .is_some_and(|&key| self.exports[key].draining);
        if draining {
            // Accepted just before the listeners closed: not served.
            drop(stream);
            shared.release_connection();
            Counters::add(&shared.counters.closed);
            return;
        }
        let export = self.export_key(&shared);
        if make_room && !self.evict_longest_idle(export, now) {
            // Counted before the client can see the close.
            Counters::add(&shared.counters.refused);
            drop(stream);
            shared.release_connection();
            self.closes_log.note(|| {
                format!(
                    "connection refused: export {} holds its maximum of {} connections, none \
                     idle for {} ms",
                    shared.export.name, shared.max_connections, shared.evict_idle_ms
                )
            });
            return;
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
            shared.release_connection();
            return;
        }
        let mut connection = Connection::new(stream, Arc::clone(&shared.budget));
        connection.writable = true;
        let inserted = self.slots.insert(Slot {
            connection,
            export,
            active: false,
            handshake_ns: 0,
            counted_ns: now,
            heard_ns: now,
        });
        debug_assert_eq!(inserted, key);
        self.handshaking = true;
        mark_active(&mut self.slots, &mut self.active, key);
    }

    /// Closes this loop's connection to export `export` idle the longest,
    /// if one has been idle for the export's
    /// [`crate::ServerConfig::evict_idle_ms`] at `now` (see
    /// [`crate::acceptor`]); says whether it did.
    fn evict_longest_idle(&mut self, export: u64, now: u64) -> bool {
        let shared = Arc::clone(&self.exports[export].shared);
        let idle_ns = shared.evict_idle_ms.saturating_mul(1_000_000);
        let longest = self
            .slots
            .iter()
            .filter(|(_, slot)| {
                slot.export == export
                    && slot.connection.unanswered() == 0
                    && !slot.connection.has_output()
                    && now.saturating_sub(slot.heard_ns) >= idle_ns
            })
            .min_by_key(|(_, slot)| slot.heard_ns)
            .map(|(key, slot)| (key, now.saturating_sub(slot.heard_ns)));
        let Some((key, idle_ns)) = longest else {
            return false;
        };
        // Counted before the client can see the close.
        Counters::add(&shared.counters.evicted);
        self.close(key);
        self.closes_log.note(|| {
            format!(
                "closed a connection idle for {:?} to make room: export {} holds its maximum \
                 of {} connections",
                Duration::from_nanos(idle_ns),
                shared.export.name,
                shared.max_connections
            )
        });
        true
    }

    /// Reads connection `key` and submits its requests at `now`.
    fn receive(&mut self, key: u64, now: u64) {
        let Some(slot) = self.slots.get_mut(key) else {
            return;
        };
        let export = &mut self.exports[slot.export];
        let connection = &mut slot.connection;
        // Not `readable` alone: bytes already in the buffer are parsed
        // whether or not the socket has more.
        if export.draining || connection.ending().is_some() {
            return;
        }
        let arrivals = &mut self.arrivals;
        let counters = &export.shared.counters;
        let refusals = &mut self.refusals_log;
        let device = &export.shared.device;
        connection.receive(
            &export.shared.export,
            // The map's size now: `mpio resize` may have grown it.
            &|| device.map().size_bytes(),
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
        if self.arrivals.is_empty() {
            return;
        }
        let structured = connection.is_structured();
        let export_key = slot.export;
        for incoming in self.arrivals.drain(..) {
            let request = InFlight {
                connection: key,
                cookie: incoming.cookie,
                offset: incoming.offset,
                length: incoming.length,
                op: incoming.op,
                structured,
                hold: incoming.hold,
            };
            let user_data = export.requests.insert(request);
            let io = Io {
                user_data,
                op: incoming.op,
                offset: incoming.offset,
                len: incoming.length,
                buf: incoming.buf,
                fua: incoming.fua,
            };
            if !export.waiting.is_empty() {
                export.waiting.push_back(io);
            } else if let Err(io) = export.queue.submit(io, now) {
                export.waiting.push_back(io);
            }
        }
        mark_busy(&mut self.exports, &mut self.busy, export_key);
    }

    /// Polls the busy exports' maps, answers what completed and submits
    /// what waited for room. Returns how many I/Os completed.
    fn complete(&mut self) -> usize {
        let mut total = 0;
        let mut polling = std::mem::take(&mut self.polling);
        std::mem::swap(&mut polling, &mut self.busy);
        for &key in &polling {
            total += self.complete_export(key);
            let Some(export) = self.exports.get_mut(key) else {
                continue;
            };
            let waiting = export.queue.waiting_for_path();
            if waiting != export.waiting_for_path {
                export.waiting_for_path = waiting;
                // Relaxed: see `Shared::waiting_for_path`.
                export.shared.waiting_for_path[self.settings.index]
                    .store(waiting, Ordering::Relaxed);
            }
            export.busy = false;
            if export.has_io() {
                mark_busy(&mut self.exports, &mut self.busy, key);
            }
        }
        polling.clear();
        self.polling = polling;
        total
    }

    /// Polls export `key`'s map until it hands back nothing more.
    fn complete_export(&mut self, key: u64) -> usize {
        let mut total = 0;
        loop {
            let now = now_ns();
            let mut completions = std::mem::take(&mut self.completions);
            let Some(export) = self.exports.get_mut(key) else {
                return total;
            };
            let handed = export
                .queue
                .poll(now, &mut |completion| completions.push(completion));
            for completion in completions.drain(..) {
                self.finish(key, completion);
            }
            self.completions = completions;
            total += handed;
            let export = &mut self.exports[key];
            // One shared add per batch, not per I/O: every loop writes
            // this counter's cache line.
            if handed > 0 {
                Counters::add_many(&export.shared.counters.requests_completed, handed as u64);
            }
            while let Some(io) = export.waiting.pop_front() {
                if let Err(io) = export.queue.submit(io, now) {
                    export.waiting.push_front(io);
                    break;
                }
            }
            // Completions freed room and waiting I/O went in: the map may
            // have finished it already (null and memory paths do).
            if handed == 0 || export.queue.in_flight() == 0 {
                return total;
            }
        }
    }

    /// Answers one I/O export `export` completed.
    fn finish(&mut self, export: u64, completion: Completion) {
        let export = &mut self.exports[export];
        let request = export
            .requests
            .remove(completion.user_data)
            .expect("a completion answers a request at the map");
        let connection = match self.slots.get_mut(request.connection) {
            Some(slot) => &mut slot.connection,
            None => {
                Counters::add(&export.shared.counters.replies_dropped);
                export.shared.budget.release(request.hold);
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
        let draining = self.exports[slot.export].draining;
        let connection = &mut slot.connection;
        if connection.has_output() {
            connection.send(&mut self.pool);
        }
        if connection.is_broken() || connection.is_done() {
            self.close(key);
        } else if !draining && connection.wants_to_read() {
            // Replies going out made room under its bounds: read on at the
            // next turn (which does not wait: `active` is not empty).
            mark_active(&mut self.slots, &mut self.active, key);
        }
    }

    fn close(&mut self, key: u64) {
        let Some(Slot {
            mut connection,
            export,
            ..
        }) = self.slots.remove(key)
        else {
            return;
        };
        let shared = &self.exports[export].shared;
        match connection.ending() {
            None | Some(Ending::Finished) => {}
            Some(ending) => {
                Counters::add(&shared.counters.protocol_errors);
                self.closes_log
                    .note(|| format!("connection closed: {ending}"));
            }
        }
        // The socket closes when dropped; a failed deregistration only
        // means it is already gone from the poller.
        let _ = self.poll.registry().deregister(&mut connection.stream);
        connection.recycle(&mut self.pool);
        shared.release_connection();
        Counters::add(&shared.counters.closed);
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

fn mark_busy(exports: &mut Slab<LoopExport>, busy: &mut Vec<u64>, key: u64) {
    let Some(export) = exports.get_mut(key) else {
        return;
    };
    if !export.busy {
        export.busy = true;
        busy.push(key);
    }
}
