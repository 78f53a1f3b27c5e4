//! A map reloaded from a dm table or a config section.
//!
//! [`reload`] builds the new map and installs it in the map's slot
//! ([`Transports::reload_named`]): path state carries over by path name,
//! threads move to the new map at their next submit or poll, and I/O in
//! flight finishes where it is. The exports and the checker settings stay
//! those the daemon started with; a reload from a config that changes
//! them says so in its answer. A reload that would point a path word at
//! another endpoint, or resize an NBD export, is refused and the map
//! keeps its table.
//!
//! [`Transports::reload_named`]: mpio_transport::Transports::reload_named

use super::dispatch::find;
use super::start::{map_options, names_of};
use super::state::State;
use crate::config::{DaemonConfig, MapConfig};
use crate::control::protocol::{ReloadSource, Response};
use crate::running::RunningMap;
use mpio_core::table::Table;
use mpio_transport::limits::Limits;
use mpio_transport::lock;
use std::sync::Arc;

/// Reloads map `name` from `source`. The caller holds `control`.
pub(super) fn reload(state: &State, name: &str, source: ReloadSource) -> Result<Response, String> {
    let (new_config, kind) = {
        let mut maps = lock(&state.maps);
        reload_config(find(&mut maps, name)?, source)?
    };
    install(state, name, new_config, kind)
}

/// Gives map `name` the table, paths and options of `new_config`, which
/// came from a source of `kind` (`table`, `config`). The caller holds
/// `control`; `maps` is taken to read the map's config and slot, released
/// while the new map is built and installed, and taken again to record
/// it.
pub(super) fn install(
    state: &State,
    name: &str,
    new_config: MapConfig,
    kind: &'static str,
) -> Result<Response, String> {
    let (slot, notes, served_as) = {
        let mut maps = lock(&state.maps);
        let running = find(&mut maps, name)?;
        let notes = reload_notes(running, &new_config)?;
        let served_as: Vec<Limits> = running
            .ublk_devices
            .iter()
            .map(|ublk| ublk.device.limits())
            .collect();
        (Arc::clone(&running.slot), notes, served_as)
    };
    let old = state
        .transports
        .reload_named(
            &slot,
            &new_config.table,
            map_options(&new_config),
            &names_of(&new_config),
            &served_as,
        )
        .map_err(|error| format!("map {name:?}: {error}; the map keeps its table"))?;
    let mut maps = lock(&state.maps);
    // Only a shutdown removes maps, and it stops the control socket first.
    let running = find(&mut maps, name)?;
    // Idle event loops move to the new map now (dropping their queues to
    // paths it removed), not at their next request.
    for server in &running.servers {
        server.notice_reload();
    }
    // The checker lists and probes the new map's paths now, not at its
    // next round.
    running.checker.wake();
    let map = running.slot.map();
    tracing::info!(
        map = %name,
        from = %old.table(),
        to = %map.table(),
        "map reloaded"
    );
    running.config = MapConfig {
        exports: running.config.exports.clone(),
        checker: running.config.checker,
        ..new_config
    };
    Ok(Response::Ok {
        text: notes.iter().map(|note| format!("note: {note}\n")).collect(),
        json: serde_json::json!({
            "map": name,
            "from": kind,
            "table": map.table().to_string(),
            "notes": notes,
        }),
    })
}

/// The config a reload of `running` from `source` gives the map, and
/// which kind of source it was.
fn reload_config(
    running: &RunningMap,
    source: ReloadSource,
) -> Result<(MapConfig, &'static str), String> {
    let name = &running.config.name;
    match source {
        ReloadSource::Table(text) => {
            let table = Table::parse(&text).map_err(|error| format!("table: {error}"))?;
            let mut config = running.config.clone();
            config.table = table;
            Ok((config, "table"))
        }
        ReloadSource::Config { origin, text } => {
            let daemon_config =
                DaemonConfig::parse(&text).map_err(|error| format!("{origin}: {error}"))?;
            let config = daemon_config
                .map(name)
                .cloned()
                .ok_or_else(|| format!("{origin}: no map named {name:?}"))?;
            Ok((config, "config"))
        }
    }
}

/// Refuses a reload of `running` to `new_config` that would move a path
/// word or resize the export; else the notes for what it leaves as is.
pub(super) fn reload_notes(
    running: &RunningMap,
    new_config: &MapConfig,
) -> Result<Vec<&'static str>, String> {
    let name = &running.config.name;
    // Path state, counters and the checker's records follow the path word
    // across a reload: a word must keep leading where it led.
    let old_map = running.map();
    for path in &new_config.paths {
        let before = running.config.uri_of(&path.name);
        let in_use = (0..old_map.paths().len()).any(|index| old_map.path_name(index) == path.name);
        if in_use && before != path.uri {
            return Err(format!(
                "map {name:?}: path {:?} leads to {before:?}; the reload points it at {:?}: a path \
                 keeps its endpoint across a reload (give the new endpoint a new name); the map \
                 keeps its table",
                path.name, path.uri
            ));
        }
    }
    let mut notes = Vec::new();
    if new_config.exports != running.config.exports {
        notes.push("the exports differ and stay as started (restart the daemon to change them)");
    }
    if new_config.checker != running.config.checker {
        notes.push("the checker settings differ and stay as started");
    }
    // Clients were told the export's size at their handshake.
    if let Some(server) = running.servers.first() {
        server
            .check_size(&new_config.table)
            .map_err(|error| format!("map {name:?}: {error}; the map keeps its table"))?;
    }
    Ok(notes)
}
