//! `mpio bench --matrix`: the seed's table in one run. The raw baseline
//! (the same harness on one null path, no map), then every selector over 8
//! null paths, at 1 job and at one job per CPU, with each run's IOPS, its
//! ratio to raw at the same job count, and the CPU time the map adds per
//! I/O: `jobs × (1/IOPS − 1/IOPS_raw)`.

use super::report::{human, run_json};
use super::{run, BenchArgs, Locking, RunResult, Subject};
use mpio_core::selector::SELECTOR_NAMES;
use mpio_core::table::Table;
use mpio_transport::uri::size_word;
use serde_json::json;

/// Paths per map in the matrix, as DESIGN.md's bar states it.
const MATRIX_PATHS: usize = 8;

/// The matrix's table for `selector`: 8 null paths, each selector's
/// required arguments filled in (io-affinity maps path i to CPU i mod the
/// CPU count: every CPU has a path, and the first path naming a CPU is its
/// choice).
fn matrix_table(args: &BenchArgs, selector: &str, cpus: usize) -> Result<Table, String> {
    let mut text = format!(
        "0 {} multipath 0 0 1 1 {selector} 0 {MATRIX_PATHS} {}",
        args.size / 512,
        u8::from(selector == "io-affinity")
    );
    for path in 0..MATRIX_PATHS {
        text.push_str(&format!(" null:{}", size_word(args.size)));
        if args.latency_ns > 0 {
            text.push_str(&format!("?latency_ns={}", args.latency_ns));
        }
        if selector == "io-affinity" {
            // MATRIX_PATHS is 8, so the shift stays below 64.
            let mask = 1u64 << (path % cpus);
            text.push_str(&format!(" {mask:x}"));
        }
    }
    Table::parse(&text).map_err(|error| format!("matrix table for {selector}: {error}"))
}

/// Runs and prints the matrix.
pub fn run_matrix(args: &BenchArgs) -> Result<(), String> {
    let cpus = std::thread::available_parallelism().map_or(1, |count| count.get());
    let job_counts: Vec<u32> = if cpus > 1 {
        vec![1, cpus as u32]
    } else {
        vec![1]
    };
    let mut rows: Vec<(RunResult, Option<f64>)> = Vec::new();
    let mut raw_iops = Vec::new();
    for &jobs in &job_counts {
        let raw = run(
            args,
            &Subject::Raw {
                latency_ns: args.latency_ns,
            },
            jobs,
            "raw (1 null path, no map)",
        )?;
        raw_iops.push(raw.iops());
        rows.push((raw, None));
    }
    let lockings: &[Locking] = match args.locking {
        Locking::None => &[Locking::None],
        Locking::Global => &[Locking::None, Locking::Global],
    };
    for selector in SELECTOR_NAMES {
        let table = matrix_table(args, selector, cpus)?;
        for &locking in lockings {
            for (&jobs, &raw) in job_counts.iter().zip(&raw_iops) {
                let label = match locking {
                    Locking::None => format!("{selector} ({MATRIX_PATHS} paths)"),
                    Locking::Global => format!("{selector} ({MATRIX_PATHS} paths, global lock)"),
                };
                let subject = Subject::Map {
                    table: table.clone(),
                    locking,
                };
                let result = run(args, &subject, jobs, &label)?;
                if result.errors > 0 {
                    return Err(format!("{label}: {} I/Os failed", result.errors));
                }
                rows.push((result, Some(raw)));
            }
        }
    }
    if args.json {
        let json_rows: Vec<_> = rows
            .iter()
            .map(|(result, raw)| {
                let mut value = run_json(result);
                if let Some(raw) = raw {
                    value["ratio_to_raw"] = json!(result.iops() / raw);
                    value["added_ns_per_io"] = json!(added_ns(result, *raw));
                }
                value
            })
            .collect();
        println!("{}", json!({ "cpus": cpus, "rows": json_rows }));
        return Ok(());
    }
    println!(
        "rw={:?} bs={} iodepth={} cpus={cpus}  (added = jobs x (1/IOPS - 1/IOPS_raw))",
        args.rw, args.bs, args.iodepth
    );
    println!(
        "{:<48} {:>4} {:>10} {:>8} {:>12}",
        "subject", "jobs", "IOPS", "vs raw", "added ns/IO"
    );
    for (result, raw) in &rows {
        let (ratio, added) = match raw {
            Some(raw) => (
                format!("{:.1}%", result.iops() * 100.0 / raw),
                format!("{:.1}", added_ns(result, *raw)),
            ),
            None => ("100.0%".to_string(), "-".to_string()),
        };
        println!(
            "{:<48} {:>4} {:>10} {:>8} {:>12}",
            result.label,
            result.jobs,
            human(result.iops()),
            ratio,
            added
        );
    }
    Ok(())
}

/// CPU ns the map adds per I/O relative to raw at the same job count.
fn added_ns(result: &RunResult, raw_iops: f64) -> f64 {
    f64::from(result.jobs) * (1.0 / result.iops() - 1.0 / raw_iops) * 1e9
}
