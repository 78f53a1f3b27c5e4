//! One path's facts, gathered once for the topology and paths views.

use crate::running::RunningMap;
use mpio_core::checker::{PathCheck, ProbeState};
use mpio_core::io::PathError;
use mpio_core::load::LATENCY_BUCKETS;
use mpio_core::path::AccessState;
use mpio_core::status::PathState;
use mpio_transport::PathHandle;
use serde::Serialize;

/// What the daemon knows of one path.
#[derive(Clone, Debug, Serialize)]
pub struct PathFacts {
    /// The path's word in the table (its config name, or its URI).
    pub name: String,
    /// Where it leads.
    pub uri: String,
    /// Its group, 1-based.
    pub group: usize,
    /// Active or failed, as dm sees it.
    pub state: PathState,
    /// The checker's verdict: `ready`, `faulty`, `pending`, `stalled`, or
    /// `marginal` (held out until it has stayed healthy long enough).
    pub checker: &'static str,
    /// Held out as marginal (failing and recovering again and again).
    pub marginal: bool,
    /// ALUA/ANA access state.
    pub access: AccessState,
    /// Times failed.
    pub fail_count: u32,
    /// The path error that failed it, while failed by one.
    pub last_error: Option<PathError>,
    /// Why it cannot serve yet: a file that could not be opened, read or
    /// sized, an NBD server not reached, an export that does not fit.
    pub unready: Option<String>,
    /// I/Os in flight now.
    pub in_flight: u32,
    /// I/Os sent to it.
    pub ios: u64,
    /// Bytes sent to it.
    pub bytes: u64,
    /// Path errors it gave.
    pub errors: u64,
    /// Reads held past their hedge delay, taken back and sent elsewhere.
    pub hedged_reads: u64,
    /// Answered attempts per latency bucket, counted since the path
    /// joined: bucket `b` holds those under `2^(b + 10)` ns, the last
    /// the rest ([`mpio_core::load::latency_bucket_upper_ns`]).
    pub latency_buckets: [u64; LATENCY_BUCKETS],
    /// Probes the checker ran, and how many failed.
    pub probes: u64,
    /// Failed probes.
    pub failed_probes: u64,
}

/// The checker's word for a path, in `multipath -ll`'s terms.
fn checker_word(check: Option<&PathCheck>) -> &'static str {
    match check {
        None => "pending",
        Some(check) if check.marginal => "marginal",
        Some(check) if check.stalled => "stalled",
        Some(check) => match check.state {
            ProbeState::Pending => "pending",
            ProbeState::Up => "ready",
            ProbeState::Down => "faulty",
        },
    }
}

/// Every path of `running`'s current map, group by group.
pub fn path_facts(running: &RunningMap) -> Vec<PathFacts> {
    let (map, handles, _) = running.slot.current();
    let status = map.status();
    let checks = running.path_checks();
    let mut facts = Vec::new();
    for (group, group_status) in map.groups().iter().zip(&status.groups) {
        for (index, path) in group.path_range().zip(&group_status.paths) {
            let load = map.path_load(index);
            // The checker lists the paths in map order; a word several
            // paths share is matched by its occurrence.
            let nth = facts
                .iter()
                .filter(|earlier: &&PathFacts| earlier.name == path.name)
                .count();
            let check = checks
                .iter()
                .filter(|(word, _)| *word == path.name)
                .nth(nth)
                .map(|(_, check)| check);
            facts.push(PathFacts {
                name: path.name.clone(),
                uri: running.config.uri_of(&path.name).to_string(),
                group: group_status.number,
                state: path.state,
                checker: checker_word(check),
                marginal: check.is_some_and(|check| check.marginal),
                access: path.access,
                fail_count: path.fail_count,
                last_error: path.last_error,
                unready: handles.get(index).and_then(PathHandle::unready),
                in_flight: path.in_flight,
                ios: load.dispatched(),
                bytes: load.dispatched_bytes(),
                errors: load.path_errors(),
                hedged_reads: load.hedged_reads(),
                latency_buckets: load.latency_buckets(),
                probes: check.map_or(0, |check| check.probes),
                failed_probes: check.map_or(0, |check| check.failed_probes),
            });
        }
    }
    facts
}

impl PathFacts {
    /// dm's word for the path's state.
    pub fn state_word(&self) -> &'static str {
        match self.state {
            PathState::Active => "active",
            PathState::Failed => "failed",
        }
    }
}
