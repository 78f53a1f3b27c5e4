//! Fencing: a write (or write-zeroes, discard, flush) that timed out on a
//! path that cannot take it back is retried elsewhere only once the path
//! reports it fenced (a path error through `poll`); past the fence
//! timeout the path abandons it and it fails with `IoError::Unfenced`,
//! logged, never retried. A read so abandoned is retried at once.
#![cfg(not(loom))]

mod support {
    pub mod capture;
}

use mpio_core::io::{Buffer, Io, IoError, Op, PathError, PathOutcome};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::queue::Queue;
use mpio_core::table::Table;
use mpio_test_support::FakePath;
use std::sync::Arc;
use support::capture::Capture;

const MS: u64 = 1_000_000;
const TIMEOUT_NS: u64 = 10 * MS;
const FENCE_NS: u64 = 20 * MS;

fn map(fence_timeout_ns: Option<u64>) -> Arc<Map> {
    let table = Table::parse("0 2048 multipath 0 0 1 1 round-robin 0 2 1 a 1 b 1").unwrap();
    let options = MapOptions {
        name: "mpathf".into(),
        io_timeout_ns: Some(TIMEOUT_NS),
        fence_timeout_ns,
        ..MapOptions::default()
    };
    Arc::new(Map::new(&table, &[PathInfo::default(); 2], options).unwrap())
}

/// A queue whose path `a` hangs (a paused server: it answers only when
/// released, and gives an attempt up when abandoned), holding one `op`
/// sent at time 0; path `b` answers everything at the next poll.
fn held_on_a(map: &Arc<Map>, op: Op) -> Queue<FakePath> {
    let paths = vec![
        FakePath {
            gives_up: true,
            ..FakePath::hung()
        },
        FakePath {
            gives_up: true,
            ..FakePath::default()
        },
    ];
    let mut queue = Queue::new(Arc::clone(map), paths, 4, 0);
    // Round-robin starts somewhere: fill both paths, finish b's at once.
    for user_data in 0..2 {
        let io = match op {
            Op::Read => Io::read(user_data, 0, Buffer::zeroed(512)),
            _ => Io::write(user_data, 0, Buffer::zeroed(512)),
        };
        queue.submit(io, 0).unwrap();
    }
    let mut done = Vec::new();
    queue.poll(0, &mut |completion| done.push(completion));
    assert_eq!(done.len(), 1, "b answered its I/O");
    assert_eq!(queue.path_queues_mut()[0].held.len(), 1, "a holds one");
    queue
}

fn poll(queue: &mut Queue<FakePath>, now_ns: u64) -> Vec<Result<(), IoError>> {
    let mut done = Vec::new();
    queue.poll(now_ns, &mut |completion| done.push(completion.result));
    done
}

#[test]
fn a_write_the_path_cannot_fence_fails_unfenced_and_is_never_retried() {
    let map = map(Some(FENCE_NS));
    let mut queue = held_on_a(&map, Op::Write);
    let dispatched_b = queue.path_loads()[1].dispatched();
    let capture = Capture::default();
    let done = capture.during(|| {
        let mut done = poll(&mut queue, TIMEOUT_NS);
        assert!(map.paths()[0].is_failed(), "the timeout failed a");
        done.extend(poll(&mut queue, TIMEOUT_NS + FENCE_NS - MS));
        assert!(done.is_empty(), "waits for the fence: {done:?}");
        done.extend(poll(&mut queue, TIMEOUT_NS + FENCE_NS + MS));
        done
    });
    assert_eq!(done, [Err(IoError::Unfenced)]);
    assert_eq!(IoError::Unfenced.errno(), 5, "EIO");
    assert_eq!(
        queue.path_loads()[1].dispatched(),
        dispatched_b,
        "never retried on b"
    );
    assert_eq!(queue.in_flight(), 0);
    let events = capture.take();
    let event = events
        .iter()
        .find(|event| event.message == "unfenced writes failed")
        .unwrap_or_else(|| panic!("no event: {events:?}"));
    assert_eq!(event.level, tracing::Level::WARN);
    assert_eq!(event.fields["count"], "1");
    assert_eq!(event.fields["map"], "mpathf");
    assert!(event.fields["why"].contains("not retried"), "{event:?}");
    assert!(
        event.fields["what_to_do"].contains("write them again only after"),
        "{event:?}"
    );
}

#[test]
fn a_fenced_write_is_retried_and_a_write_answered_late_completes() {
    let map = self::map(None);
    let mut queue = held_on_a(&map, Op::Write);
    assert!(poll(&mut queue, TIMEOUT_NS).is_empty());
    // No fence timeout: it waits however long it takes.
    assert!(poll(&mut queue, 100 * TIMEOUT_NS).is_empty());
    let dispatched_b = queue.path_loads()[1].dispatched();
    // The server's close: fenced, so retried on b.
    queue.path_queues_mut()[0].release = Some(PathOutcome::Path(PathError::ConnectionLost));
    let now = 100 * TIMEOUT_NS;
    let mut done = poll(&mut queue, now);
    done.extend(poll(&mut queue, now));
    assert_eq!(done, [Ok(())]);
    assert_eq!(queue.path_loads()[1].dispatched(), dispatched_b + 1);

    // A held write answered after its timeout simply completes.
    let mut queue = held_on_a(&self::map(Some(FENCE_NS)), Op::Write);
    assert!(poll(&mut queue, TIMEOUT_NS).is_empty());
    queue.path_queues_mut()[0].release = Some(PathOutcome::Ok);
    assert_eq!(poll(&mut queue, TIMEOUT_NS + MS), [Ok(())]);
}

#[test]
fn a_read_the_path_abandons_is_retried_elsewhere() {
    let map = map(Some(FENCE_NS));
    let mut queue = held_on_a(&map, Op::Read);
    let dispatched_b = queue.path_loads()[1].dispatched();
    assert!(poll(&mut queue, TIMEOUT_NS).is_empty());
    let now = TIMEOUT_NS + FENCE_NS + MS;
    let mut done = poll(&mut queue, now);
    done.extend(poll(&mut queue, now));
    assert_eq!(done, [Ok(())]);
    assert_eq!(queue.path_loads()[1].dispatched(), dispatched_b + 1);
}
