//! `mpio sim`: the deterministic simulator. `--seeds N` runs N seeds and
//! reports every failing one with its replay command; `--seed S` replays
//! one seed and prints its whole trace.

use mpio_sim::{run_seed, run_seeds};
use std::time::Instant;

/// `mpio sim` arguments.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Run this many seeds.
    #[arg(long, conflicts_with = "seed")]
    seeds: Option<u64>,
    /// First seed of `--seeds`.
    #[arg(long, default_value_t = 0, requires = "seeds")]
    start: u64,
    /// Replay one seed and print its whole trace.
    #[arg(long)]
    seed: Option<u64>,
    /// Threads for `--seeds` (default: every CPU). Each seed runs on one
    /// thread, so results do not depend on it.
    #[arg(long)]
    jobs: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `mpio sim`.
pub fn main(args: &SimArgs) -> Result<(), String> {
    match (args.seed, args.seeds) {
        (Some(seed), _) => replay(seed, args.json),
        (None, Some(count)) => batch(args, count),
        (None, None) => Err("sim needs --seeds N (run N seeds) or --seed S (replay one)".into()),
    }
}

fn replay(seed: u64, json: bool) -> Result<(), String> {
    let report = run_seed(seed, true);
    if json {
        println!("{}", to_json(&report)?);
    } else {
        if let Some(scenario) = &report.scenario {
            println!("{scenario}");
        }
        for event in report.full_trace.iter().flatten() {
            println!("{event}");
        }
        println!("{report}");
    }
    match &report.failure {
        Some(failure) => Err(format!("seed {seed} failed: {failure}")),
        None => Ok(()),
    }
}

fn batch(args: &SimArgs, count: u64) -> Result<(), String> {
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let started = Instant::now();
    let report = run_seeds(args.start, count, jobs);
    let seconds = started.elapsed().as_secs_f64();
    let seeds_per_second = count as f64 / seconds.max(1e-9);
    if args.json {
        let mut value = serde_json::to_value(&report).map_err(|error| error.to_string())?;
        value["seconds"] = serde_json::json!(seconds);
        value["seeds_per_second"] = serde_json::json!(seeds_per_second);
        value["jobs"] = serde_json::json!(jobs);
        println!("{}", to_json(&value)?);
    } else {
        for failure in &report.failures {
            println!("{failure}\n");
        }
        println!(
            "{} seeds from {} in {seconds:.1}s on {jobs} thread(s) ({seeds_per_second:.0} seeds/s): \
             {} failed; {} I/Os, {} blocks checked, {} path failures",
            count,
            args.start,
            report.failures.len(),
            report.ios,
            report.blocks_checked,
            report.path_failures
        );
    }
    match report.failures.first() {
        Some(first) => Err(format!(
            "{} of {count} seeds failed; replay the first with: {}",
            report.failures.len(),
            first.replay_command()
        )),
        None => Ok(()),
    }
}

fn to_json(value: &impl serde::Serialize) -> Result<String, String> {
    serde_json::to_string_pretty(value).map_err(|error| error.to_string())
}
