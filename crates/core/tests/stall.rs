//! A hung path cannot hold the queue: once it has gone far longer than
//! usual without progress, no selector sends it more I/O (it is not
//! failed; the I/O timeout decides that), so the healthy path keeps the
//! queue depth busy. And a read it holds past its hedge delay is taken
//! back and sent down the other path, once at most; a write never is.
#![cfg(not(loom))]

use mpio_core::io::{Buffer, Io, Op, PathOutcome};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue, Queue};
use mpio_core::table::Table;
use mpio_core::STALL_FLOOR_NS;
use mpio_test_support::FakePath;
use std::sync::Arc;

const DEPTH: usize = 16;
const STEP_NS: u64 = 100_000;

fn run(selector: &str) {
    let mut queue = queue(selector, true);
    // Path b learns its latency (one step) while both are healthy.
    let mut now = 0;
    let mut user_data = 0;
    // A client that submits one I/O per step, as depth allows.
    let mut step = |queue: &mut Queue<FakePath>, now: u64| {
        if queue.in_flight() < DEPTH {
            user_data += 1;
            let io = Io::read(user_data, 0, Buffer::zeroed(512));
            queue.submit(io, now).unwrap();
        }
        queue.poll(now, &mut |_| {});
    };
    for _ in 0..20 {
        now += STEP_NS;
        step(&mut queue, now);
    }
    queue.path_queues_mut()[0].hangs = true;
    let hang_start = now;
    while now < hang_start + 20 * STALL_FLOOR_NS {
        now += STEP_NS;
        step(&mut queue, now);
    }
    let held = queue.path_queues_mut()[0].held.len();
    // What reached it before the stall was seen: one I/O per step until
    // the floor passed. Without stall detection it holds the whole depth
    // and the healthy path idles.
    assert!(
        held <= (STALL_FLOOR_NS / STEP_NS) as usize + 2,
        "{selector}: the hung path holds {held} of {DEPTH}"
    );
    let dispatched_a = queue.path_loads()[0].dispatched();
    for _ in 0..100 {
        now += STEP_NS;
        step(&mut queue, now);
    }
    assert_eq!(
        queue.path_loads()[0].dispatched(),
        dispatched_a,
        "{selector}: new I/O went to the stalled path"
    );
    assert!(
        queue.path_loads()[1].dispatched() > 50,
        "{selector}: b dispatched {}, a holds {held}",
        queue.path_loads()[1].dispatched()
    );
    assert!(!queue.map().paths()[0].is_failed(), "stalled is not failed");
    // It answers: back in use (historical-service-time, having learnt how
    // slow it was, rightly prefers the other path for a while).
    queue.path_queues_mut()[0].hangs = false;
    for _ in 0..20 {
        now += STEP_NS;
        step(&mut queue, now);
    }
    if selector == "historical-service-time" {
        return;
    }
    assert!(
        queue.path_loads()[0].dispatched() > dispatched_a,
        "{selector}: the path answered and got no I/O again"
    );
}

fn queue(selector: &str, hedge_reads: bool) -> Queue<FakePath> {
    queue_over(
        selector,
        hedge_reads,
        [FakePath::default(), FakePath::default()],
    )
}

/// A queue of [`DEPTH`] over paths a and b, served by `paths`.
fn queue_over<P: PathQueue>(selector: &str, hedge_reads: bool, paths: [P; 2]) -> Queue<P> {
    let table = Table::parse(&format!("0 2048 multipath 0 0 1 1 {selector} 0 2 0 a b")).unwrap();
    let options = MapOptions {
        io_timeout_ns: Some(30_000_000_000),
        hedge_reads,
        ..MapOptions::default()
    };
    let map = Arc::new(Map::new(&table, &[PathInfo::default(); 2], options).unwrap());
    Queue::new(map, paths.into(), DEPTH, 0)
}

/// Submits `op` on a queue whose path a hangs (giving up what it holds
/// when abandoned) until a holds one, and polls every step for `for_ns`;
/// returns whether it completed, and the queue.
fn held_on_a(op: Op, hedge_reads: bool, for_ns: u64) -> (bool, Queue<FakePath>) {
    let mut queue = queue("round-robin", hedge_reads);
    queue.path_queues_mut()[0].hangs = true;
    queue.path_queues_mut()[0].gives_up = true;
    let mut now = 0;
    let mut done = 0;
    while queue.path_queues_mut()[0].held.is_empty() {
        let buf = Buffer::zeroed(512);
        let io = match op {
            Op::Read => Io::read(0, 0, buf),
            _ => Io::write(0, 0, buf),
        };
        queue.submit(io, now).unwrap();
        queue.poll(now, &mut |_| done += 1);
    }
    let submitted = done + 1;
    while now < for_ns {
        now += STEP_NS;
        queue.poll(now, &mut |_| done += 1);
    }
    (done == submitted, queue)
}

#[test]
fn a_read_held_past_its_hedge_delay_goes_down_the_other_path() {
    let (completed, queue) = held_on_a(Op::Read, true, 3 * STALL_FLOOR_NS);
    assert!(completed, "the read was not hedged");
    assert_eq!(queue.stats().hedged_reads, 1);
    assert_eq!(queue.path_loads()[0].hedged_reads(), 1);
    assert_eq!(queue.path_loads()[0].in_flight(), 0);
    assert!(!queue.map().paths()[0].is_failed(), "hedging fails no path");
}

#[test]
fn a_write_is_never_hedged_and_hedging_can_be_turned_off() {
    let (completed, queue) = held_on_a(Op::Write, true, 20 * STALL_FLOOR_NS);
    assert!(!completed, "a held write was sent elsewhere");
    assert_eq!(queue.stats().hedged_reads, 0);
    let (completed, _) = held_on_a(Op::Read, false, 20 * STALL_FLOOR_NS);
    assert!(!completed, "hedge_reads = false still hedged");
}

#[test]
fn a_hung_path_gets_no_new_io_from_any_selector() {
    for selector in [
        "round-robin",
        "queue-length",
        "service-time",
        "historical-service-time",
        "queue-depth",
        "numa",
    ] {
        run(selector);
    }
}

/// A path that stays hung through many hold-outs: each time it is tried
/// again it holds new reads, and each is taken back after the same hedge
/// delay, learnt while it answered. A read taken back is not a
/// completion: were its wait counted in the path's latency, every
/// hold-out would raise the delay (four times the p99) until reads
/// waited half the I/O timeout.
#[test]
fn a_hedge_delay_does_not_grow_while_its_path_stays_hung() {
    let mut queue = queue("round-robin", true);
    for path in queue.path_queues_mut() {
        path.delay_ns = STEP_NS;
        path.gives_up = true;
    }
    let mut now = 0;
    let mut submitted_ns = std::collections::HashMap::new();
    let mut next = 0u64;
    let mut longest_ns = 0u64;
    let mut run_until = |queue: &mut Queue<FakePath>, now: &mut u64, end_ns: u64| {
        while *now < end_ns {
            *now += STEP_NS;
            while queue.in_flight() < DEPTH {
                next += 1;
                submitted_ns.insert(next, *now);
                queue
                    .submit(Io::read(next, 0, Buffer::zeroed(512)), *now)
                    .unwrap();
            }
            queue.poll(*now, &mut |completion| {
                assert_eq!(completion.result, Ok(()));
                let started = submitted_ns.remove(&completion.user_data).unwrap();
                longest_ns = longest_ns.max(*now - started);
            });
        }
    };
    // Both paths learn their latency.
    run_until(&mut queue, &mut now, 100 * STALL_FLOOR_NS);
    queue.path_queues_mut()[0].hangs = true;
    // Long enough for dozens of hold-outs of path a.
    run_until(&mut queue, &mut now, 5_000 * STALL_FLOOR_NS);
    let hedged = queue.stats().hedged_reads;
    assert!(hedged > 20 * DEPTH as u64 / 2, "only {hedged} reads hedged");
    // The learnt delay is the floor here (p99 one step); a scan and a
    // step on top.
    assert!(
        longest_ns <= 2 * STALL_FLOOR_NS,
        "a read waited {longest_ns} ns after {hedged} hedges"
    );
}

/// A server behind one path that serves attempts one at a time, in order,
/// `service_ns` each, and goes on serving an attempt the queue abandoned
/// (an NBD server still reads the data of a request whose reply will be
/// dropped): a read sent after others waits for all of them.
#[derive(Debug)]
struct SerialServer {
    service_ns: u64,
    /// When the server is next free.
    busy_until_ns: u64,
    /// The attempts whose replies will be delivered, with when.
    held: Vec<(u64, PathIo)>,
}

impl SerialServer {
    fn new(service_ns: u64) -> Self {
        SerialServer {
            service_ns,
            busy_until_ns: 0,
            held: Vec::new(),
        }
    }
}

impl PathQueue for SerialServer {
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        self.busy_until_ns = self.busy_until_ns.max(now_ns) + self.service_ns;
        self.held.push((self.busy_until_ns, io));
    }

    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        while self
            .held
            .first()
            .is_some_and(|(done_ns, _)| *done_ns <= now_ns)
        {
            let (_, io) = self.held.remove(0);
            completions.push(PathCompletion {
                tag: io.tag,
                buf: io.buf,
                outcome: PathOutcome::Ok,
            });
        }
    }

    fn abort(&mut self, _tag: u64) -> Option<PathIo> {
        None
    }

    fn abandon(&mut self, tag: u64) -> Option<PathIo> {
        let at = self.held.iter().position(|(_, io)| io.tag == tag)?;
        Some(self.held.remove(at).1)
    }
}

/// Both paths' servers stall at once (a loaded machine) just as a burst
/// of reads arrives, so every read is past its hedge delay before either
/// path answers. Taking them back sends them behind the abandoned copies
/// the servers are still serving, so they are slower still; were a read
/// hedged again and again, each round would add to the servers' backlog,
/// no read would ever be answered (so no path would learn how slow it
/// has become) and the burst would never complete. A read is hedged at
/// most once, and never to a path the same scan gave up on.
#[test]
fn reads_hedged_while_every_path_is_slow_still_complete() {
    const SERVICE_NS: u64 = 250_000;
    const STEP_NS: u64 = 50_000;
    let servers = [SerialServer::new(SERVICE_NS), SerialServer::new(SERVICE_NS)];
    let mut queue = queue_over("round-robin", true, servers);
    let mut now = 0;
    // Each path learns its latency from reads sent one at a time.
    for user_data in 0..200 {
        queue
            .submit(Io::read(user_data, 0, Buffer::zeroed(512)), now)
            .unwrap();
        let mut done = false;
        while !done {
            now += STEP_NS;
            queue.poll(now, &mut |_| done = true);
        }
    }
    // Both servers stall for 3 ms as the burst arrives.
    for server in queue.path_queues_mut() {
        server.busy_until_ns = now + 3 * STALL_FLOOR_NS;
    }
    for user_data in 0..DEPTH as u64 {
        queue
            .submit(Io::read(user_data, 0, Buffer::zeroed(512)), now)
            .unwrap();
    }
    let mut completed = 0;
    let end_ns = now + 1_000 * STALL_FLOOR_NS;
    while completed < DEPTH && now < end_ns {
        now += STEP_NS;
        queue.poll(now, &mut |completion| {
            assert_eq!(completion.result, Ok(()));
            completed += 1;
        });
    }
    let hedged = queue.stats().hedged_reads;
    assert_eq!(
        completed, DEPTH,
        "{completed} of {DEPTH} reads completed in a simulated second, after {hedged} hedges"
    );
    // The reads of one path at most: never both ways.
    assert!(
        hedged <= DEPTH as u64 / 2,
        "{hedged} hedges for {DEPTH} reads"
    );
}

/// With both paths hung, a read taken back from one waits on the other:
/// it is not sent back once the first path's hold-out ends, and again
/// each hold-out after, doubling the load on servers already behind. A
/// read costs its paths at most two sends.
#[test]
fn a_read_is_taken_back_at_most_once() {
    let mut queue = queue("round-robin", true);
    for path in queue.path_queues_mut() {
        path.hangs = true;
        path.gives_up = true;
    }
    queue
        .submit(Io::read(1, 0, Buffer::zeroed(512)), 0)
        .unwrap();
    let mut now = 0;
    while now < 1_000 * STALL_FLOOR_NS {
        now += STEP_NS;
        queue.poll(now, &mut |_| panic!("a hung path answered"));
    }
    assert_eq!(queue.stats().hedged_reads, 1);
    let held: usize = queue
        .path_queues_mut()
        .iter()
        .map(|path| path.held.len())
        .sum();
    assert_eq!(held, 1);
}
