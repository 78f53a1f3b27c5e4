//! Running one seed and reporting it: the invariant that broke (if any), the
//! trace's hash and tail, and the command that replays it.

use crate::invariants::{Failure, Invariant};
use crate::runner::Sim;
use crate::scenario::Scenario;
use crate::trace::Trace;
use serde::Serialize;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What one seed's run found.
#[derive(Clone, Debug, Serialize)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Hash of the whole trace: equal for two runs of one seed.
    pub trace_hash: u64,
    /// Events in the trace.
    pub trace_events: u64,
    /// I/Os submitted (and, if the run passed, completed).
    pub ios: u64,
    /// Blocks read back and checked against the reference disk.
    pub blocks_checked: u64,
    /// Path failures over the run (the map's fail counts).
    pub path_failures: u64,
    /// The invariant that broke, if one did.
    pub failure: Option<Failure>,
    /// The scenario, described (kept only for failures and replays).
    pub scenario: Option<String>,
    /// The last events before the end or the failure.
    pub tail: Vec<String>,
    /// Every event, when the run was asked to keep them.
    pub full_trace: Option<Vec<String>>,
}

impl SeedReport {
    /// The command that replays this seed.
    pub fn replay_command(&self) -> String {
        format!("mpio sim --seed {}", self.seed)
    }
}

impl fmt::Display for SeedReport {
    /// A failure report: seed, invariant, detail, the last events and the
    /// replay command (one line per passing seed).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(failure) = &self.failure else {
            return write!(
                f,
                "seed {} passed: {} I/Os, {} blocks checked, {} path failures, trace {:016x}",
                self.seed, self.ios, self.blocks_checked, self.path_failures, self.trace_hash
            );
        };
        writeln!(
            f,
            "seed {} FAILED: invariant {}",
            self.seed,
            failure.invariant.name()
        )?;
        writeln!(f, "  {}", failure.detail)?;
        if let Some(scenario) = &self.scenario {
            for line in scenario.lines() {
                writeln!(f, "  {line}")?;
            }
        }
        writeln!(f, "  last {} events:", self.tail.len())?;
        for event in &self.tail {
            writeln!(f, "    {event}")?;
        }
        write!(f, "  replay: {}", self.replay_command())
    }
}

/// Runs seed `seed`; `keep_full_trace` keeps every event (for replay).
pub fn run_seed(seed: u64, keep_full_trace: bool) -> SeedReport {
    let scenario = Scenario::draw(seed);
    let description = keep_full_trace.then(|| scenario.describe());
    let mut sim = match Sim::new(scenario.clone(), Trace::new(keep_full_trace)) {
        Ok(sim) => sim,
        Err(failure) => {
            return SeedReport {
                seed,
                trace_hash: 0,
                trace_events: 0,
                ios: 0,
                blocks_checked: 0,
                path_failures: 0,
                failure: Some(failure),
                scenario: Some(scenario.describe()),
                tail: Vec::new(),
                full_trace: None,
            }
        }
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| sim.run()));
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(failure)) => Some(failure),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Some(Failure::new(Invariant::Panic, message))
        }
    };
    // A panic may leave the world borrowed by an unwound frame: its guard
    // was dropped by the unwinding, so borrowing again is sound.
    let world = sim.world.borrow();
    SeedReport {
        seed,
        trace_hash: world.trace.hash(),
        trace_events: world.trace.count(),
        ios: sim.ios.len() as u64,
        blocks_checked: sim.blocks_checked,
        path_failures: sim
            .map
            .paths()
            .iter()
            .map(|path| u64::from(path.fail_count()))
            .sum(),
        scenario: description.or_else(|| failure.is_some().then(|| scenario.describe())),
        failure,
        tail: world.trace.tail(),
        full_trace: world.trace.full(),
    }
}
