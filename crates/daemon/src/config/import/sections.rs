//! Each section of multipath.conf against mpio's config: `defaults` and
//! `overrides` into `[defaults]` (and the top-level `user_friendly_names`
//! and `bindings_file`), `blacklist` and `blacklist_exceptions`
//! into theirs, each `multipaths` entry with a `wwid` into a `[[map]]`,
//! `devices` entries as far as mpio already does what they say.
//!
//! Precedence is multipath-tools': a `multipaths` entry over `overrides`
//! over `defaults` (mpio's map keys over its `[defaults]` say the same);
//! a keyword given twice in one block counts once, the later; a
//! `no_path_retry` anywhere over a `features` `queue_if_no_path`; the
//! first entry for a WWID over later ones (in either WWID form); and the
//! `marginal_path_*` keywords count only all four together. Every value
//! that becomes a key is first checked by mpio's own config loader.

use super::model::{Keyword, Section};
use super::report::{Note, Outcome, Value, Why};
use super::settings::{setting, Scope};
use mpio_transport::blockdev::wwid_forms::same_lun;

/// A keyword that became mpio keys.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    /// The multipath.conf keyword.
    pub name: String,
    pub line: usize,
    /// `section: keyword value`, for notes.
    pub what: String,
    pub keys: Vec<(&'static str, Value)>,
}

/// A `[[map]]` from a `multipaths` entry.
#[derive(Clone, Debug)]
pub(super) struct MapOut {
    /// Its `alias`, else its WWID.
    pub name: String,
    /// Whether it has an `alias`.
    pub aliased: bool,
    pub wwid: String,
    /// The line of its `wwid`, then of its `alias` if it has one.
    pub lines: Vec<usize>,
    pub settings: Vec<Entry>,
}

impl MapOut {
    /// Whether mpio names this map from the bindings file: it has no
    /// alias and `user_friendly_names` is on for it (its entry's, else
    /// that of `defaults`, which `overrides` already went over: the
    /// precedence of multipath-tools).
    pub(super) fn named_by_bindings(&self, defaults: &[Entry]) -> bool {
        let flag = |entries: &[Entry]| {
            entries.iter().find_map(|entry| {
                entry.keys.iter().find_map(|(key, value)| match value {
                    Value::Flag(flag) if *key == "user_friendly_names" => Some(*flag),
                    _ => None,
                })
            })
        };
        !self.aliased && flag(&self.settings).or(flag(defaults)).unwrap_or(false)
    }
}

/// The blacklist or its exceptions: patterns with their lines.
#[derive(Clone, Debug, Default)]
pub(super) struct PatternsOut {
    pub devnode: Vec<Entry>,
    pub wwid: Vec<Entry>,
}

/// Everything mapped, and the notes.
#[derive(Debug, Default)]
pub(super) struct Mapped {
    pub defaults: Vec<Entry>,
    pub blacklist: PatternsOut,
    pub exceptions: PatternsOut,
    pub maps: Vec<MapOut>,
    pub notes: Vec<Note>,
}

/// Checks keys with mpio's config loader: `Err` carries its reason.
pub(super) type Probe<'a> = &'a dyn Fn(&str, &[(&'static str, Value)]) -> Result<(), String>;

/// Maps every section.
pub(super) fn map(sections: &[Section], probe: Probe<'_>) -> Mapped {
    let mut mapped = Mapped::default();
    let mut defaults = Vec::new();
    let mut overrides = Vec::new();
    for section in sections {
        match section.name.as_str() {
            "defaults" => {
                let block = block(&mut mapped.notes, section, Scope::Defaults, probe);
                merge(&mut mapped.notes, &mut defaults, block, "defaults");
            }
            "overrides" => {
                let block = block(&mut mapped.notes, section, Scope::Overrides, probe);
                merge(&mut mapped.notes, &mut overrides, block, "overrides");
                for protocol in &section.sections {
                    whole(
                        &mut mapped.notes,
                        protocol,
                        "overrides protocol",
                        Why::NoEquivalent,
                        "per-protocol SCSI transport timeouts mpio does not set",
                    );
                }
            }
            "blacklist" => patterns(&mut mapped.notes, section, &mut mapped.blacklist, probe),
            "blacklist_exceptions" => {
                patterns(&mut mapped.notes, section, &mut mapped.exceptions, probe);
            }
            "multipaths" => multipaths(&mut mapped, section, probe),
            "devices" => devices(&mut mapped.notes, section, probe),
            _ => unreachable!("the parser takes known sections only"),
        }
    }
    merge(&mut mapped.notes, &mut defaults, overrides, "overrides");
    if let Some(line) = no_path_retry_line(&defaults) {
        features_yield(&mut mapped.notes, &mut defaults, line);
        for map in &mut mapped.maps {
            features_yield(&mut mapped.notes, &mut map.settings, line);
        }
    }
    mapped.defaults = defaults;
    mapped
}

/// Notes every keyword of `section` (and its sub-sections) as `why`.
fn whole(notes: &mut Vec<Note>, section: &Section, context: &str, why: Why, reason: &str) {
    for keyword in &section.keywords {
        notes.push(Note {
            line: keyword.line,
            what: format!("{context}: {}", keyword.written()),
            why: Some(why),
            reason: reason.to_string(),
        });
    }
    for inner in &section.sections {
        whole(
            notes,
            inner,
            &format!("{context} {}", inner.name),
            why,
            reason,
        );
    }
}

/// The entries of one block of settings, after its own precedence.
fn block(notes: &mut Vec<Note>, section: &Section, scope: Scope, probe: Probe<'_>) -> Vec<Entry> {
    let context = section.name.as_str();
    let mut entries: Vec<Entry> = Vec::new();
    for keyword in &section.keywords {
        if scope == Scope::Multipath && matches!(keyword.name.as_str(), "wwid" | "alias") {
            continue;
        }
        let Some(entry) = entry(notes, keyword, context, scope, probe) else {
            continue;
        };
        merge(notes, &mut entries, vec![entry], context);
    }
    precedence(notes, &mut entries, section);
    entries
}

/// One keyword's entry, or its note.
fn entry(
    notes: &mut Vec<Note>,
    keyword: &Keyword,
    context: &str,
    scope: Scope,
    probe: Probe<'_>,
) -> Option<Entry> {
    let what = format!("{context}: {}", keyword.written());
    let note = |why, reason: String| Note {
        line: keyword.line,
        what: what.clone(),
        why,
        reason,
    };
    if !keyword.extra.is_empty() {
        notes.push(Note {
            line: keyword.line,
            what: format!(
                "{context}: {} ... {}",
                keyword.name,
                keyword.extra.join(" ")
            ),
            why: Some(Why::IgnoredByMultipathTools),
            reason: "words after the first value: multipath-tools takes the first (quote a \
                     value with spaces)"
                .into(),
        });
    }
    let Some(value) = &keyword.value else {
        notes.push(note(Some(Why::IgnoredByMultipathTools), "no value".into()));
        return None;
    };
    match setting(&keyword.name, value, scope) {
        Outcome::Set(keys) if scope == Scope::Device => {
            let written: Vec<String> = keys
                .iter()
                .map(|(key, value)| format!("{key} = {}", value.toml()))
                .collect();
            notes.push(note(
                Some(Why::NoEquivalent),
                format!(
                    "mpio has no per-vendor settings; `{}` in [defaults] or a map would set \
                     it for every LUN there",
                    written.join(", ")
                ),
            ));
            None
        }
        Outcome::Set(keys) => match probe(&keyword.name, &keys) {
            Ok(()) => Some(Entry {
                name: keyword.name.clone(),
                line: keyword.line,
                what,
                keys,
            }),
            Err(reason) => {
                notes.push(note(
                    Some(Why::DifferentMeaning),
                    format!("mpio refuses the value: {reason}"),
                ));
                None
            }
        },
        Outcome::Same(reason) => {
            notes.push(note(None, reason));
            None
        }
        Outcome::Dropped(why, reason) => {
            notes.push(note(Some(why), reason));
            None
        }
    }
}

/// Puts `later` over `entries`: an entry of a keyword already there
/// replaces it, and the one replaced is noted.
fn merge(notes: &mut Vec<Note>, entries: &mut Vec<Entry>, later: Vec<Entry>, by: &str) {
    for entry in later {
        if let Some(index) = entries.iter().position(|old| old.name == entry.name) {
            let old = entries.remove(index);
            notes.push(Note {
                line: old.line,
                what: old.what,
                why: Some(Why::IgnoredByMultipathTools),
                reason: format!("{by} sets it again at line {}, which counts", entry.line),
            });
        }
        entries.push(entry);
    }
}

/// `no_path_retry` over `features "1 queue_if_no_path"`; `marginal_path_*`
/// only all four together.
fn precedence(notes: &mut Vec<Note>, entries: &mut Vec<Entry>, section: &Section) {
    if let Some(line) = no_path_retry_line(entries) {
        features_yield(notes, entries, line);
    }
    let numeric = |name: &str| {
        section
            .keywords
            .iter()
            .rev()
            .find(|keyword| keyword.name == name)
            .and_then(|keyword| keyword.value.as_deref())
            .is_some_and(|value| value.parse::<i64>().is_ok())
    };
    if !MARGINAL.iter().all(|name| numeric(name)) {
        drop_where(
            notes,
            entries,
            |entry| entry.name.starts_with("marginal_path_"),
            || {
                "multipath-tools turns marginal-path detection on only with all four \
             marginal_path_* keywords set in one section"
                    .to_string()
            },
        );
    }
}

/// The line of the `no_path_retry` among `entries`, if there is one.
fn no_path_retry_line(entries: &[Entry]) -> Option<usize> {
    entries
        .iter()
        .find(|entry| entry.name == "no_path_retry")
        .map(|entry| entry.line)
}

/// Drops a `features` `queue_if_no_path` for the `no_path_retry` at
/// `line`, which multipath-tools lets win wherever either is set.
fn features_yield(notes: &mut Vec<Note>, entries: &mut Vec<Entry>, line: usize) {
    drop_where(
        notes,
        entries,
        |entry| entry.name == "features",
        || format!("no_path_retry at line {line} takes precedence over it"),
    );
}

/// The four keywords of marginal-path detection.
const MARGINAL: [&str; 4] = [
    "marginal_path_double_failed_time",
    "marginal_path_err_sample_time",
    "marginal_path_err_rate_threshold",
    "marginal_path_err_recheck_gap_time",
];

/// Removes the entries `which` picks, noting each as ignored.
fn drop_where(
    notes: &mut Vec<Note>,
    entries: &mut Vec<Entry>,
    which: impl Fn(&Entry) -> bool,
    reason: impl Fn() -> String,
) {
    entries.retain(|entry| {
        if which(entry) {
            notes.push(Note {
                line: entry.line,
                what: entry.what.clone(),
                why: Some(Why::IgnoredByMultipathTools),
                reason: reason(),
            });
            false
        } else {
            true
        }
    });
}

/// `devnode` and `wwid` patterns; what mpio cannot match is noted.
fn patterns(notes: &mut Vec<Note>, section: &Section, out: &mut PatternsOut, probe: Probe<'_>) {
    let context = section.name.as_str();
    for keyword in &section.keywords {
        let what = format!("{context}: {}", keyword.written());
        let mut note = |why, reason: &str| {
            notes.push(Note {
                line: keyword.line,
                what: what.clone(),
                why: Some(why),
                reason: reason.to_string(),
            });
        };
        let (list, key): (&mut Vec<Entry>, &'static str) = match keyword.name.as_str() {
            "devnode" => (&mut out.devnode, "devnode"),
            "wwid" => (&mut out.wwid, "wwid"),
            "property" => {
                note(
                    Why::NoEquivalent,
                    "mpio reads no udev properties; it holds out devices without a WWID itself",
                );
                continue;
            }
            "protocol" => {
                note(
                    Why::NoEquivalent,
                    "mpio's blacklist matches names and WWIDs only",
                );
                continue;
            }
            _ => {
                note(
                    Why::IgnoredByMultipathTools,
                    "not a keyword of this section: multipath-tools ignores it",
                );
                continue;
            }
        };
        let Some(pattern) = &keyword.value else {
            note(Why::IgnoredByMultipathTools, "no value");
            continue;
        };
        if pattern.starts_with('!') {
            note(
                Why::DifferentMeaning,
                "a leading ! matches what the rest does not; mpio's patterns have no \
                 negation (list what to take back in blacklist_exceptions)",
            );
            continue;
        }
        let keys = vec![(key, Value::Text(pattern.clone()))];
        if let Err(reason) = probe(context, &keys) {
            note(
                Why::DifferentMeaning,
                &format!("mpio refuses the pattern: {reason}"),
            );
            continue;
        }
        list.push(Entry {
            name: key.to_string(),
            line: keyword.line,
            what,
            keys,
        });
    }
    for device in &section.sections {
        whole(
            notes,
            device,
            &format!("{context} {}", device.name),
            Why::NoEquivalent,
            "mpio's blacklist has no vendor/product match: hold such LUNs out by wwid or devnode",
        );
    }
}

/// `multipaths`: a map per entry with a `wwid`.
fn multipaths(mapped: &mut Mapped, section: &Section, probe: Probe<'_>) {
    for entry in &section.sections {
        let last = |name: &str| {
            entry
                .keywords
                .iter()
                .rev()
                .find(|keyword| keyword.name == name && keyword.value.is_some())
        };
        let (wwid, alias) = (last("wwid"), last("alias"));
        let Some(wwid_keyword) = wwid else {
            whole(
                &mut mapped.notes,
                entry,
                "multipaths multipath",
                Why::IgnoredByMultipathTools,
                "its multipath entry has no wwid",
            );
            continue;
        };
        let wwid = wwid_keyword.value.clone().unwrap_or_default();
        let name = alias
            .and_then(|alias| alias.value.clone())
            .unwrap_or_else(|| wwid.clone());
        for keyword in &entry.keywords {
            let kept = [Some(wwid_keyword), alias]
                .iter()
                .flatten()
                .any(|kept| std::ptr::eq(*kept, keyword));
            if matches!(keyword.name.as_str(), "wwid" | "alias") && !kept {
                mapped.notes.push(Note {
                    line: keyword.line,
                    what: format!("multipath: {}", keyword.written()),
                    why: Some(Why::IgnoredByMultipathTools),
                    reason: "given again later in the entry, which counts".into(),
                });
            }
        }
        let refused = probe("map", &[("name", Value::Text(name.clone()))])
            .err()
            .map(|reason| {
                (
                    Why::DifferentMeaning,
                    format!("mpio refuses the map's name {name:?}: {reason}"),
                )
            })
            .or_else(|| {
                let other = mapped.maps.iter().find(|map| same_lun(&map.wwid, &wwid))?;
                Some((
                    Why::IgnoredByMultipathTools,
                    format!("the map {:?} has this WWID already", other.name),
                ))
            })
            .or_else(|| {
                let other = mapped.maps.iter().find(|map| map.name == name)?;
                Some((
                    Why::IgnoredByMultipathTools,
                    format!(
                        "a map named {:?} (wwid {}) comes earlier",
                        other.name, other.wwid
                    ),
                ))
            });
        if let Some((why, reason)) = refused {
            whole(
                &mut mapped.notes,
                entry,
                "multipaths multipath",
                why,
                &reason,
            );
            continue;
        }
        let settings = block(&mut mapped.notes, entry, Scope::Multipath, probe);
        let lines = [Some(wwid_keyword), alias]
            .into_iter()
            .flatten()
            .map(|keyword| keyword.line)
            .collect();
        mapped.maps.push(MapOut {
            name,
            aliased: alias.is_some(),
            wwid,
            lines,
            settings,
        });
    }
    for keyword in &section.keywords {
        mapped.notes.push(Note {
            line: keyword.line,
            what: format!("multipaths: {}", keyword.written()),
            why: Some(Why::IgnoredByMultipathTools),
            reason: "multipaths holds multipath entries only".into(),
        });
    }
}

/// `devices`: each entry's keywords, none a per-vendor key in mpio.
fn devices(notes: &mut Vec<Note>, section: &Section, probe: Probe<'_>) {
    for device in &section.sections {
        let label = device
            .keywords
            .iter()
            .filter(|keyword| matches!(keyword.name.as_str(), "vendor" | "product"))
            .filter_map(|keyword| keyword.value.as_deref())
            .collect::<Vec<_>>()
            .join(" ");
        let mut shown = device.clone();
        shown.name = format!("device \"{label}\"");
        block(notes, &shown, Scope::Device, probe);
        for protocol in &device.sections {
            whole(
                notes,
                protocol,
                "device protocol",
                Why::NoEquivalent,
                "per-protocol SCSI transport timeouts mpio does not set",
            );
        }
    }
    for keyword in &section.keywords {
        notes.push(Note {
            line: keyword.line,
            what: format!("devices: {}", keyword.written()),
            why: Some(Why::IgnoredByMultipathTools),
            reason: "devices holds device entries only".into(),
        });
    }
}
