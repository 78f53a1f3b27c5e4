//! A control request answered ([`handle`]): the read verbs render the
//! map named, or all ([`crate::view`]); a message goes to one map; a
//! reload goes to [`reload`], a reload of the config file to
//! [`reload_file`], a removal to [`remove_map`] and a resize to
//! [`resize_map`]. Requests run one at a time, under the
//! state's `control` lock; an unknown map's answer lists the maps there
//! are.

use super::reconfigure::reload_file;
use super::reload::reload;
use super::removal::remove_map;
use super::resize::resize_map;
use super::state::State;
use crate::control::protocol::{Request, Response};
use crate::running::RunningMap;
use crate::view;
use mpio_core::message::Message;
use mpio_transport::lock;

/// Answers one control request, one at a time (under `control`).
pub(super) fn handle(state: &State, request: Request) -> Response {
    let _control = lock(&state.control);
    let outcome = match request {
        Request::Status { map } => {
            let maps = lock(&state.maps);
            select(&maps, map.as_deref()).map(|chosen| view::status(&chosen, map.is_some()))
        }
        Request::Table { map } => {
            let maps = lock(&state.maps);
            select(&maps, map.as_deref()).map(|chosen| view::table(&chosen, map.is_some()))
        }
        Request::Topology { map } => {
            let maps = lock(&state.maps);
            select(&maps, map.as_deref()).map(|chosen| view::topology(&chosen))
        }
        Request::Paths { map } => {
            let maps = lock(&state.maps);
            select(&maps, map.as_deref()).map(|chosen| view::paths(&chosen))
        }
        Request::Message { map, message } => {
            let mut maps = lock(&state.maps);
            find(&mut maps, &map).and_then(|running| send_message(running, &message))
        }
        Request::Reload { map, source } => reload(state, &map, source),
        Request::ReloadConfig => reload_file(state),
        Request::Resize { map } => resize_map(state, &map),
        Request::Remove { map, force } => remove_map(state, &map, force).map(|done| {
            let mut text = format!("removed {map}\n");
            for line in &done {
                text.push_str(&format!("  {line}\n"));
            }
            Response::Ok {
                text,
                json: serde_json::json!({ "removed": map, "exports": done }),
            }
        }),
    };
    outcome.unwrap_or_else(|message| Response::Error { message })
}

/// The maps a read verb shows: the one named, or all.
fn select<'a>(maps: &'a [RunningMap], name: Option<&str>) -> Result<Vec<&'a RunningMap>, String> {
    match name {
        None => Ok(maps.iter().collect()),
        Some(name) => maps
            .iter()
            .find(|running| running.config.name == name)
            .map(|running| vec![running])
            .ok_or_else(|| no_such_map(maps, name)),
    }
}

/// The map named `name`, or why there is none.
pub(super) fn find<'a>(
    maps: &'a mut [RunningMap],
    name: &str,
) -> Result<&'a mut RunningMap, String> {
    position(maps, name).map(|index| &mut maps[index])
}

/// Where the map named `name` is in `maps`, or why there is none.
pub(super) fn position(maps: &[RunningMap], name: &str) -> Result<usize, String> {
    maps.iter()
        .position(|running| running.config.name == name)
        .ok_or_else(|| no_such_map(maps, name))
}

fn no_such_map(maps: &[RunningMap], name: &str) -> String {
    let names: Vec<&str> = maps
        .iter()
        .map(|running| running.config.name.as_str())
        .collect();
    format!("no map named {name:?} (maps: {})", names.join(", "))
}

fn send_message(running: &RunningMap, text: &str) -> Result<Response, String> {
    let message = Message::parse(text).map_err(|error| error.to_string())?;
    let map = running.map();
    map.message(&message)
        .map_err(|error| format!("map {:?}: {error}", running.config.name))?;
    Ok(Response::Ok {
        text: String::new(),
        json: serde_json::json!({ "map": running.config.name, "message": message }),
    })
}
