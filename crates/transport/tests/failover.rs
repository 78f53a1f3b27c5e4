//! Failover through the memory transport: ports fail, hang and drop their
//! connection with I/O in flight, and every I/O still completes exactly
//! once with the data the caller wrote.

use mpio_core::io::{Buffer, Completion, Io, IoError, Op, PathError, PathOutcome, TargetError};
use mpio_core::map::MapOptions;
use mpio_core::message::Message;
use mpio_core::queue::Queue;
use mpio_core::status::{GroupState, PathState};
use mpio_core::table::Table;
use mpio_transport::{AnyQueue, Device, Transports};
use std::collections::HashMap;

const BLOCK: u32 = 4096;
const BLOCKS: u64 = 64;

/// A table over memory disk `disk`, one group per entry of `groups`, each
/// group a list of port names.
fn table(disk: &str, groups: &[&[&str]], queue_if_no_path: bool) -> Table {
    let features = if queue_if_no_path {
        "1 queue_if_no_path"
    } else {
        "0"
    };
    let sectors = BLOCKS * u64::from(BLOCK) / 512;
    let mut text = format!("0 {sectors} multipath {features} 0 {} 1", groups.len());
    for ports in groups {
        text.push_str(&format!(" round-robin 0 {} 0", ports.len()));
        for port in *ports {
            text.push_str(&format!(" memory:{disk}#{port}"));
        }
    }
    Table::parse(&text).unwrap()
}

struct Rig {
    transports: Transports,
    device: Device,
    queue: Queue<AnyQueue>,
    now_ns: u64,
}

impl Rig {
    fn new(groups: &[&[&str]], queue_if_no_path: bool, options: MapOptions) -> Rig {
        let transports = Transports::new();
        let device = transports
            .build(&table("disk0", groups, queue_if_no_path), options)
            .unwrap();
        let queue = device.queue(128, 0);
        Rig {
            transports,
            device,
            queue,
            now_ns: 1,
        }
    }

    fn port(&self, port: &str) -> std::sync::Arc<mpio_transport::PortControl> {
        self.transports.port("disk0", port)
    }

    fn submit(&mut self, user_data: u64, op: Op, block: u64, fill: u8) {
        let buf = match op {
            Op::Read => Buffer::zeroed(BLOCK as usize),
            Op::Write => {
                let mut buf = Buffer::zeroed(BLOCK as usize);
                buf.as_mut_slice().fill(fill);
                buf
            }
            _ => Buffer::empty(),
        };
        let len = if op == Op::Flush { 0 } else { BLOCK };
        let io = Io {
            user_data,
            op,
            offset: block * u64::from(BLOCK),
            len,
            buf,
            fua: false,
        };
        self.queue.submit(io, self.now_ns).unwrap();
    }

    /// Polls, advancing the clock by `step_ns` each time, until `count`
    /// completions arrived; panics if they do not within a bound.
    fn collect(&mut self, count: usize, step_ns: u64) -> Vec<Completion> {
        let mut done = Vec::new();
        for _ in 0..100_000 {
            self.queue
                .poll(self.now_ns, &mut |completion| done.push(completion));
            if done.len() >= count {
                break;
            }
            self.now_ns += step_ns;
        }
        assert_eq!(done.len(), count, "completions after the bound");
        done
    }

    /// Polls for a while and asserts nothing completes.
    fn assert_nothing_completes(&mut self, step_ns: u64) {
        for _ in 0..100 {
            let handed = self.queue.poll(self.now_ns, &mut |completion| {
                panic!("unexpected completion {completion:?}")
            });
            assert_eq!(handed, 0);
            self.now_ns += step_ns;
        }
    }

    fn path_state(&self, group: usize, position: usize) -> PathState {
        let status = self.device.map.status();
        status.groups[group].paths[position].state
    }
}

/// Each completion once, all Ok, and reads of block b return fill b.
fn assert_all_ok_once(done: &[Completion], count: u64) {
    let mut seen = HashMap::new();
    for completion in done {
        *seen.entry(completion.user_data).or_insert(0) += 1;
        assert_eq!(
            completion.result,
            Ok(()),
            "I/O {} failed",
            completion.user_data
        );
    }
    assert_eq!(seen.len() as u64, count, "every I/O completed");
    assert!(
        seen.values().all(|&times| times == 1),
        "an I/O completed twice"
    );
}

fn fill_of(block: u64) -> u8 {
    (block as u8).wrapping_mul(7).wrapping_add(1)
}

/// Writes every block, with `fault` applied to port `a` while the writes
/// are in flight, then reads everything back through port `b` alone.
fn write_with_fault_then_verify(fault: impl Fn(&Rig), options: MapOptions) -> Rig {
    let mut rig = Rig::new(&[&["a", "b"]], false, options);
    rig.port("a").set_latency_ns(10_000);
    rig.port("b").set_latency_ns(10_000);
    for block in 0..BLOCKS {
        rig.submit(block, Op::Write, block, fill_of(block));
    }
    fault(&rig);
    let done = rig.collect(BLOCKS as usize, 1_000);
    assert_all_ok_once(&done, BLOCKS);
    assert_eq!(rig.path_state(0, 0), PathState::Failed);
    assert_eq!(rig.path_state(0, 1), PathState::Active);
    // Read back through b only (a is failed), verifying every byte.
    for block in 0..BLOCKS {
        rig.submit(1000 + block, Op::Read, block, 0);
    }
    let reads = rig.collect(BLOCKS as usize, 1_000);
    assert_all_ok_once(&reads, BLOCKS);
    for completion in &reads {
        let block = completion.user_data - 1000;
        assert!(
            completion
                .buf
                .as_slice()
                .iter()
                .all(|&byte| byte == fill_of(block)),
            "block {block} reads back wrong"
        );
    }
    rig
}

#[test]
fn port_error_with_io_in_flight_fails_over() {
    let rig = write_with_fault_then_verify(
        |rig| rig.port("a").fail(PathOutcome::Path(PathError::Transport)),
        MapOptions::default(),
    );
    let status = rig.device.map.status();
    assert_eq!(
        status.groups[0].paths[0].last_error,
        Some(PathError::Transport)
    );
    assert_eq!(status.groups[0].paths[0].fail_count, 1);
    assert!(rig.queue.stats().retries >= 1);
}

#[test]
fn dropped_connection_with_io_in_flight_fails_over() {
    let rig = write_with_fault_then_verify(|rig| rig.port("a").disconnect(), MapOptions::default());
    let status = rig.device.map.status();
    assert_eq!(
        status.groups[0].paths[0].last_error,
        Some(PathError::ConnectionLost)
    );
}

#[test]
fn hung_port_is_failed_after_the_io_timeout() {
    let options = MapOptions {
        io_timeout_ns: Some(5_000_000),
        ..MapOptions::default()
    };
    let rig = write_with_fault_then_verify(|rig| rig.port("a").hang(), options);
    let status = rig.device.map.status();
    assert_eq!(
        status.groups[0].paths[0].last_error,
        Some(PathError::Timeout)
    );
    // The hung writes were aborted and never reach the disk, even once the
    // port heals: block contents stay what the retries wrote.
    rig.port("a").heal();
}

/// A medium error, and a reservation conflict (another host holds the
/// LUN's persistent reservation, which refuses every path of this one
/// alike), go back to the caller as they came, as dm's
/// `blk_path_error` has them: no path failed, no retry.
#[test]
fn target_errors_go_back_unchanged_and_keep_the_path() {
    for error in [TargetError::Medium, TargetError::ReservationConflict] {
        let mut rig = Rig::new(&[&["a", "b"]], false, MapOptions::default());
        rig.port("a").fail(PathOutcome::Target(error));
        rig.port("b").fail(PathOutcome::Target(error));
        for block in 0..4 {
            rig.submit(block, Op::Read, block, 0);
        }
        let done = rig.collect(4, 1_000);
        assert!(
            done.iter()
                .all(|completion| completion.result == Err(IoError::Target(error))),
            "{error}: {done:?}"
        );
        assert_eq!(rig.path_state(0, 0), PathState::Active, "{error}");
        assert_eq!(rig.path_state(0, 1), PathState::Active, "{error}");
        assert_eq!(rig.queue.stats().retries, 0, "{error}");
    }
}

/// A resource shortage (the kernel's ENOMEM, EBUSY, EAGAIN) retries the
/// I/O and fails no path: here on the other path while one stays busy,
/// and with both busy until the attempt limit ends it.
#[test]
fn a_busy_path_is_retried_and_kept() {
    let options = MapOptions {
        max_attempts: 4,
        ..MapOptions::default()
    };
    let mut rig = Rig::new(&[&["a", "b"]], false, options);
    rig.port("a").fail(PathOutcome::Busy);
    for block in 0..8 {
        rig.submit(block, Op::Write, block, fill_of(block));
    }
    assert_all_ok_once(&rig.collect(8, 1_000), 8);
    assert!(rig.queue.stats().busy > 0, "the busy path met I/O");
    assert_eq!(rig.path_state(0, 0), PathState::Active);
    assert_eq!(rig.path_state(0, 1), PathState::Active);
    rig.port("b").fail(PathOutcome::Busy);
    rig.submit(9, Op::Read, 0, 0);
    let done = rig.collect(1, 1_000);
    assert_eq!(done[0].result, Err(IoError::RetryLimit));
    assert_eq!(rig.path_state(0, 0), PathState::Active);
    assert_eq!(rig.path_state(0, 1), PathState::Active);
}

#[test]
fn no_path_without_queueing_fails_with_eio() {
    let mut rig = Rig::new(&[&["a"], &["b"]], false, MapOptions::default());
    rig.device
        .map
        .message(&Message::FailPath("memory:disk0#a".into()))
        .unwrap();
    rig.device
        .map
        .message(&Message::FailPath("memory:disk0#b".into()))
        .unwrap();
    rig.submit(1, Op::Read, 0, 0);
    let done = rig.collect(1, 1_000);
    assert_eq!(done[0].result, Err(IoError::NoPath));
    assert_eq!(IoError::NoPath.errno(), 5);
}

#[test]
fn queue_if_no_path_holds_io_until_a_path_returns() {
    let mut rig = Rig::new(&[&["a"], &["b"]], true, MapOptions::default());
    let map = std::sync::Arc::clone(&rig.device.map);
    map.message(&Message::FailPath("memory:disk0#a".into()))
        .unwrap();
    map.message(&Message::FailPath("memory:disk0#b".into()))
        .unwrap();
    assert!(
        map.status_line().contains("multipath 2 1 0"),
        "queue_io reported: {}",
        map.status_line()
    );
    rig.submit(1, Op::Write, 3, 9);
    rig.submit(2, Op::Flush, 0, 0);
    rig.assert_nothing_completes(1_000_000);
    assert_eq!(rig.queue.waiting_for_path(), 2);
    map.message(&Message::ReinstatePath("memory:disk0#b".into()))
        .unwrap();
    let done = rig.collect(2, 1_000);
    assert_all_ok_once(&done, 2);
    assert_eq!(
        rig.port("b").completed(),
        2,
        "served by the reinstated path"
    );
    assert_eq!(map.status().current_group, Some(2));
}

#[test]
fn fail_if_no_path_releases_held_io_with_eio() {
    let mut rig = Rig::new(&[&["a"]], true, MapOptions::default());
    let map = std::sync::Arc::clone(&rig.device.map);
    map.message(&Message::FailPath("memory:disk0#a".into()))
        .unwrap();
    rig.submit(1, Op::Read, 0, 0);
    rig.assert_nothing_completes(1_000);
    map.message(&Message::FailIfNoPath).unwrap();
    let done = rig.collect(1, 1_000);
    assert_eq!(done[0].result, Err(IoError::NoPath));
}

#[test]
fn queueing_is_bounded_by_the_no_path_timeout() {
    let options = MapOptions {
        no_path_timeout_ns: Some(50_000_000),
        ..MapOptions::default()
    };
    let mut rig = Rig::new(&[&["a"]], true, options);
    rig.device
        .map
        .message(&Message::FailPath("memory:disk0#a".into()))
        .unwrap();
    let start = rig.now_ns;
    rig.submit(1, Op::Read, 0, 0);
    let done = rig.collect(1, 1_000_000);
    assert_eq!(done[0].result, Err(IoError::NoPathTimeout));
    let waited = rig.now_ns - start;
    assert!(
        (50_000_000..=51_000_000).contains(&waited),
        "waited {waited} ns"
    );
}

#[test]
fn whole_group_failure_moves_io_to_the_next_group() {
    let mut rig = Rig::new(&[&["a", "b"], &["c"]], false, MapOptions::default());
    rig.port("a").fail(PathOutcome::Path(PathError::Transport));
    rig.port("b").fail(PathOutcome::Path(PathError::Unknown));
    for block in 0..8 {
        rig.submit(block, Op::Write, block, fill_of(block));
    }
    let done = rig.collect(8, 1_000);
    assert_all_ok_once(&done, 8);
    assert_eq!(rig.port("c").completed(), 8);
    let map = &rig.device.map;
    assert_eq!(map.status().current_group, Some(2));
    let line = map.status_line();
    assert!(
        line.contains(" E 0 2 0 memory:disk0#a F 1 memory:disk0#b F 1 A 0 1 0 memory:disk0#c A 0"),
        "{line}"
    );
}

#[test]
fn group_messages_follow_dm() {
    let rig = Rig::new(&[&["a"], &["b"], &["c"]], false, MapOptions::default());
    let map = &rig.device.map;
    assert_eq!(map.status().current_group, Some(1));
    map.message(&Message::DisableGroup(1)).unwrap();
    assert_eq!(map.status().current_group, Some(2));
    assert_eq!(map.status().groups[0].state, GroupState::Disabled);
    // switch_group re-enables every group and goes where it is told.
    map.message(&Message::SwitchGroup(3)).unwrap();
    assert_eq!(map.status().current_group, Some(3));
    assert_eq!(map.status().groups[0].state, GroupState::Enabled);
    // enable_group makes the map choose again, in priority order.
    map.message(&Message::EnableGroup(1)).unwrap();
    assert_eq!(map.status().current_group, Some(1));
    // A disabled group is still the last resort.
    map.message(&Message::DisableGroup(1)).unwrap();
    map.message(&Message::FailPath("memory:disk0#b".into()))
        .unwrap();
    map.message(&Message::FailPath("memory:disk0#c".into()))
        .unwrap();
    assert_eq!(map.status().current_group, Some(1));
    assert!(map.message(&Message::SwitchGroup(4)).is_err());
    assert!(map.message(&Message::FailPath("nope".into())).is_err());
}

#[test]
fn invalid_requests_complete_with_an_error_and_reach_no_path() {
    let mut rig = Rig::new(&[&["a"]], false, MapOptions::default());
    let io = Io::read(1, BLOCKS * u64::from(BLOCK), Buffer::zeroed(BLOCK as usize));
    rig.queue.submit(io, 0).unwrap();
    let io = Io {
        user_data: 2,
        op: Op::Write,
        offset: 0,
        len: BLOCK,
        buf: Buffer::zeroed(1),
        fua: false,
    };
    rig.queue.submit(io, 0).unwrap();
    let flush_with_length = Io {
        user_data: 3,
        op: Op::Flush,
        offset: 0,
        len: BLOCK,
        buf: Buffer::empty(),
        fua: false,
    };
    rig.queue.submit(flush_with_length, 0).unwrap();
    let done = rig.collect(3, 1_000);
    assert!(done
        .iter()
        .all(|completion| matches!(completion.result, Err(IoError::Invalid(_)))));
    // Control calls with a path index the map does not have change nothing.
    let map = &rig.device.map;
    assert!(!map.fail_path(99, PathError::Transport));
    assert!(!map.reinstate_path(99));
    map.set_access_state(99, mpio_core::path::AccessState::Standby);
    assert_eq!(map.status().path_failures, 0);
    assert_eq!(rig.queue.path_loads()[0].dispatched(), 0);
}

#[test]
fn a_full_queue_hands_the_io_back() {
    let transports = Transports::new();
    let device = transports
        .build(&table("disk1", &[&["a"]], false), MapOptions::default())
        .unwrap();
    let mut queue = device.queue(2, 0);
    let io = |user_data| Io {
        user_data,
        op: Op::Flush,
        offset: 0,
        len: 0,
        buf: Buffer::empty(),
        fua: false,
    };
    queue.submit(io(1), 0).unwrap();
    queue.submit(io(2), 0).unwrap();
    let refused = queue.submit(io(3), 0).unwrap_err();
    assert_eq!(refused.user_data, 3);
    assert_eq!(queue.in_flight(), 2);
}

#[test]
fn repeated_path_errors_hit_the_retry_limit() {
    let options = MapOptions {
        max_attempts: 3,
        ..MapOptions::default()
    };
    let mut rig = Rig::new(&[&["a", "b"]], false, options);
    let map = std::sync::Arc::clone(&rig.device.map);
    for port in ["a", "b"] {
        rig.port(port).fail(PathOutcome::Path(PathError::Transport));
        // One attempt per poll, so the paths can come back in between.
        rig.port(port).set_latency_ns(5_000);
    }
    rig.submit(1, Op::Read, 0, 0);
    // Reinstate paths as fast as they fail: a flapping pair.
    let mut done = Vec::new();
    for _ in 0..1000 {
        rig.queue
            .poll(rig.now_ns, &mut |completion| done.push(completion));
        if !done.is_empty() {
            break;
        }
        map.reinstate_path(0);
        map.reinstate_path(1);
        rig.now_ns += 1_000;
    }
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].result, Err(IoError::RetryLimit));
}

#[test]
fn status_renders_as_dm_and_json() {
    let rig = Rig::new(&[&["a", "b"]], true, MapOptions::default());
    let map = &rig.device.map;
    map.message(&Message::FailPath("memory:disk0#b".into()))
        .unwrap();
    assert_eq!(
        map.status_line(),
        "0 512 multipath 2 0 0 0 1 1 A 0 2 0 memory:disk0#a A 0 memory:disk0#b F 1"
    );
    let json = serde_json::to_value(map.status()).unwrap();
    assert_eq!(json["groups"][0]["paths"][1]["state"], "failed");
    assert_eq!(json["queue_if_no_path"], true);
    assert_eq!(json["current_group"], 1);
}
