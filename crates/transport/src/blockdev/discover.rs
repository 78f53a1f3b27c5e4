//! The host's block devices grouped by WWID: the LUNs mpio can make maps
//! of, each with its paths, as `multipath -d -v3` lists them.

use super::blacklist::Blacklist;
use super::wwid_forms::{same_lun, WwidForms};
use super::{BlockDevice, Sysfs};
use serde::Serialize;
use std::collections::BTreeMap;

/// One LUN and the devices that reach it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lun {
    /// Its WWID, as the kernel reports it.
    pub wwid: String,
    /// The same WWID as udev and multipath-tools write it (`3600a…` for
    /// `naa.600a…`), where SCSI has a second form.
    pub udev_wwid: Option<String>,
    /// The devices with that WWID, by name.
    pub paths: Vec<BlockDevice>,
}

/// What discovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Discovery {
    /// LUNs by WWID.
    pub luns: Vec<Lun>,
    /// Devices that are not paths: name and why.
    pub excluded: Vec<Excluded>,
}

/// A device that is not a path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Excluded {
    /// Kernel name.
    pub name: String,
    /// Why (blacklist pattern, no WWID).
    pub reason: String,
}

/// Groups `sysfs`'s block devices by WWID, leaving out what `blacklist`
/// excludes.
pub fn discover(sysfs: &Sysfs, blacklist: &Blacklist) -> Discovery {
    group(sysfs.block_devices(), blacklist)
}

/// Groups `devices` by WWID, leaving out what `blacklist` excludes.
pub fn group(devices: Vec<BlockDevice>, blacklist: &Blacklist) -> Discovery {
    let mut luns: BTreeMap<String, Vec<BlockDevice>> = BTreeMap::new();
    let mut excluded = Vec::new();
    for device in devices {
        match (blacklist.excludes(&device), device.wwid.clone()) {
            (None, Some(wwid)) => luns.entry(wwid).or_default().push(device),
            (reason, _) => excluded.push(Excluded {
                name: device.name,
                reason: reason.unwrap_or_else(|| "no wwid".into()),
            }),
        }
    }
    Discovery {
        luns: luns
            .into_iter()
            .map(|(wwid, paths)| Lun {
                udev_wwid: WwidForms::of(&wwid).udev.filter(|udev| *udev != wwid),
                wwid,
                paths,
            })
            .collect(),
        excluded,
    }
}

/// The devices of `sysfs` with WWID `wwid` (in either form: `naa.600a…`
/// or `3600a…`) that `blacklist` allows.
pub fn paths_of(sysfs: &Sysfs, blacklist: &Blacklist, wwid: &str) -> Vec<BlockDevice> {
    discover(sysfs, blacklist)
        .luns
        .into_iter()
        .find(|lun| same_lun(&lun.wwid, wwid))
        .map(|lun| lun.paths)
        .unwrap_or_default()
}
