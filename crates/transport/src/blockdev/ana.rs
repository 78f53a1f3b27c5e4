//! NVMe ANA: a namespace's access state from the controller's
//! Asymmetric Namespace Access log page (log id 0x0C), read through the
//! admin passthrough ioctl (`NVME_IOCTL_ADMIN_CMD`) on the controller's
//! character device, as multipath-tools' `ana` prioritizer does. With the
//! kernel's native multipath off (`nvme_core.multipath=N`) this is the
//! only place the state is kept: the kernel tracks none and sysfs has no
//! `ana_state`.
//!
//! # Contract
//! `parse_log` is pure and bounds-checked: a short or inconsistent page
//! gives `None` for the namespace, never a panic. `read_state` asks for
//! `LOG_BYTES` bytes with RGO clear (each group lists its namespaces);
//! a controller with more groups or namespaces than fit reports them
//! beyond the buffer, and a namespace not found in what was read has no
//! known state (`None`).
//!
//! # Errors
//! `read_state` returns the ioctl's error: the controller gone
//! (`ENODEV`, `ENOENT` at open), or an NVMe status (`EIO`, with the status
//! in the message).
#![allow(unsafe_code)] // one ioctl, below

use mpio_core::path::AccessState;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Bytes asked for: a header and, for example, 32 groups listing 256
/// namespaces between them.
pub(crate) const LOG_BYTES: usize = 4096;

/// Log page id of the ANA log.
const ANA_LOG_ID: u32 = 0x0c;

/// Admin opcode Get Log Page.
const GET_LOG_PAGE: u8 = 0x02;

/// `struct nvme_passthru_cmd` of `<linux/nvme_ioctl.h>` (72 bytes).
#[repr(C)]
#[derive(Default)]
struct PassthruCommand {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

const _: () = assert!(std::mem::size_of::<PassthruCommand>() == 72);

/// `_IOWR('N', 0x41, struct nvme_admin_cmd)`: direction read|write (3)
/// in bits 31:30, the 72-byte size in bits 29:16, type 'N', number 0x41.
const NVME_IOCTL_ADMIN_CMD: u64 = (3 << 30) | (72 << 16) | ((b'N' as u64) << 8) | 0x41;

/// How long the controller may take to answer, in ms.
const TIMEOUT_MS: u32 = 5_000;

/// Reads namespace `nsid`'s ANA state from the controller whose character
/// device is `controller` (`/dev/nvme1`); `Ok(None)` when the page does
/// not list the namespace.
///
/// # Errors
/// The open or the ioctl failed (see the module docs).
pub(crate) fn read_state(controller: &Path, nsid: u32) -> std::io::Result<Option<AccessState>> {
    let page = read_log(controller)?;
    Ok(parse_log(&page, nsid))
}

/// The controller's ANA log page, [`LOG_BYTES`] long.
///
/// # Errors
/// As [`read_state`].
pub(crate) fn read_log(controller: &Path) -> std::io::Result<Vec<u8>> {
    let device = std::fs::File::open(controller)?;
    let mut page = vec![0u8; LOG_BYTES];
    let dwords = (LOG_BYTES / 4 - 1) as u32;
    let mut command = PassthruCommand {
        opcode: GET_LOG_PAGE,
        nsid: 0xffff_ffff,
        addr: page.as_mut_ptr() as u64,
        data_len: LOG_BYTES as u32,
        // NUMDL in bits 31:16, the log id in bits 7:0 (RAE, LSP clear:
        // RGO 0, every group with its namespaces).
        cdw10: ((dwords & 0xffff) << 16) | ANA_LOG_ID,
        cdw11: dwords >> 16,
        timeout_ms: TIMEOUT_MS,
        ..PassthruCommand::default()
    };
    // SAFETY: `command` is a valid `nvme_passthru_cmd` whose `addr` points
    // to `page`, `data_len` bytes long and alive until the ioctl returns;
    // the kernel writes only there and into `command`.
    let status = unsafe {
        libc::ioctl(
            device.as_raw_fd(),
            NVME_IOCTL_ADMIN_CMD as _,
            &mut command as *mut PassthruCommand,
        )
    };
    match status {
        0 => Ok(page),
        negative if negative < 0 => Err(std::io::Error::last_os_error()),
        nvme_status => Err(std::io::Error::other(format!(
            "{}: Get Log Page (ANA) failed with NVMe status {nvme_status:#x}",
            controller.display()
        ))),
    }
}

/// The state of namespace `nsid` in an ANA log page (NVMe base
/// specification: a 16-byte header whose bytes 8..10 count the group
/// descriptors; each descriptor 32 bytes — group id, namespace count,
/// change count, state in byte 16 — followed by its namespace ids).
pub(crate) fn parse_log(page: &[u8], nsid: u32) -> Option<AccessState> {
    let groups = u16::from_le_bytes(page.get(8..10)?.try_into().ok()?);
    let mut offset = 16usize;
    for _ in 0..groups {
        let descriptor = page.get(offset..offset + 32)?;
        let count = u32::from_le_bytes(descriptor[4..8].try_into().ok()?) as usize;
        let state = descriptor[16];
        let ids_end = offset.checked_add(32)?.checked_add(count.checked_mul(4)?)?;
        let ids = page.get(offset + 32..ids_end)?;
        if ids
            .chunks_exact(4)
            .any(|id| u32::from_le_bytes([id[0], id[1], id[2], id[3]]) == nsid)
        {
            return AccessState::from_ana_code(state);
        }
        offset = ids_end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log page with `groups`: (state, namespace ids).
    pub(crate) fn log_page(groups: &[(u8, &[u32])]) -> Vec<u8> {
        let mut page = vec![0u8; 16];
        page[8..10].copy_from_slice(&(groups.len() as u16).to_le_bytes());
        for (index, (state, ids)) in groups.iter().enumerate() {
            let mut descriptor = [0u8; 32];
            descriptor[0..4].copy_from_slice(&(index as u32 + 1).to_le_bytes());
            descriptor[4..8].copy_from_slice(&(ids.len() as u32).to_le_bytes());
            descriptor[16] = *state;
            page.extend_from_slice(&descriptor);
            for id in *ids {
                page.extend_from_slice(&id.to_le_bytes());
            }
        }
        page
    }

    #[test]
    fn a_namespace_takes_its_groups_state() {
        let page = log_page(&[(0x01, &[1, 3]), (0x02, &[2]), (0x03, &[4])]);
        assert_eq!(parse_log(&page, 3), Some(AccessState::Optimized));
        assert_eq!(parse_log(&page, 2), Some(AccessState::NonOptimized));
        assert_eq!(parse_log(&page, 4), Some(AccessState::Inaccessible));
        assert_eq!(parse_log(&page, 9), None, "not listed");
    }

    /// A page cut anywhere, or a descriptor claiming more namespaces than
    /// the page holds, gives no state and no panic.
    #[test]
    fn truncated_and_lying_pages_give_nothing() {
        let page = log_page(&[(0x01, &[1]), (0x02, &[2])]);
        for length in 0..page.len() {
            let state = parse_log(&page[..length], 2);
            assert_eq!(state, None, "cut at {length}");
        }
        let mut lying = log_page(&[(0x01, &[1])]);
        lying[16 + 4..16 + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse_log(&lying, 1), None);
    }

    #[test]
    fn the_ioctl_number_is_the_kernels() {
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
    }
}
