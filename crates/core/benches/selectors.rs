//! Micro-benchmark: ns per `select` + `start_io` + `end_io` (with the
//! selector's `started` and `completed` hooks) for every selector at 2, 4,
//! 8 and 16 paths, all usable, with 32 I/Os kept in flight as a queue
//! would, and the clock moving on at every I/O (so a selector's per-thread
//! cache sees a load change between any two picks).
//!
//! `cargo bench -p mpio-core --bench selectors [FILTER...]`: a filter keeps
//! the selectors whose name contains it. Each cell is the fastest of
//! several samples (the machine's noise only ever adds time), and the
//! median is printed beside it so a noisy run shows as one.

use mpio_core::load::PathLoad;
use mpio_core::numa::NumaTopology;
use mpio_core::selector::{PathSetup, Pick, Selector, Setup, SELECTOR_NAMES};
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Instant;

const PATH_COUNTS: [usize; 4] = [2, 4, 8, 16];
const IN_FLIGHT: usize = 32;
const OPS_PER_SAMPLE: u64 = 1_000_000;
const SAMPLES: usize = 9;
const BYTES: u64 = 4096;

/// The per-path arguments a selector needs to build (io-affinity: path `i`
/// serves CPU `i`); none for the others.
fn path_args(selector: &str, path_count: usize) -> Vec<Vec<String>> {
    (0..path_count)
        .map(|position| match selector {
            "io-affinity" => vec![format!("{:x}", 1u64 << position)],
            _ => Vec::new(),
        })
        .collect()
}

fn build(name: &str, path_count: usize, numa: &NumaTopology) -> Selector {
    let args = path_args(name, path_count);
    let setups: Vec<PathSetup<'_>> = args
        .iter()
        .map(|args| PathSetup {
            args,
            node: Some(0),
        })
        .collect();
    let setup = Setup {
        args: &[],
        paths: &setups,
        numa,
    };
    match Selector::build(name, &setup) {
        Some(Ok(selector)) => selector,
        Some(Err(error)) => panic!("{name}: {error}"),
        None => panic!("no selector {name}"),
    }
}

/// ns per I/O over `OPS_PER_SAMPLE` I/Os, `SAMPLES` times.
fn measure(selector: &Selector, path_count: usize) -> Vec<f64> {
    let loads: Vec<PathLoad> = (0..path_count).map(|_| PathLoad::default()).collect();
    let candidates: Vec<u16> = (0..path_count as u16).collect();
    let usable = vec![true; path_count];
    let mut thread = selector.new_thread_state();
    let mut in_flight: VecDeque<(u16, u64)> = VecDeque::with_capacity(IN_FLIGHT + 1);
    let mut now_ns = 0u64;
    (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..OPS_PER_SAMPLE {
                now_ns += 100;
                if in_flight.len() == IN_FLIGHT {
                    if let Some((position, start_ns)) = in_flight.pop_front() {
                        let position = usize::from(position);
                        let load = &loads[position];
                        load.end_io(BYTES);
                        selector.completed(|| &mut thread, position, load, start_ns, now_ns);
                    }
                }
                // As the queue does: the pick, the start on the picked
                // path's load and the selector's `started` hook in one call.
                let position = black_box(selector.select_and_start(
                    &mut thread,
                    || {
                        black_box(Pick {
                            candidates: &candidates,
                            usable: &usable,
                            loads: &loads,
                            bytes: BYTES,
                            cpu: 0,
                            node: 0,
                            now_ns,
                            generation: 1,
                        })
                    },
                    |position| {
                        let load = &loads[usize::from(position)];
                        load.start_io(BYTES);
                        load
                    },
                ));
                in_flight.push_back((position, now_ns));
            }
            start.elapsed().as_nanos() as f64 / OPS_PER_SAMPLE as f64
        })
        .collect()
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let numa = NumaTopology::default();
    println!(
        "ns per select + start_io + end_io, {IN_FLIGHT} in flight; fastest of {SAMPLES} samples (median)"
    );
    print!("{:<26}", "selector");
    for paths in PATH_COUNTS {
        print!("{:>18}", format!("{paths} paths"));
    }
    println!();
    for name in SELECTOR_NAMES {
        if !filters.is_empty() && !filters.iter().any(|filter| name.contains(filter.as_str())) {
            continue;
        }
        print!("{name:<26}");
        for paths in PATH_COUNTS {
            let selector = build(name, paths, &numa);
            let mut samples = measure(&selector, paths);
            samples.sort_by(f64::total_cmp);
            let cell = format!("{:.1} ({:.1})", samples[0], samples[SAMPLES / 2]);
            print!("{cell:>18}");
        }
        println!();
    }
}
