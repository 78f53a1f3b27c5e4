//! One ublk I/O thread: what the engine asks of it ([`Request`], through
//! its [`Worker`]), and its turn.
//!
//! # A thread's turn
//! Each thread owns one io_uring ([`Ring`]) for the commands of all the
//! queues it serves and the reads and writes of their file paths, and an
//! eventfd read on that ring through which the engine wakes it for a
//! request (the waker). A turn submits what is queued, then waits
//! according to what the busy queues' paths say ([`Rest`]) and the pace
//! every I/O loop shares ([`Pace`]): with no request at a map it sleeps
//! until a command comes; when every path completes on the thread's ring
//! it sleeps until a command or a completion comes (at most
//! [`mpio_io_loop::REST_BOUND`]); when work
//! already waits it goes on at once; and when a path completes where only
//! a poll sees it (NBD sockets, memory) it polls without sleeping for
//! [`mpio_io_loop::SPIN_TURNS`] turns, then waits at most
//! [`mpio_io_loop::BUSY_WAIT`] between polls. A hosted loop's wait hint
//! bounds every wait (`hosted.rs`). Then it hands every completed command
//! to its queue (a new request goes to the map) and keeps the file paths'
//! completions, takes the engine's requests if the waker fired, polls
//! every queue (its paths' completions delivered first; an answered
//! request is committed, which also fetches the tag's next one; its paths'
//! new entries put on the ring last), and takes a turn of the hosted loop
//! when it is due.
//!
//! # Release
//! A [`Request::Release`] puts the thread's queue of that device in
//! release (`queue.rs`): it takes no new request and answers what is at
//! its paths. Each turn after its poll the thread answers every release
//! whose queue holds nothing at a path, once the last commits are
//! submitted, or whose deadline has passed; while a release is pending
//! it never sleeps past [`mpio_io_loop::REST_BOUND`].
//!
//! A released device's fetch commands stay with the kernel, which takes
//! them back (aborting what its server held and quiescing the device for
//! the next one) only when the ring is closed. So a thread that stops
//! with a released queue leaves its ring, and the queues whose memory
//! the kernel may still write, to the process's exit, when every thread
//! is exiting: a ring closed by a thread that runs on can be handed,
//! after the kernel's one abort of the queue, a request the kernel had
//! queued for that thread as task work, and nothing ever fails or
//! requeues that request. On 6.12 the device then stays live for good,
//! the kernel's quiesce work sleeping in `ublk_wait_tagset_rqs_idle`,
//! and no next server can take it over. The memory is the process's
//! last: a thread stops only as the daemon ends.
//!
//! # Failure
//! A thread that cannot go on panics, and a panicking thread aborts the
//! daemon (the binary's panic policy): a half-served device would hang
//! its users' I/O, while a restarted daemon serves it again.

use crate::buffers::{BufferRange, BufferRanges};
use crate::hosted::{self, Hosted};
use crate::queue::{slot_and_tag, ServedQueue, SharedDevice};
use crate::ring::{Ring, HOSTED, WAKER};
use crate::UblkError;
use core_affinity::CoreId;
use mpio_io_loop::{Heartbeat, HostedLoop, Pace, Rest, Wait, REST_BOUND};
use mpio_transport::{clock::now_ns, device_queue_on, is_path_completion, DeviceSlot};
use std::fs::File;
use std::io::Write;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the engine asks of a thread.
pub(crate) enum Request {
    /// Serve hardware queue `queue` of a device, which gets the requests
    /// submitted on CPU `cpu` (what its map queue is told); answer once
    /// its fetches are with the kernel.
    Serve {
        device: Arc<SharedDevice>,
        slot: Arc<DeviceSlot>,
        queue: u16,
        cpu: u32,
        /// Its slots of the thread's buffer table, if the device is zero
        /// copy.
        buffers: Option<BufferRange>,
        answer: Sender<Result<(), String>>,
    },
    /// Release this thread's queue of device `device` (see Release in
    /// `queue.rs`); answer once nothing of it is at a path, or at
    /// `deadline_ns` with what still is.
    Release {
        device: u32,
        deadline_ns: u64,
        answer: Sender<Released>,
    },
    /// Run this loop beside the devices' queues.
    Host(Box<dyn HostedLoop>),
    /// End now.
    Stop,
}

/// What one thread's queue of a released device left behind: requests
/// still at a path when the release's deadline came, and requests the
/// map held waiting for a path (never sent; the kernel gives them to the
/// next server).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// Requests a path had not answered by the deadline.
    pub at_paths: usize,
    /// Requests that waited for a path and never reached one.
    pub waiting: usize,
}

/// A release not yet answered.
struct PendingRelease {
    device: u32,
    deadline_ns: u64,
    answer: Sender<Released>,
}

/// One I/O thread as the engine sees it.
#[derive(Debug)]
pub(crate) struct Worker {
    /// The CPU the thread runs on (pinned there when the CPUs are known).
    cpu: u32,
    requests: Sender<Request>,
    waker: Arc<File>,
    heartbeat: Arc<Heartbeat>,
    /// Its ring's buffer table in ranges, if it has one (zero copy).
    buffers: Option<Arc<BufferRanges>>,
    handle: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts thread `index`, which runs on `run_cpu`, pinned there if
    /// `pin`, and serves the queues [`Request::Serve`] names, each of
    /// `depth` tags; its ring defers task work if `defer_task_work`
    /// (`ring.rs`).
    ///
    /// # Errors
    /// Its ring or its thread could not be made.
    pub(crate) fn spawn(
        index: usize,
        run_cpu: u32,
        pin: bool,
        depth: u16,
        defer_task_work: bool,
    ) -> Result<Worker, UblkError> {
        let ring = Ring::new(defer_task_work)?;
        let waker = ring.waker_file();
        let buffers = ring.has_buffers().then(|| BufferRanges::new(depth));
        let (sender, receiver) = mpsc::channel();
        let heartbeat = Arc::new(Heartbeat::default());
        let thread = Thread {
            heartbeat: Arc::clone(&heartbeat),
            index,
            ring,
            requests: receiver,
            served: Vec::new(),
            path_done: Vec::new(),
            releases: Vec::new(),
            hosted: None,
        };
        let handle = std::thread::Builder::new()
            .name(format!("mpio-ublk-{index}"))
            .spawn(move || {
                if pin {
                    core_affinity::set_for_current(CoreId {
                        id: run_cpu as usize,
                    });
                }
                thread.run();
            })
            .map_err(|error| UblkError::system("spawning a ublk thread", error))?;
        Ok(Worker {
            cpu: run_cpu,
            requests: sender,
            waker,
            heartbeat,
            buffers,
            handle: Some(handle),
        })
    }

    /// A range of its buffer table for a zero-copy device's queue, if it
    /// has a table and room left in it.
    pub(crate) fn buffer_range(&self) -> Option<BufferRange> {
        self.buffers.as_ref()?.take()
    }

    /// The CPU the thread runs on.
    pub(crate) fn cpu(&self) -> u32 {
        self.cpu
    }

    /// The thread's heartbeat, beaten once per turn.
    pub(crate) fn heartbeat(&self) -> Arc<Heartbeat> {
        Arc::clone(&self.heartbeat)
    }

    /// Hands the thread `request` and wakes it.
    ///
    /// # Errors
    /// The thread is gone.
    pub(crate) fn send(&self, request: Request) -> Result<(), UblkError> {
        self.requests
            .send(request)
            .map_err(|_| UblkError::EngineStopped)?;
        // An eventfd write of 8 bytes fails only if the counter would
        // overflow, which wake-ups never reach.
        let _ = (&*self.waker).write_all(&1u64.to_ne_bytes());
        Ok(())
    }

    /// Waits for the thread to end (after a [`Request::Stop`]).
    pub(crate) fn join(&mut self) {
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// One I/O thread.
struct Thread {
    /// Its number among the engine's threads.
    index: usize,
    ring: Ring,
    requests: Receiver<Request>,
    /// The queues it serves, by slot (the high bits of a command's user
    /// data); a finished queue leaves its slot empty for the next.
    served: Vec<Option<ServedQueue>>,
    /// (user_data, result) of the file paths' completions reaped this
    /// turn, for their queues.
    path_done: Vec<(u64, i32)>,
    /// Releases asked for and not yet answered.
    releases: Vec<PendingRelease>,
    /// The loop it runs beside them, if it hosts one.
    hosted: Option<Hosted>,
    /// Beaten once per turn; marked idle before a wait only a command
    /// ends.
    heartbeat: Arc<Heartbeat>,
}

/// What a thread's turns did, logged when it ends: each turn enters the
/// kernel once, so these say how often it woke and how much each wake-up
/// served (the benchmark reads them per I/O).
#[derive(Debug, Default)]
struct TurnCounts {
    /// Turns that slept with no request at a map.
    idle: u64,
    /// Turns that slept on the ring while requests were at paths.
    rests: u64,
    /// Turns taken at once because work already waited (a path's
    /// completion to reap, I/O to submit): not counted as spins.
    ready: u64,
    /// Turns that polled without sleeping.
    spins: u64,
    /// Turns that waited at most [`mpio_io_loop::BUSY_WAIT`] between
    /// polls.
    busy_waits: u64,
    /// Command completions (requests, fetches ended) handled.
    commands: u64,
}

/// What a turn found on the ring.
#[derive(Debug, Default)]
struct Reaped {
    /// Something completed.
    worked: bool,
    /// The waker's read completed: the engine has requests.
    woken: bool,
    /// The poll of the hosted loop's descriptor completed.
    hosted_ready: bool,
}

impl Thread {
    fn run(mut self) {
        if let Err(error) = self.ring.enable() {
            panic!("ublk thread: enabling its io_uring failed: {error}");
        }
        self.ring.arm_waker();
        let mut pace = Pace::default();
        let mut counts = TurnCounts::default();
        loop {
            // The hosted loop's descriptor, watched on the ring; and how
            // long the loop may wait for it (`None`: as long as it takes).
            let hint = match &mut self.hosted {
                Some(hosted) => hosted.arm(&mut self.ring),
                None => None,
            };
            let hosted_due = hint.map(|hint| now_ns().saturating_add(hint.as_nanos() as u64));
            let waited = self.wait(hint, &pace, &mut counts);
            self.heartbeat.beat();
            if let Err(error) = waited {
                match error.raw_os_error() {
                    Some(libc::EINTR | libc::ETIME | libc::EBUSY) => {}
                    _ => panic!("ublk thread: io_uring_enter failed: {error}"),
                }
            }
            let now = now_ns();
            let reaped = self.reap(now, &mut counts);
            let stop = reaped.woken && self.take_requests();
            let answered = self.poll_queues(now);
            if !self.releases.is_empty() {
                self.answer_releases(now);
            }
            if reaped.hosted_ready || hosted_due.is_some_and(|due| now >= due) {
                hosted::step(&mut self.hosted, reaped.hosted_ready);
            }
            if stop {
                self.end(&counts);
                if self.served.iter().any(Option::is_some) {
                    // A released device's commands are still with the
                    // kernel: the ring, and the queues whose memory the
                    // kernel may still write, go only with the process
                    // (see Release in the module docs).
                    std::mem::forget(self);
                }
                return;
            }
            pace.turned(reaped.worked || answered);
        }
    }

    /// Submits what is queued and waits as the busy queues, the `pace`
    /// and the hosted loop's wait `hint` allow (see the module docs).
    fn wait(
        &mut self,
        hint: Option<Duration>,
        pace: &Pace,
        counts: &mut TurnCounts,
    ) -> std::io::Result<usize> {
        if hint == Some(Duration::ZERO) {
            counts.spins += 1;
            return self.ring.submit();
        }
        if !self.served.iter().flatten().any(ServedQueue::is_busy) {
            counts.idle += 1;
            // A release waiting on its answers' submission turns again.
            let hint = hint.or_else(|| (!self.releases.is_empty()).then_some(REST_BOUND));
            return match hint {
                Some(hint) => self.ring.wait_at_most(hint),
                None => {
                    self.heartbeat.idle();
                    self.ring.wait_for_one()
                }
            };
        }
        let rest = Rest::of(
            self.served
                .iter_mut()
                .flatten()
                .filter(|served| served.is_busy())
                .map(ServedQueue::rest),
        );
        let wait = pace.wait(rest);
        let bound = hint.map_or(wait.bound(), |hint| hint.min(wait.bound()));
        match wait {
            Wait::OnRing => {
                // Every path completes on this ring: sleep until a
                // completion or a command comes.
                counts.rests += 1;
                self.ring.wait_at_most(bound)
            }
            Wait::Ready => {
                // Work already waits: a turn at once, entering the kernel
                // only to submit.
                counts.ready += 1;
                self.ring.submit_queued()
            }
            Wait::Spin => {
                counts.spins += 1;
                self.ring.submit()
            }
            Wait::Nap => {
                counts.busy_waits += 1;
                self.ring.wait_at_most(bound)
            }
        }
    }

    /// Hands every command completed on the ring (at `now`) to its queue,
    /// and says what else completed.
    fn reap(&mut self, now: u64, counts: &mut TurnCounts) -> Reaped {
        let mut reaped = Reaped::default();
        let (mut submissions, mut completions) = self.ring.split();
        completions.sync();
        for completion in &mut completions {
            reaped.worked = true;
            match completion.user_data() {
                HOSTED => reaped.hosted_ready = true,
                WAKER => reaped.woken = true,
                user_data if is_path_completion(user_data) => {
                    self.path_done.push((user_data, completion.result()));
                }
                user_data => {
                    counts.commands += 1;
                    let (slot, tag) = slot_and_tag(user_data);
                    if let Some(Some(served)) = self.served.get_mut(slot) {
                        served.command_done(slot, tag, completion.result(), now, &mut |command| {
                            submissions.push(&command);
                        });
                    }
                }
            }
        }
        reaped
    }

    /// Puts the waker's read back on the ring and acts on every request
    /// the engine sent; true when told to stop.
    fn take_requests(&mut self) -> bool {
        self.ring.arm_waker();
        let mut stop = false;
        while let Ok(request) = self.requests.try_recv() {
            match request {
                Request::Stop => stop = true,
                Request::Release {
                    device,
                    deadline_ns,
                    answer,
                } => {
                    for served in self.served.iter_mut().flatten() {
                        if served.device_id() == device {
                            served.release();
                        }
                    }
                    self.releases.push(PendingRelease {
                        device,
                        deadline_ns,
                        answer,
                    });
                }
                Request::Host(hosted_loop) => self.hosted = Some(Hosted::new(hosted_loop)),
                Request::Serve {
                    device,
                    slot,
                    queue,
                    cpu,
                    buffers,
                    answer,
                } => {
                    let _ = answer.send(self.serve(device, &slot, queue, cpu, buffers));
                }
            }
        }
        stop
    }

    /// Polls every queue at `now` (each commits what its map answered),
    /// empties the buffer slots of tags that ended and lets go of the
    /// queues that finished; true if any answered.
    fn poll_queues(&mut self, now: u64) -> bool {
        let mut answered = false;
        {
            let (mut submissions, _) = self.ring.split();
            let path_done = &mut self.path_done;
            for (slot, entry) in self.served.iter_mut().enumerate() {
                let Some(served) = entry else { continue };
                answered |= served.poll(slot, now, path_done, &mut |command| {
                    submissions.push(&command);
                }) > 0;
            }
            // What no queue took belongs to a path queue that is gone
            // (its slot retired): nothing waits for it.
            path_done.clear();
        }
        for entry in &mut self.served {
            let Some(served) = entry else { continue };
            // A request whose pages stay registered never completes: a
            // tag that ended lets go of its slot now. A finished queue's
            // tags have all ended, so its range is empty as it goes.
            for index in served.ended_buffers() {
                self.ring.clear_buffer(index);
            }
            if served.is_finished() {
                *entry = None;
            }
        }
        answered
    }

    /// Answers each release whose queue settled (its answers first
    /// handed to the kernel) or whose deadline came at `now`.
    fn answer_releases(&mut self, now: u64) {
        let queue_of = |served: &[Option<ServedQueue>], device: u32| {
            served
                .iter()
                .flatten()
                .find(|served| served.device_id() == device)
                .map(|served| (served.settled(), served.at_paths_and_waiting()))
        };
        let due =
            self.releases
                .iter()
                .any(|release| match queue_of(&self.served, release.device) {
                    Some((settled, _)) => settled || now >= release.deadline_ns,
                    None => true,
                });
        if !due {
            return;
        }
        // The commits of the last answers reach the kernel before the
        // release is answered: the process may end right after.
        loop {
            match self.ring.submit() {
                Ok(_) => break,
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => {}
                // The completion queue is full: the next turn reaps it
                // and submits again.
                Err(error) if error.raw_os_error() == Some(libc::EBUSY) => return,
                Err(error) => panic!("ublk thread: io_uring_enter failed: {error}"),
            }
        }
        let served = &self.served;
        self.releases.retain(|release| {
            // A queue gone has had all its tags end (the device was
            // stopped): nothing is left at all.
            let (settled, (at_paths, waiting)) =
                queue_of(served, release.device).unwrap_or((true, (0, 0)));
            if !settled && now < release.deadline_ns {
                return true;
            }
            let _ = release.answer.send(Released { at_paths, waiting });
            false
        });
    }

    /// Starts serving queue `queue_id` of `device`, which gets CPU
    /// `cpu`'s requests: maps its descriptors, takes a free slot and hands
    /// the kernel every tag's fetch at once (START_DEV waits for them).
    fn serve(
        &mut self,
        device: Arc<SharedDevice>,
        slot: &Arc<DeviceSlot>,
        queue_id: u16,
        cpu: u32,
        buffers: Option<BufferRange>,
    ) -> Result<(), String> {
        let id = device.id;
        let depth = usize::from(device.depth);
        let map_queue = device_queue_on(slot, depth, cpu, self.ring.share());
        let new = ServedQueue::new(device, queue_id, map_queue, buffers)
            .map_err(|error| format!("mapping queue {queue_id} of /dev/ublkc{id}: {error}"))?;
        let index = self
            .served
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.served.len());
        let (mut submissions, _) = self.ring.split();
        for fetch in new.fetches(index) {
            submissions.push(&fetch);
        }
        submissions
            .submit()
            .map_err(|error| format!("submitting the fetches of /dev/ublkc{id}: {error}"))?;
        if index == self.served.len() {
            self.served.push(Some(new));
        } else {
            self.served[index] = Some(new);
        }
        Ok(())
    }

    /// Ends the hosted loop, if any, and logs what the turns did.
    fn end(&mut self, counts: &TurnCounts) {
        if let Some(hosted) = self.hosted.take() {
            hosted.quit();
        }
        tracing::info!(
            thread = self.index,
            idle = counts.idle,
            rests = counts.rests,
            ready = counts.ready,
            spins = counts.spins,
            busy_waits = counts.busy_waits,
            commands = counts.commands,
            "ublk thread ended"
        );
    }
}
