//! `mpio bench`: a fio-like load run in-process against a map, or against
//! one raw path with no map (the baseline), and the seed's matrix of both.
//!
//! Benchmarks are not tests: nothing here asserts a speed. The numbers go
//! to `docs/BENCHMARKS.md` with the command that produced them.

mod histogram;
mod job;
mod matrix;
mod report;

use histogram::Histogram;
pub use job::Rw;
use job::{run_job, JobResult, JobSpec, Limit, LockedTarget, RawTarget};
use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_transport::uri::{parse_size, size_word};
use mpio_transport::{Device, PathHandle, Transports};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// `mpio bench` arguments.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Access pattern.
    #[arg(long, value_enum, default_value = "randread")]
    pub rw: Rw,
    /// Block size (suffixes K, M).
    #[arg(long, default_value = "4K", value_parser = parse_block_size)]
    pub bs: u32,
    /// I/Os each job keeps in flight.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub iodepth: u32,
    /// Jobs (threads), each with its own queue.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: u32,
    /// Pin job N to CPU N (modulo the CPU count).
    #[arg(long)]
    pub pin: bool,
    /// Seconds each run lasts (ignored with --ios).
    #[arg(long, default_value_t = 5.0)]
    pub runtime: f64,
    /// I/Os per job instead of a runtime.
    #[arg(long)]
    pub ios: Option<u64>,
    /// The map as a dm table; path words are transport URIs (null:4G, memory:disk#port,
    /// file:/path, nbd://host:port/export, nbd+unix:///export?socket=/path).
    #[arg(long, conflicts_with_all = ["paths", "selector", "selector_args", "path_args"])]
    pub table: Option<String>,
    /// Null paths in the generated map.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub paths: u32,
    /// Selector of the generated map.
    #[arg(long, default_value = "round-robin")]
    pub selector: String,
    /// Selector arguments of the generated map, space-separated.
    #[arg(long, default_value = "")]
    pub selector_args: String,
    /// Arguments given to every path of the generated map, space-separated.
    #[arg(long, default_value = "")]
    pub path_args: String,
    /// Size of the generated map and its null paths.
    #[arg(long, default_value = "4G", value_parser = parse_size)]
    pub size: u64,
    /// Completion latency of the generated null paths, in ns (null_blk's completion_nsec).
    #[arg(long, default_value_t = 0)]
    pub latency_ns: u64,
    /// Run the raw baseline (one null path, no map) instead of a map.
    #[arg(long, conflicts_with = "table")]
    pub raw: bool,
    /// Route every selector decision through one mutex shared by all jobs.
    #[arg(long, value_enum, default_value = "none")]
    pub locking: Locking,
    /// Print the seed's matrix: raw, then every selector, at 1 job and one job per CPU.
    #[arg(long)]
    pub matrix: bool,
    /// Rounds of the matrix: each round runs every row once (raw included),
    /// and each row reports its median round, the spread, and its best
    /// round against raw's best.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=99), requires = "matrix")]
    pub repeat: u32,
    /// Print results as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
}

/// Whether the map's decisions serialise on a global lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Locking {
    /// mpio's lockless fast path.
    None,
    /// One mutex around every decision, shared by every job.
    Global,
}

fn parse_block_size(text: &str) -> Result<u32, String> {
    let size = parse_size(text)?;
    if size == 0 || size > 16 << 20 {
        return Err(format!("block size {text:?} must be from 1 byte to 16M"));
    }
    Ok(size as u32)
}

/// What to run one load against.
#[derive(Clone, Debug)]
pub enum Subject {
    /// One null path, no map.
    Raw { latency_ns: u64 },
    /// A map given as a table.
    Map { table: Table, locking: Locking },
}

/// A subject made ready to run: the raw path's handle, or the built map.
enum Prepared {
    Raw(PathHandle),
    Map { device: Device, locking: Locking },
}

/// The result of one run, summed over its jobs.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub label: String,
    pub jobs: u32,
    pub ios: u64,
    pub reads: u64,
    pub writes: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed_ns: u64,
    pub block_size: u32,
    pub latency: Histogram,
    /// (path word, dispatched I/Os) per path; empty for raw.
    pub paths: Vec<(String, u64)>,
}

impl RunResult {
    /// I/Os per second over the run.
    pub fn iops(&self) -> f64 {
        self.ios as f64 / (self.elapsed_ns.max(1) as f64 / 1e9)
    }
}

/// The table `--paths N --selector S` stands for.
pub fn generated_table(args: &BenchArgs) -> Result<Table, String> {
    let paths = args.paths as usize;
    let path_args: Vec<&str> = args.path_args.split_whitespace().collect();
    let selector_args: Vec<&str> = args.selector_args.split_whitespace().collect();
    let latency = if args.latency_ns > 0 {
        format!("?latency_ns={}", args.latency_ns)
    } else {
        String::new()
    };
    let mut words = format!(
        "0 {} multipath 0 0 1 1 {} {} {} {paths} {}",
        args.size / 512,
        args.selector,
        selector_args.len(),
        selector_args.join(" "),
        path_args.len()
    );
    // A path word is in a table once: a label tells the paths apart.
    for path in 1..=paths {
        words.push_str(&format!(
            " null:{}{latency}#{path} {}",
            size_word(args.size),
            path_args.join(" ")
        ));
    }
    Table::parse(&words).map_err(|error| format!("generated table {words:?}: {error}"))
}

/// Runs `args`'s load once against `subject` with `jobs` jobs.
pub fn run(
    args: &BenchArgs,
    subject: &Subject,
    jobs: u32,
    label: &str,
) -> Result<RunResult, String> {
    let transports = Transports::new();
    let prepared = match subject {
        Subject::Raw { latency_ns } => Prepared::Raw(PathHandle::Null {
            latency_ns: *latency_ns,
        }),
        Subject::Map { table, locking } => {
            let options = MapOptions {
                numa: mpio_transport::host::host_topology(),
                ..MapOptions::default()
            };
            let device = transports
                .build(table, options)
                .map_err(|error| error.to_string())?;
            // A benchmark runs no checker to bring a path back: one that
            // cannot serve now would only skew what is measured.
            if let Some((word, reason)) = device.unready_paths().next() {
                return Err(format!("path {word:?} cannot serve: {reason}"));
            }
            Prepared::Map {
                device,
                locking: *locking,
            }
        }
    };
    let device = match &prepared {
        Prepared::Raw(_) => None,
        Prepared::Map { device, .. } => Some(device),
    };
    let size_bytes = device.map_or(args.size, |device| device.map.size_bytes());
    if size_bytes < u64::from(args.bs) {
        return Err(format!(
            "the device ({size_bytes} bytes) is smaller than one block"
        ));
    }
    let limit = match args.ios {
        Some(ios) => Limit::Ios(ios),
        None => Limit::Runtime((args.runtime.max(0.001) * 1e9) as u64),
    };
    let core_ids = if args.pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };
    let global_lock = Arc::new(Mutex::new(()));
    let progress: Vec<AtomicU64> = (0..jobs).map(|_| AtomicU64::new(0)).collect();
    let finished = AtomicBool::new(false);
    let results: Vec<JobResult> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|job_index| {
                let spec = JobSpec {
                    rw: args.rw,
                    block_size: args.bs,
                    iodepth: args.iodepth as usize,
                    limit,
                    size_bytes,
                    job_index: u64::from(job_index),
                };
                let core =
                    (!core_ids.is_empty()).then(|| core_ids[job_index as usize % core_ids.len()]);
                let (prepared, progress, global_lock) =
                    (&prepared, &progress[job_index as usize], &global_lock);
                scope.spawn(move || {
                    let cpu = match core {
                        Some(core) => {
                            core_affinity::set_for_current(core);
                            core.id as u32
                        }
                        None => job_index,
                    };
                    match prepared {
                        Prepared::Map {
                            device,
                            locking: Locking::Global,
                        } => {
                            let mut target = LockedTarget {
                                queue: device.queue(spec.iodepth, cpu),
                                lock: Arc::clone(global_lock),
                            };
                            run_job(&mut target, &spec, progress)
                        }
                        Prepared::Map { device, .. } => {
                            let mut target = device.queue(spec.iodepth, cpu);
                            run_job(&mut target, &spec, progress)
                        }
                        Prepared::Raw(path) => {
                            let mut target =
                                RawTarget::new(path.open(spec.iodepth, None), spec.iodepth);
                            run_job(&mut target, &spec, progress)
                        }
                    }
                })
            })
            .collect();
        if !args.quiet && !args.json {
            scope.spawn(|| report::show_progress(label, &progress, &finished));
        }
        let results = handles
            .into_iter()
            .map(|handle| handle.join().unwrap_or_default())
            .collect();
        finished.store(true, Ordering::Relaxed);
        results
    });
    Ok(combine(label, jobs, args.bs, device, results))
}

fn combine(
    label: &str,
    jobs: u32,
    block_size: u32,
    device: Option<&Device>,
    results: Vec<JobResult>,
) -> RunResult {
    let mut combined = RunResult {
        label: label.to_string(),
        jobs,
        ios: 0,
        reads: 0,
        writes: 0,
        errors: 0,
        first_error: None,
        elapsed_ns: 0,
        block_size,
        latency: Histogram::default(),
        paths: device
            .map(|device| {
                (0..device.map.paths().len())
                    .map(|index| (device.map.path_name(index).to_string(), 0))
                    .collect()
            })
            .unwrap_or_default(),
    };
    for result in &results {
        combined.ios += result.ios;
        combined.reads += result.reads;
        combined.writes += result.writes;
        combined.errors += result.errors;
        if combined.first_error.is_none() {
            combined.first_error = result.first_error.map(|error| error.to_string());
        }
        combined.elapsed_ns = combined.elapsed_ns.max(result.elapsed_ns);
        combined.latency.merge(&result.latency);
        for (path, dispatched) in combined.paths.iter_mut().zip(&result.path_dispatched) {
            path.1 += dispatched;
        }
    }
    combined
}

/// Runs `mpio bench` as the arguments say; returns the process exit code.
pub fn main(args: &BenchArgs) -> Result<(), String> {
    if args.matrix {
        return matrix::run_matrix(args);
    }
    let (subject, label) = if args.raw {
        (
            Subject::Raw {
                latency_ns: args.latency_ns,
            },
            "raw (1 null path, no map)".to_string(),
        )
    } else {
        let table = match &args.table {
            Some(text) => Table::parse(text).map_err(|error| format!("--table: {error}"))?,
            None => generated_table(args)?,
        };
        let label = format!(
            "{} ({} paths{})",
            table
                .groups
                .first()
                .map_or("no group", |group| group.selector.as_str()),
            table
                .groups
                .iter()
                .map(|group| group.paths.len())
                .sum::<usize>(),
            if args.locking == Locking::Global {
                ", global lock"
            } else {
                ""
            }
        );
        (
            Subject::Map {
                table,
                locking: args.locking,
            },
            label,
        )
    };
    let result = run(args, &subject, args.jobs, &label)?;
    report::print_run(args, &result);
    if result.errors > 0 {
        return Err(format!(
            "{} I/Os failed (first: {})",
            result.errors,
            result.first_error.as_deref().unwrap_or("?")
        ));
    }
    Ok(())
}
