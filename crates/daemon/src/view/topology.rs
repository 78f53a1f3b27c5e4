//! `mpio show topology`: a `multipath -ll`-style tree.
//!
//! ```text
//! mpatha size=256M features='1 queue_if_no_path' hwhandler='0' wp=rw
//! |-+- policy='round-robin 0' status=active
//! | |- a memory:demo#a active ready optimized in_flight=3 ios=1200 errors=0 fails=0
//! | `- b memory:demo#b failed faulty optimized in_flight=0 ios=800 errors=2 fails=1
//! `-+- policy='round-robin 0' status=enabled
//!   `- c memory:demo#c active ready optimized in_flight=0 ios=0 errors=0 fails=0
//! ```
//!
//! A map by WWID names it after its block devices in both forms:
//! `wwid=naa.600a0980… (3600a0980…)`, the kernel's and multipath-tools'.
//! A map served as a ublk device has a line per device under its first:
//! `ublk /dev/ublkb1: get-data copy; user recovery, live resize`, how
//! its data moves and the optional kernel features it uses.

use super::facts::{path_facts, PathFacts};
use crate::control::protocol::Response;
use crate::running::RunningMap;
use mpio_core::status::GroupState;
use mpio_transport::blockdev::wwid_forms::WwidForms;
use std::fmt::Write;

/// The tree of `maps`, with the same facts as JSON.
pub fn topology(maps: &[&RunningMap]) -> Response {
    let mut text = String::new();
    let mut json = Vec::new();
    for running in maps {
        let map = running.map();
        let status = map.status();
        let table = map.table();
        let facts = path_facts(running);
        let features = table.features.to_string();
        let read_only = running.config.exports.iter().all(|export| export.read_only)
            && !running.config.exports.is_empty();
        let block_devices: Vec<String> = running
            .ublk_devices
            .iter()
            .map(|ublk| ublk.device.path())
            .collect();
        let wwid = running.config.wwid.as_deref().map(WwidForms::of);
        // `write!` to a String cannot fail.
        let _ = writeln!(
            text,
            "{}{}{} size={} features='{features}' hwhandler='0' wp={}{}",
            running.config.name,
            block_devices
                .iter()
                .map(|device| format!(" {device}"))
                .collect::<String>(),
            wwid.as_ref().map(wwid_words).unwrap_or_default(),
            mpio_transport::uri::size_word(status.size_bytes),
            if read_only { "ro" } else { "rw" },
            if status.queueing { " queueing" } else { "" },
        );
        // Each ublk device: how its data moves, what the kernel gives it.
        let mut ublk_json = Vec::new();
        for ublk in &running.ublk_devices {
            let (path, data, features) = (
                ublk.device.path(),
                ublk.device.data_mode(),
                ublk.device.features(),
            );
            let _ = writeln!(text, "ublk {path}: {data}; {}", features.join(", "));
            ublk_json.push(serde_json::json!({
                "device": path,
                "data_mode": data,
                "features": features,
            }));
        }
        let mut groups_json = Vec::new();
        for (position, (group, spec)) in status.groups.iter().zip(&table.groups).enumerate() {
            let last_group = position + 1 == status.groups.len();
            let policy = std::iter::once(spec.selector.clone())
                .chain(std::iter::once(spec.selector_args.len().to_string()))
                .chain(spec.selector_args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            let state = match group.state {
                GroupState::Active => "active",
                GroupState::Enabled => "enabled",
                GroupState::Disabled => "disabled",
            };
            let _ = writeln!(
                text,
                "{}-+- policy='{policy}' group={} status={state}",
                if last_group { '`' } else { '|' },
                group.number
            );
            let paths: Vec<&PathFacts> = facts
                .iter()
                .filter(|path| path.group == group.number)
                .collect();
            for (index, path) in paths.iter().enumerate() {
                let last_path = index + 1 == paths.len();
                let _ = writeln!(
                    text,
                    "{} {}- {}{} {} {} {} in_flight={} ios={} errors={} fails={}{}",
                    if last_group { ' ' } else { '|' },
                    if last_path { '`' } else { '|' },
                    path.name,
                    if path.uri == path.name {
                        String::new()
                    } else {
                        format!(" {}", path.uri)
                    },
                    path.state_word(),
                    path.checker,
                    path.access.as_str(),
                    path.in_flight,
                    path.ios,
                    path.errors,
                    path.fail_count,
                    path.last_error
                        .map(|error| format!(" ({error})"))
                        .unwrap_or_default(),
                );
            }
            groups_json.push(serde_json::json!({
                "number": group.number,
                "state": group.state,
                "selector": spec.selector,
                "selector_args": spec.selector_args,
                "paths": paths,
            }));
        }
        json.push(serde_json::json!({
            "name": running.config.name,
            "wwid": wwid,
            "size_bytes": status.size_bytes,
            "features": features,
            "queue_if_no_path": status.queue_if_no_path,
            "queueing": status.queueing,
            "current_group": status.current_group,
            "path_failures": status.path_failures,
            "exports": running.servers.iter().flat_map(mpio_server::Server::uris).collect::<Vec<_>>(),
            "block_devices": block_devices,
            "ublk": ublk_json,
            "groups": groups_json,
        }));
    }
    Response::Ok {
        text,
        json: serde_json::Value::Array(json),
    }
}

/// ` wwid=KERNEL (UDEV)`, or ` wwid=KERNEL` where there is one form.
fn wwid_words(forms: &WwidForms) -> String {
    match &forms.udev {
        Some(udev) => format!(" wwid={} ({udev})", forms.kernel),
        None => format!(" wwid={}", forms.kernel),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_by_wwid_shows_both_forms() {
        assert_eq!(
            wwid_words(&WwidForms::of("3600a098038303053")),
            " wwid=naa.600a098038303053 (3600a098038303053)"
        );
        assert_eq!(wwid_words(&WwidForms::of("uuid.1")), " wwid=uuid.1");
    }
}
