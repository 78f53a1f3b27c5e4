//! The `file` transport: a regular file or a block device, driven through
//! io_uring. Several paths may name the same file: each path opens its own
//! file description, the local stand-in for several paths to one LUN.
//!
//! # Opening
//! A path word `file:/abs/path` opens the file read-write with `O_DIRECT`,
//! so I/O bypasses the page cache as it would on a multipath LUN.
//! A filesystem that refuses `O_DIRECT` (at `open` or at the first aligned
//! read, which the open makes) is a clear [`FileError::DirectRefused`],
//! never a silent fallback. `file:/abs/path?direct=0` asks for buffered I/O
//! through the page cache explicitly: data is then as durable as the
//! flushes make it, like any buffered file. The file must hold at least
//! the map's size. A file that cannot be opened, read or sized when its
//! map is built, or is smaller than the map, is a path that cannot serve
//! yet: it starts failed and is opened again in the background until it
//! can (`late.rs`).
//!
//! # Operations
//! | op | regular file | block device |
//! |---|---|---|
//! | read, write | `IORING_OP_READ`/`WRITE` at the offset; a short transfer is continued | same |
//! | flush | `fdatasync` (`IORING_OP_FSYNC`, `DATASYNC`) | same: the device's cache flush |
//! | discard | `fallocate(PUNCH_HOLE \| KEEP_SIZE)`: reads back zeroes | the device's own discard: io_uring's `BLOCK_URING_CMD_DISCARD` (`BLKDISCARD` without blocking the thread; Linux 6.12) |
//! | write-zeroes | `fallocate(ZERO_RANGE \| KEEP_SIZE)` | same: the kernel's zero-out |
//! | FUA | a write with `RWF_DSYNC`; a discard or write-zeroes followed by `fdatasync` before it completes | same (`RWF_DSYNC` on O_DIRECT is the device's FUA write) |
//!
//! (A punch-hole `fallocate` on a block device is a write-zeroes that
//! must unmap, which a device without write-zeroes refuses even where it
//! discards: `blkdiscard` over null_blk failed so.)
//!
//! Where the file system or device cannot do an operation (tmpfs has no
//! `ZERO_RANGE`), the kernel's `EOPNOTSUPP` becomes
//! [`TargetError::NotSupported`]: every path to the same storage would
//! answer the same, so the path is not failed. A discard is the
//! exception ([`outcome_of_errno`]): it is a hint (NBD's TRIM: the client
//! may assume nothing of the range until it writes it again; the block
//! layer's discard likewise), so one the storage cannot do (a device
//! without discard, a kernel without the io_uring command, a file system
//! without holes) completes as done, having changed nothing.
//!
//! # Errors
//! Each errno is classified once, by [`classify_errno`], as dm-multipath
//! classifies the kernel's block statuses (`blk_path_error`, with
//! `BLK_STS_RESOURCE` requeued):
//!
//! | errno | kernel status | class | what happens |
//! |---|---|---|---|
//! | `EIO`, `ENOLINK` | `IOERR`, `TRANSPORT` | path error (transport) | path failed, I/O retried on another path |
//! | `ETIMEDOUT` | `TIMEOUT` | path error (timeout) | same |
//! | `ENODEV`, `ENXIO`, `EBADF` | `OFFLINE`, the device gone, a revoked file | path error (connection lost) | same |
//! | any other errno | unknown | path error (unknown) | same |
//! | `ENOMEM`, `EBUSY`, `EAGAIN`, `EINTR` | `RESOURCE`, `AGAIN` | busy | retried (the same path may take it), the path kept; within the map's attempt limit |
//! | `EREMOTEIO`, `ENODATA` | `TARGET`, `MEDIUM` | target error (medium) | back to the caller (EIO), no path failed |
//! | `EILSEQ` | `PROTECTION` | target error (protection) | same (EIO) |
//! | `EBADE` | `RESV_CONFLICT` (`NEXUS` before 6.5) | target error (reservation conflict: another host holds the LUN's reservation, so every path is refused alike) | same (EBADE) |
//! | `ENOSPC`, `EDQUOT` | `NOSPC` | target error (no space) | same (ENOSPC) |
//! | `EOPNOTSUPP`, `EROFS`, `EPERM`, `EACCES` | `NOTSUPP` | target error (not supported) | same (EOPNOTSUPP) |
//! | `EINVAL` | the request is malformed | target error (invalid) | same (EINVAL) |
//! | `EFAULT` | the request's memory is gone (a zero-copy request whose tag ended) | target error (invalid) | same (EINVAL) |
//! | `EFBIG`, `EOVERFLOW` | beyond the file | target error (out of range) | same (EINVAL) |
//!
//! `EAGAIN` and `EINTR` are first resubmitted by the ring itself a few
//! times. A read that finds the end of the file before the end of the
//! request is [`TargetError::OutOfRange`] for a regular file (it shrank
//! under the map: every path to it sees the same). On a **block device**
//! it is a path error, and so is `ENOSPC`: `Transports::build` checked
//! that the device holds the map, so an I/O inside the map that meets the
//! device's end means the device went away (a deleted disk's capacity
//! drops to zero: reads end at once, writes get `ENOSPC`) — that path is
//! gone, not the storage ([`outcome_of_errno`]).

//! # Fault switch
//! [`FilePath::revoke`] takes the path's file away from every ring that
//! uses it: each queue replaces its registered file with an empty slot, so
//! the kernel itself fails every I/O submitted after it with `EBADF`
//! (classified as a lost connection), as if the device had gone. I/O the
//! kernel already holds completes normally. [`FilePath::restore`] puts the
//! file back. Tests use it to fail and heal one path of several to the
//! same file; an operator could use it to take a path out of service.

mod late;
mod limits;
mod ring;
mod ring_share;

use crate::blockdev::node_of;
use crate::limits::{Limits, ServedAs};
use crate::unready::Unready;
use mpio_core::io::{Buffer, Op, PathError, PathOutcome, TargetError, BUFFER_ALIGN};
pub(crate) use ring::FileQueue;
pub use ring_share::{is_path_completion, RingShare};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// What to change when the kernel refuses to set up an io_uring, by the
/// error it gave: for the user, beside the error itself.
pub(crate) fn ring_setup_hint(error: &std::io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::ENOMEM) => {
            "the locked-memory limit (RLIMIT_MEMLOCK) may be too low for io_uring's rings: \
             raise it (ulimit -l, or LimitMEMLOCK= in the systemd unit), or lower the queue \
             depth"
        }
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "io_uring is not allowed here: the sysctl kernel.io_uring_disabled (set it to 0), \
             a seccomp filter or a container runtime forbids it"
        }
        Some(libc::ENOSYS) => "this kernel has no io_uring (Linux 5.6 or later is needed)",
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            "out of file descriptors: raise the limit (ulimit -n, or LimitNOFILE=)"
        }
        _ => "file paths need io_uring",
    }
}

/// Why a file path could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// The file system refuses `O_DIRECT`.
    #[error(
        "{path}: the file system refuses O_DIRECT (EINVAL); add ?direct=0 to the path word \
         for buffered I/O through the page cache"
    )]
    DirectRefused {
        /// The file.
        path: PathBuf,
    },
    /// The path names something that holds no blocks.
    #[error("{path} is neither a regular file nor a block device")]
    NotStorage {
        /// The file.
        path: PathBuf,
    },
    /// io_uring is not available to this process (disabled by the
    /// `kernel.io_uring_disabled` sysctl, seccomp, or an old kernel), or
    /// a ring cannot be had (RLIMIT_MEMLOCK): see `ring_setup_hint`.
    #[error("{path}: cannot set up io_uring: {source}; {}", ring_setup_hint(.source))]
    Ring {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// The size or the first block could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: std::io::Error,
    },
}

/// What opening a file path found.
#[derive(Debug)]
struct Opened {
    file: File,
    block_device: bool,
    size_bytes: u64,
    /// What the storage takes, read at open.
    limits: Limits,
}

impl Opened {
    /// Opens `path` read-write, with `O_DIRECT` unless `direct` is false,
    /// and reads what it holds and takes.
    fn open(path: &Path, direct: bool) -> Result<Opened, FileError> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let refused = || FileError::DirectRefused {
            path: path.to_path_buf(),
        };
        let file = options.open(node_of(path)).map_err(|source| {
            if direct && source.raw_os_error() == Some(libc::EINVAL) {
                refused()
            } else {
                FileError::Open {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        let read_error = |source| FileError::Read {
            path: path.to_path_buf(),
            source,
        };
        let metadata = file.metadata().map_err(read_error)?;
        let block_device = metadata.file_type().is_block_device();
        let size_bytes = if block_device {
            // A block device's size is where a seek to its end lands.
            (&file).seek(SeekFrom::End(0)).map_err(read_error)?
        } else if metadata.is_file() {
            metadata.len()
        } else {
            return Err(FileError::NotStorage {
                path: path.to_path_buf(),
            });
        };
        if direct {
            // Some file systems accept O_DIRECT at open and refuse it at
            // the first I/O: find out now, with an aligned block.
            let mut block = Buffer::zeroed(BUFFER_ALIGN);
            if let Err(source) = file.read_at(block.as_mut_slice(), 0) {
                return Err(if source.raw_os_error() == Some(libc::EINVAL) {
                    refused()
                } else {
                    read_error(source)
                });
            }
        }
        // Every queue to the path is a ring: find out now, with a clear
        // error, if rings cannot be made, rather than at the first I/O.
        io_uring::IoUring::new(1).map_err(|source| FileError::Ring {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Opened {
            limits: limits::limits_of(&file, direct),
            file,
            block_device,
            size_bytes,
        })
    }
}

/// One file path, shared by every thread's queue to it: opened, or (a
/// path of a map that could not be opened, read or sized when the map
/// was built) waiting to be (see `FilePath::open_for`).
#[derive(Debug)]
pub struct FilePath {
    path: PathBuf,
    direct: bool,
    /// Set once, when the file is open and fit for its map.
    opened: OnceLock<Opened>,
    /// The map's size: a file smaller than it cannot serve yet.
    map_bytes: u64,
    /// What a file that opens late must take.
    served_as: ServedAs,
    /// Why the file is not open yet: the last attempt's error.
    unready: Unready,
    /// An open is being tried in the background (`late.rs`).
    opening: AtomicBool,
    /// Set by [`FilePath::revoke`], cleared by [`FilePath::restore`].
    revoked: AtomicBool,
    /// Bumped on every revoke and restore, and when the file opens, so a
    /// queue notices with one load that it must update its ring.
    switches: AtomicU64,
}

impl FilePath {
    /// A path to `path`, for a map of `map_bytes` served as `served_as`,
    /// that is not open: its queues fail every I/O as a lost connection,
    /// and each submission to one has the file opened again in the
    /// background until it opens, holds the map and takes what its
    /// devices send.
    fn unopened(path: &Path, direct: bool, map_bytes: u64, served_as: &[Limits]) -> FilePath {
        FilePath {
            path: path.to_path_buf(),
            direct,
            opened: OnceLock::new(),
            map_bytes,
            served_as: ServedAs::new(served_as),
            unready: Unready::default(),
            opening: AtomicBool::new(false),
            revoked: AtomicBool::new(false),
            switches: AtomicU64::new(0),
        }
    }

    /// Opens `path` for a map of `map_bytes`, served as `served_as`
    /// (block devices' limits). A file that cannot
    /// be opened, read or sized, or is smaller than the map, is a path
    /// that is not open yet ([`FilePath::unready`] says why); only what
    /// no later attempt can change (`O_DIRECT` refused, a file that
    /// holds no blocks, no io_uring) is an error. Whether an opened
    /// file takes what the map's block devices send is the caller's to
    /// check ([`FilePath::limits`]); a file that opens later is checked
    /// for it here (`late.rs`).
    ///
    /// # Errors
    /// [`FileError::DirectRefused`], [`FileError::NotStorage`],
    /// [`FileError::Ring`].
    pub(crate) fn open_for(
        path: &Path,
        direct: bool,
        map_bytes: u64,
        served_as: &[Limits],
    ) -> Result<FilePath, FileError> {
        let file = FilePath::unopened(path, direct, map_bytes, served_as);
        // What the map's devices send is checked with the other paths'
        // limits (a reload that asks too much is refused whole).
        match Opened::open(path, direct) {
            Ok(opened) => match file.too_small(&opened) {
                None => {
                    let _ = file.opened.set(opened);
                }
                Some(why) => drop(file.unready.note(why)),
            },
            Err(error @ (FileError::Open { .. } | FileError::Read { .. })) => {
                file.unready.note(error.to_string());
            }
            Err(error) => return Err(error),
        }
        Ok(file)
    }

    /// The bytes `path` holds now (a block device's size, a regular
    /// file's length), read from a fresh open as a path opens it.
    ///
    /// # Errors
    /// As a path's open: [`FileError::Open`], [`FileError::Read`],
    /// [`FileError::NotStorage`], [`FileError::DirectRefused`].
    pub(crate) fn size_now(path: &Path, direct: bool) -> Result<u64, FileError> {
        Opened::open(path, direct).map(|opened| opened.size_bytes)
    }

    /// Why the path is not open yet; `None` once it is.
    pub fn unready(&self) -> Option<String> {
        self.unready
            .reason(self.opened.get().is_some(), "not opened yet")
    }

    /// Adds `limits` to what the file must take if it opens from now on:
    /// a block device advertising them now serves the map.
    pub fn require(&self, limits: Limits) {
        self.served_as.require(limits);
    }

    /// Why `opened` cannot serve its map now: it is smaller (it may grow,
    /// or a device reporting 0 bytes may come back).
    fn too_small(&self, opened: &Opened) -> Option<String> {
        (opened.size_bytes < self.map_bytes).then(|| {
            format!(
                "it holds {} bytes but the map needs {}",
                opened.size_bytes, self.map_bytes
            )
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size in bytes when opened; `None` while not open.
    pub fn size_bytes(&self) -> Option<u64> {
        self.opened.get().map(|opened| opened.size_bytes)
    }

    /// What the storage takes: its queue limits (a block device) or its
    /// file system's (a regular file), read at open; `None` while not
    /// open.
    pub fn limits(&self) -> Option<Limits> {
        self.opened.get().map(|opened| opened.limits)
    }

    /// True for a block device, false for a regular file (or a path not
    /// open yet).
    pub fn is_block_device(&self) -> bool {
        self.opened.get().is_some_and(|opened| opened.block_device)
    }

    /// Makes the kernel fail every I/O submitted on this path from now on
    /// (see the module docs).
    pub fn revoke(&self) {
        self.revoked.store(true, Ordering::Relaxed);
        // Release: a queue that sees the new count (Acquire) sees the flag.
        self.switches.fetch_add(1, Ordering::Release);
    }

    /// Undoes [`FilePath::revoke`] for I/O submitted from now on.
    pub fn restore(&self) {
        self.revoked.store(false, Ordering::Relaxed);
        // Release: as in `revoke`.
        self.switches.fetch_add(1, Ordering::Release);
    }

    /// Opens one thread's queue to this path, for `depth` I/Os in flight,
    /// on the thread's ring `share` if given.
    pub(crate) fn open_queue(
        self: &std::sync::Arc<Self>,
        depth: usize,
        share: Option<RingShare>,
    ) -> FileQueue {
        FileQueue::new(std::sync::Arc::clone(self), depth, share)
    }

    /// The switch count and the file a ring should use with it: none while
    /// the path is revoked or not open.
    fn switch_state(&self) -> (u64, Option<&Opened>) {
        // Acquire pairs with the Release in `revoke`/`restore` and in the
        // late open: the flag and the opened file are seen with the count.
        let switches = self.switches.load(Ordering::Acquire);
        let file = match self.revoked.load(Ordering::Relaxed) {
            true => None,
            false => self.opened.get(),
        };
        (switches, file)
    }
}

/// How an errno that ended an `op` is reported: as [`classify_errno`]
/// says, except that a discard the storage cannot do (`EOPNOTSUPP`) is the
/// hint it is, done, and that a block device answering `ENOSPC` has gone
/// (see the module docs).
pub(crate) fn outcome_of_errno(op: Op, errno: i32, block_device: bool) -> PathOutcome {
    match (op, errno) {
        (Op::Discard, libc::EOPNOTSUPP) => PathOutcome::Ok,
        (_, libc::ENOSPC) if block_device => vanished(),
        _ => classify_errno(errno),
    }
}

/// A read or write that met the end of the file before the end of the
/// request: a regular file shrank (every path sees it), a block device
/// went away (see the module docs).
pub(crate) fn end_of_file(block_device: bool) -> PathOutcome {
    if block_device {
        vanished()
    } else {
        PathOutcome::Target(TargetError::OutOfRange)
    }
}

/// A block device that is gone from under its path.
fn vanished() -> PathOutcome {
    PathOutcome::Path(PathError::ConnectionLost)
}

/// How an errno from a file operation is reported: the table in the
/// module docs.
pub(crate) fn classify_errno(errno: i32) -> PathOutcome {
    match errno {
        libc::EOPNOTSUPP => PathOutcome::Target(TargetError::NotSupported),
        libc::ENOSPC | libc::EDQUOT => PathOutcome::Target(TargetError::NoSpace),
        libc::ENODATA | libc::EREMOTEIO => PathOutcome::Target(TargetError::Medium),
        libc::EILSEQ => PathOutcome::Target(TargetError::Protection),
        libc::EBADE => PathOutcome::Target(TargetError::ReservationConflict),
        // EFAULT: the I/O's memory is not there (a zero-copy request's
        // pages the kernel already let go, its tag ended): the caller's.
        libc::EINVAL | libc::EFAULT => PathOutcome::Target(TargetError::Invalid),
        libc::EFBIG | libc::EOVERFLOW => PathOutcome::Target(TargetError::OutOfRange),
        libc::EROFS | libc::EPERM | libc::EACCES => PathOutcome::Target(TargetError::NotSupported),
        libc::ENOMEM | libc::EBUSY | libc::EAGAIN | libc::EINTR => PathOutcome::Busy,
        libc::ETIMEDOUT => PathOutcome::Path(PathError::Timeout),
        libc::EBADF | libc::ENODEV | libc::ENXIO => vanished(),
        libc::EIO | libc::ENOLINK => PathOutcome::Path(PathError::Transport),
        _ => PathOutcome::Path(PathError::Unknown),
    }
}

#[cfg(test)]
impl FilePath {
    /// A buffered path over any open file, claiming `size_bytes`: a pipe,
    /// in tests, whose reads stay in the kernel until it is written.
    pub(crate) fn over(file: File, size_bytes: u64) -> FilePath {
        let path = FilePath::unopened(Path::new("(test file)"), false, 0, &[]);
        let _ = path.opened.set(Opened {
            file,
            block_device: false,
            size_bytes,
            limits: Limits::ANY,
        });
        path
    }
}

/// A pipe's read and write ends: a read stays in the kernel until
/// something is written (a path that hangs, in tests).
#[cfg(test)]
pub(crate) fn pipe() -> (File, File) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    (
        File::from(std::os::fd::OwnedFd::from(reader)),
        File::from(std::os::fd::OwnedFd::from(writer)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A discard the storage cannot do is the hint NBD's TRIM is: done,
    /// with nothing changed (it once went back as an error, and the NBD
    /// client saw EOPNOTSUPP); any other operation it cannot do is still
    /// the target's refusal, and a discard's other errors keep their
    /// class.
    #[test]
    fn a_discard_the_storage_cannot_do_is_a_hint_done() {
        assert_eq!(
            outcome_of_errno(Op::Discard, libc::EOPNOTSUPP, false),
            PathOutcome::Ok
        );
        assert_eq!(
            outcome_of_errno(Op::WriteZeroes, libc::EOPNOTSUPP, false),
            PathOutcome::Target(TargetError::NotSupported)
        );
        assert_eq!(
            outcome_of_errno(Op::Discard, libc::EIO, false),
            PathOutcome::Path(PathError::Transport)
        );
        assert_eq!(
            outcome_of_errno(Op::Discard, libc::EINVAL, false),
            PathOutcome::Target(TargetError::Invalid)
        );
    }

    /// A ring the kernel refuses reaches the user with what to change
    /// (the hint is all a test can check here: this kernel charges rings
    /// to the memory cgroup, not to RLIMIT_MEMLOCK, and disabling io_uring
    /// host-wide would disturb other users).
    #[test]
    fn a_refused_ring_says_what_to_change() {
        let refused = |errno| {
            FileError::Ring {
                path: "/dev/sdz".into(),
                source: std::io::Error::from_raw_os_error(errno),
            }
            .to_string()
        };
        let message = refused(libc::ENOMEM);
        assert!(
            message.starts_with("/dev/sdz: cannot set up io_uring: "),
            "{message}"
        );
        assert!(message.contains("ulimit -l"), "{message}");
        assert!(refused(libc::EPERM).contains("kernel.io_uring_disabled"));
        assert!(refused(libc::ENOSYS).contains("Linux 5.6"));
        assert!(refused(libc::EMFILE).contains("ulimit -n"));
    }

    /// The table of the module docs, row by row: each errno it names
    /// lands in its class.
    #[test]
    fn errnos_split_as_blk_path_error_does() {
        use PathOutcome::{Busy, Path, Target};
        let table = [
            (libc::EIO, Path(PathError::Transport)),
            (libc::ENOLINK, Path(PathError::Transport)),
            (libc::EBADE, Target(TargetError::ReservationConflict)),
            (libc::ETIMEDOUT, Path(PathError::Timeout)),
            (libc::ENODEV, Path(PathError::ConnectionLost)),
            (libc::ENXIO, Path(PathError::ConnectionLost)),
            (libc::EBADF, Path(PathError::ConnectionLost)),
            (0, Path(PathError::Unknown)),
            (9999, Path(PathError::Unknown)),
            (libc::ENOMEM, Busy),
            (libc::EBUSY, Busy),
            (libc::EAGAIN, Busy),
            (libc::EREMOTEIO, Target(TargetError::Medium)),
            (libc::ENODATA, Target(TargetError::Medium)),
            (libc::EILSEQ, Target(TargetError::Protection)),
            (libc::ENOSPC, Target(TargetError::NoSpace)),
            (libc::EOPNOTSUPP, Target(TargetError::NotSupported)),
            (libc::EINVAL, Target(TargetError::Invalid)),
        ];
        for (errno, class) in table {
            assert_eq!(classify_errno(errno), class, "errno {errno}");
        }
    }

    /// A block device that meets its end inside the map has gone: a path
    /// error, where a regular file that shrank is the target's answer
    /// (the vanished device once reached NBD clients as EINVAL).
    #[test]
    fn a_block_device_that_ends_early_has_gone() {
        let lost = PathOutcome::Path(PathError::ConnectionLost);
        assert_eq!(end_of_file(true), lost);
        assert_eq!(
            end_of_file(false),
            PathOutcome::Target(TargetError::OutOfRange)
        );
        assert_eq!(outcome_of_errno(Op::Write, libc::ENOSPC, true), lost);
        assert_eq!(
            outcome_of_errno(Op::Write, libc::ENOSPC, false),
            PathOutcome::Target(TargetError::NoSpace)
        );
    }
}
