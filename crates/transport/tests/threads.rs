//! Several I/O threads, each with its own queue, write and verify disjoint
//! blocks while another thread fails, reinstates and disconnects ports
//! under them: no I/O fails, none completes twice, every byte reads back.

use mpio_core::io::{Buffer, Io, Op, PathError, PathOutcome};
use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_test_support::HANG_BOUND;
use mpio_transport::{clock, Transports};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BLOCK: usize = 4096;
const BLOCKS_PER_THREAD: u64 = 256;
const THREADS: u64 = 3;
const PORTS: [&str; 3] = ["a", "b", "c"];
/// Fault rounds the workers outlast: every fault kind on every port, twice.
const FAULT_ROUNDS: usize = 2 * PORTS.len() * 3;

fn fill(block: u64, round: u64) -> u8 {
    (block.wrapping_mul(31) ^ round.wrapping_mul(17)) as u8
}

#[test]
fn threads_survive_ports_failing_under_them() {
    let sectors = THREADS * BLOCKS_PER_THREAD * BLOCK as u64 / 512;
    let paths: Vec<String> = PORTS
        .iter()
        .map(|port| format!("memory:disk#{port}"))
        .collect();
    let table = Table::parse(&format!(
        "0 {sectors} multipath 1 queue_if_no_path 0 1 1 round-robin 0 {} 0 {}",
        PORTS.len(),
        paths.join(" ")
    ))
    .unwrap();
    let transports = Arc::new(Transports::new());
    let options = MapOptions {
        io_timeout_ns: Some(20_000_000),
        ..MapOptions::default()
    };
    let device = Arc::new(transports.build(&table, options).unwrap());
    for port in PORTS {
        transports.port("disk", port).set_latency_ns(2_000);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let rounds_done = Arc::new(AtomicUsize::new(0));

    // Chaos: one port at a time goes bad and comes back; at least one port
    // is always healthy, so no I/O may fail.
    let chaos = {
        let transports = Arc::clone(&transports);
        let map = Arc::clone(&device.map);
        let stop = Arc::clone(&stop);
        let rounds_done = Arc::clone(&rounds_done);
        std::thread::spawn(move || {
            let mut round = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let port = PORTS[round % PORTS.len()];
                let control = transports.port("disk", port);
                match round / PORTS.len() % 3 {
                    0 => control.fail(PathOutcome::Path(PathError::Transport)),
                    1 => control.disconnect(),
                    _ => control.hang(),
                }
                std::thread::sleep(Duration::from_millis(3));
                control.heal();
                // Let the timeout of a hung port fire before reinstating.
                std::thread::sleep(Duration::from_millis(25));
                for index in 0..PORTS.len() {
                    map.reinstate_path(index);
                }
                round += 1;
                rounds_done.store(round, Ordering::Relaxed);
            }
            round
        })
    };

    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let device = Arc::clone(&device);
            let rounds_done = Arc::clone(&rounds_done);
            std::thread::spawn(move || {
                let mut queue = device.queue(32, thread as u32);
                let first = thread * BLOCKS_PER_THREAD;
                let deadline = Instant::now() + HANG_BOUND;
                let mut round = 0u64;
                while round < 4 || rounds_done.load(Ordering::Relaxed) < FAULT_ROUNDS {
                    round += 1;
                    for op in [Op::Write, Op::Read] {
                        let mut next = 0u64;
                        let mut done = 0u64;
                        while done < BLOCKS_PER_THREAD {
                            assert!(Instant::now() < deadline, "thread {thread} stuck");
                            let now = clock::now_ns();
                            while next < BLOCKS_PER_THREAD && queue.in_flight() < 32 {
                                let block = first + next;
                                let mut buf = Buffer::zeroed(BLOCK);
                                if op == Op::Write {
                                    buf.as_mut_slice().fill(fill(block, round));
                                }
                                let io = Io {
                                    user_data: block,
                                    op,
                                    offset: block * BLOCK as u64,
                                    len: BLOCK as u32,
                                    buf,
                                    fua: false,
                                };
                                queue.submit(io, now).unwrap();
                                next += 1;
                            }
                            queue.poll(now, &mut |completion| {
                                assert_eq!(
                                    completion.result,
                                    Ok(()),
                                    "block {}",
                                    completion.user_data
                                );
                                if op == Op::Read {
                                    let expected = fill(completion.user_data, round);
                                    assert!(
                                        completion
                                            .buf
                                            .as_slice()
                                            .iter()
                                            .all(|&byte| byte == expected),
                                        "block {} round {round} reads back wrong",
                                        completion.user_data
                                    );
                                }
                                done += 1;
                            });
                        }
                    }
                }
                assert_eq!(queue.in_flight(), 0);
                for load in queue.path_loads() {
                    assert_eq!((load.in_flight(), load.in_flight_bytes()), (0, 0));
                }
                queue.stats().retries
            })
        })
        .collect();
    let retries: u64 = workers
        .into_iter()
        .map(|worker| worker.join().unwrap())
        .sum();
    stop.store(true, Ordering::Relaxed);
    let rounds = chaos.join().unwrap();
    assert!(rounds >= FAULT_ROUNDS, "the chaos thread ran");
    eprintln!("{rounds} fault rounds, {retries} retries");
}
