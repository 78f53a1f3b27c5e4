//! Live reload over memory ports: a device takes a new table (another
//! selector, paths added and removed) while I/O is in flight or waiting,
//! and every I/O completes exactly once, on the map it belongs to, with
//! the data the caller wrote.

use mpio_core::io::{Buffer, Completion, Io, Op, PathError};
use mpio_core::map::MapOptions;
use mpio_core::status::PathState;
use mpio_core::table::Table;
use mpio_transport::{device_queue, DeviceQueue, DeviceSlot, Transports};
use std::collections::HashMap;
use std::sync::Arc;

const BLOCK: u32 = 4096;
const BLOCKS: u64 = 64;

/// A one-group table over memory disk `disk0` with `selector` and the
/// given ports.
fn table(selector: &str, ports: &[&str], queue_if_no_path: bool) -> Table {
    let sectors = BLOCKS * u64::from(BLOCK) / 512;
    let features = if queue_if_no_path {
        "1 queue_if_no_path"
    } else {
        "0"
    };
    let mut text = format!(
        "0 {sectors} multipath {features} 0 1 1 {selector} 0 {} 0",
        ports.len()
    );
    for port in ports {
        text.push_str(&format!(" memory:disk0#{port}"));
    }
    Table::parse(&text).unwrap()
}

struct Rig {
    transports: Transports,
    slot: Arc<DeviceSlot>,
    queue: DeviceQueue,
    now_ns: u64,
    done: Vec<Completion>,
}

impl Rig {
    fn new(table: &Table) -> Rig {
        let transports = Transports::new();
        let options = MapOptions {
            io_timeout_ns: None,
            ..MapOptions::default()
        };
        let slot = transports.build(table, options).unwrap().into_slot();
        let queue = device_queue(&slot, 64, 0);
        Rig {
            transports,
            slot,
            queue,
            now_ns: 1,
            done: Vec::new(),
        }
    }

    fn write(&mut self, user_data: u64, block: u64, fill: u8) {
        let mut buf = Buffer::zeroed(BLOCK as usize);
        buf.as_mut_slice().fill(fill);
        self.submit(user_data, Op::Write, block, buf);
    }

    fn read(&mut self, user_data: u64, block: u64) {
        self.submit(user_data, Op::Read, block, Buffer::zeroed(BLOCK as usize));
    }

    fn submit(&mut self, user_data: u64, op: Op, block: u64, buf: Buffer) {
        let io = Io {
            user_data,
            op,
            offset: block * u64::from(BLOCK),
            len: BLOCK,
            buf,
            fua: false,
        };
        self.queue.submit(io, self.now_ns).unwrap();
    }

    fn poll(&mut self) {
        let done = &mut self.done;
        self.queue
            .poll(self.now_ns, &mut |completion| done.push(completion));
        self.now_ns += 1_000;
    }

    /// Polls until `count` completions in all arrived (bounded).
    fn collect(&mut self, count: usize) {
        for _ in 0..10_000 {
            if self.done.len() >= count {
                break;
            }
            self.poll();
        }
        assert_eq!(self.done.len(), count, "completions after the bound");
    }

    fn reload(&self, table: &Table) {
        self.transports.reload(&self.slot, table).unwrap();
    }

    fn port(&self, port: &str) -> Arc<mpio_transport::PortControl> {
        self.transports.port("disk0", port)
    }

    /// Every completion once and Ok; reads carry their block's fill.
    fn assert_once_ok(&self, reads: &HashMap<u64, u8>) {
        let mut seen = HashMap::new();
        for completion in &self.done {
            *seen.entry(completion.user_data).or_insert(0) += 1;
            assert!(completion.result.is_ok(), "{completion:?}");
            if let Some(&fill) = reads.get(&completion.user_data) {
                assert!(
                    completion.buf.as_slice().iter().all(|&byte| byte == fill),
                    "read {} returned other data",
                    completion.user_data
                );
            }
        }
        assert!(seen.values().all(|&count| count == 1), "{seen:?}");
    }
}

#[test]
fn reload_swaps_the_selector_and_adds_a_path_with_io_in_flight() {
    let mut rig = Rig::new(&table("round-robin", &["a"], false));
    // Writes held by a hung port when the reload comes.
    rig.port("a").hang();
    for block in 0..8 {
        rig.write(block, block, block as u8 + 1);
    }
    rig.poll();
    assert!(rig.done.is_empty());
    rig.reload(&table("queue-length", &["a", "b"], false));
    // New I/O goes to the new map (queue-length over a and b): what it
    // sends to b completes while a still hangs, and the old writes stay
    // on a.
    for block in 8..16 {
        rig.write(block, block, block as u8 + 1);
    }
    for _ in 0..100 {
        rig.poll();
    }
    let through_b = rig.slot.map().status().groups[0].paths[1].name.clone();
    assert_eq!(through_b, "memory:disk0#b");
    assert!(!rig.done.is_empty(), "b serves the new map");
    assert!(rig.done.iter().all(|completion| completion.user_data >= 8));
    assert_eq!(rig.queue.draining(), 1, "the old map's queue drains");
    assert_eq!(rig.slot.map().status().groups[0].selector, "queue-length");
    // a heals: the old writes complete where they were, exactly once.
    rig.port("a").heal();
    rig.collect(16);
    assert_eq!(rig.queue.draining(), 0, "the drained queue is dropped");
    let mut reads = HashMap::new();
    for block in 0..16 {
        rig.read(100 + block, block);
        reads.insert(100 + block, block as u8 + 1);
    }
    rig.collect(32);
    rig.assert_once_ok(&reads);
}

#[test]
fn reload_removes_a_path_whose_io_finishes_on_the_old_map() {
    let mut rig = Rig::new(&table("round-robin", &["a", "b"], false));
    rig.port("b").hang();
    for block in 0..4 {
        rig.write(block, block, 0x40 + block as u8);
    }
    rig.poll();
    // Round-robin sent half to b, which holds them.
    let held = 4 - rig.done.len();
    assert!(held > 0);
    rig.reload(&table("round-robin", &["a"], false));
    for block in 4..8 {
        rig.write(block, block, 0x40 + block as u8);
    }
    rig.collect(8 - held);
    assert_eq!(rig.slot.map().paths().len(), 1, "b is gone from the map");
    // b comes back long enough to finish what it holds.
    rig.port("b").heal();
    rig.collect(8);
    assert_eq!(rig.queue.draining(), 0);
    let mut reads = HashMap::new();
    for block in 0..8 {
        rig.read(100 + block, block);
        reads.insert(100 + block, 0x40 + block as u8);
    }
    rig.collect(16);
    rig.assert_once_ok(&reads);
}

#[test]
fn a_path_error_on_the_old_map_fails_the_path_in_the_new_one() {
    use mpio_core::io::PathOutcome;
    let mut rig = Rig::new(&table("round-robin", &["a", "b"], false));
    rig.port("a").hang();
    for block in 0..4 {
        rig.write(block, block, 0x20 + block as u8);
    }
    rig.poll();
    rig.reload(&table("round-robin", &["a", "b"], false));
    rig.poll();
    assert_eq!(rig.queue.draining(), 1);
    // a's held writes end in a path error on the old map, and are retried
    // on the old map's b; the new map learns that a failed.
    rig.port("a").fail(PathOutcome::Path(PathError::Transport));
    rig.collect(4);
    let status = rig.slot.map().status();
    assert_eq!(status.groups[0].paths[0].state, PathState::Failed);
    assert_eq!(
        status.groups[0].paths[0].last_error,
        Some(PathError::Transport)
    );
    assert_eq!(status.groups[0].paths[1].state, PathState::Active);
    let mut reads = HashMap::new();
    for block in 0..4 {
        rig.read(100 + block, block);
        reads.insert(100 + block, 0x20 + block as u8);
    }
    rig.collect(8);
    rig.assert_once_ok(&reads);
}

#[test]
fn io_waiting_for_a_path_moves_to_the_reloaded_map() {
    let mut rig = Rig::new(&table("round-robin", &["a"], true));
    rig.slot.map().fail_path(0, PathError::Transport);
    for block in 0..4 {
        rig.write(block, block, 0x70 + block as u8);
    }
    rig.poll();
    assert!(rig.done.is_empty());
    assert_eq!(rig.queue.current().waiting_for_path(), 4);
    // The new table brings a path the old one did not have.
    rig.reload(&table("round-robin", &["a", "b"], true));
    rig.collect(4);
    assert_eq!(rig.queue.draining(), 0, "nothing was left on the old map");
    let mut reads = HashMap::new();
    for block in 0..4 {
        rig.read(100 + block, block);
        reads.insert(100 + block, 0x70 + block as u8);
    }
    rig.collect(8);
    rig.assert_once_ok(&reads);
}

#[test]
fn reload_keeps_a_failed_path_failed_and_its_count() {
    let rig = Rig::new(&table("round-robin", &["a", "b"], false));
    let old = rig.slot.map();
    old.fail_path(1, PathError::ConnectionLost);
    old.reinstate_path(1);
    old.fail_path(1, PathError::Timeout);
    rig.reload(&table("service-time", &["c", "b", "a"], false));
    let status = rig.slot.map().status();
    let by_name: HashMap<&str, (PathState, u32)> = status.groups[0]
        .paths
        .iter()
        .map(|path| (path.name.as_str(), (path.state, path.fail_count)))
        .collect();
    assert_eq!(by_name["memory:disk0#a"], (PathState::Active, 0));
    assert_eq!(by_name["memory:disk0#b"], (PathState::Failed, 2));
    assert_eq!(by_name["memory:disk0#c"], (PathState::Active, 0));
    assert_eq!(
        status.groups[0].paths[1].last_error,
        Some(PathError::Timeout)
    );
}

#[test]
fn a_bad_table_leaves_the_device_as_it_was() {
    let rig = Rig::new(&table("round-robin", &["a"], false));
    let bad = Table::parse("0 8 multipath 0 0 1 1 round-robin 0 1 0 nvme:x").unwrap();
    assert!(rig.transports.reload(&rig.slot, &bad).is_err());
    assert_eq!(rig.slot.epoch(), 0);
    assert_eq!(rig.slot.map().path_name(0), "memory:disk0#a");
}

/// Two I/O threads write and read back their own blocks round after
/// round while a third reloads the device over and over (other selectors,
/// other path sets, always one path at least): no I/O fails, none
/// completes twice, every read returns the round's data.
#[test]
fn threads_keep_their_data_across_many_reloads() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const THREADS: u64 = 2;
    const PER_THREAD: u64 = BLOCKS / THREADS;
    const ROUNDS: u64 = 400;
    let tables = [
        table("round-robin", &["a", "b"], true),
        table("queue-length", &["b", "c"], true),
        table("service-time", &["c"], true),
        table("historical-service-time", &["a", "b", "c"], true),
        table("queue-depth", &["a"], true),
    ];
    let transports = Arc::new(Transports::new());
    let slot = transports
        .build(&tables[0], MapOptions::default())
        .unwrap()
        .into_slot();
    let stop = Arc::new(AtomicBool::new(false));
    let reloader = {
        let (transports, slot, stop) = (
            Arc::clone(&transports),
            Arc::clone(&slot),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            let mut reloads = 0usize;
            while !stop.load(Ordering::Relaxed) {
                transports
                    .reload(&slot, &tables[(reloads + 1) % tables.len()])
                    .unwrap();
                reloads += 1;
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            reloads
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let slot = Arc::clone(&slot);
            std::thread::spawn(move || {
                let mut queue = device_queue(&slot, 16, 0);
                let mut map = Arc::as_ptr(queue.current().map());
                let mut maps = 1;
                let mut now_ns = 1;
                let first = thread * PER_THREAD;
                for round in 0..ROUNDS {
                    let fill = |block: u64| (block * 7 + round * 13) as u8;
                    for op in [Op::Write, Op::Read] {
                        let mut seen = std::collections::HashSet::new();
                        let mut check = |completion: Completion| {
                            assert!(completion.result.is_ok(), "{completion:?}");
                            assert!(seen.insert(completion.user_data), "completed twice");
                            if op == Op::Read {
                                let expected = fill(completion.user_data);
                                assert!(completion.buf.as_slice().iter().all(|&b| b == expected));
                            }
                        };
                        let deadline =
                            std::time::Instant::now() + std::time::Duration::from_secs(60);
                        let mut next = first;
                        while next < first + PER_THREAD || queue.in_flight() > 0 {
                            assert!(
                                std::time::Instant::now() < deadline,
                                "round {round} stalled"
                            );
                            while next < first + PER_THREAD {
                                let mut buf = Buffer::zeroed(BLOCK as usize);
                                if op == Op::Write {
                                    buf.as_mut_slice().fill(fill(next));
                                }
                                let io = Io {
                                    user_data: next,
                                    op,
                                    offset: next * u64::from(BLOCK),
                                    len: BLOCK,
                                    buf,
                                    fua: false,
                                };
                                if queue.submit(io, now_ns).is_err() {
                                    break;
                                }
                                next += 1;
                            }
                            queue.poll(now_ns, &mut check);
                            now_ns += 1_000;
                            if Arc::as_ptr(queue.current().map()) != map {
                                map = Arc::as_ptr(queue.current().map());
                                maps += 1;
                            }
                        }
                        assert_eq!(seen.len() as u64, PER_THREAD);
                    }
                }
                assert_eq!(queue.in_flight(), 0);
                maps
            })
        })
        .collect();
    for worker in workers {
        let maps = worker.join().unwrap();
        assert!(maps > 1, "the worker moved to reloaded maps ({maps})");
    }
    stop.store(true, Ordering::Relaxed);
    let reloads = reloader.join().unwrap();
    assert!(reloads > 0, "the device was reloaded under the workers");
    eprintln!("{reloads} reloads");
}
