//! Data through several `file` paths to the same file: written through the
//! map, read back byte-exact through each path alone, also while one path
//! is revoked (the kernel fails its I/O) and after it is restored.

mod file_common;

use file_common::*;
use mpio_core::io::{Op, PathError};
use mpio_core::map::MapOptions;
use mpio_core::status::PathState;
use mpio_transport::Transports;

const BYTES: u64 = 1 << 20;
const BLOCKS: u64 = BYTES / BLOCK as u64;

/// What the tests write at block `block` in round `round`.
fn fill(round: u8, block: u64) -> u8 {
    round.wrapping_mul(31).wrapping_add(block as u8) | 1
}

fn expected(round: u8) -> Vec<u8> {
    (0..BLOCKS)
        .flat_map(|block| std::iter::repeat_n(fill(round, block), BLOCK as usize))
        .collect()
}

fn write_all(round: u8) -> Vec<mpio_core::io::Io> {
    let mut ios: Vec<_> = (0..BLOCKS)
        .map(|block| {
            io(
                block,
                Op::Write,
                block * u64::from(BLOCK),
                filled(fill(round, block)),
            )
        })
        .collect();
    ios.push(io(BLOCKS, Op::Flush, 0, mpio_core::io::Buffer::empty()));
    ios
}

#[test]
fn writes_through_two_paths_read_back_byte_exact_through_each() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let word = format!("file:{}", file.display());
    let transports = Transports::new();
    let device = transports
        .build(
            &table(BYTES, &[format!("{word}#a"), format!("{word}#b")]),
            MapOptions::default(),
        )
        .unwrap();
    // The pattern written before the map opened reads back through it.
    assert_eq!(
        read_through(&device.paths[1], BYTES),
        (0..BYTES).map(pattern).collect::<Vec<_>>()
    );
    let mut queue = device.queue(32, 0);
    for completion in run(&mut queue, write_all(1)) {
        assert_eq!(completion.result, Ok(()), "I/O {}", completion.user_data);
    }
    let stats = queue.path_loads();
    assert!(
        stats.iter().all(|path| path.dispatched() > BLOCKS / 4),
        "round-robin used both paths: {stats:?}"
    );
    for handle in &device.paths {
        assert!(
            read_through(handle, BYTES) == expected(1),
            "path reads back what the map wrote"
        );
    }
    assert_eq!(
        std::fs::read(&file).unwrap(),
        expected(1),
        "the file holds it too"
    );
}

/// dm's path word for a device or file, its bare path, is a `file:`
/// path: a `dmsetup table` line serves as it is, and status names the
/// path by the word.
#[test]
fn a_bare_absolute_path_is_a_file_path() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let word = file.display().to_string();
    let device = Transports::new()
        .build(
            &table(BYTES, std::slice::from_ref(&word)),
            MapOptions::default(),
        )
        .unwrap();
    let mut queue = device.queue(32, 0);
    for completion in run(&mut queue, write_all(4)) {
        assert_eq!(completion.result, Ok(()), "I/O {}", completion.user_data);
    }
    assert_eq!(std::fs::read(&file).unwrap(), expected(4));
    assert_eq!(device.map.status().groups[0].paths[0].name, word);
}

#[test]
fn a_revoked_path_fails_over_and_returns_after_restore() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let word = format!("file:{}", file.display());
    let transports = Transports::new();
    let device = transports
        .build(
            &table(BYTES, &[format!("{word}#a"), format!("{word}#b")]),
            MapOptions::default(),
        )
        .unwrap();
    let mut queue = device.queue(32, 0);
    file_of(&device.paths[0]).revoke();
    for completion in run(&mut queue, write_all(2)) {
        assert_eq!(completion.result, Ok(()), "I/O {}", completion.user_data);
    }
    let status = device.map.status();
    let revoked = &status.groups[0].paths[0];
    assert_eq!(revoked.state, PathState::Failed);
    assert_eq!(
        revoked.last_error,
        Some(PathError::ConnectionLost),
        "the kernel's EBADF"
    );
    assert_eq!(status.groups[0].paths[1].state, PathState::Active);
    assert!(
        queue.stats().retries > 0,
        "I/O sent to the revoked path was retried"
    );
    assert!(read_through(&device.paths[1], BYTES) == expected(2));

    file_of(&device.paths[0]).restore();
    assert!(device.map.reinstate_path(0));
    for completion in run(&mut queue, write_all(3)) {
        assert_eq!(completion.result, Ok(()), "I/O {}", completion.user_data);
    }
    assert_eq!(
        device.map.status().groups[0].paths[0].state,
        PathState::Active
    );
    for handle in &device.paths {
        assert!(
            read_through(handle, BYTES) == expected(3),
            "both paths read the newest data"
        );
    }
}

#[test]
fn several_threads_share_the_paths() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", BYTES);
    let word = format!("file:{}", file.display());
    let transports = Transports::new();
    let device = transports
        .build(
            &table(BYTES, &[format!("{word}#a"), format!("{word}#b")]),
            MapOptions::default(),
        )
        .unwrap();
    // Each thread writes its own half of the blocks through its own queue
    // (its own rings).
    std::thread::scope(|scope| {
        for half in 0..2u64 {
            let device = &device;
            scope.spawn(move || {
                let mut queue = device.queue(16, half as u32);
                let ios = (0..BLOCKS)
                    .filter(|block| block % 2 == half)
                    .map(|block| {
                        io(
                            block,
                            Op::Write,
                            block * u64::from(BLOCK),
                            filled(fill(4, block)),
                        )
                    })
                    .collect();
                for completion in run(&mut queue, ios) {
                    assert_eq!(completion.result, Ok(()));
                }
            });
        }
    });
    for handle in &device.paths {
        assert!(read_through(handle, BYTES) == expected(4));
    }
}
