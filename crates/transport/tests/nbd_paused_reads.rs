//! A read-heavy load over three nbdkit paths while one is paused past the
//! I/O timeout: reads the paused path holds past its hedge delay are
//! taken back and sent down the other two, and the paused path gets no
//! new I/O, so neither the queue nor any read waits for the timeout.
//! Prints the longest gap without a completion, the longest read and the
//! p99.9 read latency (docs/BENCHMARKS.md records them, before and after
//! hedging):
//!
//! ```text
//! cargo test -p mpio-transport --test nbd_paused_reads -- --nocapture
//! ```

mod support;

use mpio_core::io::{Buffer, Io};
use mpio_core::map::MapOptions;
use mpio_transport::clock;
use std::time::{Duration, Instant};
use support::{device, Server, TempDir};

const BLOCK: u32 = 4096;
const BLOCKS: u64 = 1024;
const DEPTH: usize = 16;
/// Long enough that a hedged read (milliseconds, or a second or so while
/// the machine is loaded) never comes near it.
const TIMEOUT: Duration = Duration::from_secs(4);
/// Paused for longer than the timeout, from one second in.
const PAUSE_AT: Duration = Duration::from_secs(1);
const PAUSE_FOR: Duration = Duration::from_secs(5);
const RUN: Duration = Duration::from_secs(8);

#[test]
fn reads_keep_flowing_while_one_of_three_paths_is_paused() {
    let dir = TempDir::new("nbd-paused-reads");
    let disk = dir.sparse_file("disk.img", BLOCKS * u64::from(BLOCK));
    let a = Server::nbdkit_pausable(&dir.join("a.sock"), &disk);
    let b = Server::nbdkit_file(&dir.join("b.sock"), &disk);
    let c = Server::nbdkit_file(&dir.join("c.sock"), &disk);
    let options = MapOptions {
        io_timeout_ns: Some(TIMEOUT.as_nanos() as u64),
        ..MapOptions::default()
    };
    let (_device, mut queue) = device(
        BLOCKS * u64::from(BLOCK),
        &[a.uri(), b.uri(), c.uri()],
        options,
    );

    let start = Instant::now();
    let mut submitted_ns = [0u64; DEPTH];
    let mut free: Vec<u64> = (0..DEPTH as u64).collect();
    let mut latencies_ns = Vec::new();
    let mut errors = 0;
    let mut last_completion = Instant::now();
    let mut longest_gap = Duration::ZERO;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut paused = false;
    let mut resumed = false;
    let mut buffers: Vec<Buffer> = (0..DEPTH).map(|_| Buffer::zeroed(BLOCK as usize)).collect();
    while start.elapsed() < RUN || free.len() < DEPTH {
        let elapsed = start.elapsed();
        if !paused && elapsed >= PAUSE_AT {
            a.pause();
            paused = true;
        }
        if paused && !resumed && elapsed >= PAUSE_AT + PAUSE_FOR {
            a.resume();
            resumed = true;
        }
        if elapsed < RUN {
            while let Some(slot) = free.pop() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let offset = (state % BLOCKS) * u64::from(BLOCK);
                let buf = buffers.pop().unwrap();
                submitted_ns[slot as usize] = clock::now_ns();
                queue
                    .submit(Io::read(slot, offset, buf), clock::now_ns())
                    .unwrap();
            }
        }
        let now = clock::now_ns();
        let mut any = false;
        queue.poll(now, &mut |completion| {
            any = true;
            latencies_ns.push(now - submitted_ns[completion.user_data as usize]);
            errors += usize::from(completion.result.is_err());
            free.push(completion.user_data);
            buffers.push(completion.buf);
        });
        if any {
            longest_gap = longest_gap.max(last_completion.elapsed());
            last_completion = Instant::now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
        assert!(start.elapsed() < RUN * 10, "the run did not end");
    }
    latencies_ns.sort_unstable();
    let quantile = |per_mille: usize| latencies_ns[(latencies_ns.len() - 1) * per_mille / 1000];
    let hedged = queue.stats().hedged_reads;
    println!(
        "paused-path reads: {} reads, {hedged} hedged, {errors} errors, longest gap without a completion {:.1} ms, \
         longest read {:.1} ms, p99 {:.3} ms, p99.9 {:.3} ms (I/O timeout {} ms, one of three \
         paths paused {} ms)",
        latencies_ns.len(),
        longest_gap.as_secs_f64() * 1e3,
        *latencies_ns.last().unwrap() as f64 / 1e6,
        quantile(990) as f64 / 1e6,
        quantile(999) as f64 / 1e6,
        TIMEOUT.as_millis(),
        PAUSE_FOR.as_millis(),
    );
    assert_eq!(errors, 0);
    assert!(hedged > 0, "no read was hedged: was the path paused?");
    // The point is that nothing waits for the timeout: a read that did
    // took the timeout at least (the hedge delay is milliseconds; a loaded
    // 2-core machine has stretched it past a second).
    assert!(
        longest_gap < TIMEOUT,
        "no read completed for {longest_gap:?}: the paused path held the queue"
    );
    let longest_read = Duration::from_nanos(*latencies_ns.last().unwrap());
    assert!(
        longest_read < TIMEOUT,
        "a read took {longest_read:?}: it waited for the timeout"
    );
}
