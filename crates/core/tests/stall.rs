//! A hung path cannot hold the queue: once its oldest attempt is far past
//! its usual latency, no selector sends it more I/O (it is not failed;
//! the I/O timeout decides that), so the healthy path keeps the queue
//! depth busy.
#![cfg(not(loom))]

use mpio_core::io::{Buffer, Io, PathOutcome};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue, Queue};
use mpio_core::stall::STALL_FLOOR_NS;
use mpio_core::table::Table;
use std::sync::Arc;

/// Answers every attempt at the next poll, unless it hangs.
#[derive(Debug, Default)]
struct Path {
    hangs: bool,
    held: Vec<PathIo>,
}

impl PathQueue for Path {
    fn submit(&mut self, io: PathIo, _now_ns: u64) {
        self.held.push(io);
    }
    fn poll(&mut self, _now_ns: u64, completions: &mut Vec<PathCompletion>) {
        if self.hangs {
            return;
        }
        completions.extend(self.held.drain(..).map(|io| PathCompletion {
            tag: io.tag,
            buf: io.buf,
            outcome: PathOutcome::Ok,
        }));
    }
    fn abort(&mut self, _tag: u64) -> Option<PathIo> {
        None
    }
}

const DEPTH: usize = 16;
const STEP_NS: u64 = 100_000;

fn run(selector: &str) {
    let table = Table::parse(&format!("0 2048 multipath 0 0 1 1 {selector} 0 2 0 a b")).unwrap();
    let map = Arc::new(
        Map::new(
            &table,
            &[PathInfo::default(); 2],
            MapOptions {
                io_timeout_ns: Some(30_000_000_000),
                ..MapOptions::default()
            },
        )
        .unwrap(),
    );
    let paths = vec![
        Path {
            hangs: false,
            held: Vec::new(),
        },
        Path::default(),
    ];
    let mut queue = Queue::new(map, paths, DEPTH, 0);
    // Path b learns its latency (one step) while both are healthy.
    let mut now = 0;
    let mut user_data = 0;
    // A client that submits one I/O per step, as depth allows.
    let mut step = |queue: &mut Queue<Path>, now: u64| {
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
