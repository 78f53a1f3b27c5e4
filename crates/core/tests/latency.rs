//! The per-path latency histogram as metrics read it: each queue counts
//! the attempts it completed on a path by latency, and `Map::path_load`
//! sums the live queues.
#![cfg(not(loom))]

use mpio_core::io::{Buffer, Io, PathError, PathOutcome};
use mpio_core::load::{latency_bucket_upper_ns, LATENCY_BUCKETS};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::queue::Queue;
use mpio_core::table::Table;
use mpio_test_support::FakePath;
use std::sync::Arc;

fn read(user_data: u64) -> Io {
    Io::read(user_data, 0, Buffer::zeroed(512))
}

fn queue(map: &Arc<Map>, delays_ns: [u64; 2], fail: [bool; 2]) -> Queue<FakePath> {
    let paths = (0..2)
        .map(|path| FakePath {
            delay_ns: delays_ns[path],
            outcome: if fail[path] {
                PathOutcome::Path(PathError::Transport)
            } else {
                PathOutcome::Ok
            },
            ..FakePath::default()
        })
        .collect();
    Queue::new(map.clone(), paths, 8, 0)
}

/// Submits `count` reads at time 0 and polls at `at_ns`.
fn run(queue: &mut Queue<FakePath>, count: u64, at_ns: u64) -> usize {
    for user_data in 0..count {
        queue.submit(read(user_data), 0).unwrap();
    }
    queue.poll(at_ns, &mut |_| {})
}

#[test]
fn each_attempt_is_counted_by_latency_and_the_map_sums_the_queues() {
    let table =
        Table::parse("0 8 multipath 0 0 1 1 round-robin 0 2 1 a 1 b 1").expect("the table parses");
    let map = Arc::new(Map::new(&table, &[PathInfo::default(); 2], MapOptions::default()).unwrap());
    // Path a answers after 5 µs, path b after 1.5 µs; round-robin with a
    // repeat count of 1 alternates, so 4 reads put 2 on each.
    let mut first = queue(&map, [5_000, 1_500], [false, false]);
    assert_eq!(run(&mut first, 4, 10_000), 4);
    let mut second = queue(&map, [5_000, 1_500], [false, false]);
    assert_eq!(run(&mut second, 2, 10_000), 2);

    let bucket_of = |latency: u64| {
        (0..LATENCY_BUCKETS)
            .find(|&bucket| latency_bucket_upper_ns(bucket).is_none_or(|upper| latency < upper))
            .unwrap()
    };
    // Each attempt's latency is the poll that saw it end (10 µs) minus its
    // submission (0), whatever the path's own delay.
    let mut expected = [0; LATENCY_BUCKETS];
    expected[bucket_of(10_000)] = 3;
    for path in 0..2 {
        let load = map.path_load(path);
        assert_eq!(load.latency_buckets(), expected, "path {path}");
        assert_eq!(load.latency_sum_ns(), 30_000, "path {path}");
        assert_eq!(
            load.latency_buckets().iter().sum::<u64>(),
            load.dispatched()
        );
    }
    // A queue that is gone no longer counts.
    drop(second);
    assert_eq!(map.path_load(0).latency_buckets()[bucket_of(10_000)], 2);
}

#[test]
fn failed_attempts_are_counted_too() {
    let table =
        Table::parse("0 8 multipath 0 0 1 1 round-robin 0 2 1 a 1 b 1").expect("the table parses");
    let map = Arc::new(Map::new(&table, &[PathInfo::default(); 2], MapOptions::default()).unwrap());
    // Path a fails its attempt after 1.5 µs, the retry on b completes.
    let mut queue = queue(&map, [1_500, 100], [true, false]);
    queue.submit(read(7), 0).unwrap();
    assert_eq!(queue.poll(2_000, &mut |_| {}), 0);
    assert_eq!(queue.poll(3_000, &mut |_| {}), 1);
    let (a, b) = (map.path_load(0), map.path_load(1));
    assert_eq!((a.path_errors(), a.latency_sum_ns()), (1, 2_000));
    assert_eq!(a.latency_buckets()[1], 1);
    assert_eq!(b.latency_sum_ns(), 1_000);
    assert_eq!(b.latency_buckets()[0], 1);
}
