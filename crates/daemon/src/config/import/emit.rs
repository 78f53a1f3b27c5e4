//! The mpio config text of what was mapped: the notes first, as
//! comments, then `[defaults]`, the blacklist and its exceptions, and a
//! `[[map]]` per map by WWID with a ublk block device (dm-multipath's
//! `/dev/mapper/NAME`), each key followed by the line it came from.

use super::report::{quote, Note, Value};
use super::sections::{Entry, Mapped};
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
    if !mapped.defaults.is_empty() {
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
    for map in &mapped.maps {
        let from = |index: usize| {
            map.lines
                .get(index)
                .map(|line| format!("  # line {line}"))
                .unwrap_or_default()
        };
        let _ = writeln!(
            out,
            "\n[[map]]\nname = {}{}\nwwid = {}{}",
            quote(&map.name),
            from(1),
            quote(&map.wwid),
            from(0),
        );
        settings(&mut out, &map.settings, "map");
        out.push_str("[[map.export]]\nublk = true  # the block device, as /dev/mapper/NAME\n");
    }
    out
}

/// A block's keys, then its `marginal` sub-table.
fn settings(out: &mut String, entries: &[Entry], table: &str) {
    let mut marginal: Vec<(&str, &Value, &Entry)> = Vec::new();
    for entry in entries {
        for (key, value) in &entry.keys {
            match key.strip_prefix("marginal.") {
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
