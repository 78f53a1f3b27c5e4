//! A core bug the simulator found (seed 232587 of `mpio sim --seeds 40000
//! --start 200000`), reduced to the smallest run that shows it.
//!
//! `no_path_timeout_ns` counts from an I/O's *first* wait, however often a
//! path comes and goes. An I/O that waits a second time (a path came
//! back, its attempt failed, the path is gone again) goes to the *back*
//! of the waiting list with its old start, so `Queue::expire` scans the
//! whole list: a scan that stopped at the first I/O not yet expired
//! would leave it waiting until every I/O in front of it, which started
//! waiting later, expired too, longer than the bound.
//!
//! Here: A waits from 0; the path returns at 5ms and A is sent; the path
//! is failed again; B starts waiting at 5ms; A's attempt fails and A waits
//! again, behind B. With a 20ms bound A must fail by ~20ms; the scan that
//! stops at B would fail it at 25ms, with B.

use mpio_core::io::{Buffer, Completion, Io, IoError, PathError};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::message::Message;
use mpio_core::queue::Queue;
use mpio_core::table::Table;
use mpio_sim::Trace;
use mpio_sim::{Mode, SimPathQueue, World, WorldSetup};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

const MS: u64 = 1_000_000;
const LIMIT_NS: u64 = 20 * MS;

fn read(user_data: u64) -> Io {
    Io::read(user_data, 0, Buffer::zeroed(512))
}

#[test]
fn an_io_waiting_a_second_time_still_fails_at_its_bound() {
    let table =
        Table::parse("0 64 multipath 1 queue_if_no_path 0 1 1 round-robin 0 1 0 p0").unwrap();
    let options = MapOptions {
        io_timeout_ns: Some(1_000 * MS),
        no_path_timeout_ns: Some(LIMIT_NS),
        ..MapOptions::default()
    };
    let map = Arc::new(Map::new(&table, &[PathInfo::default()], options).unwrap());
    let setup = WorldSetup {
        block_count: 64,
        base_latency_ns: vec![10_000],
        queue_count: 1,
        land_per_mille: 0,
        stuck_per_mille: 0,
        io_timeout_ns: 1_000 * MS,
        seed: 1,
    };
    let world = Rc::new(RefCell::new(World::new(&setup, Trace::new(false))));
    let path_queue = SimPathQueue::new(Rc::clone(&world), 0, 0);
    let mut queue = Queue::new(Arc::clone(&map), vec![path_queue], 4, 0);
    let mut done: Vec<Completion> = Vec::new();
    let poll = |queue: &mut Queue<SimPathQueue>, now_ns: u64, done: &mut Vec<Completion>| {
        world.borrow_mut().now_ns = now_ns;
        queue.poll(now_ns, &mut |completion| done.push(completion));
    };
    let fail_p0 = Message::FailPath("p0".into());

    // A waits from 0.
    map.message(&fail_p0).unwrap();
    queue.submit(read(1), 0).unwrap();
    assert_eq!(queue.waiting_for_path(), 1);
    // The path returns, broken: A is sent down it.
    map.reinstate_path(0);
    world
        .borrow_mut()
        .set_mode(0, Mode::Error(PathError::Transport), 5 * MS);
    poll(&mut queue, 5 * MS, &mut done);
    assert_eq!(queue.waiting_for_path(), 0);
    // The path is failed again; B starts waiting at 5ms.
    map.message(&fail_p0).unwrap();
    queue.submit(read(2), 5 * MS).unwrap();
    // A's attempt fails: A waits again, behind B.
    poll(&mut queue, 6 * MS, &mut done);
    assert_eq!(queue.waiting_for_path(), 2);
    assert!(done.is_empty());

    // Past A's bound (counted from its first wait), before B's.
    poll(&mut queue, LIMIT_NS + MS, &mut done);
    let results: Vec<(u64, Result<(), IoError>)> = done
        .iter()
        .map(|completion| (completion.user_data, completion.result))
        .collect();
    assert_eq!(
        results,
        [(1, Err(IoError::NoPathTimeout))],
        "A first waited at 0 with a {LIMIT_NS}ns bound"
    );
}
