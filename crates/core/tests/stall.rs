//! A hung path cannot hold the queue: once it has gone far longer than
//! usual without progress, no selector sends it more I/O (it is not
//! failed; the I/O timeout decides that), so the healthy path keeps the
//! queue depth busy. And a read it holds past its hedge delay is taken
//! back and sent down the other path; a write never is.
#![cfg(not(loom))]

use mpio_core::io::{Buffer, Io, Op};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::queue::Queue;
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
    let table = Table::parse(&format!("0 2048 multipath 0 0 1 1 {selector} 0 2 0 a b")).unwrap();
    let options = MapOptions {
        io_timeout_ns: Some(30_000_000_000),
        hedge_reads,
        ..MapOptions::default()
    };
    let map = Arc::new(Map::new(&table, &[PathInfo::default(); 2], options).unwrap());
    Queue::new(
        map,
        vec![FakePath::default(), FakePath::default()],
        DEPTH,
        0,
    )
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
