//! A device's parameters from its map's [`Limits`], and back.
//!
//! | parameter | from |
//! |---|---|
//! | size | the map |
//! | logical block, `io_min` | the paths' largest logical block |
//! | physical block, `io_opt` | the paths' largest physical block |
//! | largest request | the engine's buffer size, or a path's smaller limit |
//! | discard | every path discards (granularity: the physical block) |
//! | write-zeroes | every path does it (else the kernel writes zeroes) |
//! | volatile cache and FUA | any path has a cache to flush |
//! | read-only | the export |
//! | memory alignment | zero copy: the paths' strictest (the request's own pages reach them); a copy: none (mpio's buffers are page-aligned) |
//!
//! The driver takes logical blocks of 512 bytes to a page (4 KiB) and
//! requests of at least a page; paths outside that cannot back a device.

use crate::uapi::{self, ParamBasic, ParamDiscard, ParamDmaAlign, Params};
use mpio_core::io::BUFFER_ALIGN;
use mpio_transport::limits::Limits;

/// The strictest memory alignment a device can ask: a page.
pub(crate) const MAX_DMA_ALIGNMENT: u32 = 4096;
/// The driver's own, without the parameter: 4 bytes.
const DRIVER_DMA_ALIGNMENT: u32 = 4;

/// Discards and write-zeroes of up to 1 GiB each.
const MAX_DISCARD_SECTORS: u32 = 1 << 21;
/// The driver's largest logical block: a page.
const MAX_BLOCK_SHIFT: u8 = 12;

/// The parameters of a device of `size_bytes` over paths taking
/// `limits`, with requests of at most `max_io_bytes` (the engine's
/// buffers), handing the paths the requests' own pages if `zero_copy`.
///
/// # Errors
/// Paths whose blocks, requests or memory alignment the driver cannot
/// match, in words.
pub(crate) fn params_for(
    limits: &Limits,
    size_bytes: u64,
    max_io_bytes: u32,
    read_only: bool,
    zero_copy: bool,
) -> Result<Params, String> {
    if zero_copy && limits.dma_alignment > MAX_DMA_ALIGNMENT {
        return Err(format!(
            "its paths take memory aligned to {} bytes, and a ublk device's at most to a page",
            limits.dma_alignment
        ));
    }
    let logical_bs_shift = shift(limits.logical_block);
    if logical_bs_shift > MAX_BLOCK_SHIFT {
        return Err(format!(
            "its paths take blocks of {} bytes, and a ublk device's are at most 4096",
            limits.logical_block
        ));
    }
    let physical_bs_shift = shift(limits.physical_block).max(logical_bs_shift);
    let largest = max_io_bytes.min(limits.max_io_bytes) & !(limits.logical_block - 1);
    if largest < 4096 {
        return Err(format!(
            "its paths take requests of at most {} bytes, and a ublk device's take 4096",
            limits.max_io_bytes
        ));
    }
    let mut attrs = 0;
    if limits.volatile_cache {
        attrs |= uapi::ATTR_VOLATILE_CACHE | uapi::ATTR_FUA;
    }
    if read_only {
        attrs |= uapi::ATTR_READ_ONLY;
    }
    let (len, dma_type, dma) = if zero_copy {
        let alignment = limits.dma_alignment.max(DRIVER_DMA_ALIGNMENT);
        (
            uapi::PARAMS_LEN_DMA,
            uapi::PARAM_TYPE_DMA_ALIGN,
            ParamDmaAlign {
                alignment: alignment - 1,
                pad: [0; 4],
            },
        )
    } else {
        (uapi::PARAMS_LEN, 0, ParamDmaAlign::default())
    };
    Ok(Params {
        len,
        types: uapi::PARAM_TYPE_BASIC | uapi::PARAM_TYPE_DISCARD | dma_type,
        basic: ParamBasic {
            attrs,
            logical_bs_shift,
            physical_bs_shift,
            io_opt_shift: physical_bs_shift,
            io_min_shift: physical_bs_shift,
            max_sectors: largest >> 9,
            chunk_sectors: 0,
            dev_sectors: size_bytes >> 9,
            virt_boundary_mask: 0,
        },
        discard: ParamDiscard {
            discard_alignment: 0,
            discard_granularity: 1 << physical_bs_shift,
            max_discard_sectors: if limits.discard {
                MAX_DISCARD_SECTORS
            } else {
                0
            },
            max_write_zeroes_sectors: if limits.write_zeroes {
                MAX_DISCARD_SECTORS
            } else {
                0
            },
            max_discard_segments: 1,
            reserved0: 0,
        },
        dma,
        ..Params::default()
    })
}

/// The limits a device with `params` holds its paths to: what it sends.
pub(crate) fn limits_of(params: &Params) -> Limits {
    let basic = &params.basic;
    let has_discard = params.types & uapi::PARAM_TYPE_DISCARD != 0;
    Limits {
        logical_block: 1 << basic.logical_bs_shift,
        physical_block: 1 << basic.physical_bs_shift,
        max_io_bytes: basic.max_sectors << 9,
        discard: has_discard && params.discard.max_discard_sectors > 0,
        write_zeroes: has_discard && params.discard.max_write_zeroes_sectors > 0,
        volatile_cache: basic.attrs & uapi::ATTR_VOLATILE_CACHE != 0,
        // A copying device's paths get mpio's own, page-aligned buffers.
        dma_alignment: if params.types & uapi::PARAM_TYPE_DMA_ALIGN != 0 {
            params.dma.alignment + 1
        } else {
            BUFFER_ALIGN as u32
        },
    }
}

/// log2 of a power of two.
fn shift(bytes: u32) -> u8 {
    bytes.trailing_zeros() as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISK: Limits = Limits {
        logical_block: 4096,
        physical_block: 4096,
        max_io_bytes: 128 << 10,
        discard: false,
        write_zeroes: true,
        volatile_cache: true,
        dma_alignment: 512,
    };

    #[test]
    fn a_device_takes_its_paths_blocks_requests_and_cache() {
        let params = params_for(&DISK, 1 << 30, 512 << 10, false, false).unwrap();
        assert_eq!(params.basic.logical_bs_shift, 12);
        assert_eq!(params.basic.physical_bs_shift, 12);
        assert_eq!(params.basic.max_sectors, 256, "the path's 128 KiB");
        assert_eq!(params.basic.dev_sectors, 1 << 21);
        assert_ne!(params.basic.attrs & uapi::ATTR_VOLATILE_CACHE, 0);
        assert_ne!(params.basic.attrs & uapi::ATTR_FUA, 0);
        assert_eq!(params.discard.max_discard_sectors, 0);
        assert_eq!(params.discard.max_write_zeroes_sectors, 1 << 21);
        assert_eq!(params.discard.discard_granularity, 4096);
        assert_eq!(params.len, uapi::PARAMS_LEN);
        assert_eq!(params.types & uapi::PARAM_TYPE_DMA_ALIGN, 0);
        let copied = Limits {
            dma_alignment: 4096,
            ..DISK
        };
        assert_eq!(limits_of(&params), copied, "paths get mpio's buffers");

        let any = params_for(&Limits::ANY, 1 << 30, 512 << 10, true, false).unwrap();
        assert_eq!(any.basic.logical_bs_shift, 9);
        assert_eq!(any.basic.max_sectors, 1024, "the engine's 512 KiB");
        assert_eq!(
            any.basic.attrs,
            uapi::ATTR_READ_ONLY,
            "no cache: no flushes"
        );
        assert_eq!(any.discard.max_discard_sectors, 1 << 21);
    }

    /// A zero-copy device hands its paths the requests' own pages: it
    /// asks the memory alignment its strictest path takes (at least the
    /// driver's 4 bytes, at most a page).
    #[test]
    fn a_zero_copy_device_asks_its_paths_memory_alignment() {
        let params = params_for(&DISK, 1 << 30, 512 << 10, false, true).unwrap();
        assert_eq!(params.len, uapi::PARAMS_LEN_DMA);
        assert_ne!(params.types & uapi::PARAM_TYPE_DMA_ALIGN, 0);
        assert_eq!(params.dma.alignment, 511);
        assert_eq!(limits_of(&params), DISK);
        let any = params_for(&Limits::ANY, 1 << 30, 512 << 10, false, true).unwrap();
        assert_eq!(any.dma.alignment, 3, "the driver's own 4 bytes");
        let strict = Limits {
            dma_alignment: 8192,
            ..DISK
        };
        let error = params_for(&strict, 1 << 30, 512 << 10, false, true).unwrap_err();
        assert!(error.contains("aligned to 8192"), "{error}");
        assert!(params_for(&strict, 1 << 30, 512 << 10, false, false).is_ok());
    }

    #[test]
    fn blocks_and_requests_the_driver_cannot_match_are_refused() {
        let large = Limits {
            logical_block: 8192,
            ..DISK
        };
        let error = params_for(&large, 1 << 30, 512 << 10, false, false).unwrap_err();
        assert!(error.contains("blocks of 8192"), "{error}");
        let small = Limits {
            max_io_bytes: 2048,
            ..DISK
        };
        let error = params_for(&small, 1 << 30, 512 << 10, false, false).unwrap_err();
        assert!(error.contains("at most 2048"), "{error}");
    }
}
