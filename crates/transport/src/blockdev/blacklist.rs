//! Which block devices are never paths, as multipath.conf's `blacklist`
//! section says: regular expressions over the device name (`devnode`)
//! and the WWID (`wwid`), and a built-in list of device kinds that are
//! not multipath LUNs (RAM disks, loop, md, device-mapper, optical, NBD,
//! ublk — mpio's own devices among them).

use super::BlockDevice;
use regex_automata::meta::Regex;

/// Device names that are never paths unless the config's own list
/// replaces this one (multipath-tools' built-in devnode blacklist, with
/// mpio's and the kernel's other virtual disks).
pub const DEFAULT_DEVNODE: &str =
    "^(ram|zram|raw|loop|fd|md|dm-|sr|scd|st|dcssblk|nbd|ublkb|zd)[0-9]";

/// Compiled blacklist.
#[derive(Clone, Debug)]
pub struct Blacklist {
    devnode: Vec<(String, Regex)>,
    wwid: Vec<(String, Regex)>,
}

impl Default for Blacklist {
    /// The built-in devnode list only.
    fn default() -> Self {
        Blacklist::new(&[DEFAULT_DEVNODE.to_string()], &[]).expect("the built-in pattern compiles")
    }
}

impl Blacklist {
    /// A blacklist of the `devnode` and `wwid` patterns.
    ///
    /// # Errors
    /// A message naming the pattern that does not compile and why.
    pub fn new(devnode: &[String], wwid: &[String]) -> Result<Blacklist, String> {
        let compile = |patterns: &[String]| {
            patterns
                .iter()
                .map(|pattern| {
                    Regex::new(pattern)
                        .map(|regex| (pattern.clone(), regex))
                        .map_err(|error| format!("pattern {pattern:?}: {error}"))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Blacklist {
            devnode: compile(devnode)?,
            wwid: compile(wwid)?,
        })
    }

    /// Why `device` is not a path (which pattern it matched, or that it
    /// has no WWID); `None` if it may be one.
    pub fn excludes(&self, device: &BlockDevice) -> Option<String> {
        if let Some((pattern, _)) = self
            .devnode
            .iter()
            .find(|(_, regex)| regex.is_match(&device.name))
        {
            return Some(format!("blacklisted: devnode {pattern:?}"));
        }
        let Some(wwid) = &device.wwid else {
            return Some("no wwid".into());
        };
        self.wwid
            .iter()
            .find(|(_, regex)| regex.is_match(wwid))
            .map(|(pattern, _)| format!("blacklisted: wwid {pattern:?}"))
    }
}
