//! How bench results are shown: a progress line while running, then a
//! fio-like summary, or JSON.

use super::{BenchArgs, RunResult};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How long the progress line waits between updates.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);

/// Rewrites one progress line on stderr until `finished`.
pub fn show_progress(label: &str, progress: &[AtomicU64], finished: &AtomicBool) {
    let start = std::time::Instant::now();
    let mut last = 0u64;
    let mut last_at = start;
    // Relaxed: a display; a stale count only shows an older number.
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(PROGRESS_INTERVAL);
        let done: u64 = progress
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum();
        let now = std::time::Instant::now();
        let rate = (done - last) as f64 / now.duration_since(last_at).as_secs_f64().max(1e-9);
        eprint!(
            "\r  {label}: {:>6.1}s  {:>9} IOPS  {:>12} I/Os ",
            start.elapsed().as_secs_f64(),
            human(rate),
            done
        );
        let _ = std::io::stderr().flush();
        (last, last_at) = (done, now);
    }
    eprint!("\r{:80}\r", "");
}

/// `1234567.0` → `1.23M`.
pub fn human(value: f64) -> String {
    match value {
        v if v >= 1e9 => format!("{:.2}G", v / 1e9),
        v if v >= 1e6 => format!("{:.2}M", v / 1e6),
        v if v >= 1e3 => format!("{:.1}K", v / 1e3),
        v => format!("{v:.0}"),
    }
}

/// A latency in the unit that suits it (ns below a µs, then µs, then ms).
fn latency(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{:.2}µs", ns as f64 / 1e3),
        _ => format!("{:.2}ms", ns as f64 / 1e6),
    }
}

/// The JSON form of one run.
pub fn run_json(result: &RunResult) -> serde_json::Value {
    let seconds = result.elapsed_ns as f64 / 1e9;
    json!({
        "label": result.label,
        "jobs": result.jobs,
        "ios": result.ios,
        "reads": result.reads,
        "writes": result.writes,
        "errors": result.errors,
        "first_error": result.first_error,
        "runtime_s": seconds,
        "iops": result.iops(),
        "bandwidth_bytes_per_s": result.iops() * f64::from(result.block_size),
        "latency_ns": {
            "p50": result.latency.percentile(50.0),
            "p99": result.latency.percentile(99.0),
            "p99.9": result.latency.percentile(99.9),
        },
        "paths": result.paths.iter().map(|(name, ios)| json!({"path": name, "ios": ios})).collect::<Vec<_>>(),
    })
}

/// Prints one run as text or JSON.
pub fn print_run(args: &BenchArgs, result: &RunResult) {
    if args.json {
        println!("{}", run_json(result));
        return;
    }
    let bandwidth = result.iops() * f64::from(result.block_size);
    println!(
        "{}: rw={:?} bs={} iodepth={} jobs={}",
        result.label, args.rw, result.block_size, args.iodepth, result.jobs
    );
    println!(
        "  IOPS={} BW={}B/s ios={} (read {} write {}) errors={} runtime={:.2}s",
        human(result.iops()),
        human(bandwidth),
        result.ios,
        result.reads,
        result.writes,
        result.errors,
        result.elapsed_ns as f64 / 1e9
    );
    println!(
        "  latency (batch granularity): p50={} p99={} p99.9={}",
        latency(result.latency.percentile(50.0)),
        latency(result.latency.percentile(99.0)),
        latency(result.latency.percentile(99.9))
    );
    if !result.paths.is_empty() {
        println!("  per path:");
        for (index, (name, ios)) in result.paths.iter().enumerate() {
            let share = *ios as f64 * 100.0 / result.ios.max(1) as f64;
            println!("    {index:>3} {name:<32} {ios:>12} I/Os {share:>5.1}%");
        }
    }
}
