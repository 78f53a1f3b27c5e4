//! What the metrics endpoint serves ([`render_metrics`]): every map's
//! Prometheus text ([`crate::metrics::render`]) with the I/O its NBD
//! exports hold waiting for a path, read under the `maps` lock only (a
//! scrape never waits behind a reload's build).

use super::state::State;
use crate::metrics::{self, MapMetrics};
use mpio_core::map::Map;
use mpio_server::Server;
use mpio_transport::lock;
use std::sync::Arc;

/// The Prometheus text for every map, with the I/O its exports hold
/// waiting for a path.
pub(super) fn render_metrics(state: &State) -> String {
    let maps = lock(&state.maps);
    let current: Vec<(Arc<Map>, u64)> = maps
        .iter()
        .map(|running| {
            let waiting = running.servers.iter().map(Server::waiting_for_path).sum();
            (running.map(), waiting)
        })
        .collect();
    let metrics: Vec<MapMetrics<'_>> = maps
        .iter()
        .zip(&current)
        .map(|(running, (map, waiting))| MapMetrics {
            name: &running.config.name,
            map,
            waiting_for_path: Some(*waiting),
        })
        .collect();
    metrics::render(&metrics)
}
