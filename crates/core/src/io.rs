//! I/O requests, their buffers and their outcomes, as the caller and the
//! transports see them.
//!
//! An [`Io`] owns its [`Buffer`] while it is in flight and gives it back in
//! its [`Completion`], so a caller that reuses its buffers allocates nothing
//! per I/O.
//!
//! # Errors
//! Every failure is classified once, where it is born, into a [`PathError`]
//! (the route is bad: fail the path, retry elsewhere) or a [`TargetError`]
//! (the storage itself refused: hand back to the caller unchanged). This is
//! the rule of the kernel's `blk_path_error()`. A third outcome,
//! [`PathOutcome::Busy`], is a resource shortage on the route: the I/O is
//! dispatched again and the path kept, as dm requeues on
//! `BLK_STS_RESOURCE`.

use serde::Serialize;

/// Bytes per sector, the unit of dm tables.
pub const SECTOR_SIZE: u64 = 512;

/// Alignment of every [`Buffer`]: enough for O_DIRECT on 4K-sector devices.
pub const BUFFER_ALIGN: usize = 4096;

/// One aligned block of buffer storage.
#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(4096))]
struct Block([u8; BUFFER_ALIGN]);

/// A data buffer aligned to [`BUFFER_ALIGN`], reusable across I/Os; or
/// the name of one that stays in the kernel ([`Buffer::kernel`]).
///
/// # Invariants
/// `len <= blocks.len() * BUFFER_ALIGN`, unless the buffer is a kernel
/// one, which holds no blocks.
#[derive(Clone)]
pub struct Buffer {
    blocks: Vec<Block>,
    len: usize,
    /// The index of the kernel buffer it names, if it names one.
    kernel: Option<u16>,
}

impl Buffer {
    /// A zero-filled buffer of `len` bytes.
    pub fn zeroed(len: usize) -> Self {
        let block_count = len.div_ceil(BUFFER_ALIGN);
        Buffer {
            blocks: vec![Block([0; BUFFER_ALIGN]); block_count],
            len,
            kernel: None,
        }
    }

    /// An empty buffer (for flush, discard and write-zeroes).
    pub fn empty() -> Self {
        Buffer {
            blocks: Vec::new(),
            len: 0,
            kernel: None,
        }
    }

    /// The `len` bytes of a request's own pages, registered at `index`
    /// of the submitting thread's io_uring buffer table (zero copy: a
    /// ublk device's request). It has no bytes in mpio: only a transport
    /// that names the kernel's buffer in its I/O (a file path on that
    /// thread's ring) may take it, and [`Buffer::as_slice`] and
    /// [`Buffer::as_mut_slice`] panic on it.
    pub fn kernel(index: u16, len: usize) -> Self {
        Buffer {
            blocks: Vec::new(),
            len,
            kernel: Some(index),
        }
    }

    /// The buffer table index of a [`Buffer::kernel`] buffer.
    pub fn kernel_index(&self) -> Option<u16> {
        self.kernel
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Capacity in bytes without reallocating.
    pub fn capacity(&self) -> usize {
        self.blocks.len() * BUFFER_ALIGN
    }

    /// Sets the length; grows the storage (zero-filled) only if needed.
    pub fn resize(&mut self, len: usize) {
        let block_count = len.div_ceil(BUFFER_ALIGN);
        if block_count > self.blocks.len() {
            self.blocks.resize(block_count, Block([0; BUFFER_ALIGN]));
        }
        self.len = len;
    }

    /// The bytes.
    ///
    /// # Panics
    /// On a [`Buffer::kernel`] buffer, whose bytes are not here.
    pub fn as_slice(&self) -> &[u8] {
        assert!(self.kernel.is_none(), "a kernel buffer has no bytes here");
        &bytemuck::cast_slice::<Block, u8>(&self.blocks)[..self.len]
    }

    /// The bytes, writable.
    ///
    /// # Panics
    /// On a [`Buffer::kernel`] buffer, whose bytes are not here.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        assert!(self.kernel.is_none(), "a kernel buffer has no bytes here");
        &mut bytemuck::cast_slice_mut::<Block, u8>(&mut self.blocks)[..self.len]
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.len)
            .field("kernel", &self.kernel)
            .finish()
    }
}

/// What an I/O does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Read `len` bytes at `offset` into the buffer.
    Read,
    /// Write the buffer at `offset`.
    Write,
    /// Make every acknowledged write durable.
    Flush,
    /// Discard (trim) `len` bytes at `offset`.
    Discard,
    /// Write `len` zero bytes at `offset`.
    WriteZeroes,
}

impl Op {
    /// True for operations that change the disk's content.
    pub fn is_write(self) -> bool {
        matches!(self, Op::Write | Op::Discard | Op::WriteZeroes)
    }
}

/// One I/O as the caller submits it.
#[derive(Debug)]
pub struct Io {
    /// The caller's tag, returned unchanged in the completion.
    pub user_data: u64,
    /// What to do.
    pub op: Op,
    /// Byte offset on the device.
    pub offset: u64,
    /// Byte length. For reads and writes the buffer's length must match.
    pub len: u32,
    /// Data for writes, space for reads; empty otherwise.
    pub buf: Buffer,
    /// Force unit access: a write, write-zeroes or discard completes only
    /// once it is durable, as if a flush followed it (NBD's
    /// `NBD_CMD_FLAG_FUA`, the block layer's `REQ_FUA`). Ignored for reads
    /// and flushes.
    pub fua: bool,
}

impl Io {
    /// A read of `buf.len()` bytes at `offset` into `buf`.
    ///
    /// # Panics
    /// If the buffer is 4 GiB or more (an I/O's length is a `u32`).
    pub fn read(user_data: u64, offset: u64, buf: Buffer) -> Io {
        Io::transfer(user_data, Op::Read, offset, buf)
    }

    /// A write of `buf` at `offset` (without FUA).
    ///
    /// # Panics
    /// As [`Io::read`].
    pub fn write(user_data: u64, offset: u64, buf: Buffer) -> Io {
        Io::transfer(user_data, Op::Write, offset, buf)
    }

    fn transfer(user_data: u64, op: Op, offset: u64, buf: Buffer) -> Io {
        Io {
            user_data,
            op,
            offset,
            len: u32::try_from(buf.len()).expect("an I/O's buffer is below 4 GiB"),
            buf,
            fua: false,
        }
    }
}

/// An error from the route to the storage: the path is failed and the I/O
/// is retried on another path. Never seen by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum PathError {
    /// The transport reported an error (EIO from a link, a reset, ...).
    #[error("transport error")]
    Transport,
    /// The I/O did not complete within the map's I/O timeout.
    #[error("I/O timed out")]
    Timeout,
    /// The connection to the storage was lost with the I/O in flight.
    #[error("connection lost")]
    ConnectionLost,
    /// An error nobody classified: treated as a path error, as dm does.
    #[error("unknown error")]
    Unknown,
}

/// An error from the storage itself: every path would give the same answer,
/// so it goes back to the caller unchanged and does not fail the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum TargetError {
    /// The range lies outside the device.
    #[error("out of range")]
    OutOfRange,
    /// The device is full.
    #[error("no space left")]
    NoSpace,
    /// The medium could not be read or written.
    #[error("medium error")]
    Medium,
    /// Protection information did not verify.
    #[error("protection error")]
    Protection,
    /// The device does not support the operation.
    #[error("operation not supported")]
    NotSupported,
    /// The request itself is malformed (buffer length, alignment).
    #[error("invalid request")]
    Invalid,
    /// A persistent reservation held by another host refused the I/O
    /// (SCSI RESERVATION CONFLICT, the kernel's `BLK_STS_RESV_CONFLICT`):
    /// this host is fenced from the storage, on every path alike.
    #[error("reservation conflict")]
    ReservationConflict,
}

impl TargetError {
    /// The errno a frontend reports for this error.
    pub fn errno(self) -> i32 {
        match self {
            TargetError::OutOfRange | TargetError::Invalid => 22, // EINVAL
            TargetError::NoSpace => 28,                           // ENOSPC
            TargetError::Medium | TargetError::Protection => 5,   // EIO
            TargetError::NotSupported => 95,                      // EOPNOTSUPP
            TargetError::ReservationConflict => 52,               // EBADE
        }
    }
}

/// How one attempt of an I/O on one path ended, as a transport reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathOutcome {
    /// Done.
    Ok,
    /// The route failed: retry elsewhere.
    Path(PathError),
    /// The storage refused: return to the caller.
    Target(TargetError),
    /// A resource on the route ran short (the kernel's `ENOMEM`, `EBUSY`,
    /// `EAGAIN`: dm's `BLK_STS_RESOURCE`): retry, without failing the
    /// path, within the map's attempt limit.
    Busy,
}

/// Why the multipath device failed an I/O. This is what the caller sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum IoError {
    /// The storage refused the I/O; every path would.
    #[error("target error: {0}")]
    Target(TargetError),
    /// No path was usable and the map does not queue (`fail_if_no_path`).
    #[error("no usable path and queue_if_no_path is off")]
    NoPath,
    /// The I/O waited for a path longer than the map allows.
    #[error("no usable path within the queueing limit")]
    NoPathTimeout,
    /// The I/O was retried on failed paths more times than the map allows.
    #[error("retry limit reached after repeated path errors")]
    RetryLimit,
    /// The request does not fit the device (range, buffer length).
    #[error("invalid request: {0}")]
    Invalid(&'static str),
    /// A write (or write-zeroes, discard, flush) went unanswered on a path
    /// that could not be fenced within the map's fence timeout: it may
    /// still land, so it was not retried elsewhere (see
    /// [`crate::queue`]).
    #[error("write unanswered on a path that could not be fenced")]
    Unfenced,
}

impl IoError {
    /// The errno a frontend reports for this error.
    pub fn errno(self) -> i32 {
        match self {
            IoError::Target(target) => target.errno(),
            IoError::NoPath | IoError::NoPathTimeout | IoError::RetryLimit | IoError::Unfenced => 5, // EIO
            IoError::Invalid(_) => 22, // EINVAL
        }
    }
}

/// A finished I/O handed back to the caller: exactly one per submitted [`Io`].
#[derive(Debug)]
pub struct Completion {
    /// The caller's tag from [`Io::user_data`].
    pub user_data: u64,
    /// The buffer, given back.
    pub buf: Buffer,
    /// The result.
    pub result: Result<(), IoError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_aligned_and_sized() {
        let mut buf = Buffer::zeroed(5000);
        assert_eq!(buf.len(), 5000);
        assert_eq!(buf.capacity(), 8192);
        assert_eq!(buf.as_slice().as_ptr() as usize % BUFFER_ALIGN, 0);
        buf.as_mut_slice()[4999] = 7;
        buf.resize(100);
        assert_eq!(buf.as_slice().len(), 100);
        assert_eq!(buf.capacity(), 8192);
        buf.resize(5000);
        assert_eq!(buf.as_slice()[4999], 7, "shrinking keeps storage");
        assert!(Buffer::empty().is_empty());
    }

    /// A target error reaches the caller as the errno the kernel's block
    /// status of the same kind carries (`blk_status_to_errno`).
    #[test]
    fn target_errors_carry_the_kernels_errnos() {
        let errnos = [
            (TargetError::OutOfRange, libc::EINVAL),
            (TargetError::NoSpace, libc::ENOSPC),
            (TargetError::Medium, libc::EIO),
            (TargetError::Protection, libc::EIO),
            (TargetError::NotSupported, libc::EOPNOTSUPP),
            (TargetError::Invalid, libc::EINVAL),
            (TargetError::ReservationConflict, libc::EBADE),
        ];
        for (error, errno) in errnos {
            assert_eq!(IoError::Target(error).errno(), errno, "{error}");
        }
    }
}
