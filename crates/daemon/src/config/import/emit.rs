//! The mpio config text of what was mapped: the notes first, as
//! comments, then the top-level keys, `[defaults]`, the blacklist and its exceptions, and a
//! `[[map]]` per map by WWID with a ublk block device (dm-multipath's
//! `/dev/mapper/NAME`), each key followed by the line it came from.

use super::report::{quote, Note, Value};
use super::sections::{Entry, Mapped};
use super::settings::TOP_LEVEL;
use std::fmt::Write;

/// The config text.
pub(super) fn toml(mapped: &Mapped, notes: &[Note]) -> String {
    let mut out = String::from("# mpio config written by `mpio import-multipath-conf`.\n");
    let dropped: Vec<&Note> = notes.iter().filter(|note| note.why.is_some()).collect();
    let same: Vec<&Note> = notes.iter().filter(|note| note.why.is_none()).collect();
    for (title, list) in [
        ("Not carried over", &dropped),
        ("Nothing to write: mpio already behaves so", &same),
    ] {
        if !list.is_empty() {
            let _ = writeln!(out, "#\n# {title} ({}):", list.len());
            for note in list.iter() {
                let _ = writeln!(out, "#   {note}");
            }
        }
    }
    top_level(&mut out, mapped);
    if mapped
        .defaults
        .iter()
        .any(|entry| !entry.keys.iter().all(|(key, _)| TOP_LEVEL.contains(key)))
    {
        out.push_str("\n[defaults]\n");
        settings(&mut out, &mapped.defaults, "defaults");
    }
    for (table, patterns) in [
        ("blacklist", &mapped.blacklist),
        ("blacklist_exceptions", &mapped.exceptions),
    ] {
        if patterns.devnode.is_empty() && patterns.wwid.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n[{table}]");
        for (key, list) in [("devnode", &patterns.devnode), ("wwid", &patterns.wwid)] {
            if list.is_empty() {
                continue;
            }
            let _ = writeln!(out, "{key} = [");
            for entry in list.iter() {
                for (_, value) in &entry.keys {
                    let _ = writeln!(out, "    {},  # line {}", value.toml(), entry.line);
                }
            }
            out.push_str("]\n");
        }
    }
    if mapped.maps.is_empty() {
        out.push_str(
            "\n# No multipaths entry with a wwid: mpio makes maps only for its [[map]]s.\n\
             # `mpio discover --config` writes one per LUN of this host.\n",
        );
    }
    for (number, map) in mapped.maps.iter().enumerate() {
        let from = |index: usize| {
            map.lines
                .get(index)
                .map(|line| format!("  # line {line}"))
                .unwrap_or_default()
        };
        out.push_str("\n[[map]]\n");
        if !map.named_by_bindings(&mapped.defaults) {
            let _ = writeln!(out, "name = {}{}", quote(&map.name), from(1));
        }
        let _ = writeln!(out, "wwid = {}{}", quote(&map.wwid), from(0));
        settings(&mut out, &map.settings, "map");
        // A number of its own, so that a restart keeps the device (and
        // whatever is mounted on it) as multipathd's restart keeps a map;
        // a device the kernel numbered is removed at a stop.
        let _ = writeln!(
            out,
            "[[map.export]]\nublk = {number}  # /dev/ublkb{number}: kept across restarts, \
             taken over by this number (keep it for this map)"
        );
    }
    out
}

/// The top-level keys `defaults` gave (`user_friendly_names`,
/// `bindings_file`); `user_friendly_names = true` where only a map's
/// entry turned it on; and where a map is named from the bindings file
/// and the file named none, multipath-tools' own, whose names it keeps.
fn top_level(out: &mut String, mapped: &Mapped) {
    let given = |name: &str| mapped.defaults.iter().find(|entry| entry.name == name);
    let mut lines = Vec::new();
    for entry in &mapped.defaults {
        for (key, value) in entry.keys.iter().filter(|(key, _)| TOP_LEVEL.contains(key)) {
            lines.push(format!("{key} = {}  # line {}", value.toml(), entry.line));
        }
    }
    if let Some(map) = mapped
        .maps
        .iter()
        .find(|map| map.named_by_bindings(&mapped.defaults))
    {
        let on = |entry: &Entry| {
            entry.name == "user_friendly_names"
                && entry
                    .keys
                    .iter()
                    .any(|(_, value)| *value == Value::Flag(true))
        };
        if !mapped.defaults.iter().any(on) {
            let entry = map.settings.iter().find(|entry| on(entry));
            let line = entry.map_or(0, |entry| entry.line);
            lines.retain(|line| !line.starts_with("user_friendly_names"));
            lines.push(format!("user_friendly_names = true  # line {line}"));
        }
        if given("bindings_file").is_none() {
            lines.push(format!(
                "bindings_file = {}  # multipath-tools' default: the names it gave stay",
                quote(MULTIPATH_BINDINGS)
            ));
        }
    }
    if !lines.is_empty() {
        out.push('\n');
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    }
}

/// Where multipath-tools keeps its bindings unless `bindings_file` says.
const MULTIPATH_BINDINGS: &str = "/etc/multipath/bindings";

/// A block's keys (but the top-level ones), then its `marginal`
/// sub-table.
fn settings(out: &mut String, entries: &[Entry], table: &str) {
    let mut marginal: Vec<(&str, &Value, &Entry)> = Vec::new();
    for entry in entries {
        for (key, value) in &entry.keys {
            match key.strip_prefix("marginal.") {
                _ if TOP_LEVEL.contains(key) => {}
                Some(key) => marginal.push((key, value, entry)),
                None => {
                    let _ = writeln!(out, "{key} = {}  # line {}", value.toml(), entry.line);
                }
            }
        }
    }
    if !marginal.is_empty() {
        let _ = writeln!(out, "[{table}.marginal]");
        for (key, value, entry) in marginal {
            let _ = writeln!(out, "{key} = {}  # line {}", value.toml(), entry.line);
        }
    }
}
