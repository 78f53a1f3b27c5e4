//! The fast path allocates nothing: after a warm-up, thousands of I/Os
//! through a map of null paths (every selector), through a memory map
//! with a failover in the middle, through two io_uring file paths, and
//! through NBD connections to a real `nbdkit` make no heap allocation at
//! all.
//!
//! A counting global allocator counts, per thread, every allocation made
//! by the thread that drives the queue (a queue belongs to one thread), so
//! the test harness's own threads do not disturb the count.

// A global allocator is an `unsafe impl` by definition; this one only
// forwards to the system allocator.
#![allow(unsafe_code)]

mod support;

use mpio_core::io::{Buffer, Io, Op};
use mpio_core::map::MapOptions;
use mpio_core::queue::Queue;
use mpio_core::selector::SELECTOR_NAMES;
use mpio_core::table::Table;
use mpio_transport::{AnyQueue, Transports};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    // Const-initialised and without a destructor, so the allocator may
    // touch it at any time, even while the thread starts or ends.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_allocation() {
    ALLOCATIONS.with(|count| count.set(count.get() + 1));
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: forwards every call to the system allocator unchanged; only
// counts allocations on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const DEPTH: usize = 32;

/// Runs `count` 4K I/Os (reads and writes) through `queue`, keeping it
/// full; the buffers are made once up front and reused.
fn drive(queue: &mut Queue<AnyQueue>, buffers: &mut Vec<Buffer>, count: u64, now_ns: &mut u64) {
    let mut issued = 0;
    let mut completed = 0;
    let blocks = queue.map().size_bytes() / 4096;
    while completed < count {
        while issued < count {
            let Some(buf) = buffers.pop() else { break };
            let io = Io {
                user_data: issued,
                op: if issued % 3 == 0 { Op::Write } else { Op::Read },
                offset: (issued * 7 % blocks) * 4096,
                len: 4096,
                buf,
                fua: false,
            };
            queue
                .submit(io, *now_ns)
                .expect("room for a buffer we hold");
            issued += 1;
        }
        queue.poll(*now_ns, &mut |completion| {
            assert_eq!(completion.result, Ok(()));
            buffers.push(completion.buf);
            completed += 1;
        });
        *now_ns += 1_000;
    }
}

fn measure(label: &str, queue: &mut Queue<AnyQueue>, between: impl FnOnce()) {
    let mut buffers: Vec<Buffer> = (0..DEPTH).map(|_| Buffer::zeroed(4096)).collect();
    let mut now_ns = 1;
    drive(queue, &mut buffers, 1_000, &mut now_ns);
    between();
    drive(queue, &mut buffers, 1_000, &mut now_ns);
    let before = allocations();
    drive(queue, &mut buffers, 10_000, &mut now_ns);
    let allocations = allocations() - before;
    assert_eq!(
        allocations, 0,
        "{label}: {allocations} allocations in 10,000 I/Os"
    );
}

#[test]
fn steady_state_io_allocates_nothing() {
    // Canary: the counter sees a known allocation, so a zero below means
    // nothing was allocated, not that nothing was counted.
    let before = allocations();
    std::hint::black_box(Box::new([0u8; 64]));
    assert!(allocations() > before, "the counter counts");

    let transports = Transports::new();
    for selector in SELECTOR_NAMES {
        let path_args = if *selector == "io-affinity" { " 1" } else { "" };
        let mut text = format!(
            "0 16384 multipath 0 0 1 1 {selector} 0 8 {}",
            path_args.len() / 2
        );
        for path in 1..=8 {
            text.push_str(&format!(" null:8M#{path}{path_args}"));
        }
        let table = Table::parse(&text).unwrap();
        let device = transports.build(&table, MapOptions::default()).unwrap();
        let mut queue = device.queue(DEPTH, 0);
        measure(selector, &mut queue, || {});
    }

    // A memory map whose first port fails between warm-up and measurement:
    // the failover itself may allocate (a new snapshot), the I/O after it
    // may not.
    let table =
        Table::parse("0 16384 multipath 0 0 1 1 round-robin 0 2 0 memory:disk#a memory:disk#b")
            .unwrap();
    let device = transports.build(&table, MapOptions::default()).unwrap();
    let mut queue = device.queue(DEPTH, 0);
    let port = transports.port("disk", "a");
    measure("memory with failover", &mut queue, || {
        port.fail(mpio_core::io::PathOutcome::Path(
            mpio_core::io::PathError::Transport,
        ));
    });
    assert!(device.map.paths()[0].is_failed());

    // Two file paths to one file, through io_uring (the kernel's own
    // memory is not ours to count).
    let dir = tempfile::TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("lun");
    std::fs::write(&file, vec![0u8; 8 << 20]).unwrap();
    let word = format!("file:{}", file.display());
    let table = Table::parse(&format!(
        "0 16384 multipath 0 0 1 1 round-robin 0 2 0 {word}#a {word}#b"
    ))
    .unwrap();
    let device = transports.build(&table, MapOptions::default()).unwrap();
    let mut queue = device.queue(DEPTH, 0);
    measure("file", &mut queue, || {});
}

#[test]
fn steady_state_nbd_io_allocates_nothing() {
    let dir = support::TempDir::new("nbd-no-alloc");
    let server = support::Server::nbdkit(&dir.join("m.sock"), &["memory", "size=8M"]);
    let text = format!(
        "0 16384 multipath 0 0 1 1 round-robin 0 2 0 {}#a {}#b",
        server.uri(),
        server.uri()
    );
    let table = Table::parse(&text).unwrap();
    let device = Transports::new()
        .build(&table, MapOptions::default())
        .unwrap();
    let mut queue = device.queue(DEPTH, 0);
    measure("nbd", &mut queue, || {});
}
