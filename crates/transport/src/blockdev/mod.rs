//! Kernel block devices as paths: what sysfs says about each (its WWID,
//! transport, size, NUMA node, holders, ALUA access state), as
//! multipath-tools' path discovery reads it, and the devices of the host
//! grouped by WWID ([`discover`]).
//!
//! # Where each fact comes from
//! | fact | SCSI (`sdX`) | NVMe namespace (`nvmeXnY`, native multipath off) |
//! |---|---|---|
//! | WWID | `device/wwid`, else VPD page 0x83 (`device/vpd_pg83`, `wwid`) | `wwid`, else `nguid`, else `eui` |
//! | transport | `scsi:<host proc_name>` (`tcm_loopback`, `scsi_debug`, an HBA driver) | `nvme:<controller transport>` (`pcie`, `tcp`, `loop`, ...) |
//! | size | `size` (512-byte sectors) | same |
//! | NUMA node | `numa_node` of the nearest device above it that has one (the HBA's PCI function); `-1` is none | the controller's `numa_node` |
//! | holders | `holders/` | same |
//! | access state | `device/access_state` (`scsi_dh_alua`), `device/preferred_path` | the ANA log page through the controller ([`ana`]); `ana_state` where the kernel keeps one |
//!
//! Everything is read under a sysfs root ([`Sysfs::at`]) so tests build a
//! fake tree in a temporary directory; only [`ana`] talks to a device.
//!
//! # Errors
//! A fact that cannot be read is absent (`None`, empty), never an error:
//! devices come and go while they are read, and discovery lists what it
//! could see.

pub mod ana;
pub mod blacklist;
pub mod discover;
mod wwid;
pub mod wwid_forms;

use mpio_core::map::PathInfo;
use mpio_core::path::AccessState;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One block device as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    /// Kernel name (`sdb`, `nvme1n1`); the device node is `/dev/<name>`.
    pub name: String,
    /// `major:minor`.
    pub dev: String,
    /// `scsi` or `nvme`, with the host driver or controller transport
    /// after a colon; `other` for the rest.
    pub transport: String,
    /// The LUN's world-wide identifier, if the device reports one.
    pub wwid: Option<String>,
    /// Size in bytes.
    pub size_bytes: u64,
    /// NUMA node of the device's adapter, if the platform tells.
    pub numa_node: Option<u16>,
    /// Devices stacked on this one (`dm-0`, a partition's holder).
    pub holders: Vec<String>,
    /// ALUA state from sysfs; `None` where sysfs keeps none (NVMe with
    /// native multipath off: read the ANA log page, [`ana`]).
    pub access: Option<AccessState>,
    /// ALUA's preferred-path bit.
    pub preferred: bool,
    /// The NVMe controller (`nvme1`) and namespace id, for NVMe
    /// namespaces.
    pub nvme: Option<NvmeNamespace>,
}

/// Where an NVMe namespace's ANA state is read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NvmeNamespace {
    /// The controller's name: its character device is `/dev/<controller>`.
    pub controller: String,
    /// Namespace id.
    pub nsid: u32,
}

impl BlockDevice {
    /// The device node.
    pub fn node(&self) -> PathBuf {
        Path::new("/dev").join(&self.name)
    }
}

/// The access state of `device` now: its sysfs state, else (an NVMe
/// namespace whose kernel keeps none) its group's state in the ANA log
/// page of its controller, `/dev/<controller>`; `None` where neither
/// says (no ALUA handler, a controller without ANA).
pub fn current_access(device: &BlockDevice) -> Option<AccessState> {
    device.access.or_else(|| {
        let namespace = device.nvme.as_ref()?;
        let controller = Path::new("/dev").join(&namespace.controller);
        ana::read_state(&controller, namespace.nsid).ok().flatten()
    })
}

/// The node to open for a `file:` path: the path itself, unless it is
/// a device number's udev link (`/dev/block/MAJ:MIN`, what a dm path
/// word `MAJ:MIN` names) on a host where udev made none, whose device is
/// then `/dev/NAME` by the kernel's name for those numbers (devtmpfs
/// makes that node; a `!` in the name is a directory, `cciss!c0d0` at
/// `/dev/cciss/c0d0`). A device that is not there (yet) keeps the link's
/// path, which fails to open naming it.
pub(crate) fn node_of(path: &Path) -> std::borrow::Cow<'_, Path> {
    match device_numbers(path) {
        Some((major, minor)) if !path.exists() => Sysfs::host()
            .name_of(major, minor)
            .map_or(path.into(), |name| {
                Path::new("/dev").join(name.replace('!', "/")).into()
            }),
        _ => path.into(),
    }
}

/// The numbers of a device number's udev link, `/dev/block/MAJ:MIN`.
fn device_numbers(path: &Path) -> Option<(u32, u32)> {
    let (major, minor) = path
        .strip_prefix("/dev/block")
        .ok()?
        .to_str()?
        .split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The sysfs name of the block device at `node` (`/dev/sdb`, or any
/// node with its numbers, or a device number's udev link whether or not
/// udev made it), if it is one.
pub fn name_of_node(sysfs: &Sysfs, node: &Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if let Some((major, minor)) = device_numbers(node) {
        return sysfs.name_of(major, minor);
    }
    let metadata = std::fs::metadata(node).ok()?;
    if !metadata.file_type().is_block_device() {
        return None;
    }
    let rdev = metadata.rdev();
    sysfs.name_of(libc::major(rdev), libc::minor(rdev))
}

/// What a map is told of a path when it is built: for a `file:` path on
/// a block device, its NUMA node and access state from the host's sysfs
/// (and ANA log page); nothing for other paths.
pub(crate) fn path_info(endpoint: &crate::Endpoint) -> PathInfo {
    let crate::Endpoint::File { path, .. } = endpoint else {
        return PathInfo::default();
    };
    let sysfs = Sysfs::host();
    let Some(device) = name_of_node(&sysfs, Path::new(path)).and_then(|name| sysfs.device(&name))
    else {
        return PathInfo::default();
    };
    PathInfo {
        node: device.numa_node,
        access: current_access(&device).unwrap_or_default(),
    }
}

/// A sysfs tree: the host's (`/sys`) or a copy in tests.
#[derive(Clone, Debug)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    /// The host's sysfs, `/sys`.
    pub fn host() -> Sysfs {
        Sysfs::at("/sys")
    }

    /// A sysfs tree mounted at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// The directory of block device `name`: `<root>/block/<name>`.
    pub fn block_path(&self, name: &str) -> PathBuf {
        self.root.join("block").join(name)
    }

    /// Every block device of `/sys/block` (whole disks: partitions are
    /// not there), sorted by name.
    pub fn block_devices(&self) -> Vec<BlockDevice> {
        let mut names: Vec<String> = std::fs::read_dir(self.root.join("block"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect();
        names.sort();
        names.iter().filter_map(|name| self.device(name)).collect()
    }

    /// The block device `name`, if sysfs has it.
    pub fn device(&self, name: &str) -> Option<BlockDevice> {
        let block = self.block_path(name);
        let dev = read_word(&block.join("dev"))?;
        let size_bytes = read_word(&block.join("size"))
            .and_then(|sectors| sectors.parse::<u64>().ok())
            .map_or(0, |sectors| sectors.saturating_mul(512));
        let mut holders: Vec<String> = std::fs::read_dir(block.join("holders"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect();
        holders.sort();
        let device = block.join("device");
        let mut found = BlockDevice {
            name: name.to_string(),
            dev,
            transport: "other".into(),
            wwid: None,
            size_bytes,
            numa_node: numa_node_above(&device),
            holders,
            access: None,
            preferred: false,
            nvme: None,
        };
        if name.starts_with("nvme") {
            self.read_nvme(&block, &device, &mut found);
        } else if device.join("scsi_level").exists() || device.join("vpd_pg83").exists() {
            read_scsi(&device, &mut found);
        }
        Some(found)
    }

    /// The name of the block device numbered `major:minor`, if any.
    pub(crate) fn name_of(&self, major: u32, minor: u32) -> Option<String> {
        let link = self.root.join("dev/block").join(format!("{major}:{minor}"));
        let target = std::fs::read_link(link).ok()?;
        Some(target.file_name()?.to_str()?.to_string())
    }

    fn read_nvme(&self, block: &Path, device: &Path, found: &mut BlockDevice) {
        let controller = std::fs::canonicalize(device)
            .ok()
            .and_then(|path| Some(path.file_name()?.to_str()?.to_string()));
        let transport = read_word(&device.join("transport")).unwrap_or_else(|| "unknown".into());
        found.transport = format!("nvme:{transport}");
        found.wwid = wwid::nvme(block);
        found.access =
            read_word(&block.join("ana_state")).and_then(|word| AccessState::from_ana_word(&word));
        let nsid = read_word(&block.join("nsid")).and_then(|word| word.parse().ok());
        if let (Some(controller), Some(nsid)) = (controller, nsid) {
            found.nvme = Some(NvmeNamespace { controller, nsid });
        }
    }
}

fn read_scsi(device: &Path, found: &mut BlockDevice) {
    let driver = scsi_host_driver(device).unwrap_or_else(|| "unknown".into());
    found.transport = format!("scsi:{driver}");
    found.wwid = wwid::scsi(device);
    found.access =
        read_word(&device.join("access_state")).and_then(|word| AccessState::from_alua(&word));
    found.preferred = read_word(&device.join("preferred_path")).as_deref() == Some("1");
}

/// The driver of the SCSI host above `device`: `hostN/scsi_host/hostN/proc_name`.
fn scsi_host_driver(device: &Path) -> Option<String> {
    let real = std::fs::canonicalize(device).ok()?;
    let host = real.ancestors().find(|path| {
        path.file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| {
                name.strip_prefix("host")
                    .is_some_and(|number| number.parse::<u32>().is_ok())
            })
    })?;
    let name = host.file_name()?;
    read_word(&host.join("scsi_host").join(name).join("proc_name"))
}

/// The `numa_node` of `device` or the nearest directory above it that has
/// one; `None` when none has, or it says `-1`.
fn numa_node_above(device: &Path) -> Option<u16> {
    let real = std::fs::canonicalize(device).ok()?;
    real.ancestors()
        .find_map(|path| read_word(&path.join("numa_node")))
        .and_then(|word| word.parse::<i32>().ok())
        .and_then(|node| u16::try_from(node).ok())
}

/// A sysfs attribute's text, trimmed; `None` if absent, unreadable or
/// empty.
pub(crate) fn read_word(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let word = text.trim();
    (!word.is_empty()).then(|| word.to_string())
}

#[cfg(test)]
mod tests;
