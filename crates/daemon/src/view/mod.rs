//! What the read verbs show: each view gives the text `mpio` prints and
//! the JSON `mpio --json` prints, built from the same facts.
//!
//! - [`status`] and [`table`]: dm's status line and canonical table, as
//!   `dmsetup status` and `dmsetup table` print them.
//! - [`topology`]: a `multipath -ll`-style tree.
//! - [`paths`]: one row per path.

mod facts;
mod paths;
mod topology;

use crate::control::protocol::Response;
use crate::running::RunningMap;
pub use facts::{path_facts, PathFacts};
pub use paths::paths;
pub use topology::topology;

/// dm status of `maps`; with `one`, without the `name: ` prefix
/// (`dmsetup status NAME`), and the JSON an object instead of a list.
pub fn status(maps: &[&RunningMap], one: bool) -> Response {
    let (statuses, lines): (Vec<_>, Vec<String>) = maps
        .iter()
        .map(|running| {
            let map = running.map();
            let status = map.status();
            let line = map.status_line_of(&status);
            (status, line)
        })
        .unzip();
    lines_response(maps, one, &lines, serde_json::json!(statuses))
}

/// The canonical dm table of `maps`, as [`status`] arranges it.
pub fn table(maps: &[&RunningMap], one: bool) -> Response {
    let tables: Vec<String> = maps
        .iter()
        .map(|running| running.map().table().to_string())
        .collect();
    let json = maps
        .iter()
        .zip(&tables)
        .map(|(running, table)| serde_json::json!({ "name": running.config.name, "table": table }))
        .collect();
    lines_response(maps, one, &tables, serde_json::Value::Array(json))
}

fn lines_response(
    maps: &[&RunningMap],
    one: bool,
    lines: &[String],
    json: serde_json::Value,
) -> Response {
    let text = maps
        .iter()
        .zip(lines)
        .map(|(running, line)| {
            if one {
                format!("{line}\n")
            } else {
                format!("{}: {line}\n", running.config.name)
            }
        })
        .collect();
    let json = match json {
        serde_json::Value::Array(mut items) if one && items.len() == 1 => items.remove(0),
        json => json,
    };
    Response::Ok { text, json }
}
