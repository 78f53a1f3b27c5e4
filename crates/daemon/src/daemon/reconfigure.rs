//! The config file read again (`systemctl reload`, SIGHUP, `mpio
//! reload` without arguments) and the running maps made to match it.
//!
//! # Rule
//! - The file is read and checked whole first; a file that does not read
//!   or check is refused whole and no map changes. So is one whose
//!   changes include a reload [`install`] would refuse (a path word
//!   pointed at another endpoint, a new size under an export): the error
//!   names it.
//! - Then, map by name: a map the file no longer has is removed as
//!   `mpio remove` removes it ([`remove_map`]: not while its device is
//!   held open); a map whose table, paths or I/O
//!   options changed is reloaded in place ([`install`]: its I/O goes on);
//!   a new map is started as at the daemon's start. Removals go first, so
//!   an added map may take over a removed one's socket. Each change is
//!   logged.
//! - `[ublk] on_stop` and `keep_timeout_ms` take effect at once (for
//!   the next stop).
//! - What a reload does not change stays as started, with a note: a
//!   map's exports and checker settings; the control socket and the
//!   metrics address are read at start only.
//! - A map that cannot be started or reloaded then is reported (the
//!   answer is an error naming it) and the other changes stand.
//! - Around it the service manager hears `RELOADING=1` and then
//!   `READY=1`, with a `STATUS=` that begins `reload failed:` when it
//!   failed.

use super::reload::{install, reload_notes, Source};
use super::removal::remove_map;
use super::service_status::service_status;
use super::start::start_map;
use super::state::State;
use crate::config::{DaemonConfig, MapConfig};
use crate::control::protocol::Response;
use crate::running::RunningMap;
use mpio_transport::lock;
use std::path::Path;

/// Reads the daemon's config file again and applies it (see the module
/// docs), telling the service manager. The caller holds `control`.
pub(super) fn reload_file(state: &State) -> Result<Response, String> {
    let Some(path) = state.config_file.as_deref() else {
        return Err(
            "this daemon was started without a config file (--config, or \
                    /etc/mpio/mpio.toml by default): there is no file to read again"
                .into(),
        );
    };
    state.notifier.reloading();
    tracing::info!(file = %path.display(), "reading the config again");
    let outcome = apply(state, path);
    let status = service_status(state);
    match &outcome {
        Ok(_) => state.notifier.ready(&status),
        Err(error) => {
            tracing::error!(file = %path.display(), "reload failed: {error}");
            state
                .notifier
                .ready(&format!("reload failed: {error}; {status}"));
        }
    }
    outcome
}

/// What the file asks of the running maps.
#[derive(Debug, Default)]
struct Plan {
    removed: Vec<String>,
    changed: Vec<MapConfig>,
    added: Vec<MapConfig>,
    unchanged: Vec<String>,
    notes: Vec<String>,
}

/// Reads `path`, plans, and applies the plan.
fn apply(state: &State, path: &Path) -> Result<Response, String> {
    let config = DaemonConfig::load(path).map_err(|error| format!("{error}; no map changed"))?;
    if config.maps.is_empty() {
        return Err(format!(
            "{}: the config defines no map; no map changed",
            path.display()
        ));
    }
    let on_stop = config.ublk_on_stop;
    let plan = plan(&lock(&state.maps), config)?;
    let before = std::mem::replace(&mut *lock(&state.ublk_on_stop), on_stop);
    if before != on_stop {
        tracing::info!("reload: ublk devices at a stop: {before} -> {on_stop}");
    }
    let mut errors = Vec::new();
    let mut removed = Vec::new();
    for name in &plan.removed {
        match remove_map(state, name, false) {
            Ok(_) => {
                tracing::info!(map = %name, "map removed by the config");
                removed.push(name.as_str());
            }
            Err(error) => errors.push(error),
        }
    }
    for config in &plan.changed {
        let name = config.name.clone();
        match install(state, &name, config.clone(), Source::Config) {
            Ok(_) => tracing::info!(map = %name, "map changed by the config"),
            Err(error) => errors.push(error),
        }
    }
    for config in &plan.added {
        let name = config.name.clone();
        match start_map(state, config.clone(), state.settings) {
            Ok(running) => {
                lock(&state.maps).push(running);
                tracing::info!(map = %name, "map added by the config");
            }
            Err(error) => errors.push(format!("map {name:?} not added: {error}")),
        }
    }
    for note in &plan.notes {
        tracing::info!("reload: {note}");
    }
    let changed: Vec<&str> = plan.changed.iter().map(|map| map.name.as_str()).collect();
    let added: Vec<&str> = plan.added.iter().map(|map| map.name.as_str()).collect();
    if !errors.is_empty() {
        return Err(format!(
            "{} (the other changes stand: removed [{}], changed [{}], added [{}])",
            errors.join("; "),
            removed.join(", "),
            changed.join(", "),
            added.join(", ")
        ));
    }
    let mut text = String::new();
    for (word, names) in [
        ("removed", plan.removed.iter().map(String::as_str).collect()),
        ("changed", changed.clone()),
        ("added", added.clone()),
    ] {
        for name in names {
            text.push_str(&format!("{word} {name}\n"));
        }
    }
    if text.is_empty() {
        text.push_str("no map changed\n");
    }
    for note in &plan.notes {
        text.push_str(&format!("note: {note}\n"));
    }
    Ok(Response::Ok {
        text,
        json: serde_json::json!({
            "file": path.display().to_string(),
            "removed": plan.removed,
            "changed": changed,
            "added": added,
            "unchanged": plan.unchanged,
            "notes": plan.notes,
        }),
    })
}

/// Sorts the file's maps against the running ones; refuses the whole
/// file if a changed map's reload would be refused.
fn plan(running: &[RunningMap], config: DaemonConfig) -> Result<Plan, String> {
    let mut plan = Plan::default();
    for map in running {
        if config.map(&map.config.name).is_none() {
            plan.removed.push(map.config.name.clone());
        }
    }
    for new in config.maps {
        let Some(old) = running.iter().find(|map| map.config.name == new.name) else {
            plan.added.push(new);
            continue;
        };
        if new.exports != old.config.exports {
            plan.notes.push(format!(
                "map {:?}: the exports differ and stay as started (restart the daemon to change \
                 them)",
                new.name
            ));
        }
        if new.checker != old.config.checker {
            plan.notes.push(format!(
                "map {:?}: the checker settings differ and stay as started",
                new.name
            ));
        }
        if same_io(&old.config, &new) {
            plan.unchanged.push(new.name);
            continue;
        }
        reload_notes(old, &new, Source::Config)
            .map_err(|error| format!("{error}; no map changed"))?;
        plan.changed.push(new);
    }
    Ok(plan)
}

/// Whether two configs of one map give it the same table, paths and I/O
/// options (what a reload changes). Tables compare in their canonical
/// form, as dm prints them.
fn same_io(old: &MapConfig, new: &MapConfig) -> bool {
    old.table.to_string() == new.table.to_string()
        && old.wwid == new.wwid
        && old.paths == new.paths
        && old.io_timeout_ns == new.io_timeout_ns
        && old.fence_timeout_ns == new.fence_timeout_ns
        && old.hedge_reads == new.hedge_reads
        && old.no_path_retry == new.no_path_retry
        && old.max_attempts == new.max_attempts
}
