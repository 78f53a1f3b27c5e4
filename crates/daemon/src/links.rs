//! The stable links to a map's ublk device: `DEV/mpio/NAME` ->
//! `../ublkbN` and, for a map by WWID, `DEV/disk/by-id/mpio-WWID` ->
//! `../../ublkbN` (`DEV` is `[links] dev_dir`, `/dev` by default), and the
//! record `dist/udev/99-mpio.rules` reads to make the same links where
//! udev owns `/dev`.
//!
//! # Contract
//! - [`DeviceLinks::make`] makes each link when the daemon makes or
//!   recovers the device. A link already there to the same device (udev
//!   made it from the record, or an earlier daemon did) is left as it is;
//!   a link to another device (a name whose device number changed) is
//!   replaced atomically (a new link renamed over it); anything else in
//!   its place (a file, a directory) is left, and reported.
//! - [`DeviceLinks::remove`] removes exactly those links, and only while
//!   they still lead to this device: a link udev or another map has
//!   taken since is left. A link already gone is no error.
//! - With `DEV` = `/dev`, `make` also writes the udev record
//!   `/run/mpio/udev/ublkbN` (`MPIO_NAME=`, `MPIO_WWID=`) and asks the
//!   kernel for a `change` uevent of the device, so that udev, whose `add`
//!   event came before the record, makes its links too; `remove` deletes
//!   the record. Elsewhere (a test's directory) there is no udev to tell.
//! - The record outlives a daemon that keeps its device, so it also says
//!   whose the kept device is: [`kept_for_another`] refuses it to a map
//!   that is not the one it served (its waiting writes are that map's).
//!
//! # Errors
//! Nothing here stops a device: every step that fails is returned as a
//! sentence for the log, and the other steps are still taken.

use crate::config::wwid::multipath_form;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Where the daemon leaves the records the udev rule imports
/// (`IMPORT{file}="/run/mpio/udev/%k"` in `dist/udev/99-mpio.rules`).
pub(crate) const UDEV_RECORDS: &str = "/run/mpio/udev";

/// The udev record's keys: the map's name, and its WWID as the link has it.
const RECORD_NAME: &str = "MPIO_NAME=";
const RECORD_WWID: &str = "MPIO_WWID=";

/// The directory udev owns; only links made there are udev's business.
const UDEV_DEV_DIR: &str = "/dev";

/// The links of one ublk device, and its udev record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeviceLinks {
    /// Each link and the relative target it must hold.
    links: Vec<(PathBuf, PathBuf)>,
    /// The udev record, its text, and the device's `uevent` file.
    udev: Option<(PathBuf, String, PathBuf)>,
}

impl DeviceLinks {
    /// The links under `dev_dir` of ublk device `id` (`/dev/ublkb3`)
    /// serving map `name`, by WWID `wwid` (in either form; the link has
    /// multipath-tools') if it is a map by WWID; with `dev_dir` = `/dev`,
    /// its udev record under [`UDEV_RECORDS`].
    pub(crate) fn new(dev_dir: &Path, id: u32, name: &str, wwid: Option<&str>) -> DeviceLinks {
        let udev = (dev_dir == Path::new(UDEV_DEV_DIR)).then(|| {
            (
                Path::new(UDEV_RECORDS).to_path_buf(),
                PathBuf::from("/sys/class/block"),
            )
        });
        let wwid = wwid.map(multipath_form);
        DeviceLinks::under(dev_dir, udev, &format!("ublkb{id}"), name, wwid.as_deref())
    }

    /// As [`DeviceLinks::new`] for block device `device` (`ublkb3`), with
    /// the udev records in `udev`'s first directory and the devices'
    /// sysfs directories under its second.
    fn under(
        dev_dir: &Path,
        udev: Option<(PathBuf, PathBuf)>,
        device: &str,
        name: &str,
        wwid: Option<&str>,
    ) -> DeviceLinks {
        let wwid = wwid.map(link_word);
        let mut links = vec![(
            dev_dir.join("mpio").join(name),
            Path::new("..").join(device),
        )];
        if let Some(wwid) = &wwid {
            links.push((
                dev_dir.join("disk/by-id").join(format!("mpio-{wwid}")),
                Path::new("../..").join(device),
            ));
        }
        let udev = udev.map(|(records, sys)| {
            let mut record = format!("{RECORD_NAME}{name}\n");
            if let Some(wwid) = &wwid {
                record.push_str(&format!("{RECORD_WWID}{wwid}\n"));
            }
            (
                records.join(device),
                record,
                sys.join(device).join("uevent"),
            )
        });
        DeviceLinks { links, udev }
    }

    /// Makes the links and the udev record (see the module docs); returns
    /// what could not be done.
    pub(crate) fn make(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (link, target) in &self.links {
            if let Err(error) = make_link(link, target) {
                problems.push(format!("link {}: {error}", link.display()));
            }
        }
        if let Some((record, text, uevent)) = &self.udev {
            let written = record
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(record, text));
            if let Err(error) = written {
                problems.push(format!("udev record {}: {error}", record.display()));
            } else if let Err(error) = std::fs::write(uevent, "change") {
                problems.push(format!("{}: {error}", uevent.display()));
            }
        }
        problems
    }

    /// Removes the links that still lead to the device, and the udev
    /// record; returns what could not be done.
    pub(crate) fn remove(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (link, target) in &self.links {
            let removed = match std::fs::read_link(link) {
                Ok(held) if held == *target => std::fs::remove_file(link),
                Ok(_) => Ok(()),
                Err(error) => Err(error),
            };
            match removed {
                Err(error) if error.kind() != ErrorKind::NotFound => {
                    problems.push(format!("link {}: {error}", link.display()));
                }
                _ => {}
            }
        }
        if let Some((record, _, _)) = &self.udev {
            match std::fs::remove_file(record) {
                Err(error) if error.kind() != ErrorKind::NotFound => {
                    problems.push(format!("udev record {}: {error}", record.display()));
                }
                _ => {}
            }
        }
        problems
    }
}

/// Makes `link` lead to `target` unless it already does (see the module
/// docs).
fn make_link(link: &Path, target: &Path) -> std::io::Result<()> {
    match std::fs::read_link(link) {
        Ok(held) if held == target => return Ok(()),
        Ok(_) => {}
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) if error.kind() == ErrorKind::InvalidInput => {
            return Err(std::io::Error::new(
                ErrorKind::AlreadyExists,
                "something that is not a link is in its place: left as it is",
            ))
        }
        Err(error) => return Err(error),
    }
    let directory = link.parent().expect("a link is under a directory");
    std::fs::create_dir_all(directory)?;
    let file_name = link.file_name().unwrap_or_default().to_string_lossy();
    let temporary = directory.join(format!(".{file_name}.mpio-{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(target, &temporary)?;
    std::fs::rename(&temporary, link).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

/// Why map `name` (by `wwid`, in either form) may not take over ublk
/// device `id`: the record the daemon that made it left (see the module
/// docs) names another map, whose writes are waiting in it. The same map
/// is the same WWID where both have one, else the same name (a map's
/// table may change between two daemons, as a dm reload changes it).
/// `None` when there is no such device, no record (links off, or a
/// device made before the record was), or the record is this map's.
pub(crate) fn kept_for_another(id: u32, name: &str, wwid: Option<&str>) -> Option<String> {
    kept_for_another_in(
        Path::new(UDEV_RECORDS),
        Path::new("/sys/class/block"),
        id,
        name,
        wwid,
    )
}

/// [`kept_for_another`] with the records under `records` and the block
/// devices under `sys`.
fn kept_for_another_in(
    records: &Path,
    sys: &Path,
    id: u32,
    name: &str,
    wwid: Option<&str>,
) -> Option<String> {
    let device = format!("ublkb{id}");
    if !sys.join(&device).exists() {
        return None;
    }
    let record = std::fs::read_to_string(records.join(&device)).ok()?;
    let field = |key: &str| {
        record
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .map(str::trim)
    };
    let (kept_name, kept_wwid) = (field(RECORD_NAME), field(RECORD_WWID));
    let ours = wwid.map(|wwid| link_word(&multipath_form(wwid)));
    let same = match (kept_wwid, ours.as_deref()) {
        (Some(kept), Some(ours)) => kept == ours,
        _ => kept_name == Some(name),
    };
    (!same).then(|| {
        format!(
            "/dev/{device} is map {:?}'s{}, with its writes waiting: not taken over by \
             map {name:?}; give this map another number (the device goes once its \
             keeper's time is up, its waiting I/O failed)",
            kept_name.unwrap_or("?"),
            kept_wwid
                .map(|wwid| format!(" (WWID {wwid})"))
                .unwrap_or_default()
        )
    })
}

/// `wwid` as a link's name may hold it: characters other than letters,
/// digits and `#+-.:=@_` become `_`, as udev makes them in a `SYMLINK`.
fn link_word(wwid: &str) -> String {
    wwid.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "#+-.:=@_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links_in(root: &Path, wwid: Option<&str>) -> DeviceLinks {
        DeviceLinks::under(&root.join("dev"), None, "ublkb3", "mpatha", wwid)
    }

    #[test]
    fn make_links_the_name_and_the_wwid_to_the_device() {
        let root = tempfile::tempdir().unwrap();
        let links = links_in(root.path(), Some("3600a0980000000000000000000000001"));
        assert_eq!(links.make(), Vec::<String>::new());
        let dev = root.path().join("dev");
        assert_eq!(
            std::fs::read_link(dev.join("mpio/mpatha")).unwrap(),
            Path::new("../ublkb3")
        );
        assert_eq!(
            std::fs::read_link(dev.join("disk/by-id/mpio-3600a0980000000000000000000000001"))
                .unwrap(),
            Path::new("../../ublkb3")
        );
        // The links resolve to the device node beside them.
        std::fs::write(dev.join("ublkb3"), "device").unwrap();
        assert_eq!(
            std::fs::read_to_string(dev.join("mpio/mpatha")).unwrap(),
            "device"
        );
        assert_eq!(links.remove(), Vec::<String>::new());
        assert!(!dev.join("mpio/mpatha").exists());
        assert!(std::fs::read_dir(dev.join("disk/by-id"))
            .unwrap()
            .next()
            .is_none());
    }

    #[test]
    fn a_map_without_wwid_has_its_name_link_only() {
        let root = tempfile::tempdir().unwrap();
        let links = links_in(root.path(), None);
        assert!(links.make().is_empty());
        assert!(!root.path().join("dev/disk").exists());
    }

    #[test]
    fn a_link_already_there_to_the_device_is_left_and_another_replaced() {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("dev");
        std::fs::create_dir_all(dev.join("mpio")).unwrap();
        // As udev made it: the same target.
        std::os::unix::fs::symlink("../ublkb3", dev.join("mpio/mpatha")).unwrap();
        let before = std::fs::symlink_metadata(dev.join("mpio/mpatha")).unwrap();
        let links = links_in(root.path(), None);
        assert!(links.make().is_empty());
        let after = std::fs::symlink_metadata(dev.join("mpio/mpatha")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(before.ino(), after.ino(), "left as it was");
        // A name whose device number changed.
        std::fs::remove_file(dev.join("mpio/mpatha")).unwrap();
        std::os::unix::fs::symlink("../ublkb7", dev.join("mpio/mpatha")).unwrap();
        assert!(links.make().is_empty());
        assert_eq!(
            std::fs::read_link(dev.join("mpio/mpatha")).unwrap(),
            Path::new("../ublkb3")
        );
        assert_eq!(std::fs::read_dir(dev.join("mpio")).unwrap().count(), 1);
    }

    #[test]
    fn remove_leaves_a_link_that_leads_elsewhere_now() {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("dev");
        let links = links_in(root.path(), None);
        assert!(links.make().is_empty());
        std::fs::remove_file(dev.join("mpio/mpatha")).unwrap();
        std::os::unix::fs::symlink("../ublkb9", dev.join("mpio/mpatha")).unwrap();
        assert!(links.remove().is_empty());
        assert_eq!(
            std::fs::read_link(dev.join("mpio/mpatha")).unwrap(),
            Path::new("../ublkb9")
        );
        std::fs::remove_file(dev.join("mpio/mpatha")).unwrap();
        assert!(links.remove().is_empty(), "a link already gone is no error");
    }

    #[test]
    fn something_else_in_the_links_place_is_reported_and_left() {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("dev");
        std::fs::create_dir_all(dev.join("mpio")).unwrap();
        std::fs::write(dev.join("mpio/mpatha"), "mine").unwrap();
        let problems = links_in(root.path(), None).make();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("not a link"), "{problems:?}");
        assert_eq!(
            std::fs::read_to_string(dev.join("mpio/mpatha")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn the_udev_record_is_written_the_change_asked_for_and_the_record_removed() {
        let root = tempfile::tempdir().unwrap();
        let (records, sys) = (root.path().join("run"), root.path().join("sys"));
        std::fs::create_dir_all(sys.join("ublkb3")).unwrap();
        let links = DeviceLinks::under(
            &root.path().join("dev"),
            Some((records.clone(), sys.clone())),
            "ublkb3",
            "mpatha",
            Some("1DEC_321/8"),
        );
        assert!(links.make().is_empty());
        assert_eq!(
            std::fs::read_to_string(records.join("ublkb3")).unwrap(),
            "MPIO_NAME=mpatha\nMPIO_WWID=1DEC_321_8\n"
        );
        assert_eq!(
            std::fs::read_to_string(sys.join("ublkb3/uevent")).unwrap(),
            "change"
        );
        assert!(root
            .path()
            .join("dev/disk/by-id/mpio-1DEC_321_8")
            .is_symlink());
        assert!(links.remove().is_empty());
        assert!(!records.join("ublkb3").exists());
    }

    /// A kept device's record says whose it is: the same map (by WWID
    /// where both have one, else by name) takes it over, another does
    /// not; without a device or a record nothing is refused.
    #[test]
    fn a_kept_device_is_refused_to_another_map() {
        let root = tempfile::tempdir().unwrap();
        let (records, sys) = (root.path().join("run"), root.path().join("sys"));
        let refused =
            |name: &str, wwid: Option<&str>| kept_for_another_in(&records, &sys, 3, name, wwid);
        assert_eq!(refused("other", None), None, "no device");
        std::fs::create_dir_all(sys.join("ublkb3")).unwrap();
        assert_eq!(refused("other", None), None, "no record");
        let wwid = multipath_form("naa.600a0980");
        let links = DeviceLinks::under(
            &root.path().join("dev"),
            Some((records.clone(), sys.clone())),
            "ublkb3",
            "mpatha",
            Some(&wwid),
        );
        assert!(links.make().is_empty());
        assert_eq!(refused("mpatha", Some("3600a0980")), None, "its own");
        assert_eq!(refused("renamed", Some("naa.600a0980")), None, "by WWID");
        let why = refused("mpatha", Some("3600a0981")).expect("another LUN");
        assert!(why.contains("map \"mpatha\"'s (WWID 3600a0980)"), "{why}");
        assert!(refused("mpathb", None).is_some(), "another name, no WWID");
        links.remove();
        assert_eq!(
            refused("mpathb", None),
            None,
            "the record went with the device"
        );
    }

    #[test]
    fn only_links_in_dev_tell_udev() {
        let in_dev = DeviceLinks::new(Path::new("/dev"), 3, "m", Some("naa.600a0980"));
        assert_eq!(
            in_dev.udev.as_ref().map(|udev| udev.0.clone()),
            Some(PathBuf::from("/run/mpio/udev/ublkb3"))
        );
        assert_eq!(
            in_dev.links[1],
            (
                PathBuf::from("/dev/disk/by-id/mpio-3600a0980"),
                PathBuf::from("../../ublkb3")
            ),
            "the WWID as multipath-tools writes it"
        );
        assert!(DeviceLinks::new(Path::new("/tmp/x"), 3, "m", None)
            .udev
            .is_none());
    }

    #[test]
    fn the_udev_rule_reads_the_records_the_daemon_writes() {
        let rule = include_str!("../../../dist/udev/99-mpio.rules");
        assert!(
            rule.contains(&format!("IMPORT{{file}}=\"{UDEV_RECORDS}/%k\"")),
            "{rule}"
        );
        for line in rule.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // Every rule line is comma-separated KEY OP "VALUE" pairs.
            for pair in line.split(", ") {
                let operator = ["==", "!=", "+=", "-=", ":=", "="]
                    .into_iter()
                    .find_map(|op| pair.split_once(op).map(|split| (op, split)));
                let Some((_, (key, value))) = operator else {
                    panic!("{line:?}: {pair:?} has no operator");
                };
                assert!(
                    key.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "{}_".contains(c)),
                    "{line:?}: key {key:?}"
                );
                assert!(
                    value.len() >= 2 && value.starts_with('"') && value.ends_with('"'),
                    "{line:?}: value {value:?} is not quoted"
                );
            }
        }
        let wwid_link = "disk/by-id/mpio-$env{MPIO_WWID}";
        assert!(
            rule.contains("mpio/$env{MPIO_NAME}") && rule.contains(wwid_link),
            "{rule}"
        );
    }
}
