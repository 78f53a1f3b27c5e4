//! Which block devices are never paths, as multipath.conf's `blacklist`
//! section says: regular expressions over the device name (`devnode`)
//! and the WWID (`wwid`), and a built-in list of device kinds that are
//! not multipath LUNs (RAM disks, loop, md, device-mapper, optical, NBD,
//! ublk — mpio's own devices among them).
//!
//! And, as its `blacklist_exceptions` section says, patterns of the same
//! two kinds that take a device back: a device whose name or WWID matches
//! an exception is excluded by no pattern, built-in or configured. A
//! device without a WWID is never a path, exception or not: nothing
//! could tell its paths apart from another device's. A `wwid` pattern
//! matches a WWID in either of its forms (the kernel's `naa.600a…` or
//! udev's `3600a…`, see [`super::wwid_forms`]).

use super::wwid_forms::WwidForms;
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
    /// Devices these match are excluded by no pattern.
    except_devnode: Vec<(String, Regex)>,
    except_wwid: Vec<(String, Regex)>,
}

/// Compiles each pattern, or names the first that does not compile.
fn compile(patterns: &[String]) -> Result<Vec<(String, Regex)>, String> {
    patterns
        .iter()
        .map(|pattern| {
            Regex::new(pattern)
                .map(|regex| (pattern.clone(), regex))
                .map_err(|error| format!("pattern {pattern:?}: {error}"))
        })
        .collect()
}

/// The first pattern of `patterns` that matches `text`.
fn first_match<'a>(patterns: &'a [(String, Regex)], text: &str) -> Option<&'a str> {
    patterns
        .iter()
        .find(|(_, regex)| regex.is_match(text))
        .map(|(pattern, _)| pattern.as_str())
}

/// The first pattern of `patterns` that matches `wwid` in either of its
/// forms (a multipath.conf pattern is written for udev's `3600a…`, the
/// device reports the kernel's `naa.600a…`).
fn wwid_match<'a>(patterns: &'a [(String, Regex)], wwid: &str) -> Option<&'a str> {
    let forms = WwidForms::of(wwid);
    patterns
        .iter()
        .find(|(_, regex)| regex.is_match(wwid) || forms.any(|form| regex.is_match(form)))
        .map(|(pattern, _)| pattern.as_str())
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
        Ok(Blacklist {
            devnode: compile(devnode)?,
            wwid: compile(wwid)?,
            except_devnode: Vec::new(),
            except_wwid: Vec::new(),
        })
    }

    /// This blacklist, with exceptions: devices whose name matches a
    /// `devnode` pattern or whose WWID matches a `wwid` pattern are
    /// excluded by none of its patterns.
    ///
    /// # Errors
    /// A message naming the pattern that does not compile and why.
    pub fn with_exceptions(
        mut self,
        devnode: &[String],
        wwid: &[String],
    ) -> Result<Blacklist, String> {
        self.except_devnode = compile(devnode)?;
        self.except_wwid = compile(wwid)?;
        Ok(self)
    }

    /// Why `device` is not a path (which pattern it matched, or that it
    /// has no WWID); `None` if it may be one.
    pub fn excludes(&self, device: &BlockDevice) -> Option<String> {
        let excepted = first_match(&self.except_devnode, &device.name).is_some()
            || device
                .wwid
                .as_deref()
                .is_some_and(|wwid| wwid_match(&self.except_wwid, wwid).is_some());
        if !excepted {
            if let Some(pattern) = first_match(&self.devnode, &device.name) {
                return Some(format!("blacklisted: devnode {pattern:?}"));
            }
        }
        let Some(wwid) = &device.wwid else {
            return Some("no wwid".into());
        };
        if excepted {
            return None;
        }
        wwid_match(&self.wwid, wwid).map(|pattern| format!("blacklisted: wwid {pattern:?}"))
    }
}
