//! The engine: one acceptor thread and a fixed set of event loops, one per
//! CPU by default and each pinned to its CPU, that serve every export
//! started on it ([`crate::Server::start_on`]), so a daemon with a
//! thousand exports runs as many threads as one with one.
//!
//! # Ownership
//! The engine owns its threads; each [`crate::Server`] on it holds the
//! engine (an `Arc`) and its own export's state ([`crate::Shared`]), and
//! speaks to the threads by message: the acceptor is told to listen for
//! an export and to stop listening for it; each loop is told when an
//! export reloads, drains and stops. A loop keeps, per export it serves,
//! its own queue over the export's map, made when the export's first
//! connection reaches that loop ([`crate::event_loop`]). The threads end
//! when the engine is dropped, that is when its last server and its
//! owner let go of it.
//!
//! # Hosted loops
//! [`Engine::start_hosted`] makes the loops without threads, for another
//! per-CPU thread set to run as [`HostedLoop`]s (the contract is
//! `mpio_io_loop`'s): the daemon hands them to its ublk threads, so a
//! daemon with ublk and NBD exports runs one I/O thread per CPU, not
//! two. Such a thread waits on its own work and on the loop's poller
//! together and takes the loop's turns when the poller is readable or
//! the loop's wait hint has passed.
//!
//! # Failure
//! A thread that cannot start fails [`Engine::start`]. A loop or acceptor
//! that panics is reported when the engine joins it; the daemon's panic
//! policy stops the process at the panic itself.

use crate::acceptor::{self, AcceptorMessage, Listener};
use crate::event_loop::{self, EventLoop, LoopSettings};
use crate::loop_message::{LoopInbox, LoopMessage};
use crate::shutdown::LoopExit;
use crate::Shared;
use mio::{Poll, Waker};
use mpio_io_loop::{Heartbeat, HostedLoop};
use mpio_transport::lock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How an engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Event loops; 0 means one per available CPU.
    pub loops: usize,
    /// After work, how long (µs) an event loop polls before sleeping;
    /// 0: sleep at once. See `crate::event_loop`.
    pub idle_spin_us: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            loops: 0,
            idle_spin_us: 25,
        }
    }
}

/// The loops [`Engine::start_hosted`] makes, one per CPU it was given,
/// for a host to run.
pub type HostedLoops = Vec<Box<dyn HostedLoop>>;

/// A running engine; see the module docs. Stops its threads when dropped.
#[derive(Debug)]
pub struct Engine {
    loops: Vec<LoopInbox>,
    acceptor: Sender<AcceptorMessage>,
    acceptor_waker: Arc<Waker>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The heartbeats of the loops on the engine's own threads.
    heartbeats: Vec<Arc<Heartbeat>>,
    /// The next export's id. Relaxed: ids need only be unique.
    next_export: AtomicU64,
}

impl Engine {
    /// Starts the acceptor and the event loops. Loop `i` runs on CPU
    /// `i` modulo the CPUs the process may use, pinned there, and tells
    /// its queues that CPU (for the `io-affinity` and `numa` selectors).
    ///
    /// # Errors
    /// A poller or a thread that cannot be created.
    pub fn start(config: &EngineConfig) -> std::io::Result<Arc<Engine>> {
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let count = match config.loops {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            count => count,
        };
        let mut threads = Vec::with_capacity(count + 1);
        let mut loops = Vec::with_capacity(count);
        let mut heartbeats = Vec::with_capacity(count);
        for index in 0..count {
            let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
            let cpu = core.map_or(index as u32, |core| core.id as u32);
            let spawned = new_loop(index, cpu, config).and_then(|(event_loop, inbox)| {
                heartbeats.push(event_loop.heartbeat());
                let thread = std::thread::Builder::new()
                    .name(format!("mpio-serve-{index}"))
                    .spawn(move || {
                        if let Some(core) = core {
                            core_affinity::set_for_current(core);
                        }
                        event_loop.run();
                    })?;
                Ok((thread, inbox))
            });
            match spawned {
                Ok((thread, inbox)) => {
                    threads.push(thread);
                    loops.push(inbox);
                }
                Err(error) => {
                    stop_loops(&loops, threads);
                    return Err(error);
                }
            }
        }
        Engine::with_loops(loops, threads, heartbeats)
    }

    /// Starts the acceptor and makes one event loop for each CPU of
    /// `cpus`, for the caller to run on threads of its own (each pinned to
    /// its loop's CPU) beside other work, as [`HostedLoop`] says. The
    /// engine tells each loop to quit when it is dropped; its next turn
    /// then says so.
    ///
    /// # Errors
    /// A poller or the acceptor's thread that cannot be created.
    pub fn start_hosted(
        config: &EngineConfig,
        cpus: &[u32],
    ) -> std::io::Result<(Arc<Engine>, HostedLoops)> {
        let mut event_loops: HostedLoops = Vec::with_capacity(cpus.len());
        let mut loops = Vec::with_capacity(cpus.len());
        for (index, &cpu) in cpus.iter().enumerate() {
            let (event_loop, inbox) = new_loop(index, cpu, config)?;
            event_loops.push(Box::new(event_loop));
            loops.push(inbox);
        }
        Ok((
            Engine::with_loops(loops, Vec::new(), Vec::new())?,
            event_loops,
        ))
    }

    /// Starts the acceptor for `loops` (whose `threads`, if any, the
    /// engine joins when dropped, and whose `heartbeats` it shows).
    fn with_loops(
        loops: Vec<LoopInbox>,
        mut threads: Vec<JoinHandle<()>>,
        heartbeats: Vec<Arc<Heartbeat>>,
    ) -> std::io::Result<Arc<Engine>> {
        let started = Poll::new().and_then(|poll| {
            let waker = Arc::new(Waker::new(poll.registry(), acceptor::WAKER)?);
            let (sender, receiver) = mpsc::channel();
            let inboxes = loops.clone();
            let thread = std::thread::Builder::new()
                .name("mpio-serve-accept".into())
                .spawn(move || acceptor::run(poll, inboxes, receiver))?;
            Ok((thread, sender, waker))
        });
        let (thread, acceptor, acceptor_waker) = match started {
            Ok(started) => started,
            Err(error) => {
                stop_loops(&loops, threads);
                return Err(error);
            }
        };
        threads.push(thread);
        Ok(Arc::new(Engine {
            loops,
            acceptor,
            acceptor_waker,
            threads: Mutex::new(threads),
            heartbeats,
            next_export: AtomicU64::new(1),
        }))
    }

    /// The event loops' count.
    pub fn loop_count(&self) -> usize {
        self.loops.len()
    }

    /// The threads the engine runs itself: its acceptor, and its loops
    /// unless a host runs them ([`Engine::start_hosted`]).
    pub fn thread_count(&self) -> usize {
        lock(&self.threads).len()
    }

    /// The heartbeats of the loops on the engine's own threads, each
    /// beaten once per turn (none for hosted loops: their host's threads
    /// beat their own).
    pub fn heartbeats(&self) -> &[Arc<Heartbeat>] {
        &self.heartbeats
    }

    /// A fresh export id.
    pub(crate) fn export_id(&self) -> u64 {
        // Relaxed: see `next_export`.
        self.next_export.fetch_add(1, Ordering::Relaxed)
    }

    /// Tells the acceptor to accept on `listeners` for `export`.
    pub(crate) fn listen(&self, export: Arc<Shared>, listeners: Vec<Listener>) {
        self.tell_acceptor(AcceptorMessage::Listen { export, listeners });
    }

    /// Closes `export`'s listeners; returns once the acceptor dropped them
    /// (a client connecting after that is refused by the kernel).
    pub(crate) fn close_listeners(&self, export: u64) {
        let (done, closed) = mpsc::channel();
        self.tell_acceptor(AcceptorMessage::Close { export, done });
        // An error means the acceptor is gone, and its listeners with it.
        let _ = closed.recv();
    }

    fn tell_acceptor(&self, message: AcceptorMessage) {
        if self.acceptor.send(message).is_err() {
            tracing::error!("the acceptor is gone");
            return;
        }
        if let Err(error) = self.acceptor_waker.wake() {
            tracing::error!(%error, "cannot wake the acceptor");
        }
    }

    /// Sends every loop the message `make` builds; `why` names it in logs.
    pub(crate) fn tell_loops(&self, why: &str, make: impl Fn() -> LoopMessage) {
        for inbox in &self.loops {
            inbox.send(make(), why);
        }
    }

    /// Stops `export` on every loop: each closes its connections and
    /// waits for its I/O at the map until `exit_by_ns` (the transports'
    /// clock). Returns what each loop left behind.
    pub(crate) fn stop_export(&self, export: u64, exit_by_ns: u64) -> Vec<LoopExit> {
        let (done, exits) = mpsc::channel();
        self.tell_loops("stop an export", || LoopMessage::Stop {
            export,
            exit_by_ns,
            done: done.clone(),
        });
        drop(done);
        // Ends when every loop answered (or is gone: its sender dropped).
        exits.iter().collect()
    }
}

/// Makes loop `index` for `cpu`, and its inbox.
fn new_loop(
    index: usize,
    cpu: u32,
    config: &EngineConfig,
) -> std::io::Result<(EventLoop, LoopInbox)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), event_loop::WAKER)?);
    let (sender, receiver) = mpsc::channel();
    let settings = LoopSettings {
        index,
        cpu,
        idle_spin_ns: config.idle_spin_us.saturating_mul(1000),
    };
    Ok((
        EventLoop::new(poll, Arc::clone(&waker), settings, receiver),
        LoopInbox { sender, waker },
    ))
}

/// Tells the loops started so far to quit and joins their threads (a
/// start that failed part way).
fn stop_loops(loops: &[LoopInbox], threads: Vec<JoinHandle<()>>) {
    for inbox in loops {
        inbox.send(LoopMessage::Quit, "stop");
    }
    for thread in threads {
        let _ = thread.join();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.tell_acceptor(AcceptorMessage::Quit);
        self.tell_loops("stop", || LoopMessage::Quit);
        for thread in lock(&self.threads).drain(..) {
            if thread.join().is_err() {
                tracing::error!("a server thread panicked");
            }
        }
    }
}
