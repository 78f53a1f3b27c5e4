//! Maps by WWID (`wwid = "..."` instead of `[[map.path]]`s): their paths
//! are the block devices with that WWID when the config is checked —
//! at start, at a reload, and at each round of the daemon's rescan —
//! named as the kernel names them (`sdb`, `nvme1n1`), each a
//! `file:/dev/<name>` path whose `prio` (for `group_by_prio`) is its
//! access state's, as multipath-tools' `alua`/`ana` prioritizers give it.
//! And `[blacklist]`: devices that are never such paths, but those
//! `[blacklist_exceptions]` takes back.

use super::error::{quoted, Place, Source};
use super::grouping::PathPlan;
use super::raw::{RawBlacklist, RawMap, RawUblk};
use super::{ConfigError, NamedPath};
use mpio_core::map::MAX_PATHS;
use mpio_transport::blockdev::blacklist::{Blacklist, DEFAULT_DEVNODE};
use mpio_transport::blockdev::wwid_forms::WwidForms;
use mpio_transport::blockdev::{current_access, discover, Sysfs};
use std::path::Path;
use toml::Spanned;

/// One device a WWID leads to now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundPath {
    /// Its kernel name: the path's name in the map.
    pub name: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Its `group_by_prio` priority.
    pub prio: u32,
}

/// Where the paths of maps by WWID are looked up, and the bindings file
/// their user-friendly names are kept in.
pub trait PathSource {
    /// The devices with `wwid` that `blacklist` lets through, by name.
    fn paths_of(&self, wwid: &str, blacklist: &Blacklist) -> Vec<FoundPath>;

    /// The size of block device `name` (a map's own ublk device, left
    /// waiting by a daemon that died), if it exists and reports one.
    fn device_bytes(&self, name: &str) -> Option<u64>;

    /// The text of the bindings file at `file` (`user_friendly_names`);
    /// `None` if there is none. By default, the file's.
    ///
    /// # Errors
    /// It exists and cannot be read.
    fn read_bindings(&self, file: &Path) -> std::io::Result<Option<String>> {
        super::bindings::read(file)
    }

    /// Replaces the bindings file at `file` with `text`, atomically. By
    /// default, the file's.
    ///
    /// # Errors
    /// It cannot be written.
    fn write_bindings(&self, file: &Path, text: &str) -> std::io::Result<()> {
        super::bindings::write(file, text)
    }
}

/// `wwid` as multipath-tools writes it in its bindings file and names a
/// map by it: udev's form where there is one (`3600a0980…`), else the
/// kernel's (`eui.…`, `nvme.…`).
pub fn multipath_form(wwid: &str) -> String {
    let forms = WwidForms::of(wwid);
    forms.udev.unwrap_or(forms.kernel)
}

/// The host's block devices, from `/sys` (and the NVMe controllers' ANA
/// log pages for the priorities).
#[derive(Clone, Copy, Debug, Default)]
pub struct HostPaths;

impl PathSource for HostPaths {
    fn paths_of(&self, wwid: &str, blacklist: &Blacklist) -> Vec<FoundPath> {
        discover::paths_of(&Sysfs::host(), blacklist, wwid)
            .into_iter()
            .map(|device| FoundPath {
                prio: current_access(&device).unwrap_or_default().prio(),
                size_bytes: device.size_bytes,
                name: device.name,
            })
            .collect()
    }

    fn device_bytes(&self, name: &str) -> Option<u64> {
        Sysfs::host()
            .device(name)
            .map(|device| device.size_bytes)
            .filter(|&bytes| bytes > 0)
    }
}

/// No devices and no bindings file: for checks that must not depend on
/// the host or change it (the fuzz target, the importer's check).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPaths;

impl PathSource for NoPaths {
    fn paths_of(&self, _wwid: &str, _blacklist: &Blacklist) -> Vec<FoundPath> {
        Vec::new()
    }

    fn device_bytes(&self, _name: &str) -> Option<u64> {
        None
    }

    /// No file: every name is new.
    fn read_bindings(&self, _file: &Path) -> std::io::Result<Option<String>> {
        Ok(None)
    }

    /// Nothing is written.
    fn write_bindings(&self, _file: &Path, _text: &str) -> std::io::Result<()> {
        Ok(())
    }
}

/// The size of the map's own ublk device, `/dev/ublkbN` for the first
/// export with a fixed number N that exists: the size of a map by WWID
/// whose devices report none, when the daemon that served it died and
/// left it waiting for recovery.
pub(super) fn recovered_bytes(map: &RawMap, found: &dyn PathSource) -> Option<u64> {
    map.export
        .iter()
        .find_map(|export| match export.get_ref().ublk.as_ref()?.get_ref() {
            RawUblk::Number(number) => found.device_bytes(&format!("ublkb{number}")),
            RawUblk::Flag(_) => None,
        })
}

/// The blacklist: the built-in device names, then the config's patterns,
/// and the config's exceptions.
pub(super) fn blacklist(
    source: &Source<'_>,
    raw: Option<&Spanned<RawBlacklist>>,
    exceptions: Option<&Spanned<RawBlacklist>>,
) -> Result<Blacklist, ConfigError> {
    let empty = RawBlacklist::default();
    let check = |patterns: &[Spanned<String>], section: &str, key: &str| {
        for (index, pattern) in patterns.iter().enumerate() {
            Blacklist::new(&[pattern.get_ref().clone()], &[]).map_err(|reason| {
                source.error(
                    &Place::of(pattern, format!("{section}: {key}[{index}]")),
                    quoted(pattern.get_ref()),
                    reason,
                )
            })?;
        }
        Ok::<_, ConfigError>(
            patterns
                .iter()
                .map(|pattern| pattern.get_ref().clone())
                .collect::<Vec<_>>(),
        )
    };
    let raw = raw.map_or(&empty, Spanned::get_ref);
    let devnode: Vec<String> = std::iter::once(DEFAULT_DEVNODE.to_string())
        .chain(check(&raw.devnode, "blacklist", "devnode")?)
        .collect();
    let wwid = check(&raw.wwid, "blacklist", "wwid")?;
    let exceptions = exceptions.map_or(&empty, Spanned::get_ref);
    let except_devnode = check(&exceptions.devnode, "blacklist_exceptions", "devnode")?;
    let except_wwid = check(&exceptions.wwid, "blacklist_exceptions", "wwid")?;
    Ok(Blacklist::new(&devnode, &wwid)
        .and_then(|blacklist| blacklist.with_exceptions(&except_devnode, &except_wwid))
        .expect("every pattern compiled alone"))
}

/// What a WWID leads to: the map's path plans, its named paths, and the
/// size they hold (see [`paths`]).
pub(super) type Found = (Vec<PathPlan>, Vec<NamedPath>, Option<u64>);

/// The paths of a map by WWID and the size they hold: the smallest size a
/// device reports, 512-byte aligned, or `None` when none reports one. A
/// device that reports 0 (a SCSI LUN behind an ALUA-unavailable port
/// after a rescan, a device going away) is still a path, never the
/// map's size: a path smaller than its map is failed, not the map. A map
/// by WWID lists no paths, table or groups of its own, and must find at
/// least one device.
pub(super) fn paths(
    source: &Source<'_>,
    map: &RawMap,
    wwid: &Spanned<String>,
    context: &str,
    blacklist: &Blacklist,
    found: &dyn PathSource,
) -> Result<Found, ConfigError> {
    let place = Place::of(wwid, format!("{context}: wwid"));
    let listed = [
        map.path
            .first()
            .map(|path| Place::of(path, format!("{context} path[0]"))),
        map.group
            .first()
            .map(|group| Place::of(group, format!("{context} group[0]"))),
        map.table
            .as_ref()
            .map(|table| Place::of(table, format!("{context}: table"))),
    ];
    if let Some(other) = listed.into_iter().flatten().next() {
        return Err(source.error(
            &other,
            None,
            "a map by wwid has the devices with that WWID as its paths: it lists no paths, \
             groups or table (use path_grouping_policy)",
        ));
    }
    let mut devices = found.paths_of(wwid.get_ref(), blacklist);
    if devices.is_empty() {
        return Err(source.error(
            &place,
            quoted(wwid.get_ref()),
            "no block device has this WWID (or every one is blacklisted); `mpio discover` lists \
             the host's",
        ));
    }
    devices.truncate(MAX_PATHS);
    let size_bytes = devices
        .iter()
        .map(|device| device.size_bytes / 512 * 512)
        .filter(|&bytes| bytes > 0)
        .min();
    let plans = devices
        .iter()
        .map(|device| PathPlan {
            name: device.name.clone(),
            place: place.clone(),
            prio: device.prio,
            args: Vec::new(),
            args_place: None,
        })
        .collect();
    let named = devices
        .into_iter()
        .map(|device| NamedPath {
            uri: format!("file:/dev/{}", device.name),
            name: device.name,
            numa_node: None,
        })
        .collect();
    Ok((plans, named, size_bytes))
}
