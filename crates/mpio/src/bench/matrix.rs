//! `mpio bench --matrix`: the seed's table in one run. The raw baseline
//! (the same harness on one null path, no map), then every selector over 8
//! null paths, at 1 job and at one job per CPU, with each run's IOPS, its
//! ratio to raw at the same job count, and the CPU time the map adds per
//! I/O: `jobs × (1/IOPS − 1/IOPS_raw)`. With `--repeat N` every row runs
//! once per round, and each row reports the median of its rounds (each
//! against the raw run of its own round), their range, and the added time
//! of its best round against raw's best: on a shared machine neighbours
//! only ever take time away, so the best rounds come closest to what the
//! code itself costs, and many short rounds find them.

use super::report::{human, run_json};
use super::{run, BenchArgs, Locking, RunResult, Subject};
use mpio_core::selector::SELECTOR_NAMES;
use mpio_core::table::Table;
use mpio_transport::uri::size_word;
use serde_json::json;

/// Paths per map in the matrix, as the bar states it
/// (docs/ARCHITECTURE.md, "What it promises").
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
        // A path word is in a table once: a label tells the paths apart.
        text.push_str(&format!("#{}", path + 1));
        if selector == "io-affinity" {
            // MATRIX_PATHS is 8, so the shift stays below 64.
            let mask = 1u64 << (path % cpus);
            text.push_str(&format!(" {mask:x}"));
        }
    }
    Table::parse(&text).map_err(|error| format!("matrix table for {selector}: {error}"))
}

/// One row of the matrix: what runs, and its result in every round.
struct Row {
    label: String,
    jobs: u32,
    subject: Subject,
    /// For a map row, the index of the raw row at the same job count.
    raw_row: Option<usize>,
    runs: Vec<RunResult>,
}

impl Row {
    /// The round whose IOPS is the median (the lower middle for an even
    /// count).
    fn median_round(&self) -> usize {
        let mut rounds: Vec<usize> = (0..self.runs.len()).collect();
        rounds.sort_by(|&a, &b| self.runs[a].iops().total_cmp(&self.runs[b].iops()));
        rounds[(rounds.len() - 1) / 2]
    }
}

/// Median and range of `values` (not empty).
fn median_and_range(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let median = values[(values.len() - 1) / 2];
    (median, values[0], values[values.len() - 1])
}

/// Runs and prints the matrix.
pub fn run_matrix(args: &BenchArgs) -> Result<(), String> {
    let cpus = std::thread::available_parallelism().map_or(1, |count| count.get());
    let job_counts: Vec<u32> = if cpus > 1 {
        vec![1, cpus as u32]
    } else {
        vec![1]
    };
    let mut rows: Vec<Row> = job_counts
        .iter()
        .map(|&jobs| Row {
            label: "raw (1 null path, no map)".to_string(),
            jobs,
            subject: Subject::Raw {
                latency_ns: args.latency_ns,
            },
            raw_row: None,
            runs: Vec::new(),
        })
        .collect();
    let lockings: &[Locking] = match args.locking {
        Locking::None => &[Locking::None],
        Locking::Global => &[Locking::None, Locking::Global],
    };
    for selector in SELECTOR_NAMES {
        let table = matrix_table(args, selector, cpus)?;
        for &locking in lockings {
            for (raw_row, &jobs) in job_counts.iter().enumerate() {
                rows.push(Row {
                    label: match locking {
                        Locking::None => format!("{selector} ({MATRIX_PATHS} paths)"),
                        Locking::Global => {
                            format!("{selector} ({MATRIX_PATHS} paths, global lock)")
                        }
                    },
                    jobs,
                    subject: Subject::Map {
                        table: table.clone(),
                        locking,
                    },
                    raw_row: Some(raw_row),
                    runs: Vec::new(),
                });
            }
        }
    }
    // Round by round, so that a noisy stretch of the machine lands on
    // every row of one round instead of on every round of one row.
    for _ in 0..args.repeat {
        for row in &mut rows {
            let result = run(args, &row.subject, row.jobs, &row.label)?;
            if result.errors > 0 {
                return Err(format!("{}: {} I/Os failed", row.label, result.errors));
            }
            row.runs.push(result);
        }
    }
    // Per row: the ratio to raw and the added ns of each round against the
    // raw run of the same round.
    let rounds = args.repeat as usize;
    let compared: Vec<Option<(Vec<f64>, Vec<f64>)>> = rows
        .iter()
        .map(|row| {
            row.raw_row.map(|raw_row| {
                (0..rounds)
                    .map(|round| {
                        let raw = rows[raw_row].runs[round].iops();
                        let result = &row.runs[round];
                        (result.iops() / raw, added_ns(row.jobs, result.iops(), raw))
                    })
                    .unzip()
            })
        })
        .collect();
    // Per row: its best round against raw's best round.
    let best_iops = |row: &Row| row.runs.iter().map(RunResult::iops).fold(0.0, f64::max);
    let best_added: Vec<Option<f64>> = rows
        .iter()
        .map(|row| {
            row.raw_row
                .map(|raw_row| added_ns(row.jobs, best_iops(row), best_iops(&rows[raw_row])))
        })
        .collect();
    if args.json {
        let json_rows: Vec<_> = rows
            .iter()
            .zip(compared.iter().zip(&best_added))
            .map(|(row, (compared, best_added))| {
                let mut value = run_json(&row.runs[row.median_round()]);
                value["iops_by_round"] =
                    json!(row.runs.iter().map(RunResult::iops).collect::<Vec<_>>());
                if let Some((ratios, added)) = compared {
                    value["ratio_to_raw"] = json!(median_and_range(ratios.clone()).0);
                    value["added_ns_per_io"] = json!(median_and_range(added.clone()).0);
                    value["added_ns_per_io_by_round"] = json!(added);
                    value["added_ns_per_io_best"] = json!(best_added);
                }
                value
            })
            .collect();
        println!(
            "{}",
            json!({ "cpus": cpus, "rounds": rounds, "rows": json_rows })
        );
        return Ok(());
    }
    println!(
        "rw={:?} bs={} iodepth={} cpus={cpus} rounds={rounds}  (added = jobs x (1/IOPS - 1/IOPS_raw); median of the rounds{})",
        args.rw,
        args.bs,
        args.iodepth,
        if rounds > 1 {
            ", range in brackets; best: the best round against raw's best"
        } else {
            ""
        }
    );
    println!(
        "{:<48} {:>4} {:>10} {:>8} {:>12} {:>16} {:>6}",
        "subject",
        "jobs",
        "IOPS",
        "vs raw",
        "added ns/IO",
        "",
        if rounds > 1 { "best" } else { "" }
    );
    for ((row, compared), best_added) in rows.iter().zip(&compared).zip(&best_added) {
        let iops = median_and_range(row.runs.iter().map(RunResult::iops).collect()).0;
        let (ratio, added, range) = match compared {
            Some((ratios, added)) => {
                let (added, low, high) = median_and_range(added.clone());
                (
                    format!("{:.1}%", median_and_range(ratios.clone()).0 * 100.0),
                    format!("{added:.1}"),
                    if rounds > 1 {
                        format!("[{low:.1}..{high:.1}]")
                    } else {
                        String::new()
                    },
                )
            }
            None => ("100.0%".to_string(), "-".to_string(), String::new()),
        };
        let best = match best_added {
            Some(added) if rounds > 1 => format!("{added:.1}"),
            _ => String::new(),
        };
        println!(
            "{:<48} {:>4} {:>10} {:>8} {:>12} {:>16} {:>6}",
            row.label,
            row.jobs,
            human(iops),
            ratio,
            added,
            range,
            best
        );
    }
    Ok(())
}

/// CPU ns a map at `iops` with `jobs` jobs adds per I/O relative to raw
/// at `raw_iops` with as many jobs.
fn added_ns(jobs: u32, iops: f64, raw_iops: f64) -> f64 {
    f64::from(jobs) * (1.0 / iops - 1.0 / raw_iops) * 1e9
}
