//! Opening `file` paths: O_DIRECT refused is a clear error and `direct=0`
//! is the explicit way to buffered I/O, and a non-storage file is refused;
//! a file smaller than the map or missing is a path that cannot serve yet,
//! failed with its reason, and opens once it is there and holds the map.

mod file_common;

use file_common::*;
use mpio_core::io::Op;
use mpio_core::map::MapOptions;
use mpio_transport::FileError;
use mpio_transport::{SetupError, Transports};

fn build(bytes: u64, word: &str) -> Result<mpio_transport::Device, SetupError> {
    Transports::new().build(&table(bytes, &[word.to_string()]), MapOptions::default())
}

#[test]
fn o_direct_refusal_is_a_clear_error_and_direct0_opts_into_buffered() {
    // procfs refuses O_DIRECT at open (EINVAL), the way tmpfs did before
    // Linux 6.6 and other page-cache-only file systems still do.
    let word = "file:/proc/self/comm";
    let error = build(1 << 20, word).unwrap_err();
    assert!(
        matches!(
            &error,
            SetupError::File {
                source: FileError::DirectRefused { .. },
                ..
            }
        ),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(word) && text.contains("O_DIRECT") && text.contains("?direct=0"),
        "{text}"
    );
    // Asked for buffered I/O, the same file opens, and cannot serve for
    // what it is: far smaller than the map.
    let device = build(1 << 20, "file:/proc/self/comm?direct=0").unwrap();
    assert_eq!(
        unready(&device),
        ["it holds 0 bytes but the map needs 1048576"]
    );
}

/// Why each path of `device` cannot serve, in map order.
fn unready(device: &mpio_transport::Device) -> Vec<String> {
    device.unready_paths().map(|(_, reason)| reason).collect()
}

/// Submits probe reads to `handle`'s own queue until one succeeds: each
/// submission to a path that is not open has it opened again in the
/// background, and the read after it opened goes through. Bounded by
/// [`DEADLINE`]; returns how many reads failed first.
fn read_until_open(handle: &mpio_transport::PathHandle) -> u32 {
    let mut queue = handle.open(1, None);
    let started = std::time::Instant::now();
    let mut failed = 0;
    loop {
        let read = mpio_core::queue::PathIo::read(0, 0, filled(0));
        let completion = run_path(&mut queue, read);
        if completion.outcome == mpio_core::io::PathOutcome::Ok {
            return failed;
        }
        assert_eq!(
            completion.outcome,
            mpio_core::io::PathOutcome::Path(mpio_core::io::PathError::ConnectionLost),
            "a path not open yet loses its I/O as a lost connection"
        );
        failed += 1;
        assert!(
            started.elapsed() < DEADLINE,
            "the path did not open within {DEADLINE:?}: {:?}",
            handle.unready()
        );
        // Wait for the background attempt this read started to end, not
        // for a time: the next read then starts another or finds it open.
        while file_of(handle).is_opening() {
            assert!(started.elapsed() < DEADLINE, "an open attempt hangs");
            std::thread::yield_now();
        }
    }
}

#[test]
fn buffered_fallback_carries_data_on_tmpfs() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: no /dev/shm (tmpfs) on this machine");
        return;
    }
    let dir = tempfile::TempDir::new_in(shm).unwrap();
    let file = pattern_file(dir.path(), "lun", 1 << 20);
    let device = build(1 << 20, &format!("file:{}?direct=0", file.display())).unwrap();
    let mut queue = device.queue(8, 0);
    let ios = (0..8u64)
        .map(|block| {
            io(
                block,
                Op::Write,
                block * u64::from(BLOCK),
                filled(block as u8 + 1),
            )
        })
        .collect();
    for completion in run(&mut queue, ios) {
        assert_eq!(completion.result, Ok(()));
    }
    let data = read_through(&device.paths[0], 8 * u64::from(BLOCK));
    for block in 0..8usize {
        let bytes = &data[block * BLOCK as usize..][..BLOCK as usize];
        assert!(
            bytes.iter().all(|&byte| byte == block as u8 + 1),
            "block {block}"
        );
    }
}

#[test]
fn a_file_smaller_than_the_map_is_a_failed_path_until_it_holds_the_map() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "small", 1 << 20);
    let word = format!("file:{}", file.display());
    let device = build(2 << 20, &word).unwrap();
    let reasons: Vec<(&str, String)> = device.unready_paths().collect();
    assert_eq!(
        reasons,
        [(
            word.as_str(),
            "it holds 1048576 bytes but the map needs 2097152".to_string()
        )]
    );
    assert!(device.map.paths()[0].is_failed(), "failed, not the map");
    // The same file is fine for a map of its size or smaller.
    assert!(unready(&build(1 << 20, &word).unwrap()).is_empty());
    assert!(unready(&build(512 << 10, &word).unwrap()).is_empty());
    // Grown to the map's size, it opens at the next attempt and serves.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    read_until_open(&device.paths[0]);
    assert!(unready(&device).is_empty());
}

/// A path whose file is missing when its map is built starts failed,
/// with why, while the map serves through its other path; once the file
/// is there, its queues (opened before) read through it.
#[test]
fn a_missing_file_is_a_failed_path_until_it_appears() {
    let dir = direct_dir();
    let present = pattern_file(dir.path(), "a", 1 << 20);
    let missing = dir.path().join("b");
    let words = [
        format!("file:{}", present.display()),
        format!("file:{}", missing.display()),
    ];
    let device = Transports::new()
        .build(&table(1 << 20, &words), MapOptions::default())
        .unwrap();
    let reasons = unready(&device);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with(&format!("cannot open {}", missing.display())),
        "{reasons:?}"
    );
    assert!(!device.map.paths()[0].is_failed());
    assert!(device.map.paths()[1].is_failed());
    // The map serves through the path that opened.
    let mut queue = device.queue(8, 0);
    let reads = (0..8u64)
        .map(|block| io(block, Op::Read, block * u64::from(BLOCK), filled(0)))
        .collect();
    for completion in run(&mut queue, reads) {
        assert_eq!(completion.result, Ok(()));
    }
    // A queue opened while the file was missing reads it once it is there.
    let mut early = device.paths[1].open(1, None);
    std::fs::copy(&present, &missing).unwrap();
    assert!(read_until_open(&device.paths[1]) <= 1);
    let read = mpio_core::queue::PathIo::read(0, u64::from(BLOCK), filled(0));
    let completion = run_path(&mut early, read);
    assert_eq!(completion.outcome, mpio_core::io::PathOutcome::Ok);
    assert!(completion
        .buf
        .as_slice()
        .iter()
        .enumerate()
        .all(|(index, &byte)| byte == pattern(u64::from(BLOCK) + index as u64)));
}

#[test]
fn missing_files_and_directories_cannot_serve_and_devices_without_blocks_are_refused() {
    let dir = direct_dir();
    let missing = format!("file:{}/absent", dir.path().display());
    let reasons = unready(&build(1 << 20, &missing).unwrap());
    assert!(
        reasons.len() == 1 && reasons[0].contains("cannot open") && reasons[0].contains("absent"),
        "{reasons:?}"
    );
    let directory = format!("file:{}", dir.path().display());
    let reasons = unready(&build(1 << 20, &directory).unwrap());
    assert!(
        reasons.len() == 1 && reasons[0].contains("Is a directory"),
        "{reasons:?}"
    );
    let error = build(1 << 20, "file:/dev/null?direct=0").unwrap_err();
    assert!(
        matches!(
            &error,
            SetupError::File {
                source: FileError::NotStorage { .. },
                ..
            }
        ),
        "{error:?}"
    );
    let error = build(1 << 20, "file:relative/lun.img").unwrap_err();
    assert!(matches!(error, SetupError::Uri(_)), "{error:?}");
}
