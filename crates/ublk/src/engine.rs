//! The ublk engine: a fixed set of I/O threads, one per CPU, each
//! serving one CPU's queue of every ublk device, so the daemon's thread
//! count does not grow with its devices. Each thread is pinned to a
//! neighbour of the CPU whose queue it serves, on the same NUMA node
//! (`placement` says which and why).
//!
//! # A thread's turn
//! Each thread owns one io_uring for the commands of all the queues it
//! serves, and an eventfd read on that ring through which the engine
//! wakes it for a new device (the waker; file paths' rings signal it
//! too). A turn submits what is queued, then waits according to what
//! the busy queues' paths say ([`Rest`]) and the pace every I/O loop
//! shares ([`Pace`]): with no request at a map it sleeps until a command
//! comes; when every path's ring will signal the waker it sleeps until a
//! command or that signal (at most [`mpio_io_loop::REST_BOUND`]); when
//! work already waits it goes on at once; and when a path completes
//! where only a poll sees it (NBD sockets, memory) it polls without
//! sleeping for [`mpio_io_loop::SPIN_TURNS`] turns, then waits at most
//! [`mpio_io_loop::BUSY_WAIT`] between polls.
//! Then it hands every completed command to its queue (a new request
//! goes to the map) and polls every queue (an answered request is
//! committed, which also fetches the tag's next one).
//!
//! # Hosted loops
//! A thread may also run one loop of another engine ([`Engine::host`]:
//! the daemon's NBD loops, made for the threads' CPUs), kept to the
//! [`HostedLoop`] contract, so a daemon with ublk and NBD exports has one
//! I/O thread per CPU. A poll of the loop's descriptor (an epoll
//! descriptor, for an NBD loop) stays armed on the thread's ring; the
//! thread never waits longer than the loop's wait hint, and takes a turn
//! of the loop, without waiting, when that poll completes or the hint has
//! passed. A hosted NBD loop costs its connections one more system call
//! per wake-up (the thread's ring, then the loop's non-blocking epoll
//! wait); the devices' queues pay nothing for it but that waits are cut
//! short while the loop has work.
//!
//! # Failure
//! A thread that cannot go on panics, and a panicking thread aborts the
//! daemon (the binary's panic policy): a half-served device would hang
//! its users' I/O, while a restarted daemon serves it again.

#![allow(unsafe_code)]

use crate::control::Control;
use crate::params::{limits_of, params_for};
use crate::placement::run_cpus;
use crate::queue::{slot_and_tag, ServedQueue, SharedDevice};
use crate::uapi::{self, DevInfo};
use crate::UblkError;
use core_affinity::CoreId;
use io_uring::{cqueue, opcode, squeue, types, IoUring, SubmissionQueue, Submitter};
use mpio_io_loop::{HostedLoop, Pace, Rest, Step, Wait, Waker};
use mpio_transport::host::host_topology;
use mpio_transport::limits::Limits;
use mpio_transport::{clock::now_ns, lock, waking_device_queue, DeviceSlot};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The user data of the waker's read.
const WAKER: u64 = u64::MAX;
/// The user data of the poll of a hosted loop's poller.
const HOSTED: u64 = u64::MAX - 1;
/// Ring entries per thread; the completion queue has twice as many, and
/// the kernel keeps completions that overflow it (IORING_FEAT_NODROP).
const RING_ENTRIES: u32 = 1024;
/// How long a new device's char device node may take to appear, and its
/// queues to let go of it at removal.
const DEVICE_WAIT: Duration = Duration::from_secs(30);

/// How the engine sizes its threads and devices.
#[derive(Clone, Copy, Debug)]
pub struct EngineConfig {
    /// I/O threads, each a hardware queue of every device (0: one per
    /// CPU).
    pub threads: usize,
    /// Requests each queue holds at once.
    pub queue_depth: u16,
    /// Largest request, bytes (a multiple of 4096).
    pub max_io_bytes: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            threads: 0,
            queue_depth: 128,
            max_io_bytes: 512 << 10,
        }
    }
}

/// One device's wishes.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceOptions {
    /// `/dev/ublkbN` with this N, or the kernel's choice.
    pub id: Option<u32>,
    /// Refuse writes.
    pub read_only: bool,
}

/// What the engine asks of a thread.
enum Request {
    /// Serve this thread's queue of a device; answer once its fetches
    /// are with the kernel.
    Serve {
        device: Arc<SharedDevice>,
        slot: Arc<DeviceSlot>,
        answer: Sender<Result<(), String>>,
    },
    /// Run this loop beside the devices' queues.
    Host(Box<dyn HostedLoop>),
    /// End now.
    Stop,
}

/// One I/O thread as the engine sees it.
#[derive(Debug)]
struct Worker {
    /// The CPU the thread runs on (pinned there when the CPUs are known).
    cpu: u32,
    requests: Sender<Request>,
    waker: Arc<File>,
    handle: Option<JoinHandle<()>>,
}

impl Worker {
    fn send(&self, request: Request) -> Result<(), UblkError> {
        self.requests
            .send(request)
            .map_err(|_| UblkError::EngineStopped)?;
        // An eventfd write of 8 bytes fails only if the counter would
        // overflow, which wake-ups never reach.
        let _ = (&*self.waker).write_all(&1u64.to_ne_bytes());
        Ok(())
    }
}

/// A ublk device the engine serves, `/dev/ublkbN`. Give it back to
/// [`Engine::remove`] to remove it.
#[derive(Debug)]
pub struct UblkDevice {
    device: Arc<SharedDevice>,
    limits: Limits,
}

impl UblkDevice {
    /// Its number N.
    pub fn id(&self) -> u32 {
        self.device.id
    }

    /// Its block device, `/dev/ublkbN`.
    pub fn path(&self) -> String {
        format!("/dev/ublkb{}", self.device.id)
    }

    /// What it sends its map's paths: a map reloaded under it must take
    /// all of it ([`Limits::admits`]).
    pub fn limits(&self) -> Limits {
        self.limits
    }
}

/// The I/O threads and the control device.
///
/// Dropping the engine stops every device it still serves (their disks
/// go; nothing is left waiting for a server that will not come) before
/// its threads end: an orderly exit, unlike a crash, is no case for
/// recovery.
#[derive(Debug)]
pub struct Engine {
    workers: Vec<Worker>,
    control: Mutex<Control>,
    config: EngineConfig,
    /// The devices served, by number.
    served: Mutex<Vec<u32>>,
}

impl Engine {
    /// Opens the control device and starts the I/O threads.
    ///
    /// # Errors
    /// No ublk driver, no permission, or an io_uring that cannot be set
    /// up (the error says what to change).
    pub fn start(config: EngineConfig) -> Result<Engine, UblkError> {
        let control = Control::open()?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let threads = if config.threads == 0 {
            cpus
        } else {
            config.threads
        };
        let core_ids = core_affinity::get_core_ids().unwrap_or_default();
        // Thread i serves CPU i's queue (the CPU it tells its map queues)
        // and runs on a neighbour of it: see `placement`.
        let queue_cpus: Vec<u32> = (0..threads)
            .map(|index| {
                let core = core_ids.get(index % core_ids.len().max(1));
                core.map_or(index, |core| core.id) as u32
            })
            .collect();
        let run_cpus = run_cpus(&queue_cpus, &host_topology());
        let pinned = !core_ids.is_empty();
        let mut workers = Vec::with_capacity(threads);
        for index in 0..threads {
            let ring = IoUring::builder()
                .setup_cqsize(2 * RING_ENTRIES)
                .build(RING_ENTRIES)
                .map_err(|error| {
                    UblkError::system(
                        "io_uring for a ublk thread (a locked-memory limit? raise RLIMIT_MEMLOCK)",
                        error,
                    )
                })?;
            // SAFETY: eventfd has no preconditions; the result is checked.
            let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
            if raw < 0 {
                return Err(UblkError::system(
                    "eventfd",
                    std::io::Error::last_os_error(),
                ));
            }
            // SAFETY: `raw` is a new descriptor that nothing else owns.
            let waker = Arc::new(File::from(unsafe { OwnedFd::from_raw_fd(raw) }));
            let (sender, receiver) = mpsc::channel();
            let (queue_cpu, run_cpu) = (queue_cpus[index], run_cpus[index]);
            let thread = Thread {
                queue_id: u16::try_from(index).expect("at most 65536 threads"),
                queue_cpu,
                ring,
                waker_count: Box::new(0),
                waker: Arc::clone(&waker),
                requests: receiver,
                served: Vec::new(),
                hosted: None,
            };
            let handle = std::thread::Builder::new()
                .name(format!("mpio-ublk-{index}"))
                .spawn(move || {
                    if pinned {
                        core_affinity::set_for_current(CoreId {
                            id: run_cpu as usize,
                        });
                    }
                    thread.run();
                })
                .map_err(|error| UblkError::system("spawning a ublk thread", error))?;
            workers.push(Worker {
                cpu: run_cpu,
                requests: sender,
                waker,
                handle: Some(handle),
            });
        }
        Ok(Engine {
            workers,
            control: Mutex::new(control),
            config,
            served: Mutex::new(Vec::new()),
        })
    }

    /// The I/O threads.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// The CPU each I/O thread runs on, in thread order: what the loops
    /// it is to host are made for ([`Engine::host`]).
    pub fn cpus(&self) -> Vec<u32> {
        self.workers.iter().map(|worker| worker.cpu).collect()
    }

    /// Has thread `i` run `loops[i]` beside its devices' queues, so that
    /// NBD exports and ublk devices share one I/O thread per CPU (see
    /// "Hosted loops" in the module docs). The engine that made the
    /// loops ends them when it is dropped; a loop still running when this
    /// engine is dropped is ended with its thread.
    ///
    /// # Errors
    /// Not one loop per thread, a loop made for another CPU than its
    /// thread's, or a thread that is gone.
    pub fn host(&self, loops: Vec<Box<dyn HostedLoop>>) -> Result<(), UblkError> {
        let cpus: Vec<u32> = loops.iter().map(|hosted| hosted.cpu()).collect();
        if cpus != self.cpus() {
            return Err(UblkError::system(
                format!(
                    "hosting loops for CPUs {cpus:?} on ublk threads of CPUs {:?}",
                    self.cpus()
                ),
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            ));
        }
        for (worker, hosted) in self.workers.iter().zip(loops) {
            worker.send(Request::Host(hosted))?;
        }
        Ok(())
    }

    /// Makes the map `slot` serves a block device and starts serving it.
    ///
    /// A device number that names a device whose server died (quiesced,
    /// its requests waiting: user recovery) is taken over instead, if it
    /// has this engine's queue count and the map's size; one left dead
    /// by a server without recovery is deleted and made again.
    ///
    /// # Errors
    /// The kernel refused a step; a new device is not left behind, a
    /// recovered one is (its requests keep waiting for a server).
    pub fn add(
        &self,
        slot: &Arc<DeviceSlot>,
        options: DeviceOptions,
    ) -> Result<UblkDevice, UblkError> {
        // A map none of whose paths can serve yet gets the most careful
        // device: the paths that open later must take what it sends.
        let known = known_limits(slot);
        let limits = known.unwrap_or(Limits::UNKNOWN);
        let params = params_for(
            &limits,
            slot.map().size_bytes(),
            self.config.max_io_bytes,
            options.read_only,
        )
        .map_err(|reason| UblkError::Unservable { reason })?;
        let mut control = lock(&self.control);
        if let Some(id) = options.id {
            match control.info(id) {
                Ok(info) if info.state == uapi::S_DEV_QUIESCED => {
                    return self.recover(&mut control, info, slot, known.as_ref());
                }
                Ok(info) if info.state == uapi::S_DEV_DEAD => control.delete(id)?,
                Ok(_) => return Err(UblkError::IdTaken { id }),
                Err(error) if error.errno() == Some(libc::ENODEV) => {}
                Err(error) => return Err(error),
            }
        }
        let info = control.add(DevInfo {
            nr_hw_queues: self.workers.len() as u16,
            queue_depth: self.config.queue_depth,
            max_io_buf_bytes: self.config.max_io_bytes,
            dev_id: options.id.unwrap_or(u32::MAX),
            flags: uapi::F_CMD_IOCTL_ENCODE
                | uapi::F_NEED_GET_DATA
                | uapi::F_USER_RECOVERY
                | uapi::F_USER_RECOVERY_REISSUE,
            ..DevInfo::default()
        })?;
        let id = info.dev_id;
        let started = control
            .set_params(id, &params)
            .and_then(|()| self.serve_queues(&info, slot))
            .and_then(|device| control.start(id).map(|()| device));
        match started {
            Ok(device) => {
                lock(&self.served).push(id);
                require(slot, limits_of(&params));
                Ok(UblkDevice {
                    device,
                    limits: limits_of(&params),
                })
            }
            Err(error) => {
                let _ = control.stop(id);
                let _ = control.delete(id);
                Err(error)
            }
        }
    }

    /// Takes over device `info.dev_id`, whose server died.
    fn recover(
        &self,
        control: &mut Control,
        info: DevInfo,
        slot: &Arc<DeviceSlot>,
        paths: Option<&Limits>,
    ) -> Result<UblkDevice, UblkError> {
        let id = info.dev_id;
        let refuse = |reason: String| Err(UblkError::Recovery { id, reason });
        if info.flags & uapi::F_NEED_GET_DATA == 0 {
            // Its fetches would carry data into buffers sized for none.
            return refuse("it was not made by this version of mpio (no NEED_GET_DATA)".into());
        }
        if usize::from(info.nr_hw_queues) != self.workers.len() {
            return refuse(format!(
                "it has {} queues and this daemon {} I/O threads (one per CPU)",
                info.nr_hw_queues,
                self.workers.len()
            ));
        }
        let params = control.params(id)?;
        let sectors = params.basic.dev_sectors;
        if sectors != slot.map().size_bytes() >> 9 {
            return refuse(format!(
                "it has {sectors} sectors and the map {}",
                slot.map().size_bytes() >> 9
            ));
        }
        let limits = limits_of(&params);
        if let Some(Err(refused)) = paths.map(|paths| limits.admits(paths)) {
            return refuse(refused.to_string());
        }
        require(slot, limits);
        // The dead server's files close as the kernel reaps it.
        let deadline = Instant::now() + DEVICE_WAIT;
        loop {
            match control.start_recovery(id) {
                Ok(()) => break,
                Err(error) if error.errno() == Some(libc::EBUSY) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(error) => return Err(error),
            }
        }
        let device = self.serve_queues(&info, slot)?;
        control.end_recovery(id)?;
        lock(&self.served).push(id);
        tracing::info!(
            device = id,
            "ublk device recovered: its waiting I/O flows again"
        );
        Ok(UblkDevice { device, limits })
    }

    /// Opens device `info.dev_id`'s char device and has every thread
    /// serve its queue, its fetches with the kernel.
    fn serve_queues(
        &self,
        info: &DevInfo,
        slot: &Arc<DeviceSlot>,
    ) -> Result<Arc<SharedDevice>, UblkError> {
        let id = info.dev_id;
        let path = format!("/dev/ublkc{id}");
        let deadline = Instant::now() + DEVICE_WAIT;
        let file = loop {
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
            {
                Ok(file) => break file,
                Err(error)
                    if error.kind() == std::io::ErrorKind::NotFound
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(error) => return Err(UblkError::system(format!("opening {path}"), error)),
            }
        };
        let device = Arc::new(SharedDevice {
            id,
            file,
            depth: info.queue_depth,
            max_io_bytes: info.max_io_buf_bytes,
        });
        let (answer, answers) = mpsc::channel();
        for worker in &self.workers {
            worker.send(Request::Serve {
                device: Arc::clone(&device),
                slot: Arc::clone(slot),
                answer: answer.clone(),
            })?;
        }
        for _ in &self.workers {
            match answers.recv_timeout(DEVICE_WAIT) {
                Ok(Ok(())) => {}
                Ok(Err(message)) => {
                    return Err(UblkError::system(
                        message,
                        std::io::Error::other("queue setup"),
                    ))
                }
                Err(_) => return Err(UblkError::EngineStopped),
            }
        }
        Ok(device)
    }

    /// Stops and deletes `device`: its disk goes (the block layer first
    /// waits for the requests it holds), its queues end, then the device.
    ///
    /// # Errors
    /// The kernel refused a step, or the queues did not let go in time.
    pub fn remove(&self, device: UblkDevice) -> Result<(), UblkError> {
        let mut control = lock(&self.control);
        let id = device.id();
        lock(&self.served).retain(|served| *served != id);
        let stopped = control.stop(id);
        let deadline = Instant::now() + DEVICE_WAIT;
        while Arc::strong_count(&device.device) > 1 {
            if Instant::now() >= deadline {
                return Err(UblkError::system(
                    format!("removing ublk device {id}"),
                    std::io::Error::from(std::io::ErrorKind::TimedOut),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(device);
        stopped?;
        control.delete(id)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let mut control = lock(&self.control);
        for id in lock(&self.served).drain(..) {
            if let Err(error) = control.stop(id) {
                tracing::warn!(device = id, %error, "ublk device not stopped");
            }
        }
        drop(control);
        for worker in &self.workers {
            let _ = worker.send(Request::Stop);
        }
        for worker in &mut self.workers {
            if let Some(handle) = worker.handle.take() {
                let _ = handle.join();
            }
        }
    }
}

/// What every path of the map `slot` serves that is open or settled
/// takes; `None` when none is.
fn known_limits(slot: &DeviceSlot) -> Option<Limits> {
    let (_, paths, _) = slot.current();
    mpio_transport::paths_limits(&paths)
}

/// Has every path of `slot`'s map that opens or settles from now on
/// take what a device advertising `limits` sends.
fn require(slot: &DeviceSlot, limits: Limits) {
    let (_, paths, _) = slot.current();
    for path in paths.iter() {
        path.require(limits);
    }
}

/// One I/O thread.
struct Thread {
    queue_id: u16,
    /// The CPU whose submissions its queues receive (not the one it runs
    /// on: see `placement`).
    queue_cpu: u32,
    ring: IoUring<squeue::Entry, cqueue::Entry>,
    /// Where the kernel writes the waker's count. A field after `ring`,
    /// so it is freed after the ring is closed (and with it the read).
    waker_count: Box<u64>,
    waker: Arc<File>,
    requests: Receiver<Request>,
    /// The queues it serves, by slot (the high bits of a command's user
    /// data); a finished queue leaves its slot empty for the next.
    served: Vec<Option<ServedQueue>>,
    /// The loop it runs beside them, if it hosts one.
    hosted: Option<Hosted>,
}

/// A loop a ublk thread runs (see the module docs).
struct Hosted {
    hosted_loop: Box<dyn HostedLoop>,
    /// A poll of the loop's poller is on the ring.
    armed: bool,
}

/// What a thread's turns did, logged when it ends: each turn enters the
/// kernel once, so these say how often it woke and how much each wake-up
/// served (the benchmark reads them per I/O).
#[derive(Debug, Default)]
struct TurnCounts {
    /// Turns that slept with no request at a map.
    idle: u64,
    /// Turns that slept on the waker while requests were at paths.
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

/// Pushes `entry`, submitting first when the submission queue is full.
fn push(submitter: &Submitter<'_>, queue: &mut SubmissionQueue<'_>, entry: &squeue::Entry) {
    loop {
        // SAFETY: every entry's memory (a tag's buffer, the waker's
        // counter) lives until its completion is reaped: buffers stay
        // in their tag while the kernel holds them, and the counter
        // lives as long as the thread's ring.
        if unsafe { queue.push(entry) }.is_ok() {
            return;
        }
        queue.sync();
        if let Err(error) = submitter.submit() {
            panic!("ublk thread: io_uring submit failed: {error}");
        }
        queue.sync();
    }
}

impl Thread {
    fn run(mut self) {
        let waker_read = opcode::Read::new(
            types::Fd(self.waker.as_raw_fd()),
            (&mut *self.waker_count as *mut u64).cast::<u8>(),
            8,
        )
        .build()
        .user_data(WAKER);
        {
            let (submitter, mut queue, _) = self.ring.split();
            push(&submitter, &mut queue, &waker_read);
        }
        let mut pace = Pace::default();
        let mut counts = TurnCounts::default();
        loop {
            // The hosted loop's poller, watched on the ring; and how long
            // the loop may wait for it (`None`: as long as it takes).
            let hint = self.arm_hosted();
            let hosted_due = hint.map(|hint| now_ns().saturating_add(hint.as_nanos() as u64));
            let busy = self.served.iter().flatten().any(ServedQueue::is_busy);
            let submitted = if hint == Some(Duration::ZERO) {
                counts.spins += 1;
                self.ring.submit()
            } else if !busy {
                counts.idle += 1;
                match hint {
                    Some(hint) => self.wait_at_most(hint),
                    None => self.ring.submit_and_wait(1),
                }
            } else {
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
                    Wait::OnWaker => {
                        // Each path completion signals the waker, whose
                        // read is on this ring: sleep until it or a
                        // command comes.
                        counts.rests += 1;
                        self.wait_at_most(bound)
                    }
                    Wait::Ready => {
                        // Work already waits: a turn at once, entering the
                        // kernel only to submit.
                        counts.ready += 1;
                        if self.ring.submission().is_empty() {
                            Ok(0)
                        } else {
                            self.ring.submit()
                        }
                    }
                    Wait::Spin => {
                        counts.spins += 1;
                        self.ring.submit()
                    }
                    Wait::Nap => {
                        counts.busy_waits += 1;
                        self.wait_at_most(bound)
                    }
                }
            };
            if let Err(error) = submitted {
                match error.raw_os_error() {
                    Some(libc::EINTR | libc::ETIME | libc::EBUSY) => {}
                    _ => panic!("ublk thread: io_uring_enter failed: {error}"),
                }
            }
            let now = now_ns();
            let mut worked = false;
            let mut stop = false;
            let mut hosted_ready = false;
            let (submitter, mut queue, mut completions) = self.ring.split();
            completions.sync();
            for completion in &mut completions {
                worked = true;
                if completion.user_data() == HOSTED {
                    hosted_ready = true;
                    continue;
                }
                if completion.user_data() == WAKER {
                    push(&submitter, &mut queue, &waker_read);
                    while let Ok(request) = self.requests.try_recv() {
                        match request {
                            Request::Stop => stop = true,
                            Request::Host(hosted_loop) => {
                                self.hosted = Some(Hosted {
                                    hosted_loop,
                                    armed: false,
                                });
                            }
                            Request::Serve {
                                device,
                                slot,
                                answer,
                            } => {
                                let outcome = serve(
                                    &mut self.served,
                                    device,
                                    &slot,
                                    (self.queue_id, self.queue_cpu),
                                    Waker(self.waker.as_raw_fd()),
                                    &submitter,
                                    &mut queue,
                                );
                                let _ = answer.send(outcome);
                            }
                        }
                    }
                    continue;
                }
                counts.commands += 1;
                let (slot, tag) = slot_and_tag(completion.user_data());
                if let Some(Some(served)) = self.served.get_mut(slot) {
                    served.command_done(slot, tag, completion.result(), now, &mut |command| {
                        push(&submitter, &mut queue, &command);
                    });
                }
            }
            for (slot, entry) in self.served.iter_mut().enumerate() {
                let Some(served) = entry else { continue };
                let answered = served.poll(slot, now, &mut |command| {
                    push(&submitter, &mut queue, &command);
                });
                worked |= answered > 0;
                if served.is_finished() {
                    *entry = None;
                }
            }
            if hosted_ready || hosted_due.is_some_and(|due| now >= due) {
                step_hosted(&mut self.hosted, hosted_ready);
            }
            if stop {
                if let Some(hosted) = self.hosted.take() {
                    hosted.hosted_loop.quit();
                }
                tracing::info!(
                    thread = self.queue_id,
                    idle = counts.idle,
                    rests = counts.rests,
                    ready = counts.ready,
                    spins = counts.spins,
                    busy_waits = counts.busy_waits,
                    commands = counts.commands,
                    "ublk thread ended"
                );
                return;
            }
            pace.turned(worked);
        }
    }
}

impl Thread {
    /// Puts a poll of the hosted loop's poller on the ring if none is
    /// there, and returns how long the loop may wait (its wait hint);
    /// `None` also when there is no hosted loop.
    fn arm_hosted(&mut self) -> Option<Duration> {
        let hosted = self.hosted.as_mut()?;
        if !hosted.armed {
            let poll = opcode::PollAdd::new(
                types::Fd(hosted.hosted_loop.as_raw_fd()),
                libc::POLLIN as u32,
            )
            .build()
            .user_data(HOSTED);
            let (submitter, mut queue, _) = self.ring.split();
            push(&submitter, &mut queue, &poll);
            hosted.armed = true;
        }
        hosted.hosted_loop.wait_hint()
    }

    /// Submits what is queued and waits for one completion, or `limit`.
    fn wait_at_most(&mut self, limit: Duration) -> std::io::Result<usize> {
        let timeout = types::Timespec::from(limit);
        let arguments = types::SubmitArgs::new().timespec(&timeout);
        self.ring.submitter().submit_with_args(1, &arguments)
    }
}

/// Takes one turn of the hosted loop, if any, without waiting; `polled`:
/// its poll on the ring completed (and must be put there again). A loop
/// told to quit is ended and dropped.
fn step_hosted(hosted: &mut Option<Hosted>, polled: bool) {
    let Some(running) = hosted.as_mut() else {
        return;
    };
    if polled {
        running.armed = false;
    }
    if running.hosted_loop.step(Some(Duration::ZERO)) == Step::Ends {
        if let Some(ended) = hosted.take() {
            ended.hosted_loop.quit();
        }
    }
}

/// Starts serving queue `queue_id` of `device` on this thread: maps its
/// descriptors, takes a free slot and hands the kernel every tag's
/// fetch at once (START_DEV waits for them).
fn serve(
    served: &mut Vec<Option<ServedQueue>>,
    device: Arc<SharedDevice>,
    slot: &Arc<DeviceSlot>,
    (queue_id, cpu): (u16, u32),
    waker: Waker,
    submitter: &Submitter<'_>,
    queue: &mut SubmissionQueue<'_>,
) -> Result<(), String> {
    let id = device.id;
    let map_queue = waking_device_queue(slot, usize::from(device.depth), cpu, Some(waker));
    let new = ServedQueue::new(device, queue_id, map_queue)
        .map_err(|error| format!("mapping queue {queue_id} of /dev/ublkc{id}: {error}"))?;
    let index = served
        .iter()
        .position(Option::is_none)
        .unwrap_or(served.len());
    for fetch in new.fetches(index) {
        push(submitter, queue, &fetch);
    }
    queue.sync();
    submitter
        .submit()
        .map_err(|error| format!("submitting the fetches of /dev/ublkc{id}: {error}"))?;
    if index == served.len() {
        served.push(Some(new));
    } else {
        served[index] = Some(new);
    }
    Ok(())
}
