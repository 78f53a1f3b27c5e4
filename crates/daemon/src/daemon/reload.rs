//! A map reloaded from a dm table or a config section.
//!
//! [`reload`] builds the new map and installs it in the map's slot
//! ([`Transports::reload_named`]): path state carries over by path name,
//! threads move to the new map at their next submit or poll, and I/O in
//! flight finishes where it is. The exports and the checker settings stay
//! those the daemon started with; a reload from a config that changes
//! them says so in its answer. A reload that would point a path word at
//! another endpoint, or change the size of a map served by an NBD export
//! or a ublk device, is refused and the map keeps its table: only a
//! resize ([`super::resize`]) grows such a map, once its paths have.
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
use mpio_transport::uri::Endpoint;
use std::sync::Arc;

/// Where a map's new config came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// A dm table (`mpio reload MAP --table`).
    Table,
    /// A config's section (a reload, a rescan by WWID, the config file).
    Config,
    /// `mpio resize`: the same map, larger, as its paths are now.
    Resize,
}

impl Source {
    /// Its name in a reload's answer.
    fn word(self) -> &'static str {
        match self {
            Source::Table => "table",
            Source::Config => "config",
            Source::Resize => "resize",
        }
    }
}

/// Reloads map `name` from `source`. The caller holds `control`.
pub(super) fn reload(state: &State, name: &str, source: ReloadSource) -> Result<Response, String> {
    let (new_config, kind) = {
        let mut maps = lock(&state.maps);
        reload_config(find(&mut maps, name)?, source)?
    };
    install(state, name, new_config, kind)
}

/// Gives map `name` the table, paths and options of `new_config`, which
/// came from `kind`. The caller holds
/// `control`; `maps` is taken to read the map's config and slot, released
/// while the new map is built and installed, and taken again to record
/// it.
pub(super) fn install(
    state: &State,
    name: &str,
    new_config: MapConfig,
    kind: Source,
) -> Result<Response, String> {
    let (slot, notes, served_as) = {
        let mut maps = lock(&state.maps);
        let running = find(&mut maps, name)?;
        let notes = reload_notes(running, &new_config, kind)?;
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
            "from": kind.word(),
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
) -> Result<(MapConfig, Source), String> {
    let name = &running.config.name;
    match source {
        ReloadSource::Table(text) => {
            let table = Table::parse(&text).map_err(|error| format!("table: {error}"))?;
            let mut config = running.config.clone();
            config.table = table;
            Ok((config, Source::Table))
        }
        ReloadSource::Config { origin, text } => {
            let daemon_config =
                DaemonConfig::parse(&text).map_err(|error| format!("{origin}: {error}"))?;
            let config = daemon_config
                .map(name)
                .cloned()
                .ok_or_else(|| format!("{origin}: no map named {name:?}"))?;
            Ok((config, Source::Config))
        }
    }
}

/// Refuses a reload of `running` to `new_config` from `kind` that would
/// move a path word or (but for a resize) change the size its exports
/// and devices were given; else the notes for what it leaves as is.
pub(super) fn reload_notes(
    running: &RunningMap,
    new_config: &MapConfig,
    kind: Source,
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
    if kind != Source::Resize {
        check_size(running, new_config)?;
    }
    check_zero_copy(running, new_config)?;
    Ok(notes)
}

/// Refuses `new_config` if a zero-copy ublk device serves the map and a
/// path of the new table cannot take the request's registered pages
/// ([`Endpoint::takes_kernel_buffers`], as `mpio_ublk::zero_copy_paths`
/// asks of a new device's paths).
fn check_zero_copy(running: &RunningMap, new_config: &MapConfig) -> Result<(), String> {
    let Some(ublk) = running
        .ublk_devices
        .iter()
        .find(|ublk| ublk.device.is_zero_copy())
    else {
        return Ok(());
    };
    let name = &running.config.name;
    let paths = new_config
        .table
        .groups
        .iter()
        .flat_map(|group| &group.paths);
    for path in paths {
        let uri = new_config.uri_of(&path.name);
        if !Endpoint::parse(uri).is_ok_and(|endpoint| endpoint.takes_kernel_buffers()) {
            return Err(format!(
                "map {name:?}: {} moves data by zero copy, and path {:?} ({uri}) is not a file, \
                 block device or null path; the map keeps its table",
                ublk.device.path(),
                path.name
            ));
        }
    }
    Ok(())
}

/// Refuses `new_config` if its size is not the map's while an export or
/// device serves the map: clients were told the export's size at their
/// handshake, and a ublk device's size is the kernel's to change.
fn check_size(running: &RunningMap, new_config: &MapConfig) -> Result<(), String> {
    let name = &running.config.name;
    if let Some(server) = running.servers.first() {
        server
            .check_size(&new_config.table)
            .map_err(|error| format!("map {name:?}: {error}; the map keeps its table"))?;
    }
    let map_bytes = running.map().size_bytes();
    let table_bytes = new_config.table.size_bytes();
    match running.ublk_devices.first() {
        Some(ublk) if table_bytes != map_bytes => Err(format!(
            "map {name:?}: the table is {table_bytes} bytes but {} is {map_bytes}: a reload keeps \
             a served map's size (`mpio resize {name}` grows it, once every path has grown); the \
             map keeps its table",
            ublk.device.path()
        )),
        _ => Ok(()),
    }
}
