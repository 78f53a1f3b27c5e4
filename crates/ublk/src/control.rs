//! `/dev/ublk-control`: adding, configuring, starting, stopping and
//! deleting ublk devices. Each command is one `IORING_OP_URING_CMD` on a
//! small ring of 128-byte entries (the command's 32 bytes live in the
//! entry), submitted and waited for at once.
//!
//! # Concurrency
//! One `Control` serves one thread at a time (`&mut self`); the daemon
//! keeps it under its maps' lock. START_DEV blocks until every queue of
//! the device fetched all its tags, so the I/O threads must be running.

#![allow(unsafe_code)]

use crate::error::{StuckCommand, UblkError};
use crate::uapi::{self, CtrlCmd, DevInfo, Params};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The ublk control device.
pub(crate) struct Control {
    file: File,
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    /// A command that outlived its bound (`Control::remove_within`) and
    /// that the kernel still runs: its completion would answer the next
    /// command, so none is sent.
    stuck: Option<StuckCommand>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control").finish_non_exhaustive()
    }
}

impl Control {
    /// Opens `/dev/ublk-control`.
    ///
    /// # Errors
    /// [`UblkError::NoDriver`] without the driver, [`UblkError::NotPermitted`]
    /// without the right to open it.
    pub(crate) fn open() -> Result<Control, UblkError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/ublk-control")
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => UblkError::NoDriver,
                std::io::ErrorKind::PermissionDenied => UblkError::NotPermitted {
                    what: "opening /dev/ublk-control".into(),
                },
                _ => UblkError::system("opening /dev/ublk-control", error),
            })?;
        let ring = IoUring::builder()
            .build(4)
            .map_err(|error| UblkError::system("io_uring for /dev/ublk-control", error))?;
        Ok(Control {
            file,
            ring,
            stuck: None,
        })
    }

    /// Sends one command and waits for its answer.
    fn command(&mut self, name: &'static str, nr: u8, command: CtrlCmd) -> Result<i32, UblkError> {
        self.command_within(name, nr, command, None)
    }

    /// Sends one command and waits for its answer, at most `limit` if
    /// given: a command still running then is left to the kernel, and
    /// this control device sends no other. A bounded command names no
    /// buffer (`addr` 0), which the kernel could use after the return.
    fn command_within(
        &mut self,
        name: &'static str,
        nr: u8,
        command: CtrlCmd,
        limit: Option<Duration>,
    ) -> Result<i32, UblkError> {
        assert!(
            limit.is_none() || command.addr == 0,
            "a bounded ublk {name} names no buffer"
        );
        if let Some(stuck) = self.stuck {
            return Err(UblkError::Stuck(stuck));
        }
        let mut bytes = [0u8; 80];
        // SAFETY: CtrlCmd is repr(C), 32 bytes of plain integers, and the
        // array has room for it; the kernel reads the first 32 bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&command as *const CtrlCmd).cast::<u8>(),
                bytes.as_mut_ptr(),
                std::mem::size_of::<CtrlCmd>(),
            );
        }
        let entry = opcode::UringCmd80::new(types::Fd(self.file.as_raw_fd()), uapi::ctrl_op(nr))
            .cmd(bytes)
            .build();
        // SAFETY: the entry points at no memory but the buffer at
        // `command.addr`, which the caller keeps alive until this call
        // returns, and this call waits for the completion, unless it is
        // bounded, and a bounded command has no buffer.
        unsafe { self.ring.submission().push(&entry) }
            .expect("the control ring has room: one command at a time");
        let deadline = limit.map(|limit| Instant::now() + limit);
        loop {
            let waited = match deadline {
                None => self.ring.submit_and_wait(1),
                Some(deadline) => {
                    let left =
                        types::Timespec::from(deadline.saturating_duration_since(Instant::now()));
                    let arguments = types::SubmitArgs::new().timespec(&left);
                    self.ring.submitter().submit_with_args(1, &arguments)
                }
            };
            match waited {
                _ if !self.ring.completion().is_empty() => break,
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => {}
                Err(error) if error.raw_os_error() == Some(libc::ETIME) => {
                    let stuck = StuckCommand {
                        command: name,
                        id: command.dev_id,
                        seconds: limit.unwrap_or_default().as_secs(),
                    };
                    self.stuck = Some(stuck);
                    return Err(UblkError::Stuck(stuck));
                }
                Err(error) => return Err(UblkError::system(format!("ublk {name}"), error)),
            }
        }
        let completion = self
            .ring
            .completion()
            .next()
            .expect("submit_and_wait(1) returned a completion");
        match completion.result() {
            result if result < 0 => Err(UblkError::command(name, command.dev_id, -result)),
            result => Ok(result),
        }
    }

    /// Adds a device described by `info` (`dev_id` `u32::MAX`: the kernel
    /// chooses); returns it as the kernel completed it.
    ///
    /// # Errors
    /// [`UblkError::IdTaken`] for a number in use; any refusal.
    pub(crate) fn add(&mut self, mut info: DevInfo) -> Result<DevInfo, UblkError> {
        self.with_buffer("ADD_DEV", uapi::CMD_ADD_DEV, info.dev_id, &mut info)?;
        Ok(info)
    }

    /// Sets device `id`'s parameters.
    ///
    /// # Errors
    /// Parameters the kernel refuses.
    pub(crate) fn set_params(&mut self, id: u32, params: &Params) -> Result<(), UblkError> {
        let mut params = *params;
        self.with_buffer("SET_PARAMS", uapi::CMD_SET_PARAMS, id, &mut params)
    }

    /// Device `id`'s description.
    ///
    /// # Errors
    /// `ENODEV` (as [`UblkError::Command`]) when there is no such device.
    pub(crate) fn info(&mut self, id: u32) -> Result<DevInfo, UblkError> {
        let mut info = DevInfo::default();
        self.with_buffer("GET_DEV_INFO", uapi::CMD_GET_DEV_INFO, id, &mut info)?;
        Ok(info)
    }

    /// Device `id`'s parameters.
    ///
    /// # Errors
    /// Any refusal.
    pub(crate) fn params(&mut self, id: u32) -> Result<Params, UblkError> {
        let mut params = Params {
            len: uapi::PARAMS_LEN_DMA,
            ..Params::default()
        };
        self.with_buffer("GET_PARAMS", uapi::CMD_GET_PARAMS, id, &mut params)?;
        Ok(params)
    }

    /// The CPUs whose requests queue `queue` of added device `id` gets
    /// (the block layer's map, fixed once the device is added).
    ///
    /// # Errors
    /// Any refusal (`EINVAL` for a queue it does not have).
    pub(crate) fn queue_cpus(&mut self, id: u32, queue: u16) -> Result<Vec<u32>, UblkError> {
        // A mask of 4096 CPUs; the kernel wants at least its possible
        // CPUs' bits, in whole longs.
        let mut mask = [0u64; 64];
        let command = CtrlCmd {
            dev_id: id,
            queue_id: u16::MAX,
            len: std::mem::size_of_val(&mask) as u16,
            addr: mask.as_mut_ptr() as u64,
            data: [u64::from(queue), 0],
        };
        self.command("GET_QUEUE_AFFINITY", uapi::CMD_GET_QUEUE_AFFINITY, command)?;
        Ok((0..mask.len() * 64)
            .filter(|&cpu| mask[cpu / 64] & (1 << (cpu % 64)) != 0)
            .map(|cpu| cpu as u32)
            .collect())
    }

    /// Command `nr` for device `id` whose buffer (in, out or both) is
    /// `buffer`, one of the ABI's plain structs.
    fn with_buffer<T: Copy>(
        &mut self,
        name: &'static str,
        nr: u8,
        id: u32,
        buffer: &mut T,
    ) -> Result<(), UblkError> {
        let command = CtrlCmd {
            dev_id: id,
            queue_id: u16::MAX,
            len: std::mem::size_of::<T>() as u16,
            addr: (buffer as *mut T) as u64,
            data: [0; 2],
        };
        self.command(name, nr, command).map(drop)
    }

    /// The driver's features (`UBLK_F_*`).
    ///
    /// # Errors
    /// Any refusal (a kernel before 6.5 has no such command).
    pub(crate) fn features(&mut self) -> Result<u64, UblkError> {
        let mut features = 0u64;
        // The command names no device.
        self.with_buffer(
            "GET_FEATURES",
            uapi::CMD_GET_FEATURES,
            u32::MAX,
            &mut features,
        )?;
        Ok(features)
    }

    /// Sets live device `id`'s size to `sectors`.
    ///
    /// # Errors
    /// `EOPNOTSUPP` from a kernel without [`uapi::F_UPDATE_SIZE`]; any
    /// refusal.
    pub(crate) fn update_size(&mut self, id: u32, sectors: u64) -> Result<(), UblkError> {
        self.simple("UPDATE_SIZE", uapi::CMD_UPDATE_SIZE, id, sectors)
    }

    /// Readies quiesced device `id` (its server died) for this process.
    ///
    /// # Errors
    /// `EBUSY` while the dead server's files are still open.
    pub(crate) fn start_recovery(&mut self, id: u32) -> Result<(), UblkError> {
        self.simple("START_USER_RECOVERY", uapi::CMD_START_USER_RECOVERY, id, 0)
    }

    /// Hands recovered device `id` to this process; returns once every
    /// queue fetched all its tags.
    ///
    /// # Errors
    /// Any refusal.
    pub(crate) fn end_recovery(&mut self, id: u32) -> Result<(), UblkError> {
        self.simple(
            "END_USER_RECOVERY",
            uapi::CMD_END_USER_RECOVERY,
            id,
            std::process::id().into(),
        )
    }

    /// Starts device `id` served by this process: its disk appears.
    /// Returns once every queue fetched all its tags.
    ///
    /// # Errors
    /// Any refusal.
    pub(crate) fn start(&mut self, id: u32) -> Result<(), UblkError> {
        self.simple(
            "START_DEV",
            uapi::CMD_START_DEV,
            id,
            std::process::id().into(),
        )
    }

    /// Stops device `id`: its disk goes, and every fetch its queues
    /// hold ends with [`uapi::IO_RES_ABORT`].
    ///
    /// # Errors
    /// Any refusal.
    pub(crate) fn stop(&mut self, id: u32) -> Result<(), UblkError> {
        self.stop_within(id, None)
    }

    /// [`Control::stop`], waiting at most `limit` if given.
    fn stop_within(&mut self, id: u32, limit: Option<Duration>) -> Result<(), UblkError> {
        self.simple_within("STOP_DEV", uapi::CMD_STOP_DEV, id, 0, limit)
    }

    /// Stops device `id` and deletes it, waiting at most `limit` for
    /// each command.
    ///
    /// # Errors
    /// [`UblkError::Stuck`] for a command still running at its bound
    /// (this control device then sends no other); any refusal.
    pub(crate) fn remove_within(&mut self, id: u32, limit: Duration) -> Result<(), UblkError> {
        self.stop_within(id, Some(limit))?;
        self.delete_within(id, Some(limit))
    }

    /// Stops device `id` as [`Control::stop`] does if no one has its disk
    /// open; from then on no one can open it.
    ///
    /// # Errors
    /// `EBUSY` while someone has it open; any refusal.
    pub(crate) fn try_stop(&mut self, id: u32) -> Result<(), UblkError> {
        self.simple("TRY_STOP_DEV", uapi::CMD_TRY_STOP_DEV, id, 0)
    }

    /// Deletes stopped device `id`; waits until nothing has its char
    /// device open.
    ///
    /// # Errors
    /// Any refusal.
    pub(crate) fn delete(&mut self, id: u32) -> Result<(), UblkError> {
        self.delete_within(id, None)
    }

    /// [`Control::delete`], waiting at most `limit` if given.
    fn delete_within(&mut self, id: u32, limit: Option<Duration>) -> Result<(), UblkError> {
        self.simple_within("DEL_DEV", uapi::CMD_DEL_DEV, id, 0, limit)
    }

    fn simple(&mut self, name: &'static str, nr: u8, id: u32, data: u64) -> Result<(), UblkError> {
        self.simple_within(name, nr, id, data, None)
    }

    /// Command `nr` on device `id` with no buffer and `data` inline,
    /// waiting at most `limit` if given.
    fn simple_within(
        &mut self,
        name: &'static str,
        nr: u8,
        id: u32,
        data: u64,
        limit: Option<Duration>,
    ) -> Result<(), UblkError> {
        let command = CtrlCmd {
            dev_id: id,
            queue_id: u16::MAX,
            len: 0,
            addr: 0,
            data: [data, 0],
        };
        self.command_within(name, nr, command, limit).map(drop)
    }
}
