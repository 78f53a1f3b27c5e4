//! The ublk engine: a fixed set of I/O threads, one per CPU, each
//! serving one CPU's queue of every ublk device, so the daemon's thread
//! count does not grow with its devices. Each thread is pinned to a
//! neighbour of the CPU whose queue it serves, on the same NUMA node
//! (`placement` says which and why); `thread` says how a thread turns,
//! `hosted` how it runs another engine's loop beside its queues.
//!
//! # Life cycle
//! The engine owns the control device and the threads, and speaks to the
//! threads by message. [`Engine::add`] makes a map a device (or takes
//! over one whose server died: user recovery), sets its parameters, has
//! every thread serve its queue of it (each answers once its fetches are
//! with the kernel) and starts it; [`Engine::remove`] stops it, waits
//! until every thread has let go of its queue, and deletes it (the two
//! steps apart: [`Engine::stop`], [`Engine::delete`]);
//! [`Engine::release`] leaves it, its I/O waiting, for the next server.
//! Dropping the engine stops the devices it still serves (not those it
//! released), then ends its threads.

use crate::buffers::BufferRange;
use crate::control::Control;
use crate::keeper::{server_runs, ServerLock};
use crate::params::{limits_of, params_for};
use crate::placement::{assign_queues, run_cpus};
use crate::queue::SharedDevice;
use crate::thread::{Released, Request, Worker};
use crate::uapi::{self, DevInfo};
use crate::UblkError;
use mpio_io_loop::{Heartbeat, HostedLoop};
use mpio_transport::host::host_topology;
use mpio_transport::limits::Limits;
use mpio_transport::{clock::now_ns, lock, DeviceSlot, PathHandle};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a new device's char device node may take to appear, and its
/// queues to let go of it at removal.
const DEVICE_WAIT: Duration = Duration::from_secs(30);

/// How long a device whose server ended may take to be quiesced by the
/// kernel before a new server takes it over (under load, 6.12 took more
/// than 30 s in the kernel test VM; below systemd's 90 s start timeout),
/// and when the wait is logged.
const SETTLE_WAIT: Duration = Duration::from_secs(60);
const SETTLE_NOTICE: Duration = Duration::from_secs(5);

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

/// A ublk device the engine serves, `/dev/ublkbN`. Give it back to
/// [`Engine::remove`] to remove it.
#[derive(Debug)]
pub struct UblkDevice {
    device: Arc<SharedDevice>,
    limits: Limits,
    /// Its flags (`UBLK_F_*`), as the kernel made it.
    flags: u64,
    /// The driver's features, as the engine read them.
    driver: u64,
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

    /// How its data moves between the kernel and mpio: `zero copy` (the
    /// paths read into and write from the request's own pages, which the
    /// kernel registers in the thread's ring) or `get-data copy` (a
    /// write's data is copied in once its buffer is given, a read's out
    /// at commit).
    pub fn data_mode(&self) -> &'static str {
        if self.flags & uapi::F_AUTO_BUF_REG != 0 {
            "zero copy"
        } else if self.flags & uapi::F_NEED_GET_DATA != 0 {
            "get-data copy"
        } else {
            "copy"
        }
    }

    /// It moves data by zero copy: every path of its map must be a file
    /// or block device.
    pub fn is_zero_copy(&self) -> bool {
        self.flags & uapi::F_AUTO_BUF_REG != 0
    }

    /// The optional kernel features serving it, in words: user recovery
    /// (a restart keeps it), and what the driver offers that mpio uses
    /// (a live resize, a stop only while no one has it open).
    pub fn features(&self) -> Vec<&'static str> {
        let recovery = uapi::F_USER_RECOVERY | uapi::F_USER_RECOVERY_REISSUE;
        [
            (self.flags & recovery == recovery, "user recovery"),
            (self.driver & uapi::F_UPDATE_SIZE != 0, "live resize"),
            (self.driver & uapi::F_SAFE_STOP_DEV != 0, "safe stop"),
        ]
        .into_iter()
        .filter_map(|(used, name)| used.then_some(name))
        .collect()
    }
}

/// What [`Engine::try_stop`] did.
#[derive(Debug)]
#[must_use = "a stopped device stays until deleted; a held one is still served"]
pub enum TryStop {
    /// No one had its disk open: stopped, and no one can open it now.
    Stopped(StoppedDevice),
    /// Someone has its disk open: nothing changed.
    Held(UblkDevice),
}

/// A device [`Engine::stop`] stopped: its disk is gone, the device
/// waits for [`Engine::delete`] or [`Engine::delete_when_closed`].
#[derive(Debug)]
#[must_use = "a stopped device stays until deleted"]
pub struct StoppedDevice {
    id: u32,
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
    /// The CPU each thread is for (whose requests it serves).
    queue_cpus: Vec<u32>,
    control: Mutex<Control>,
    /// The driver's features (`UBLK_F_*`), read at start.
    features: u64,
    config: EngineConfig,
    /// The devices served, by number.
    served: Mutex<Vec<u32>>,
    /// Held while the engine runs: no keeper removes a device meanwhile.
    _server_lock: ServerLock,
}

impl Engine {
    /// Opens the control device and starts the I/O threads.
    ///
    /// # Errors
    /// No ublk driver, no permission, or an io_uring that cannot be set
    /// up (the error says what to change).
    pub fn start(config: EngineConfig) -> Result<Engine, UblkError> {
        let mut control = Control::open()?;
        // A kernel before 6.5 cannot say: it has none of the optional
        // features asked about.
        let features = control.features().unwrap_or(0);
        let server_lock = ServerLock::take()?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let threads = if config.threads == 0 {
            cpus
        } else {
            config.threads
        };
        let core_ids = core_affinity::get_core_ids().unwrap_or_default();
        // Thread i is CPU i's: it serves the queue of each device that
        // gets CPU i's requests, and runs on a neighbour of it: see
        // `placement`.
        let queue_cpus: Vec<u32> = (0..threads)
            .map(|index| {
                let core = core_ids.get(index % core_ids.len().max(1));
                core.map_or(index, |core| core.id) as u32
            })
            .collect();
        let run_cpus = run_cpus(&queue_cpus, &host_topology());
        let pinned = !core_ids.is_empty();
        // Deferred task work only with a driver of 6.16 or later (see
        // `ring.rs`).
        let defer_task_work = features & uapi::F_AUTO_BUF_REG != 0;
        let workers = run_cpus
            .iter()
            .enumerate()
            .map(|(index, &run_cpu)| {
                Worker::spawn(index, run_cpu, pinned, config.queue_depth, defer_task_work)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Engine {
            workers,
            queue_cpus,
            control: Mutex::new(control),
            features,
            config,
            served: Mutex::new(Vec::new()),
            _server_lock: server_lock,
        })
    }

    /// The I/O threads.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Each I/O thread's heartbeat, beaten once per turn (for a
    /// watchdog: `mpio_io_loop::Heartbeat`).
    pub fn heartbeats(&self) -> Vec<Arc<Heartbeat>> {
        self.workers.iter().map(Worker::heartbeat).collect()
    }

    /// The CPU each I/O thread runs on, in thread order: what the loops
    /// it is to host are made for ([`Engine::host`]).
    pub fn cpus(&self) -> Vec<u32> {
        self.workers.iter().map(Worker::cpu).collect()
    }

    /// Has thread `i` run `loops[i]` beside its devices' queues, so that
    /// NBD exports and ublk devices share one I/O thread per CPU (see
    /// `hosted.rs`). The engine that made the
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
        let params_of = |zero_copy| {
            params_for(
                &limits,
                slot.map().size_bytes(),
                self.config.max_io_bytes,
                options.read_only,
                zero_copy,
            )
        };
        let copy_params = params_of(false).map_err(|reason| UblkError::Unservable { reason })?;
        let mut control = lock(&self.control);
        if let Some(id) = options.id {
            match settled_info(&mut control, id) {
                Ok(info) if info.state == uapi::S_DEV_QUIESCED => {
                    return self.recover(&mut control, info, slot, known.as_ref());
                }
                Ok(info) if info.state == uapi::S_DEV_DEAD => control.delete(id)?,
                Ok(_) => return Err(UblkError::IdTaken { id }),
                Err(error) if error.errno() == Some(libc::ENODEV) => {}
                Err(error) => return Err(error),
            }
        }
        // Zero copy where the kernel and the map allow, every thread has
        // room in its buffer table and the paths' memory alignment is one
        // a device can ask; a copy otherwise.
        let zero_copy = self
            .zero_copy_buffers(slot)
            .and_then(|buffers| Some((buffers, params_of(true).ok()?)));
        let (buffers, params) = match zero_copy {
            Some((buffers, params)) => (Some(buffers), params),
            None => (None, copy_params),
        };
        let data_flags = match buffers {
            Some(_) => uapi::F_SUPPORT_ZERO_COPY | uapi::F_AUTO_BUF_REG,
            None => uapi::F_NEED_GET_DATA,
        };
        let info = control.add(DevInfo {
            nr_hw_queues: self.workers.len() as u16,
            queue_depth: self.config.queue_depth,
            max_io_buf_bytes: self.config.max_io_bytes,
            dev_id: options.id.unwrap_or(u32::MAX),
            flags: uapi::F_CMD_IOCTL_ENCODE
                | data_flags
                | uapi::F_USER_RECOVERY
                | uapi::F_USER_RECOVERY_REISSUE,
            ..DevInfo::default()
        })?;
        let id = info.dev_id;
        let started = data_mode_kept(&info, data_flags)
            .and_then(|()| control.set_params(id, &params))
            .and_then(|()| self.serve_queues(&mut control, &info, slot, buffers))
            .and_then(|device| control.start(id).map(|()| device));
        match started {
            Ok(device) => {
                lock(&self.served).push(id);
                require(slot, limits_of(&params));
                Ok(UblkDevice {
                    device,
                    limits: limits_of(&params),
                    flags: info.flags,
                    driver: self.features,
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
        let buffers = if info.flags & uapi::F_AUTO_BUF_REG != 0 {
            match self.zero_copy_buffers(slot) {
                Some(buffers) => Some(buffers),
                None => {
                    return refuse(
                        "it is zero copy, and this map or engine cannot be (a path that is \
                         not a file or block device, or no room in the threads' buffer tables)"
                            .into(),
                    )
                }
            }
        } else if info.flags & uapi::F_NEED_GET_DATA != 0 {
            None
        } else {
            // Its fetches would carry data into buffers sized for none.
            return refuse("it was not made by this version of mpio (no NEED_GET_DATA)".into());
        };
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
        let device = self.serve_queues(control, &info, slot, buffers)?;
        control.end_recovery(id)?;
        lock(&self.served).push(id);
        tracing::info!(
            device = id,
            "ublk device recovered: its waiting I/O flows again"
        );
        Ok(UblkDevice {
            device,
            limits,
            flags: info.flags,
            driver: self.features,
        })
    }

    /// A range of every thread's buffer table for a zero-copy device
    /// serving `slot`'s map, if the kernel registers buffers itself
    /// ([`uapi::F_AUTO_BUF_REG`]), every path of the map can be served so
    /// ([`zero_copy_paths`]) and every thread has room.
    fn zero_copy_buffers(&self, slot: &DeviceSlot) -> Option<Vec<BufferRange>> {
        if self.features & uapi::F_AUTO_BUF_REG == 0 || !zero_copy_paths(&slot.current().1) {
            return None;
        }
        self.workers.iter().map(Worker::buffer_range).collect()
    }

    /// Opens device `info.dev_id`'s char device and has every thread
    /// serve the queue that gets its CPU's requests (as the kernel maps
    /// them: [`assign_queues`]), its fetches with the kernel; with
    /// `buffers` (one range per thread) zero copy.
    fn serve_queues(
        &self,
        control: &mut Control,
        info: &DevInfo,
        slot: &Arc<DeviceSlot>,
        buffers: Option<Vec<BufferRange>>,
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
        let affinity = (0..info.nr_hw_queues)
            .map(|queue| control.queue_cpus(id, queue))
            .collect::<Result<Vec<_>, _>>()?;
        let queues = assign_queues(&self.queue_cpus, &affinity);
        let (answer, answers) = mpsc::channel();
        let mut buffers = buffers.map(Vec::into_iter);
        for (worker, &(queue, cpu)) in self.workers.iter().zip(&queues) {
            worker.send(Request::Serve {
                device: Arc::clone(&device),
                slot: Arc::clone(slot),
                queue,
                cpu,
                buffers: buffers.as_mut().and_then(Iterator::next),
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

    /// Whether the kernel can resize a live device ([`Engine::resize`]):
    /// to ask before anything else changes.
    ///
    /// # Errors
    /// [`UblkError::Unsupported`] from a kernel that cannot.
    pub fn check_resize(&self) -> Result<(), UblkError> {
        if self.features & uapi::F_UPDATE_SIZE == 0 {
            return Err(UblkError::Unsupported {
                what: "resize a live device",
                needs: "UBLK_F_UPDATE_SIZE, Linux 6.16 or later",
            });
        }
        Ok(())
    }

    /// Gives live `device` a size of `size_bytes` (a multiple of 512):
    /// its disk's capacity changes at once and the kernel tells user
    /// space. Its map must be that large already.
    ///
    /// # Errors
    /// [`UblkError::Unsupported`] from a kernel that cannot resize a live
    /// device; any refusal.
    pub fn resize(&self, device: &UblkDevice, size_bytes: u64) -> Result<(), UblkError> {
        self.check_resize()?;
        lock(&self.control).update_size(device.id(), size_bytes >> 9)
    }

    /// Stops and deletes `device` ([`Engine::stop`], [`Engine::delete`]).
    ///
    /// # Errors
    /// The kernel refused a step, or the queues did not let go in time.
    pub fn remove(&self, device: UblkDevice) -> Result<(), UblkError> {
        let stopped = self.stop(device)?;
        self.delete(stopped)
    }

    /// Stops `device`: its disk goes (the block layer first waits for the
    /// requests it holds; those who hold it open see their I/O fail) and
    /// its queues end. The device itself stays until deleted.
    ///
    /// # Errors
    /// The kernel refused, or the queues did not let go in time.
    pub fn stop(&self, device: UblkDevice) -> Result<StoppedDevice, UblkError> {
        let stopped = lock(&self.control).stop(device.id());
        self.stopped(device, stopped)
    }

    /// Whether the kernel can stop a device only while no one has it
    /// open ([`Engine::try_stop`]).
    pub fn can_try_stop(&self) -> bool {
        self.features & uapi::F_SAFE_STOP_DEV != 0
    }

    /// Stops `device` as [`Engine::stop`] does if no one has its disk
    /// open, in one step the kernel takes under the disk's open lock: no
    /// one can open it between the check and the stop, nor after. Where
    /// no one held it, [`Engine::delete`] then waits for no one. For a
    /// kernel that [`Engine::can_try_stop`]: the caller chooses how to
    /// stop before it lets go of its own hold on the device.
    ///
    /// # Errors
    /// The kernel refused (`EOPNOTSUPP` without the command); the queues
    /// did not let go in time.
    pub fn try_stop(&self, device: UblkDevice) -> Result<TryStop, UblkError> {
        match lock(&self.control).try_stop(device.id()) {
            Err(error) if error.errno() == Some(libc::EBUSY) => Ok(TryStop::Held(device)),
            stopped => self.stopped(device, stopped).map(TryStop::Stopped),
        }
    }

    /// `device` once the kernel answered its stop with `stopped`: no
    /// longer served, its queues let go.
    fn stopped(
        &self,
        device: UblkDevice,
        stopped: Result<(), UblkError>,
    ) -> Result<StoppedDevice, UblkError> {
        let id = device.id();
        lock(&self.served).retain(|served| *served != id);
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
        stopped.map(|()| StoppedDevice { id })
    }

    /// Deletes a stopped device, waiting until no one holds its disk
    /// open (this process included).
    ///
    /// # Errors
    /// The kernel refused.
    pub fn delete(&self, stopped: StoppedDevice) -> Result<(), UblkError> {
        lock(&self.control).delete(stopped.id)
    }

    /// Deletes a stopped device on a thread of its own once those who
    /// hold its disk open have closed it; its number stays taken until
    /// then. The deletion is logged.
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn delete_when_closed(&self, stopped: StoppedDevice) -> Result<(), UblkError> {
        let id = stopped.id;
        let delete = move || match Control::open().and_then(|mut control| control.delete(id)) {
            Ok(()) => tracing::info!(
                device = id,
                "ublk device deleted: its last holder closed it"
            ),
            Err(error) => tracing::warn!(device = id, %error, "ublk device not deleted"),
        };
        std::thread::Builder::new()
            .name(format!("mpio-ublk-del-{id}"))
            .spawn(delete)
            .map_err(|error| UblkError::system("spawning a ublk deletion thread", error))?;
        Ok(())
    }

    /// Leaves `device` to the next server instead of removing it: its
    /// queues take no new request, answer what is at its paths (until
    /// `bound` has passed), and the engine will not stop the device. Its
    /// disk stays; once this process ends (it must, soon: the device's
    /// I/O waits until it does) the kernel holds the unanswered requests
    /// for the next server, which takes the device over as after a crash
    /// (see [`Engine::add`]). Returns what was left behind, summed over
    /// the queues.
    ///
    /// # Errors
    /// A thread is gone or did not answer.
    pub fn release(&self, device: UblkDevice, bound: Duration) -> Result<Released, UblkError> {
        let id = device.id();
        lock(&self.served).retain(|served| *served != id);
        let deadline_ns = now_ns().saturating_add(bound.as_nanos() as u64);
        let (answer, answers) = mpsc::channel();
        for worker in &self.workers {
            worker.send(Request::Release {
                device: id,
                deadline_ns,
                answer: answer.clone(),
            })?;
        }
        let mut left = Released::default();
        for _ in &self.workers {
            let released = answers
                .recv_timeout(bound + DEVICE_WAIT)
                .map_err(|_| UblkError::EngineStopped)?;
            left.at_paths += released.at_paths;
            left.waiting += released.waiting;
        }
        Ok(left)
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
            worker.join();
        }
    }
}

/// Device `id`'s description once the kernel has settled it: a live
/// device whose server has ended is about to be quiesced (the kernel does
/// that once the server's rings are torn down and the requests it held
/// are back in the queue), so it is asked again until it is, for at most
/// [`SETTLE_WAIT`], saying so after [`SETTLE_NOTICE`]. Waiting long
/// costs nothing: the device's I/O waits either way, and no keeper
/// removes it while this engine runs.
///
/// # Errors
/// As [`Control::info`]; [`UblkError::NotQuiesced`] if the device is
/// still live, its server ended, after [`SETTLE_WAIT`].
fn settled_info(control: &mut Control, id: u32) -> Result<DevInfo, UblkError> {
    let started = Instant::now();
    let mut noticed = false;
    loop {
        let info = control.info(id)?;
        if info.state != uapi::S_DEV_LIVE || server_runs(info.ublksrv_pid) {
            return Ok(info);
        }
        if started.elapsed() >= SETTLE_WAIT {
            return Err(UblkError::NotQuiesced {
                id,
                server: info.ublksrv_pid,
                waited_s: SETTLE_WAIT.as_secs(),
            });
        }
        if !noticed && started.elapsed() >= SETTLE_NOTICE {
            noticed = true;
            tracing::info!(
                device = id,
                server = info.ublksrv_pid,
                "waiting for the kernel to quiesce the device: its server has ended"
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a map of `paths` can be served by zero copy: every path
/// takes the request's registered pages
/// ([`PathHandle::takes_kernel_buffers`]). A reload of a zero-copy
/// device must keep it so.
pub(crate) fn zero_copy_paths(paths: &[PathHandle]) -> bool {
    paths.iter().all(PathHandle::takes_kernel_buffers)
}

/// The kernel kept the data mode asked for (`data_flags`): it drops
/// flags it does not know rather than refuse them.
fn data_mode_kept(info: &DevInfo, data_flags: u64) -> Result<(), UblkError> {
    if info.flags & data_flags == data_flags {
        Ok(())
    } else {
        Err(UblkError::Unservable {
            reason: format!(
                "the kernel made the device with flags {:#x}, without {:#x} asked for",
                info.flags, data_flags
            ),
        })
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
