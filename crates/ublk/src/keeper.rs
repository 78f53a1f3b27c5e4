//! How long a released device ([`crate::Engine::release`]) waits for its
//! next server. Once its server has ended, a device's I/O waits in the
//! kernel for as long as no server comes; [`keep`] bounds that wait. It
//! runs in a process of its own, started by the server that released the
//! devices, and ends as soon as every device is taken over or gone.
//!
//! # Who may remove a device
//! Every running engine holds [`LOCK_FILE`] shared for its life
//! ([`ServerLock`]). At the bound, [`keep`] removes the devices still
//! waiting only while it holds the lock exclusively: never while a server
//! runs, which may be taking one over at that moment (a device's
//! recovery spans several commands). With a server running, it goes on
//! watching until that server takes the devices over or ends.
//!
//! # A removal that does not end
//! The kernel may take a removal's commands for ever: STOP_DEV while the
//! disk's I/O never ends, DEL_DEV while someone holds the char device
//! open. Holding the lock that long would keep every server from
//! starting, so each command is bounded ([`REMOVAL_BOUND`]): a device
//! whose command outlives it is reported not removed, as is every device
//! after it (the control device sends nothing more), and the lock goes
//! as [`keep`] returns. The command itself stays with the kernel.

#![allow(unsafe_code)]

use crate::control::Control;
use crate::uapi;
use crate::UblkError;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The lock every ublk server holds shared while it runs; outside
/// `/run/mpio`, which a service manager may remove at a stop while a
/// keeper still watches.
pub const LOCK_FILE: &str = "/run/mpio-ublk.lock";

/// How often [`keep`] looks at the devices it watches.
const WATCH_EVERY: Duration = Duration::from_millis(100);
/// How long [`keep`] waits for each command of a removal (see the
/// module docs): seconds on hardware even with the disk's waiting I/O
/// to fail, and well within this under emulation.
const REMOVAL_BOUND: Duration = Duration::from_secs(15);

/// [`LOCK_FILE`], held shared: a ublk server runs.
#[derive(Debug)]
pub(crate) struct ServerLock {
    _file: File,
}

/// Opens [`LOCK_FILE`], made if need be.
fn open_lock() -> Result<File, UblkError> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_FILE)
        .map_err(|error| UblkError::system(format!("opening {LOCK_FILE}"), error))
}

/// `flock(file, operation)`, retried when a signal interrupts it; false
/// when a non-blocking lock is held by another.
fn flock(file: &File, operation: i32) -> Result<bool, UblkError> {
    loop {
        // SAFETY: flock on a descriptor `file` owns; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(UblkError::system(format!("locking {LOCK_FILE}"), error)),
        }
    }
}

impl ServerLock {
    /// Takes [`LOCK_FILE`] shared, waiting while a keeper removes
    /// devices under it.
    ///
    /// # Errors
    /// The file cannot be made or locked.
    pub(crate) fn take() -> Result<ServerLock, UblkError> {
        let file = open_lock()?;
        flock(&file, libc::LOCK_SH)?;
        Ok(ServerLock { _file: file })
    }
}

/// Process `pid` exists (a signal could be sent to it).
pub(crate) fn server_runs(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; kill only checks that `pid` exists.
    let sent = unsafe { libc::kill(pid, 0) } == 0;
    sent || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// What [`keep`] saw become of each device it watched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// Taken over by a new server.
    pub taken_over: Vec<u32>,
    /// Removed by someone else, or never there.
    pub gone: Vec<u32>,
    /// Removed at the bound, their waiting I/O failed.
    pub removed: Vec<u32>,
    /// Could not be removed at the bound, and why.
    pub not_removed: Vec<(u32, String)>,
}

/// Watches `devices`, released by the server `released_by` (a process
/// id), until each is taken over by a new server or gone; those still waiting `bound` after
/// the call are removed (their waiting I/O fails) once no server runs
/// (see the module docs).
///
/// # Errors
/// The control device or the lock cannot be opened.
pub fn keep(devices: &[u32], released_by: i32, bound: Duration) -> Result<Kept, UblkError> {
    let deadline = Instant::now() + bound;
    let lock = open_lock()?;
    let mut control = Control::open()?;
    let mut kept = Kept::default();
    let mut waiting = devices.to_vec();
    loop {
        waiting.retain(|&id| match control.info(id) {
            Ok(info) if info.state == uapi::S_DEV_QUIESCED => true,
            // Until the kernel quiesces it, the device still names the
            // server that released it, or (7.3 was seen to) a process
            // that is not running: a device is taken over only by a
            // server that runs.
            Ok(info)
                if info.state == uapi::S_DEV_LIVE
                    && (info.ublksrv_pid == released_by || !server_runs(info.ublksrv_pid)) =>
            {
                true
            }
            Ok(info) if info.state == uapi::S_DEV_LIVE => {
                kept.taken_over.push(id);
                false
            }
            // Stopped, or deleted: not ours to wait for any more.
            Ok(_) => {
                kept.gone.push(id);
                false
            }
            Err(error) if error.errno() == Some(libc::ENODEV) => {
                kept.gone.push(id);
                false
            }
            // Asked again at the next look.
            Err(_) => true,
        });
        if waiting.is_empty() {
            return Ok(kept);
        }
        if Instant::now() >= deadline && flock(&lock, libc::LOCK_EX | libc::LOCK_NB)? {
            for id in waiting {
                // STOP_DEV ends a quiesced device's wait: its I/O fails.
                match control.remove_within(id, REMOVAL_BOUND) {
                    Ok(()) => kept.removed.push(id),
                    Err(error) => kept.not_removed.push((id, error.to_string())),
                }
            }
            return Ok(kept);
        }
        std::thread::sleep(WATCH_EVERY);
    }
}
