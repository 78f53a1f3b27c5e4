//! `mpio show paths`: one row per path, over every map shown.

use super::facts::path_facts;
use crate::control::protocol::Response;
use crate::running::RunningMap;

/// Columns of the text table.
const HEADER: [&str; 13] = [
    "map",
    "path",
    "uri",
    "group",
    "dm_st",
    "chk_st",
    "access",
    "fails",
    "in_flight",
    "ios",
    "bytes",
    "errors",
    "why",
];

/// The rows of `maps`' paths, with the same facts as JSON.
pub fn paths(maps: &[&RunningMap]) -> Response {
    let mut rows: Vec<Vec<String>> = vec![HEADER.iter().map(|column| column.to_string()).collect()];
    let mut json = Vec::new();
    for running in maps {
        for path in path_facts(running) {
            rows.push(vec![
                running.config.name.clone(),
                path.name.clone(),
                path.uri.clone(),
                path.group.to_string(),
                path.state_word().to_string(),
                path.checker.to_string(),
                path.access.as_str().to_string(),
                path.fail_count.to_string(),
                path.in_flight.to_string(),
                path.ios.to_string(),
                path.bytes.to_string(),
                path.errors.to_string(),
                path.unready.clone().unwrap_or_default(),
            ]);
            let mut value = serde_json::to_value(&path).unwrap_or_default();
            if let Some(object) = value.as_object_mut() {
                object.insert("map".into(), running.config.name.clone().into());
            }
            json.push(value);
        }
    }
    Response::Ok {
        text: align(&rows),
        json: serde_json::Value::Array(json),
    }
}

/// Left-aligned columns, two spaces apart, no trailing blanks.
fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            line.push_str(&format!("{cell:<width$}  "));
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}
