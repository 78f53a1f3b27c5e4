//! The ublk user-space ABI (`include/uapi/linux/ublk_cmd.h`), the part
//! mpio uses, written out by hand so that building needs neither the
//! kernel headers nor bindgen and libclang. `uapi_header.rs` compiles a
//! C program against the newest kernel's header and checks every size,
//! offset and constant here against it.
//!
//! Commands are the ioctl-encoded forms (`UBLK_U_CMD_*`,
//! `UBLK_U_IO_*`), which every kernel with ublk accepts from 6.0 on,
//! whatever `CONFIG_BLKDEV_UBLK_LEGACY_OPCODES` says.

/// Control commands, sent to `/dev/ublk-control` (`_IOC_NR` values).
/// The CPUs whose requests a queue (`data[0]`) of an added device gets,
/// as a CPU mask.
pub(crate) const CMD_GET_QUEUE_AFFINITY: u8 = 0x01;
/// Reads a device's description.
pub(crate) const CMD_GET_DEV_INFO: u8 = 0x02;
/// Adds a device (`ublksrv_ctrl_dev_info` in, and back with its id).
pub(crate) const CMD_ADD_DEV: u8 = 0x04;
/// Deletes a stopped device; waits until its char device is closed.
pub(crate) const CMD_DEL_DEV: u8 = 0x05;
/// Starts the disk once every queue fetched all its tags.
pub(crate) const CMD_START_DEV: u8 = 0x06;
/// Removes the disk; pending fetches end with [`IO_RES_ABORT`].
pub(crate) const CMD_STOP_DEV: u8 = 0x07;
/// Sets the device's parameters (`ublk_params`).
pub(crate) const CMD_SET_PARAMS: u8 = 0x08;
/// Reads the device's parameters (`ublk_params`).
pub(crate) const CMD_GET_PARAMS: u8 = 0x09;
/// Readies a quiesced device (its server died) for a new server.
pub(crate) const CMD_START_USER_RECOVERY: u8 = 0x10;
/// Hands a recovered device to the new server once every queue fetched
/// all its tags; the waiting requests flow again.
pub(crate) const CMD_END_USER_RECOVERY: u8 = 0x11;
/// Reads the driver's features (`UBLK_F_*`, 8 bytes), no device needed.
pub(crate) const CMD_GET_FEATURES: u8 = 0x13;
/// Sets a live device's size in sectors (`data[0]`); the disk's
/// capacity changes and the kernel tells user space (a uevent).
pub(crate) const CMD_UPDATE_SIZE: u8 = 0x15;
/// Stops a device only if no one has its disk open (`EBUSY` otherwise),
/// and refuses every open from then on.
pub(crate) const CMD_TRY_STOP_DEV: u8 = 0x17;

/// Device state (`ublksrv_ctrl_dev_info::state`): no disk.
pub(crate) const S_DEV_DEAD: u16 = 0;
/// Served: its disk takes I/O.
pub(crate) const S_DEV_LIVE: u16 = 1;
/// Its server died; its requests wait for a new one (user recovery).
pub(crate) const S_DEV_QUIESCED: u16 = 2;

/// Queue commands, sent to `/dev/ublkcN`.
pub(crate) const IO_FETCH_REQ: u8 = 0x20;
/// Completes a request and fetches the tag's next one.
pub(crate) const IO_COMMIT_AND_FETCH_REQ: u8 = 0x21;
/// Gives a write's buffer, into which the kernel then copies its data.
pub(crate) const IO_NEED_GET_DATA: u8 = 0x22;

/// A fetch completed with a request to serve.
pub(crate) const IO_RES_OK: i32 = 0;
/// A fetch completed with a write whose buffer the kernel asks for
/// (with [`F_NEED_GET_DATA`]).
pub(crate) const IO_RES_NEED_GET_DATA: i32 = 1;
/// The queue is going away (device stopped or deleted): stop using it.
pub(crate) const IO_RES_ABORT: i32 = -libc::ENODEV;

/// Offset of the request descriptors in `/dev/ublkcN` for `mmap`.
pub(crate) const CMD_BUF_OFFSET: i64 = 0;
/// Most tags a queue may have; queue `q`'s descriptors start at
/// `q * MAX_QUEUE_DEPTH * size_of::<IoDesc>()`, rounded up to a page.
pub(crate) const MAX_QUEUE_DEPTH: usize = 4096;

/// Device flags (`ublksrv_ctrl_dev_info::flags`): the request's own
/// pages may be registered as an io_uring buffer (zero copy).
pub(crate) const F_SUPPORT_ZERO_COPY: u64 = 1 << 0;
/// A write's buffer is asked for when the write arrives, not given in
/// advance at fetch.
pub(crate) const F_NEED_GET_DATA: u64 = 1 << 2;
/// Keep the disk when the server dies, its I/O waiting for a new one.
pub(crate) const F_USER_RECOVERY: u64 = 1 << 3;
/// With recovery: I/O the dead server held is re-issued to the new one.
pub(crate) const F_USER_RECOVERY_REISSUE: u64 = 1 << 4;
/// The kernel accepts the ioctl-encoded commands.
pub(crate) const F_CMD_IOCTL_ENCODE: u64 = 1 << 6;
/// Driver feature: [`CMD_UPDATE_SIZE`] resizes a live device (6.16+).
pub(crate) const F_UPDATE_SIZE: u64 = 1 << 10;
/// The kernel registers each read's or write's pages in the fetching
/// ring's buffer table, at the index the fetch names
/// ([`auto_buf_reg`]), and unregisters them at the commit (6.16+).
pub(crate) const F_AUTO_BUF_REG: u64 = 1 << 11;
/// Driver feature: [`CMD_TRY_STOP_DEV`] (7.0+).
pub(crate) const F_SAFE_STOP_DEV: u64 = 1 << 17;

/// The submission entry's `addr` of a FETCH or COMMIT_AND_FETCH on a
/// device with [`F_AUTO_BUF_REG`]: `struct ublk_auto_buf_reg` with the
/// buffer table's `index` for the tag's next request, no flags (no
/// fallback: the index is the tag's own, never taken by another).
pub(crate) fn auto_buf_reg(index: u16) -> u64 {
    u64::from(index)
}

/// Request operations (`op_flags & 0xff`).
pub(crate) const IO_OP_READ: u8 = 0;
/// A write.
pub(crate) const IO_OP_WRITE: u8 = 1;
/// A flush.
pub(crate) const IO_OP_FLUSH: u8 = 2;
/// A discard.
pub(crate) const IO_OP_DISCARD: u8 = 3;
/// A write of zeroes.
pub(crate) const IO_OP_WRITE_ZEROES: u8 = 5;
/// Request flag: force unit access.
pub(crate) const IO_F_FUA: u32 = 1 << 13;

/// Device attributes (`ublk_param_basic::attrs`).
pub(crate) const ATTR_READ_ONLY: u32 = 1 << 0;
/// The device has a volatile write cache: flushes matter.
pub(crate) const ATTR_VOLATILE_CACHE: u32 = 1 << 2;
/// The device honours FUA.
pub(crate) const ATTR_FUA: u32 = 1 << 3;

/// Parameter types (`ublk_params::types`).
pub(crate) const PARAM_TYPE_BASIC: u32 = 1 << 0;
/// Discard and write-zeroes limits.
pub(crate) const PARAM_TYPE_DISCARD: u32 = 1 << 1;
/// Memory alignment.
pub(crate) const PARAM_TYPE_DMA_ALIGN: u32 = 1 << 4;

/// A control command's payload (the 80-byte command area of a 128-byte
/// submission entry holds it).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct CtrlCmd {
    /// The device; `u32::MAX` asks ADD_DEV to choose.
    pub dev_id: u32,
    /// The queue, or `u16::MAX` for a command that is not a queue's.
    pub queue_id: u16,
    /// Length of the buffer at `addr`.
    pub len: u16,
    /// A command-specific buffer, in or out.
    pub addr: u64,
    /// Inline data (START_DEV: the server's pid).
    pub data: [u64; 2],
}

/// A device's description (`ublksrv_ctrl_dev_info`).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct DevInfo {
    /// Hardware queues (one per I/O thread).
    pub nr_hw_queues: u16,
    /// Tags per queue.
    pub queue_depth: u16,
    /// `UBLK_S_DEV_*`.
    pub state: u16,
    /// Padding.
    pub pad0: u16,
    /// Largest request, bytes.
    pub max_io_buf_bytes: u32,
    /// The device's number (`/dev/ublkbN`, `/dev/ublkcN`).
    pub dev_id: u32,
    /// The serving process.
    pub ublksrv_pid: i32,
    /// Padding.
    pub pad1: u32,
    /// `UBLK_F_*`.
    pub flags: u64,
    /// The server's own flags; the kernel keeps them.
    pub ublksrv_flags: u64,
    /// Reserved (the owner's uid and gid from 6.5 on).
    pub reserved0: u64,
    /// Reserved.
    pub reserved1: u64,
    /// Reserved.
    pub reserved2: u64,
}

/// One request, as the kernel describes it in the shared descriptor
/// array (`ublksrv_io_desc`).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct IoDesc {
    /// Operation in bits 0–7, `UBLK_IO_F_*` flags above.
    pub op_flags: u32,
    /// Length in 512-byte sectors.
    pub nr_sectors: u32,
    /// Where it starts, in sectors.
    pub start_sector: u64,
    /// The buffer the server gave for this tag.
    pub addr: u64,
}

/// A queue command's payload (`ublksrv_io_cmd`), in the 16-byte command
/// area of a submission entry.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct IoCmd {
    /// The queue.
    pub q_id: u16,
    /// The tag (request slot) in the queue.
    pub tag: u16,
    /// COMMIT: bytes done, or a negative errno.
    pub result: i32,
    /// The tag's buffer for the next request (and this one's data).
    pub addr: u64,
}

/// Basic device parameters (`ublk_param_basic`).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct ParamBasic {
    /// `UBLK_ATTR_*`.
    pub attrs: u32,
    /// log2 of the logical block size.
    pub logical_bs_shift: u8,
    /// log2 of the physical block size.
    pub physical_bs_shift: u8,
    /// log2 of the optimal I/O size.
    pub io_opt_shift: u8,
    /// log2 of the minimal I/O size.
    pub io_min_shift: u8,
    /// Largest request in sectors.
    pub max_sectors: u32,
    /// Requests do not cross chunk boundaries (0: none).
    pub chunk_sectors: u32,
    /// The device's size in sectors.
    pub dev_sectors: u64,
    /// Buffer boundary mask (0: none).
    pub virt_boundary_mask: u64,
}

/// Discard and write-zeroes limits (`ublk_param_discard`).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct ParamDiscard {
    /// Offset of the first aligned discard, bytes.
    pub discard_alignment: u32,
    /// Discard granularity, bytes (not 0).
    pub discard_granularity: u32,
    /// Largest discard in sectors.
    pub max_discard_sectors: u32,
    /// Largest write-zeroes in sectors.
    pub max_write_zeroes_sectors: u32,
    /// Segments per discard: 1.
    pub max_discard_segments: u16,
    /// Reserved.
    pub reserved0: u16,
}

/// The device numbers (`ublk_param_devt`): the kernel's to fill in.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct ParamDevt {
    /// `/dev/ublkcN`'s major.
    pub char_major: u32,
    /// `/dev/ublkcN`'s minor.
    pub char_minor: u32,
    /// `/dev/ublkbN`'s major.
    pub disk_major: u32,
    /// `/dev/ublkbN`'s minor.
    pub disk_minor: u32,
}

/// Zone limits (`ublk_param_zoned`): mpio's devices are not zoned.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct ParamZoned {
    /// Most open zones.
    pub max_open_zones: u32,
    /// Most active zones.
    pub max_active_zones: u32,
    /// Largest zone append, sectors.
    pub max_zone_append_sectors: u32,
    /// Reserved.
    pub reserved: [u8; 20],
}

/// Memory alignment (`ublk_param_dma_align`, 6.15+).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct ParamDmaAlign {
    /// A read's or write's memory must start at a multiple of this + 1
    /// (a mask: one less than a power of two, below a page).
    pub alignment: u32,
    /// Reserved.
    pub pad: [u8; 4],
}

/// The parameters mpio sets (`ublk_params` up to its `dma` member; newer
/// kernels read `len` and take what is there, older ones the members
/// they know).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Params {
    /// Bytes given: up to the end of `discard` (60), or of `dma` (116)
    /// for a device with a memory alignment; not the size.
    pub len: u32,
    /// `UBLK_PARAM_TYPE_*` present.
    pub types: u32,
    /// Basic parameters.
    pub basic: ParamBasic,
    /// Discard limits.
    pub discard: ParamDiscard,
    /// Device numbers (read only).
    pub devt: ParamDevt,
    /// Zone limits (unused).
    pub zoned: ParamZoned,
    /// Memory alignment (with `UBLK_PARAM_TYPE_DMA_ALIGN` in `types`).
    pub dma: ParamDmaAlign,
}

/// The bytes of [`Params`] a device without a memory alignment gives the
/// kernel: up to the end of its discard member, which every kernel since
/// 6.1 reads alike.
pub(crate) const PARAMS_LEN: u32 =
    (std::mem::offset_of!(Params, discard) + std::mem::size_of::<ParamDiscard>()) as u32;
/// The bytes of [`Params`] up to the end of its `dma` member: what a
/// zero-copy device gives (a kernel with zero copy has the member) and
/// what GET_PARAMS asks for (an older kernel gives what it has).
pub(crate) const PARAMS_LEN_DMA: u32 =
    (std::mem::offset_of!(Params, dma) + std::mem::size_of::<ParamDmaAlign>()) as u32;

/// `_IOC(direction, 'u', nr, size)`, as the kernel's ioctl encoding.
const fn ioctl(direction: u32, nr: u8, size: usize) -> u32 {
    (direction << 30) | ((size as u32) << 16) | ((b'u' as u32) << 8) | nr as u32
}
const IOC_READ: u32 = 2;
const IOC_READ_WRITE: u32 = 3;

/// The ioctl-encoded control command `UBLK_U_CMD_<nr>`.
pub(crate) const fn ctrl_op(nr: u8) -> u32 {
    let direction = if matches!(
        nr,
        CMD_GET_QUEUE_AFFINITY | CMD_GET_DEV_INFO | CMD_GET_PARAMS | CMD_GET_FEATURES
    ) {
        IOC_READ
    } else {
        IOC_READ_WRITE
    };
    ioctl(direction, nr, std::mem::size_of::<CtrlCmd>())
}

/// The ioctl-encoded queue command `UBLK_U_IO_<nr>`.
pub(crate) const fn io_op(nr: u8) -> u32 {
    ioctl(IOC_READ_WRITE, nr, std::mem::size_of::<IoCmd>())
}

/// Bytes of queue `queue`'s descriptor array to map: its depth's worth,
/// rounded up to a page.
pub(crate) fn descriptors_len(depth: usize, page: usize) -> usize {
    (depth * std::mem::size_of::<IoDesc>()).div_ceil(page) * page
}

/// Where queue `queue`'s descriptors start in `/dev/ublkcN`.
pub(crate) fn descriptors_offset(queue: u16, page: usize) -> i64 {
    let per_queue = descriptors_len(MAX_QUEUE_DEPTH, page);
    CMD_BUF_OFFSET + (usize::from(queue) * per_queue) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_encode_as_the_kernel_defines_them() {
        // UBLK_U_CMD_ADD_DEV (_IOWR), UBLK_U_CMD_GET_DEV_INFO (_IOR)
        // and UBLK_U_IO_FETCH_REQ (_IOWR) as the 6.12 header's macros
        // evaluate them.
        assert_eq!(ctrl_op(CMD_ADD_DEV), 0xc020_7504);
        assert_eq!(ctrl_op(CMD_GET_DEV_INFO), 0x8020_7502);
        // UBLK_U_CMD_GET_FEATURES (_IOR), UBLK_U_CMD_UPDATE_SIZE and
        // UBLK_U_CMD_TRY_STOP_DEV (_IOWR), as 7.0's header evaluates them.
        assert_eq!(ctrl_op(CMD_GET_FEATURES), 0x8020_7513);
        assert_eq!(ctrl_op(CMD_UPDATE_SIZE), 0xc020_7515);
        assert_eq!(ctrl_op(CMD_TRY_STOP_DEV), 0xc020_7517);
        assert_eq!(io_op(IO_FETCH_REQ), 0xc010_7520);
    }

    #[test]
    fn queues_map_their_own_pages() {
        assert_eq!(descriptors_len(128, 4096), 4096);
        assert_eq!(descriptors_len(256, 4096), 8192);
        assert_eq!(descriptors_offset(0, 4096), 0);
        assert_eq!(descriptors_offset(2, 4096), 2 * 24 * 4096);
    }
}
