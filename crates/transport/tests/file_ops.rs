//! The `file` transport's non-data operations and its error classes: flush,
//! discard and write-zeroes where the file system has them, a target error
//! (not a path failure) where it does not, a malformed O_DIRECT request, a
//! file that shrank under the map, and `abort`'s promise.

mod file_common;

use file_common::*;
use mpio_core::io::{Buffer, IoError, Op, PathOutcome, TargetError};
use mpio_core::map::MapOptions;
use mpio_core::queue::{PathIo, PathQueue};
use mpio_core::status::PathState;
use mpio_transport::Transports;

const BYTES: u64 = 1 << 20;

fn device(word: &str) -> mpio_transport::Device {
    Transports::new()
        .build(&table(BYTES, &[word.to_string()]), MapOptions::default())
        .unwrap()
}

fn block_of(data: &[u8], block: u64) -> &[u8] {
    &data[(block * u64::from(BLOCK)) as usize..][..BLOCK as usize]
}

#[test]
fn flush_discard_and_write_zeroes_on_a_disk_file() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let device = device(&format!("file:{}", file.display()));
    let mut queue = device.queue(8, 0);
    let block = u64::from(BLOCK);
    let ios = vec![
        io(1, Op::Write, 0, filled(0xAA)),
        io(2, Op::Write, block, filled(0xBB)),
        io(3, Op::Write, 2 * block, filled(0xCC)),
    ];
    for completion in run(&mut queue, ios) {
        assert_eq!(completion.result, Ok(()));
    }
    let ios = vec![
        io(4, Op::Discard, block, Buffer::empty()),
        io(5, Op::WriteZeroes, 2 * block, Buffer::empty()),
        io(6, Op::Flush, 0, Buffer::empty()),
    ];
    for completion in run(&mut queue, ios) {
        assert_eq!(completion.result, Ok(()), "op {}", completion.user_data);
    }
    let data = read_through(&device.paths[0], 4 * block);
    assert!(
        block_of(&data, 0).iter().all(|&byte| byte == 0xAA),
        "untouched"
    );
    assert!(
        block_of(&data, 1).iter().all(|&byte| byte == 0),
        "discarded: a hole"
    );
    assert!(block_of(&data, 2).iter().all(|&byte| byte == 0), "zeroed");
    assert!(
        block_of(&data, 3)
            .iter()
            .enumerate()
            .all(|(at, &byte)| byte == pattern(3 * block + at as u64)),
        "beyond the ranges: the original pattern"
    );
}

#[test]
fn fua_writes_discards_and_write_zeroes_complete_and_land() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let device = device(&format!("file:{}", file.display()));
    let mut queue = device.queue(8, 0);
    let block = u64::from(BLOCK);
    let mut ios = vec![
        io(1, Op::Write, 0, filled(0x11)),
        io(2, Op::Discard, block, Buffer::empty()),
        io(3, Op::WriteZeroes, 2 * block, Buffer::empty()),
    ];
    for io in &mut ios {
        io.fua = true;
    }
    for completion in run(&mut queue, ios) {
        assert_eq!(completion.result, Ok(()), "op {}", completion.user_data);
    }
    let data = read_through(&device.paths[0], 3 * block);
    assert!(block_of(&data, 0).iter().all(|&byte| byte == 0x11));
    assert!(block_of(&data, 1).iter().all(|&byte| byte == 0));
    assert!(block_of(&data, 2).iter().all(|&byte| byte == 0));
}

#[test]
fn an_operation_the_file_system_lacks_is_a_target_error_not_a_path_failure() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: no /dev/shm (tmpfs) on this machine");
        return;
    }
    let dir = tempfile::TempDir::new_in(shm).unwrap();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let device = device(&format!("file:{}?direct=0", file.display()));
    let mut queue = device.queue(4, 0);
    // tmpfs punches holes but has no FALLOC_FL_ZERO_RANGE.
    let done = run(&mut queue, vec![io(1, Op::WriteZeroes, 0, Buffer::empty())]);
    assert_eq!(
        done[0].result,
        Err(IoError::Target(TargetError::NotSupported))
    );
    let done = run(&mut queue, vec![io(2, Op::Discard, 0, Buffer::empty())]);
    assert_eq!(done[0].result, Ok(()));
    let status = device.map.status();
    assert_eq!(status.groups[0].paths[0].state, PathState::Active);
    assert_eq!(status.path_failures, 0);
}

#[test]
fn a_misaligned_direct_read_is_the_callers_error() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let device = device(&format!("file:{}", file.display()));
    let mut queue = device.queue(4, 0);
    // No block device has 1-byte sectors: O_DIRECT answers EINVAL.
    let done = run(
        &mut queue,
        vec![io(1, Op::Read, 1, Buffer::zeroed(BLOCK as usize))],
    );
    assert_eq!(done[0].result, Err(IoError::Target(TargetError::Invalid)));
    assert_eq!(device.map.status().path_failures, 0);
}

#[test]
fn a_file_that_shrank_under_the_map_reads_out_of_range() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let device = device(&format!("file:{}", file.display()));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(BYTES / 2)
        .unwrap();
    let mut queue = device.queue(4, 0);
    let done = run(
        &mut queue,
        vec![io(
            1,
            Op::Read,
            BYTES - u64::from(BLOCK),
            Buffer::zeroed(BLOCK as usize),
        )],
    );
    assert_eq!(
        done[0].result,
        Err(IoError::Target(TargetError::OutOfRange))
    );
    let done = run(
        &mut queue,
        vec![io(2, Op::Read, 0, Buffer::zeroed(BLOCK as usize))],
    );
    assert_eq!(done[0].result, Ok(()), "what is left still reads");
}

#[test]
fn abort_never_takes_back_what_the_kernel_holds() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let device = device(&format!("file:{}", file.display()));
    let mut queue = device.paths[0].open(4, None);
    queue.submit(
        PathIo {
            tag: 7,
            op: Op::Write,
            offset: 0,
            len: BLOCK,
            buf: filled(0x5A),
            fua: false,
        },
        0,
    );
    assert!(
        queue.abort(7).is_none(),
        "a pushed write may land: not abortable"
    );
    assert!(queue.abort(8).is_none(), "unknown tag");
    queue.submit(
        PathIo {
            tag: 9,
            op: Op::Flush,
            offset: 0,
            len: 0,
            buf: Buffer::empty(),
            fua: false,
        },
        0,
    );
    // The write and the flush both come back through poll, in either order.
    let mut tags = Vec::new();
    let mut done = Vec::new();
    let start = std::time::Instant::now();
    while tags.len() < 2 {
        queue.poll(0, &mut done);
        tags.extend(done.drain(..).map(|completion| {
            assert_eq!(completion.outcome, PathOutcome::Ok);
            completion.tag
        }));
        assert!(start.elapsed() < DEADLINE);
        std::thread::yield_now();
    }
    tags.sort();
    assert_eq!(tags, [7, 9]);
    let data = read_through(&device.paths[0], u64::from(BLOCK));
    assert!(data.iter().all(|&byte| byte == 0x5A), "the write landed");
}

#[test]
fn dropping_a_queue_with_io_in_flight_gives_every_buffer_back_first() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let device = device(&format!("file:{}", file.display()));
    let mut queue = device.paths[0].open(64, None);
    for tag in 0..64u64 {
        queue.submit(
            PathIo::read(tag, tag * u64::from(BLOCK), Buffer::zeroed(BLOCK as usize)),
            0,
        );
    }
    // Enter the kernel once, so it holds the reads, then drop the queue:
    // the drop waits for the kernel to finish with the buffers before they
    // are freed (a use-after-free here shows as corrupted heap or a crash).
    let mut done = Vec::new();
    queue.poll(0, &mut done);
    let start = std::time::Instant::now();
    drop(queue);
    assert!(start.elapsed() < DEADLINE);
    // The file is untouched by all that and reads as before.
    let data = read_through(&device.paths[0], BYTES);
    assert!(data
        .iter()
        .enumerate()
        .all(|(at, &byte)| byte == pattern(at as u64)));
}

#[test]
fn more_io_than_the_ring_holds_waits_its_turn() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let device = device(&format!("file:{}", file.display()));
    // A ring of 4 entries (8 completions) given 64 reads at once.
    let mut queue = device.paths[0].open(4, None);
    for tag in 0..64u64 {
        queue.submit(
            PathIo::read(tag, tag * u64::from(BLOCK), Buffer::zeroed(BLOCK as usize)),
            0,
        );
    }
    let mut done = Vec::new();
    let start = std::time::Instant::now();
    while done.len() < 64 {
        queue.poll(0, &mut done);
        assert!(start.elapsed() < DEADLINE, "{} of 64 completed", done.len());
        std::thread::yield_now();
    }
    done.sort_by_key(|completion| completion.tag);
    for (tag, completion) in done.iter().enumerate() {
        assert_eq!(completion.tag, tag as u64);
        assert_eq!(completion.outcome, PathOutcome::Ok);
        let offset = tag as u64 * u64::from(BLOCK);
        assert!(completion
            .buf
            .as_slice()
            .iter()
            .enumerate()
            .all(|(at, &byte)| byte == pattern(offset + at as u64)));
    }
}
