//! The ublk frontend's errors: each says what failed and, where the
//! user can fix it, how.

/// Why a ublk device could not be created, started or removed.
#[derive(Debug, thiserror::Error)]
pub enum UblkError {
    /// `/dev/ublk-control` is missing: the driver is not loaded.
    #[error("no /dev/ublk-control: load the ublk driver (modprobe ublk_drv; Linux 6.0 or later)")]
    NoDriver,
    /// The caller may not create ublk devices.
    #[error("{what}: permission denied (creating ublk devices needs root, or CAP_SYS_ADMIN)")]
    NotPermitted {
        /// What was refused.
        what: String,
    },
    /// The device number asked for is in use.
    #[error("ublk device {id} exists already: choose another number, or `ublk = true` to let the kernel choose")]
    IdTaken {
        /// The number asked for.
        id: u32,
    },
    /// The device number asked for is a device whose server has ended
    /// but which the kernel has not quiesced, so no server can take it
    /// over.
    #[error(
        "ublk device {id} cannot be taken over: its server (pid {server}) has ended, but the \
         kernel has not quiesced the device in {waited_s} s (its I/O waits); a kernel whose \
         quiesce is stuck keeps it so until a reboot"
    )]
    NotQuiesced {
        /// The number asked for.
        id: u32,
        /// The server the kernel still names.
        server: i32,
        /// How long this server waited, s.
        waited_s: u64,
    },
    /// A control command failed.
    #[error("ublk {command} for device {id}: {source}")]
    Command {
        /// The command.
        command: &'static str,
        /// The device (`u32::MAX`: not chosen yet).
        id: u32,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// A system call outside the commands failed.
    #[error("{what}: {source}")]
    System {
        /// What was being done.
        what: String,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// A control command did not return within its bound: the kernel
    /// still runs it, and the control device takes no other until it
    /// does.
    #[error("ublk {} for device {} did not return within {} s: the kernel still holds it (its disk's I/O does not end, or its char device /dev/ublkc{} is still open)", .0.command, .0.id, .0.seconds, .0.id)]
    Stuck(StuckCommand),
    /// A device whose server died cannot be taken over by this one.
    #[error("ublk device {id} waits for its dead server but cannot be taken over: {reason} (start mpio with the map it served, on as many CPUs)")]
    Recovery {
        /// The device.
        id: u32,
        /// Why.
        reason: String,
    },
    /// The map's paths take no block device the driver can make.
    #[error("the map cannot be a ublk device: {reason}")]
    Unservable {
        /// What the paths take that the driver cannot match.
        reason: String,
    },
    /// The running kernel's driver lacks a feature.
    #[error(
        "the ublk driver of this kernel ({}) cannot {what}: that needs {needs}",
        kernel_release()
    )]
    Unsupported {
        /// What it cannot do.
        what: &'static str,
        /// The feature it would need, and the first kernel with it.
        needs: &'static str,
    },
    /// The I/O threads are gone (a thread panicked and the daemon is
    /// going down).
    #[error("the ublk I/O threads have stopped")]
    EngineStopped,
}

/// A control command that outlived its bound ([`UblkError::Stuck`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StuckCommand {
    /// The command.
    pub command: &'static str,
    /// The device.
    pub id: u32,
    /// Its bound, seconds.
    pub seconds: u64,
}

impl UblkError {
    /// An error from `errno` for `command` on device `id`, with the
    /// hint a user can act on where there is one.
    pub(crate) fn command(command: &'static str, id: u32, errno: i32) -> UblkError {
        match errno {
            libc::EPERM | libc::EACCES => UblkError::NotPermitted {
                what: format!("ublk {command}"),
            },
            libc::EEXIST if command == "ADD_DEV" && id != u32::MAX => UblkError::IdTaken { id },
            _ => UblkError::Command {
                command,
                id,
                source: std::io::Error::from_raw_os_error(errno),
            },
        }
    }

    /// The errno behind a failed command, if that is what it is.
    pub fn errno(&self) -> Option<i32> {
        match self {
            UblkError::Command { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// A failed system call.
    pub(crate) fn system(what: impl Into<String>, source: std::io::Error) -> UblkError {
        UblkError::System {
            what: what.into(),
            source,
        }
    }
}

/// The running kernel's release (`uname -r`), or `unknown release`.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|release| format!("Linux {}", release.trim()))
        .unwrap_or_else(|_| "unknown release".into())
}
