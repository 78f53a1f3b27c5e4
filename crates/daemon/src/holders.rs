//! Who holds a block device open, so that a map's device is removed only
//! when no one uses it (`mpio remove`, a map dropped by a reload), as
//! `multipath -f` refuses a map in use.
//!
//! # What is found
//! The kernel keeps no list of a disk's openers, so [`Claim::take`]
//! looks where each kind shows, and names what it finds:
//! - mounts (`/proc/self/mountinfo`, by device number);
//! - swap (`/proc/swaps`);
//! - devices stacked on it (`/sys/class/block/NAME/holders`: dm, md);
//! - processes with it open (`/proc/PID/fd`, by device number);
//! - anything else holding it exclusively (an `O_EXCL` open refused
//!   with `EBUSY`), named as such.
//!
//! A free device is returned claimed: the `O_EXCL` open stays until the
//! claim is dropped, so nothing mounts it between the look and the
//! removal. A process may still open it plainly in that window: where
//! the kernel has TRY_STOP_DEV (7.0+) the stop itself finds it, and the
//! device is removed as a held one (`crate::ublk`); elsewhere it sees the
//! disk go as after `--force`, and the deletion waits until it closes.

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// A block device opened exclusively: no mount, stacked device or other
/// exclusive opener can take it while this lives.
#[derive(Debug)]
pub(crate) struct Claim {
    _file: File,
}

impl Claim {
    /// Claims block device `device` (`/dev/ublkb5`) if no one holds it.
    ///
    /// # Errors
    /// Its holders, each named (`mounted on /mnt (ext4)`, `opened by
    /// pid 42 (fio)`), or why the device could not be looked at.
    pub(crate) fn take(device: &Path) -> Result<Claim, Vec<String>> {
        let metadata = std::fs::metadata(device)
            .map_err(|error| vec![format!("{}: {error}", device.display())])?;
        if !metadata.file_type().is_block_device() {
            return Err(vec![format!("{} is not a block device", device.display())]);
        }
        let number = metadata.rdev();
        let name = device
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut holders = mounts(number);
        holders.extend(swaps(device));
        holders.extend(stacked(&name));
        holders.extend(openers(number));
        let exclusive = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL)
            .open(device);
        match exclusive {
            Ok(file) if holders.is_empty() => Ok(Claim { _file: file }),
            Ok(_) => Err(holders),
            Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {
                if holders.is_empty() {
                    holders.push(
                        "held exclusively by the kernel or a program (none found by name)".into(),
                    );
                }
                Err(holders)
            }
            Err(error) => Err(vec![format!(
                "{}: opening it exclusively: {error}",
                device.display()
            )]),
        }
    }
}

/// `major:minor` as `/proc/self/mountinfo` writes a device number.
fn major_minor(number: u64) -> String {
    format!("{}:{}", libc::major(number), libc::minor(number))
}

/// Where device `number` is mounted, from `/proc/self/mountinfo`.
fn mounts(number: u64) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mounts_in(&text, &major_minor(number))
}

/// The mounts of device `major_minor` in a mountinfo text: field 3 is
/// the device, field 5 the mount point, and the file system's type
/// follows the ` - ` separator.
fn mounts_in(mountinfo: &str, major_minor: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (fields, rest) = line.split_once(" - ")?;
            let fields: Vec<&str> = fields.split(' ').collect();
            if fields.get(2) != Some(&major_minor) {
                return None;
            }
            let point = unescape(fields.get(4)?);
            let kind = rest.split(' ').next().unwrap_or("?");
            Some(format!("mounted on {point} ({kind})"))
        })
        .collect()
}

/// A mountinfo or swaps field with its octal escapes (`\040` for a
/// space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let octal = bytes.get(index + 1..index + 4).filter(|digits| {
            bytes[index] == b'\\' && digits.iter().all(|digit| (b'0'..=b'7').contains(digit))
        });
        match octal {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |value, digit| value * 8 + u32::from(digit - b'0'));
                out.push(value as u8);
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `device` as swap, from `/proc/swaps`.
fn swaps(device: &Path) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    let device = device.to_string_lossy();
    text.lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| unescape(name) == device)
        .map(|_| "used as swap".to_string())
        .collect()
}

/// The devices stacked on block device `name` (dm, md), from sysfs.
fn stacked(name: &str) -> Vec<String> {
    let dir = Path::new("/sys/class/block").join(name).join("holders");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| format!("used by {}", entry.file_name().to_string_lossy()))
        .collect()
}

/// The processes with device `number` open, from `/proc/PID/fd`.
fn openers(number: u64) -> Vec<String> {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for process in processes.flatten() {
        let name = process.file_name();
        let Some(pid) = name.to_str().and_then(|pid| pid.parse::<u32>().ok()) else {
            continue;
        };
        // A process that ends or hides its descriptors meanwhile holds
        // nothing we could name.
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::metadata(fd.path()).is_ok_and(|metadata| {
                metadata.file_type().is_block_device() && metadata.rdev() == number
            })
        });
        if holds {
            let command = std::fs::read_to_string(process.path().join("comm")).unwrap_or_default();
            found.push(format!("opened by pid {pid} ({})", command.trim_end()));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_is_found_by_device_number_with_its_point_and_type() {
        let mountinfo = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
97 22 259:5 / /mnt/with\\040space rw,relatime shared:40 - xfs /dev/ublkb5 rw
98 22 259:50 / /other rw - ext4 /dev/ublkb50 rw
";
        assert_eq!(
            mounts_in(mountinfo, "259:5"),
            ["mounted on /mnt/with space (xfs)"]
        );
        assert!(mounts_in(mountinfo, "259:6").is_empty());
        assert!(mounts_in("garbage without separator\n", "259:5").is_empty());
    }

    #[test]
    fn escapes_are_undone_and_a_lone_backslash_kept() {
        assert_eq!(unescape("a\\040b\\011c"), "a b\tc");
        assert_eq!(unescape("a\\09"), "a\\09");
        assert_eq!(unescape("end\\"), "end\\");
    }

    #[test]
    fn an_open_character_device_holds_no_block_device() {
        // This process holds /dev/null open; it is a character device,
        // so nothing is found for its number as a block device.
        let _null = File::open("/dev/null").unwrap();
        let number = std::fs::metadata("/dev/null").unwrap().rdev();
        assert!(openers(number).is_empty());
    }

    #[test]
    fn a_file_is_not_a_block_device() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let refused = Claim::take(file.path()).unwrap_err();
        assert!(refused[0].contains("is not a block device"), "{refused:?}");
    }
}
