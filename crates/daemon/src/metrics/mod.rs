//! Prometheus metrics: the daemon's maps in the text exposition format
//! 0.0.4 ([`render`], encoded by `prometheus-client`), served over HTTP on
//! loopback ([`http`]).
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
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt;

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

/// A sample's labels, as `prometheus-client` escapes and prints them.
type Labels = Vec<(&'static str, String)>;

/// One path's sample source: its labels, status and load.
#[derive(Debug)]
struct PathSample {
    labels: Labels,
    active: bool,
    fail_count: u32,
    load: PathLoad,
}

/// One map's sample source.
#[derive(Debug)]
struct MapSample {
    labels: Labels,
    status: MapStatus,
    waiting_for_path: Option<u64>,
}

/// What one scrape shows: every map's and path's samples, read once, and
/// encoded by `prometheus-client` as a collector of constant values (the
/// counts live in the core's loads, not in metric objects).
#[derive(Debug)]
struct Scrape {
    maps: Vec<MapSample>,
    paths: Vec<PathSample>,
}

/// Renders `maps` in the Prometheus text format 0.0.4: each metric family
/// once, with its `# HELP` and `# TYPE` lines, then its samples for every
/// map or path. See the module docs for what is exported.
pub fn render(maps: &[MapMetrics<'_>]) -> String {
    let mut scrape = Scrape {
        maps: Vec::with_capacity(maps.len()),
        paths: Vec::new(),
    };
    for source in maps {
        let status = source.map.status();
        for (group, group_status) in source.map.groups().iter().zip(&status.groups) {
            for (index, path_status) in group.path_range().zip(&group_status.paths) {
                // A path word is in a table once (`Table::canonical`), so
                // each path's labels are a series of its own.
                scrape.paths.push(PathSample {
                    labels: vec![
                        ("map", source.name.to_string()),
                        ("path", path_status.name.clone()),
                        ("group", group_status.number.to_string()),
                    ],
                    active: path_status.state == PathState::Active,
                    fail_count: path_status.fail_count,
                    load: source.map.path_load(index),
                });
            }
        }
        scrape.maps.push(MapSample {
            labels: vec![("map", source.name.to_string())],
            status,
            waiting_for_path: source.waiting_for_path,
        });
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    // Writing to a String cannot fail, nor can encoding these samples.
    prometheus_text::encode(&mut out, &registry).expect("the samples encode");
    out
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        use MetricType::{Counter, Gauge};
        let maps = &self.maps;
        let paths = &self.paths;
        family(
            &mut encoder,
            "mpio_map_path_failures",
            Counter,
            "Path failures (failovers) since the map was built.",
            maps.iter()
                .map(|map| (&map.labels, map.status.path_failures)),
        )?;
        family(
            &mut encoder,
            "mpio_map_current_group",
            Gauge,
            "The priority group I/O goes to (1-based); 0 while no group has a usable path.",
            maps.iter().map(|map| {
                let group = map.status.current_group.unwrap_or(0);
                (&map.labels, group as u64)
            }),
        )?;
        family(
            &mut encoder,
            "mpio_map_queueing",
            Gauge,
            "1 while no path is usable and I/O is held (queue_if_no_path), else 0.",
            maps.iter()
                .map(|map| (&map.labels, u64::from(map.status.queueing))),
        )?;
        family(
            &mut encoder,
            "mpio_map_waiting_for_path",
            Gauge,
            "I/Os waiting for a usable path.",
            maps.iter()
                .filter_map(|map| map.waiting_for_path.map(|waiting| (&map.labels, waiting))),
        )?;
        family(
            &mut encoder,
            "mpio_path_active",
            Gauge,
            "1 while the path is in use, 0 while it is failed.",
            paths
                .iter()
                .map(|path| (&path.labels, u64::from(path.active))),
        )?;
        family(
            &mut encoder,
            "mpio_path_failures",
            Counter,
            "Times the path was failed.",
            paths
                .iter()
                .map(|path| (&path.labels, u64::from(path.fail_count))),
        )?;
        family(
            &mut encoder,
            "mpio_path_in_flight",
            Gauge,
            "I/Os in flight on the path.",
            paths
                .iter()
                .map(|path| (&path.labels, u64::from(path.load.in_flight()))),
        )?;
        family(
            &mut encoder,
            "mpio_path_dispatched",
            Counter,
            "Attempts sent down the path (retries included).",
            paths
                .iter()
                .map(|path| (&path.labels, path.load.dispatched())),
        )?;
        family(
            &mut encoder,
            "mpio_path_dispatched_bytes",
            Counter,
            "Bytes of the reads and writes sent down the path.",
            paths
                .iter()
                .map(|path| (&path.labels, path.load.dispatched_bytes())),
        )?;
        family(
            &mut encoder,
            "mpio_path_errors",
            Counter,
            "Attempts on the path that ended in a path error, timeouts included.",
            paths
                .iter()
                .map(|path| (&path.labels, path.load.path_errors())),
        )?;
        family(
            &mut encoder,
            "mpio_path_hedged_reads",
            Counter,
            "Reads the path held past its hedge delay, taken back and sent down another path.",
            paths
                .iter()
                .map(|path| (&path.labels, path.load.hedged_reads())),
        )?;
        latency_histogram(&mut encoder, paths)
    }
}

/// Encodes one family of integer samples (nothing if it has none): a
/// counter's samples get `_total` after `name`.
fn family<'a>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    kind: MetricType,
    help: &str,
    samples: impl Iterator<Item = (&'a Labels, u64)>,
) -> fmt::Result {
    let mut samples = samples.peekable();
    if samples.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in samples {
        let mut sample = metric.encode_family(labels)?;
        match kind {
            MetricType::Counter => sample.encode_counter::<NoLabelSet, _, u64>(&value, None)?,
            _ => sample.encode_gauge(&value)?,
        }
    }
    Ok(())
}

/// The per-path latency histogram, in seconds.
fn latency_histogram(encoder: &mut DescriptorEncoder<'_>, paths: &[PathSample]) -> fmt::Result {
    if paths.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(
        "mpio_path_latency_seconds",
        "Latency of the attempts on the path, successful or not.",
        None,
        MetricType::Histogram,
    )?;
    for path in paths {
        let counts = path.load.latency_buckets();
        // Per-bucket counts: the encoder makes them cumulative.
        let buckets: Vec<(f64, u64)> = counts
            .iter()
            .enumerate()
            .take(LATENCY_BUCKETS)
            .map(|(bucket, &count)| {
                let upper = latency_bucket_upper_ns(bucket).map_or(f64::INFINITY, seconds);
                (upper, count)
            })
            .collect();
        let count = counts
            .iter()
            .fold(0u64, |sum, count| sum.wrapping_add(*count));
        let sum = seconds(path.load.latency_sum_ns());
        metric
            .encode_family(&path.labels)?
            .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
    }
    Ok(())
}

/// `ns` as seconds.
fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_exact_for_the_bucket_bounds() {
        assert_eq!(seconds(1024), 0.000001024);
        assert_eq!(seconds(1 << 31), 2.147483648);
        assert_eq!(seconds(0), 0.0);
    }
}
