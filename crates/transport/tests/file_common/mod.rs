//! Shared by the `file_*` tests: a directory that supports O_DIRECT, files
//! with a known pattern, tables over file paths, and a loop that drives a
//! queue until its I/O completes (bounded in real time: the kernel does
//! the I/O).

#![allow(dead_code)] // each test file uses its own subset

use mpio_core::io::{Buffer, Completion, Io, Op};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue, Queue};
use mpio_core::table::Table;
use mpio_transport::clock::now_ns;
use mpio_transport::FilePath;
use mpio_transport::{AnyQueue, PathHandle};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const BLOCK: u32 = 4096;
/// Only a hang reaches it: a local file answers in milliseconds, a busy
/// machine's in seconds.
pub const DEADLINE: Duration = mpio_test_support::HANG_BOUND;

/// A temporary directory on a file system that takes O_DIRECT: cargo's
/// target tmp dir (a real disk here), else /var/tmp.
pub fn direct_dir() -> tempfile::TempDir {
    for parent in [env!("CARGO_TARGET_TMPDIR"), "/var/tmp"] {
        let Ok(dir) = tempfile::TempDir::new_in(parent) else {
            continue;
        };
        let probe = dir.path().join("probe");
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&probe);
        if opened.is_ok() {
            return dir;
        }
        eprintln!("{parent} refuses O_DIRECT; trying the next directory");
    }
    panic!("no directory here takes O_DIRECT (tried CARGO_TARGET_TMPDIR and /var/tmp)");
}

/// The byte at `offset` of the pattern files start with.
pub fn pattern(offset: u64) -> u8 {
    (offset / 512 % 251) as u8
}

/// A file of `bytes` holding [`pattern`].
pub fn pattern_file(dir: &Path, name: &str, bytes: u64) -> PathBuf {
    let path = dir.join(name);
    let data: Vec<u8> = (0..bytes).map(pattern).collect();
    std::fs::write(&path, data).unwrap();
    path
}

/// A one-group round-robin table of `bytes` over `words`.
pub fn table(bytes: u64, words: &[String]) -> Table {
    mpio_test_support::one_group_table(bytes, words, false)
}

/// A block of `fill`.
pub fn filled(fill: u8) -> Buffer {
    let mut buf = Buffer::zeroed(BLOCK as usize);
    buf.as_mut_slice().fill(fill);
    buf
}

/// An I/O of one block (reads and writes) or none (the others).
pub fn io(user_data: u64, op: Op, offset: u64, buf: Buffer) -> Io {
    let len = match op {
        Op::Flush => 0,
        Op::Read | Op::Write => buf.len() as u32,
        Op::Discard | Op::WriteZeroes => BLOCK,
    };
    Io {
        user_data,
        op,
        offset,
        len,
        buf,
        fua: false,
    }
}

/// Submits every I/O (polling when the queue is full) and polls until
/// each completed; completions in arrival order.
pub fn run(queue: &mut Queue<AnyQueue>, ios: Vec<Io>) -> Vec<Completion> {
    let count = ios.len();
    let mut done = Vec::with_capacity(count);
    let start = Instant::now();
    for mut io in ios {
        loop {
            match queue.submit(io, now_ns()) {
                Ok(()) => break,
                Err(back) => io = back,
            }
            queue.poll(now_ns(), &mut |completion| done.push(completion));
            assert!(start.elapsed() < DEADLINE, "queue stayed full");
        }
    }
    while done.len() < count {
        queue.poll(now_ns(), &mut |completion| done.push(completion));
        assert!(
            start.elapsed() < DEADLINE,
            "{} of {count} I/Os completed within {DEADLINE:?}",
            done.len()
        );
        std::thread::yield_now();
    }
    done
}

/// One I/O straight on a path's own queue (no map): its completion.
pub fn run_path(queue: &mut AnyQueue, path_io: PathIo) -> PathCompletion {
    queue.submit(path_io, now_ns());
    let start = Instant::now();
    let mut done = Vec::new();
    while done.is_empty() {
        queue.poll(now_ns(), &mut done);
        assert!(
            start.elapsed() < DEADLINE,
            "no completion within {DEADLINE:?}"
        );
        std::thread::yield_now();
    }
    assert_eq!(done.len(), 1);
    done.pop().unwrap()
}

/// Reads `bytes` from offset 0 through `handle` alone, block by block.
pub fn read_through(handle: &PathHandle, bytes: u64) -> Vec<u8> {
    let mut queue = handle.open(1, None);
    let mut data = Vec::with_capacity(bytes as usize);
    for block in 0..bytes / u64::from(BLOCK) {
        let completion = run_path(
            &mut queue,
            PathIo::read(
                block,
                block * u64::from(BLOCK),
                Buffer::zeroed(BLOCK as usize),
            ),
        );
        assert_eq!(completion.outcome, mpio_core::io::PathOutcome::Ok);
        data.extend_from_slice(completion.buf.as_slice());
    }
    data
}

/// The file behind a file path's handle.
pub fn file_of(handle: &PathHandle) -> &Arc<FilePath> {
    match handle {
        PathHandle::File(file) => file,
        other => panic!("not a file path: {other:?}"),
    }
}
