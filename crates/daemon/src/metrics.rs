//! Prometheus metrics: the daemon's maps in the text exposition format
//! 0.0.4 ([`render`]), served over HTTP on loopback ([`http`]).
//!
//! # What is exported
//! Per map (label `map`): path failures (failovers), the current group,
//! whether I/O is held for lack of a path, and (where the caller knows it:
//! the NBD server counts it per event loop) how many I/Os wait for one.
//! Per path (labels `map`, `path` = the path word, `group` = its 1-based
//! priority group): whether it is in use, how often it was failed, I/Os in
//! flight, attempts and bytes sent, path errors, reads hedged away from it
//! (`mpio_path_hedged_reads_total`), and a latency histogram
//! of its attempts in seconds (`_bucket{le=..}` cumulative, `_sum`,
//! `_count`), from [`mpio_core::load`]'s power-of-two buckets (1.024 µs to
//! 4.29 s, then `+Inf`).
//!
//! # Counters and reloads
//! Per-path counts are sums over the live I/O queues of a map
//! ([`Map::path_load`]) plus what the map took over from the maps it
//! replaced: a reload carries each path word's totals, and the map's
//! failure count, into the new map, so counters do not go back. What the
//! old map's draining queues complete after the reload is not counted
//! (the totals lag, never fall). The daemon's I/O queues live as long as
//! its exports.
//!
//! # Cost
//! Rendering takes each map's control lock once for its status and once per
//! path for its load (as `mpio status` does); nothing here touches the I/O
//! path.

pub mod http;

use mpio_core::load::{latency_bucket_upper_ns, PathLoad, LATENCY_BUCKETS};
use mpio_core::map::Map;
use mpio_core::status::{MapStatus, PathState};
use std::fmt::Write as _;

/// One map to render.
#[derive(Clone, Copy, Debug)]
pub struct MapMetrics<'a> {
    /// The map's name (label `map`).
    pub name: &'a str,
    /// The map.
    pub map: &'a Map,
    /// I/Os waiting for a usable path, over every queue on the map, where
    /// the caller counts them (`mpio_server::Server::waiting_for_path`);
    /// `None` leaves the metric out for this map.
    pub waiting_for_path: Option<u64>,
}

impl<'a> MapMetrics<'a> {
    /// `map` under `name`, with no count of waiting I/O.
    pub fn new(name: &'a str, map: &'a Map) -> Self {
        MapMetrics {
            name,
            map,
            waiting_for_path: None,
        }
    }
}

/// The content type of [`render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One path's sample source: its labels, status and load.
struct PathSample {
    labels: String,
    active: bool,
    fail_count: u32,
    load: PathLoad,
}

/// One map's sample source.
struct MapSample {
    labels: String,
    status: MapStatus,
    waiting_for_path: Option<u64>,
}

/// Renders `maps` in the Prometheus text format 0.0.4: each metric family
/// once, with its `# HELP` and `# TYPE` lines, then its samples for every
/// map or path. See the module docs for what is exported.
pub fn render(maps: &[MapMetrics<'_>]) -> String {
    let mut map_samples = Vec::with_capacity(maps.len());
    let mut path_samples = Vec::new();
    for source in maps {
        let map_label = format!("map=\"{}\"", escape(source.name));
        let status = source.map.status();
        for (group, group_status) in source.map.groups().iter().zip(&status.groups) {
            for (index, path_status) in group.path_range().zip(&group_status.paths) {
                // A path word is in a table once (`Table::canonical`), so
                // each path's labels are a series of its own.
                let label = escape(&path_status.name);
                path_samples.push(PathSample {
                    labels: format!(
                        "{map_label},path=\"{label}\",group=\"{}\"",
                        group_status.number
                    ),
                    active: path_status.state == PathState::Active,
                    fail_count: path_status.fail_count,
                    load: source.map.path_load(index),
                });
            }
        }
        map_samples.push(MapSample {
            labels: map_label,
            status,
            waiting_for_path: source.waiting_for_path,
        });
    }
    let mut out = String::new();
    let maps = &map_samples;
    family(
        &mut out,
        "mpio_map_path_failures_total",
        "counter",
        "Path failures (failovers) since the map was built.",
        maps.iter()
            .map(|map| (&map.labels, map.status.path_failures)),
    );
    family(
        &mut out,
        "mpio_map_current_group",
        "gauge",
        "The priority group I/O goes to (1-based); 0 while no group has a usable path.",
        maps.iter().map(|map| {
            let group = map.status.current_group.unwrap_or(0);
            (&map.labels, group as u64)
        }),
    );
    family(
        &mut out,
        "mpio_map_queueing",
        "gauge",
        "1 while no path is usable and I/O is held (queue_if_no_path), else 0.",
        maps.iter()
            .map(|map| (&map.labels, u64::from(map.status.queueing))),
    );
    family(
        &mut out,
        "mpio_map_waiting_for_path",
        "gauge",
        "I/Os waiting for a usable path.",
        maps.iter()
            .filter_map(|map| map.waiting_for_path.map(|waiting| (&map.labels, waiting))),
    );
    let paths = &path_samples;
    family(
        &mut out,
        "mpio_path_active",
        "gauge",
        "1 while the path is in use, 0 while it is failed.",
        paths
            .iter()
            .map(|path| (&path.labels, u64::from(path.active))),
    );
    family(
        &mut out,
        "mpio_path_failures_total",
        "counter",
        "Times the path was failed.",
        paths
            .iter()
            .map(|path| (&path.labels, u64::from(path.fail_count))),
    );
    family(
        &mut out,
        "mpio_path_in_flight",
        "gauge",
        "I/Os in flight on the path.",
        paths
            .iter()
            .map(|path| (&path.labels, u64::from(path.load.in_flight()))),
    );
    family(
        &mut out,
        "mpio_path_dispatched_total",
        "counter",
        "Attempts sent down the path (retries included).",
        paths
            .iter()
            .map(|path| (&path.labels, path.load.dispatched())),
    );
    family(
        &mut out,
        "mpio_path_dispatched_bytes_total",
        "counter",
        "Bytes of the reads and writes sent down the path.",
        paths
            .iter()
            .map(|path| (&path.labels, path.load.dispatched_bytes())),
    );
    family(
        &mut out,
        "mpio_path_errors_total",
        "counter",
        "Attempts on the path that ended in a path error, timeouts included.",
        paths
            .iter()
            .map(|path| (&path.labels, path.load.path_errors())),
    );
    family(
        &mut out,
        "mpio_path_hedged_reads_total",
        "counter",
        "Reads the path held past its hedge delay, taken back and sent down another path.",
        paths
            .iter()
            .map(|path| (&path.labels, path.load.hedged_reads())),
    );
    latency_histogram(&mut out, paths);
    out
}

/// Writes one family of integer samples: HELP, TYPE, then `name{labels}
/// value` per sample (nothing if there is none).
fn family<'a>(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: impl Iterator<Item = (&'a String, u64)>,
) {
    let mut samples = samples.peekable();
    if samples.peek().is_none() {
        return;
    }
    header(out, name, kind, help);
    for (labels, value) in samples {
        // `write!` to a String cannot fail.
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The per-path latency histogram, in seconds.
fn latency_histogram(out: &mut String, paths: &[PathSample]) {
    const NAME: &str = "mpio_path_latency_seconds";
    if paths.is_empty() {
        return;
    }
    header(
        out,
        NAME,
        "histogram",
        "Latency of the attempts on the path, successful or not.",
    );
    for path in paths {
        let buckets = path.load.latency_buckets();
        let mut cumulative = 0u64;
        for (bucket, count) in buckets.iter().enumerate().take(LATENCY_BUCKETS) {
            cumulative = cumulative.wrapping_add(*count);
            let le = match latency_bucket_upper_ns(bucket) {
                Some(upper_ns) => seconds(upper_ns),
                None => "+Inf".to_string(),
            };
            let _ = writeln!(
                out,
                "{NAME}_bucket{{{},le=\"{le}\"}} {cumulative}",
                path.labels
            );
        }
        let _ = writeln!(
            out,
            "{NAME}_sum{{{}}} {}",
            path.labels,
            seconds(path.load.latency_sum_ns())
        );
        let _ = writeln!(out, "{NAME}_count{{{}}} {cumulative}", path.labels);
    }
}

/// `ns` as seconds, printed exactly enough to read back (`f64`'s shortest
/// round-trip form: 1024 ns is `0.000001024`).
fn seconds(ns: u64) -> String {
    format!("{}", ns as f64 / 1e9)
}

/// A label value escaped as the text format asks: backslash, double quote
/// and line feed as `\\`, `\"` and `\n`.
pub fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for character in value.chars() {
        match character {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("plain"), "plain");
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(
            escape("nbd+unix:///?socket=/run/x.sock"),
            "nbd+unix:///?socket=/run/x.sock"
        );
    }

    #[test]
    fn seconds_read_back_exactly() {
        assert_eq!(seconds(1024), "0.000001024");
        assert_eq!(seconds(1 << 31), "2.147483648");
        assert_eq!(seconds(0), "0");
    }
}
