//! A read-heavy load over three nbdkit paths while one is paused: reads
//! the paused path holds past its hedge delay are taken back and sent
//! down the other two, and the paused path gets no new I/O, so reads go
//! on completing while it is paused and none waits for the I/O timeout.
//!
//! The phases end on counts of completed reads, not on time: reads flow,
//! then path A is paused until [`WHILE_PAUSED`] more reads complete and
//! at least one was hedged, then it is resumed for [`AFTER`] more. The
//! I/O timeout is [`HANG_BOUND`]: a read that waited for it took that
//! long, which no healthy machine reaches however busy. The test prints
//! the longest gap without a completion in each phase, the longest read and the p99 /
//! p99.9 read latency (docs/BENCHMARKS.md records them):
//!
//! ```text
//! cargo test -p mpio-transport --test nbd_paused_reads -- --nocapture
//! ```

mod support;

use mpio_core::io::{Buffer, Io};
use mpio_core::map::MapOptions;
use mpio_core::queue::Queue;
use mpio_core::status::PathState;
use mpio_test_support::HANG_BOUND;
use mpio_transport::{clock, AnyQueue};
use std::time::{Duration, Instant};
use support::{device, Server, TempDir};

const BLOCK: u32 = 4096;
const BLOCKS: u64 = 1024;
const DEPTH: usize = 16;
/// Reads completed before the pause, so every path has a latency history.
const BEFORE: usize = 2_000;
/// Reads completed while path A is paused.
const WHILE_PAUSED: usize = 20_000;
/// Reads completed after it resumed.
const AFTER: usize = 2_000;

/// Keeps [`DEPTH`] random reads in flight through a queue and records
/// what came back.
struct Load {
    submitted_ns: [u64; DEPTH],
    free: Vec<u64>,
    buffers: Vec<Buffer>,
    latencies_ns: Vec<u64>,
    errors: usize,
    last_completion: Instant,
    longest_gap: Duration,
    state: u64,
}

impl Load {
    fn new() -> Self {
        Load {
            submitted_ns: [0; DEPTH],
            free: (0..DEPTH as u64).collect(),
            buffers: (0..DEPTH).map(|_| Buffer::zeroed(BLOCK as usize)).collect(),
            latencies_ns: Vec::new(),
            errors: 0,
            last_completion: Instant::now(),
            longest_gap: Duration::ZERO,
            state: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// Reads until `done(queue, reads completed so far)` holds, then
    /// lets what is in flight finish if `drain`.
    fn run(
        &mut self,
        queue: &mut Queue<AnyQueue>,
        drain: bool,
        mut done: impl FnMut(&Queue<AnyQueue>, usize) -> bool,
    ) {
        let start = Instant::now();
        let mut submitting = true;
        while submitting || (drain && self.free.len() < DEPTH) {
            if submitting && done(queue, self.latencies_ns.len()) {
                submitting = false;
            }
            if submitting {
                self.submit(queue);
            }
            if !self.poll(queue) {
                std::thread::sleep(Duration::from_micros(50));
            }
            assert!(start.elapsed() < HANG_BOUND, "the reads hang");
        }
    }

    fn submit(&mut self, queue: &mut Queue<AnyQueue>) {
        while let Some(slot) = self.free.pop() {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let offset = (self.state % BLOCKS) * u64::from(BLOCK);
            let buf = self.buffers.pop().unwrap();
            self.submitted_ns[slot as usize] = clock::now_ns();
            queue
                .submit(Io::read(slot, offset, buf), clock::now_ns())
                .unwrap();
        }
    }

    /// Polls once; says whether anything completed.
    fn poll(&mut self, queue: &mut Queue<AnyQueue>) -> bool {
        let now = clock::now_ns();
        let mut any = false;
        queue.poll(now, &mut |completion| {
            any = true;
            self.latencies_ns
                .push(now - self.submitted_ns[completion.user_data as usize]);
            self.errors += usize::from(completion.result.is_err());
            self.free.push(completion.user_data);
            self.buffers.push(completion.buf);
        });
        if any {
            self.longest_gap = self.longest_gap.max(self.last_completion.elapsed());
            self.last_completion = Instant::now();
        }
        any
    }
}

#[test]
fn reads_keep_flowing_while_one_of_three_paths_is_paused() {
    let dir = TempDir::new("nbd-paused-reads");
    let disk = dir.sparse_file("disk.img", BLOCKS * u64::from(BLOCK));
    let a = Server::nbdkit_pausable(&dir.join("a.sock"), &disk);
    let b = Server::nbdkit_file(&dir.join("b.sock"), &disk);
    let c = Server::nbdkit_file(&dir.join("c.sock"), &disk);
    let options = MapOptions {
        io_timeout_ns: Some(HANG_BOUND.as_nanos() as u64),
        ..MapOptions::default()
    };
    let (device, mut queue) = device(
        BLOCKS * u64::from(BLOCK),
        &[a.uri(), b.uri(), c.uri()],
        options,
    );

    let mut load = Load::new();
    load.run(&mut queue, false, |_, reads| reads >= BEFORE);
    let gap_before = std::mem::take(&mut load.longest_gap);
    a.pause();
    // The pause call blocked this loop while nbdkit took hold of A's
    // reads: the gap it made is the test's, not the queue's.
    load.last_completion = Instant::now();
    let paused_at = load.latencies_ns.len();
    load.run(&mut queue, false, |queue, reads| {
        reads >= paused_at + WHILE_PAUSED && queue.stats().hedged_reads > 0
    });
    let gap_paused = std::mem::take(&mut load.longest_gap);
    a.resume();
    let resumed_at = load.latencies_ns.len();
    load.run(&mut queue, true, |_, reads| reads >= resumed_at + AFTER);
    let gap_after = load.longest_gap;

    let hedged = queue.stats().hedged_reads;
    let latencies_ns = &mut load.latencies_ns;
    latencies_ns.sort_unstable();
    let quantile = |per_mille: usize| latencies_ns[(latencies_ns.len() - 1) * per_mille / 1000];
    let longest_read = Duration::from_nanos(*latencies_ns.last().unwrap());
    println!(
        "paused-path reads: {} reads, {hedged} hedged, {} errors, longest gap without a \
         completion {:.1} ms before the pause, {:.1} ms while paused, {:.1} ms after; \
         longest read {:.1} ms, p99 {:.3} ms, p99.9 {:.3} ms ({WHILE_PAUSED} reads while one \
         of three paths was paused)",
        latencies_ns.len(),
        load.errors,
        gap_before.as_secs_f64() * 1e3,
        gap_paused.as_secs_f64() * 1e3,
        gap_after.as_secs_f64() * 1e3,
        longest_read.as_secs_f64() * 1e3,
        quantile(990) as f64 / 1e6,
        quantile(999) as f64 / 1e6,
    );
    assert_eq!(load.errors, 0);
    assert!(hedged > 0, "no read was hedged: was the path paused?");
    // Reads completed while A held some: none waited for the timeout, or
    // the run would have taken it (and the path been failed).
    assert!(
        longest_read < HANG_BOUND,
        "a read took {longest_read:?}: it waited for the timeout"
    );
    assert_eq!(
        device.map.status().groups[0].paths[0].state,
        PathState::Active,
        "hedges fail no path"
    );
}
