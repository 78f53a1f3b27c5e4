//! A map grown to what its paths hold now: `mpio resize MAP`, as
//! `multipathd resize map`.
//!
//! # Rule
//! - Every path is sized afresh ([`Transports::path_size`]: a file's
//!   length, a block device's size, an NBD export's size from a new
//!   handshake). The new size is the smallest, in whole logical blocks
//!   of the map's ublk devices (512 bytes without one). A path that
//!   cannot be sized now is left out and named in the answer; it is held
//!   to the new size when it comes back, and failed if smaller, like any
//!   path.
//! - A map only grows. A path smaller than the map refuses the resize,
//!   naming it: shrinking would cut off what a file system keeps at the
//!   map's end. Paths no larger than the map leave it as it is, and the
//!   answer says so.
//! - A map a ublk device serves grows only where the kernel can resize a
//!   live device (`UBLK_F_UPDATE_SIZE`); elsewhere the resize is refused
//!   before anything changes, naming the kernel.
//! - Then the map is reloaded with the larger table ([`install`]: its
//!   paths reopened at the new size, their state carried over, no I/O
//!   paused); each ublk device is given the new size (the kernel tells
//!   udev, and a file system on it can be grown); NBD connections made
//!   from now on are told the new size, while those made before keep the
//!   size they were told at their handshake (the protocol has no way to
//!   tell them of another).
//! - A map whose size the config file gives (`size`, `table`) is grown
//!   all the same, and the answer says to change the file: a reload of
//!   it would otherwise be refused, and a restart would not take the
//!   devices over.
//!
//! [`Transports::path_size`]: mpio_transport::Transports::path_size

use super::dispatch::find;
use super::reload::{install, Source};
use super::start::names_of;
use super::state::State;
use crate::control::protocol::Response;
use mpio_transport::lock;

/// Grows map `name` to what its paths hold now (see the module docs).
/// The caller holds `control`.
///
/// # Errors
/// No such map, no path could be sized, a path smaller than the map, a
/// kernel that cannot resize the map's ublk device, or a reload or a
/// device resize that failed: the error says which, and what changed.
pub(super) fn resize_map(state: &State, name: &str) -> Result<Response, String> {
    let (config, map_bytes, words, has_ublk, unit) = {
        let mut maps = lock(&state.maps);
        let running = find(&mut maps, name)?;
        let map = running.map();
        let words: Vec<String> = (0..map.paths().len())
            .map(|index| map.path_name(index).to_string())
            .collect();
        let unit = running
            .ublk_devices
            .iter()
            .map(|ublk| u64::from(ublk.device.limits().logical_block))
            .fold(512, u64::max);
        (
            running.config.clone(),
            map.size_bytes(),
            words,
            !running.ublk_devices.is_empty(),
            unit,
        )
    };
    let names = names_of(&config);
    let mut sized = Vec::new();
    let mut left_out = Vec::new();
    for word in &words {
        match state.transports.path_size(word, &names) {
            Ok(bytes) => sized.push((word.as_str(), bytes)),
            Err(why) => left_out.push(why),
        }
    }
    let Some(&(smallest, path_bytes)) = sized.iter().min_by_key(|(_, bytes)| *bytes) else {
        return Err(format!(
            "map {name:?} not resized: no path could be sized ({})",
            left_out.join("; ")
        ));
    };
    let new_bytes = path_bytes / unit * unit;
    if new_bytes < map_bytes {
        return Err(format!(
            "map {name:?} not resized: path {smallest:?} holds {path_bytes} bytes, less than the \
             map's {map_bytes}: a map only grows (shrinking would cut off what is kept at its end)"
        ));
    }
    let left_out = left_out
        .iter()
        .map(|why| format!("left out, held to the map's size when it returns: {why}"));
    if new_bytes == map_bytes {
        let first = format!("map {name} is {map_bytes} bytes already: its paths hold no more");
        let lines = std::iter::once(first).chain(left_out).collect();
        return Ok(answer(name, map_bytes, map_bytes, lines));
    }
    if has_ublk {
        state.ublk.check_resize().map_err(|error| {
            format!("map {name:?} not resized: {error}; the map keeps its size")
        })?;
    }
    let mut new_config = config;
    let fixed_in_file = new_config.wwid.is_none();
    new_config.table.length_sectors = new_bytes >> 9;
    install(state, name, new_config, Source::Resize)?;
    tracing::info!(map = %name, from = map_bytes, to = new_bytes, "map resized");
    let first = format!("map {name} grown from {map_bytes} to {new_bytes} bytes");
    let mut lines: Vec<String> = std::iter::once(first).chain(left_out).collect();
    let mut maps = lock(&state.maps);
    let running = find(&mut maps, name)?;
    for ublk in &running.ublk_devices {
        let path = ublk.device.path();
        state
            .ublk
            .resize(&ublk.device, new_bytes)
            .map_err(|error| {
                format!(
                "map {name:?} grew to {new_bytes} bytes but {path} stays at {map_bytes}: {error}"
            )
            })?;
        tracing::info!(map = %name, device = %path, bytes = new_bytes, "ublk device resized");
        lines.push(format!("{path} is now {new_bytes} bytes"));
    }
    for server in &running.servers {
        lines.push(format!(
            "export {}: connections made from now on are told {new_bytes} bytes; those open \
             keep {map_bytes} until they reconnect",
            server.export().name
        ));
    }
    if fixed_in_file {
        lines.push(format!(
            "the config gives map {name} its size: make it {new_bytes} bytes there, or a reload \
             of the file is refused and a restart serves the old size"
        ));
    }
    Ok(answer(name, map_bytes, new_bytes, lines))
}

/// The answer to a resize of `name` from `from_bytes` to `to_bytes`.
fn answer(name: &str, from_bytes: u64, to_bytes: u64, lines: Vec<String>) -> Response {
    let mut text = String::new();
    for line in &lines {
        text.push_str(line);
        text.push('\n');
    }
    Response::Ok {
        text,
        json: serde_json::json!({
            "map": name,
            "from_bytes": from_bytes,
            "to_bytes": to_bytes,
            "notes": lines,
        }),
    }
}
