//! What `mpio top` shows: the daemon's per-path counters read twice, and
//! the rates and latency percentiles of the interval between.
//!
//! The counters come from `show paths --json` (the daemon's
//! `view::facts::PathFacts`); only the fields shown here are read, and a
//! field the daemon does not send is an error naming it. Latency
//! percentiles come from the interval's difference of the paths'
//! power-of-two latency histograms, interpolated linearly within the
//! bucket the percentile falls in; in the last, unbounded bucket they
//! are its lower bound.

use mpio_core::load::{latency_bucket_upper_ns, LATENCY_BUCKETS};
use mpio_daemon::control::client;
use mpio_daemon::control::protocol::{Request, Response};
use serde::Deserialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// One path's counters as the daemon sent them.
#[derive(Clone, Debug, Deserialize)]
pub struct PathCounters {
    pub map: String,
    pub name: String,
    /// `active` or `failed`.
    pub state: String,
    /// The checker's word (`ready`, `faulty`, ...).
    pub checker: String,
    /// ALUA/ANA access state.
    pub access: String,
    pub in_flight: u32,
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
    pub hedged_reads: u64,
    pub latency_buckets: [u64; LATENCY_BUCKETS],
}

/// Every path's counters at one moment.
#[derive(Clone, Debug)]
pub struct Sample {
    pub at: Instant,
    pub paths: Vec<PathCounters>,
}

impl Sample {
    /// Reads the daemon at `socket`.
    pub fn take(socket: &Path) -> Result<Sample, String> {
        let response = client::call(socket, &Request::Paths { map: None })?;
        let at = Instant::now();
        match response {
            Response::Ok { json, .. } => {
                let paths = serde_json::from_value(json)
                    .map_err(|error| format!("the daemon's paths: {error}"))?;
                Ok(Sample { at, paths })
            }
            Response::Error { message } => Err(message),
        }
    }
}

/// One row of the view: a path's (or a map's) interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub map: String,
    /// The path; empty for a map's total.
    pub path: String,
    pub state: String,
    pub checker: String,
    pub access: String,
    pub iops: f64,
    pub mb_per_s: f64,
    /// Latency percentiles over the interval, in µs; `None` without an
    /// answered I/O.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub in_flight: u64,
    /// Errors and hedged reads in the interval.
    pub errors: u64,
    pub hedged: u64,
}

/// The rows of the interval from `before` to `after`: per map (the
/// daemon lists a map's paths together), its total first, then its paths
/// in the daemon's order. A path new in `after` (a reload added it)
/// counts from zero.
pub fn rows(before: &Sample, after: &Sample) -> Vec<Row> {
    let seconds = after
        .at
        .saturating_duration_since(before.at)
        .max(Duration::from_millis(1))
        .as_secs_f64();
    let mut rows = Vec::with_capacity(after.paths.len() * 2);
    let mut index = 0;
    for map in after.paths.chunk_by(|one, next| one.map == next.map) {
        let mut map_buckets = [0u64; LATENCY_BUCKETS];
        let paths: Vec<Row> = map
            .iter()
            .map(|path| {
                // The daemon lists paths in the same order each time: the
                // same index finds a path unless a reload moved it.
                let same = |old: &&PathCounters| old.map == path.map && old.name == path.name;
                let earlier = before
                    .paths
                    .get(index)
                    .filter(same)
                    .or_else(|| before.paths.iter().find(same));
                index += 1;
                let (row, buckets) = path_row(earlier, path, seconds);
                for (into, count) in map_buckets.iter_mut().zip(buckets) {
                    *into += count;
                }
                row
            })
            .collect();
        rows.push(Row {
            map: map[0].map.clone(),
            path: String::new(),
            state: "map".into(),
            checker: String::new(),
            access: String::new(),
            iops: paths.iter().map(|row| row.iops).sum(),
            mb_per_s: paths.iter().map(|row| row.mb_per_s).sum(),
            p50_us: percentile_ns(&map_buckets, 0.50).map(|ns| ns / 1e3),
            p99_us: percentile_ns(&map_buckets, 0.99).map(|ns| ns / 1e3),
            in_flight: paths.iter().map(|row| row.in_flight).sum(),
            errors: paths.iter().map(|row| row.errors).sum(),
            hedged: paths.iter().map(|row| row.hedged).sum(),
        });
        rows.extend(paths);
    }
    rows
}

/// `path`'s row over `seconds` since `earlier` (its counters then, if it
/// was there), and its latency buckets' counts in the interval.
fn path_row(
    earlier: Option<&PathCounters>,
    path: &PathCounters,
    seconds: f64,
) -> (Row, [u64; LATENCY_BUCKETS]) {
    let delta =
        |field: fn(&PathCounters) -> u64| field(path).saturating_sub(earlier.map_or(0, field));
    let buckets: [u64; LATENCY_BUCKETS] = std::array::from_fn(|bucket| {
        path.latency_buckets[bucket]
            .saturating_sub(earlier.map_or(0, |old| old.latency_buckets[bucket]))
    });
    let row = Row {
        map: path.map.clone(),
        path: path.name.clone(),
        state: path.state.clone(),
        checker: path.checker.clone(),
        access: path.access.clone(),
        iops: delta(|counters| counters.ios) as f64 / seconds,
        mb_per_s: delta(|counters| counters.bytes) as f64 / seconds / 1e6,
        p50_us: percentile_ns(&buckets, 0.50).map(|ns| ns / 1e3),
        p99_us: percentile_ns(&buckets, 0.99).map(|ns| ns / 1e3),
        in_flight: u64::from(path.in_flight),
        errors: delta(|counters| counters.errors),
        hedged: delta(|counters| counters.hedged_reads),
    };
    (row, buckets)
}

/// The `quantile` (0 to 1) of the latencies counted in `buckets`, in ns.
pub fn percentile_ns(buckets: &[u64; LATENCY_BUCKETS], quantile: f64) -> Option<f64> {
    let count: u64 = buckets.iter().sum();
    if count == 0 {
        return None;
    }
    let rank = (quantile * count as f64).max(1.0);
    let mut below = 0u64;
    for (bucket, &in_bucket) in buckets.iter().enumerate() {
        if in_bucket == 0 || ((below + in_bucket) as f64) < rank {
            below += in_bucket;
            continue;
        }
        let lower = if bucket == 0 {
            0.0
        } else {
            latency_bucket_upper_ns(bucket - 1).map_or(0.0, |ns| ns as f64)
        };
        return Some(match latency_bucket_upper_ns(bucket) {
            Some(upper) => {
                let within = (rank - below as f64) / in_bucket as f64;
                lower + within * (upper as f64 - lower)
            }
            None => lower,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(map: &str, name: &str, ios: u64, bucket: usize, in_bucket: u64) -> PathCounters {
        let mut latency_buckets = [0; LATENCY_BUCKETS];
        latency_buckets[bucket] = in_bucket;
        PathCounters {
            map: map.into(),
            name: name.into(),
            state: "active".into(),
            checker: "ready".into(),
            access: "optimized".into(),
            in_flight: 2,
            ios,
            bytes: ios * 4096,
            errors: 0,
            hedged_reads: 0,
            latency_buckets,
        }
    }

    #[test]
    fn percentiles_interpolate_within_their_bucket() {
        let mut buckets = [0; LATENCY_BUCKETS];
        // 100 under 1,024 ns, 100 in [1,024, 2,048).
        buckets[0] = 100;
        buckets[1] = 100;
        assert_eq!(percentile_ns(&buckets, 0.50), Some(1024.0));
        assert_eq!(percentile_ns(&buckets, 0.75), Some(1536.0));
        assert_eq!(percentile_ns(&[0; LATENCY_BUCKETS], 0.5), None);
        let mut slow = [0; LATENCY_BUCKETS];
        slow[LATENCY_BUCKETS - 1] = 1;
        let lower = latency_bucket_upper_ns(LATENCY_BUCKETS - 2).unwrap() as f64;
        assert_eq!(percentile_ns(&slow, 0.99), Some(lower));
    }

    #[test]
    fn an_interval_gives_rates_and_each_map_its_total_first() {
        let start = Instant::now();
        let before = Sample {
            at: start,
            paths: vec![counters("m", "a", 1000, 3, 10), counters("m", "b", 0, 3, 0)],
        };
        let after = Sample {
            at: start + Duration::from_secs(2),
            paths: vec![
                counters("m", "a", 3000, 3, 110),
                counters("m", "b", 400, 3, 0),
                counters("n", "c", 10, 0, 0),
            ],
        };
        let rows = rows(&before, &after);
        let names: Vec<(&str, &str)> = rows
            .iter()
            .map(|row| (row.map.as_str(), row.path.as_str()))
            .collect();
        assert_eq!(
            names,
            [("m", ""), ("m", "a"), ("m", "b"), ("n", ""), ("n", "c")]
        );
        assert_eq!(rows[1].iops, 1000.0);
        assert_eq!(rows[2].iops, 200.0);
        assert_eq!(rows[0].iops, 1200.0);
        assert_eq!(rows[0].in_flight, 4);
        assert!((rows[1].mb_per_s - 4.096).abs() < 1e-9);
        // a's 100 answers of the interval lie in bucket 3, [4,096,
        // 8,192) ns: the median halfway.
        assert_eq!(rows[1].p50_us, Some(6.144));
        assert_eq!(rows[0].p50_us, rows[1].p50_us);
        assert_eq!(rows[2].p50_us, None);
        // A path new in the interval counts from zero.
        assert_eq!(rows[4].iops, 5.0);
    }
}
