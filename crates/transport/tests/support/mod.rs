//! Shared by the `nbd_*` tests: real NBD servers (nbdkit, qemu-nbd, from
//! `mpio-test-support`, as `Server`) in a private temporary directory,
//! and a driver that runs a map's queue on the real clock until its I/O
//! completes, with a bound.

#![allow(dead_code)] // each test binary uses its own part of this module

use mpio_core::io::{Buffer, Completion, Io, Op};
use mpio_core::map::MapOptions;
use mpio_core::queue::Queue;

use mpio_transport::{clock, AnyQueue, Device, Transports};
// Each test binary uses its own part of these.
#[allow(unused_imports)]
pub use mpio_test_support::{one_group_table, require, NbdServer as Server, TempDir};
use std::time::{Duration, Instant};

/// A device over `words` (one round-robin group).
pub fn build(size_bytes: u64, words: &[String], options: MapOptions) -> Device {
    Transports::new()
        .build(&one_group_table(size_bytes, words, false), options)
        .unwrap_or_else(|error| panic!("building the map: {error}"))
}

/// A device over `words` (one round-robin group) and one queue on it.
pub fn device(size_bytes: u64, words: &[String], options: MapOptions) -> (Device, Queue<AnyQueue>) {
    let device = build(size_bytes, words, options);
    let queue = device.queue(64, 0);
    (device, queue)
}

/// An I/O of `op` on `len` bytes at `offset`; writes carry `data`.
pub fn io(user_data: u64, op: Op, offset: u64, len: u32, data: Option<&[u8]>) -> Io {
    let buf = match (op, data) {
        (Op::Write, Some(data)) => {
            let mut buf = Buffer::zeroed(data.len());
            buf.as_mut_slice().copy_from_slice(data);
            buf
        }
        (Op::Read, _) => Buffer::zeroed(len as usize),
        _ => Buffer::empty(),
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

/// Submits `ios` (as fast as the queue takes them) and polls `queue` on
/// the real clock until every one completed; panics after `bound`.
pub fn run(queue: &mut Queue<AnyQueue>, ios: Vec<Io>, bound: Duration) -> Vec<Completion> {
    run_with(queue, ios, bound, |_| {})
}

/// [`run`], calling `between_polls` after every poll (to inject a fault
/// while the I/O is in flight).
pub fn run_with(
    queue: &mut Queue<AnyQueue>,
    ios: Vec<Io>,
    bound: Duration,
    mut between_polls: impl FnMut(&mut Queue<AnyQueue>),
) -> Vec<Completion> {
    let count = ios.len();
    let deadline = Instant::now() + bound;
    let mut ios = ios.into_iter();
    let mut next = ios.next();
    let mut done = Vec::new();
    while done.len() < count {
        while let Some(io) = next.take() {
            match queue.submit(io, clock::now_ns()) {
                Ok(()) => next = ios.next(),
                Err(io) => {
                    next = Some(io);
                    break;
                }
            }
        }
        queue.poll(clock::now_ns(), &mut |completion| done.push(completion));
        between_polls(queue);
        assert!(
            Instant::now() < deadline,
            "{} of {count} I/Os completed within {bound:?}",
            done.len()
        );
        if done.len() < count {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    done.sort_by_key(|completion| completion.user_data);
    for pair in done.windows(2) {
        assert_ne!(
            pair[0].user_data, pair[1].user_data,
            "an I/O completed twice"
        );
    }
    done
}

/// [`run`], then panics unless every I/O succeeded.
pub fn run_ok(queue: &mut Queue<AnyQueue>, ios: Vec<Io>, bound: Duration) -> Vec<Completion> {
    let done = run(queue, ios, bound);
    for completion in &done {
        assert_eq!(
            completion.result,
            Ok(()),
            "I/O {} failed",
            completion.user_data
        );
    }
    done
}

/// A deterministic byte pattern for block `block` in round `round`.
pub fn block_data(block: u64, round: u64, len: usize) -> Vec<u8> {
    let mut state =
        (block + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Writes of blocks `0..blocks` of `block_len` bytes with round `round`'s
/// data ([`block_data`]), and that data, block by block, to check reads
/// against.
pub fn block_writes(blocks: u64, block_len: u32, round: u64) -> (Vec<Io>, Vec<Vec<u8>>) {
    let reference: Vec<Vec<u8>> = (0..blocks)
        .map(|block| block_data(block, round, block_len as usize))
        .collect();
    let writes = (0..blocks)
        .map(|block| {
            io(
                block,
                Op::Write,
                block * u64::from(block_len),
                block_len,
                Some(&reference[block as usize]),
            )
        })
        .collect();
    (writes, reference)
}

/// Reads blocks `0..blocks` of `block_len` through a fresh one-path map
/// over `word` and asserts they equal `expected`.
pub fn verify_through(word: &str, block_len: u32, expected: &[Vec<u8>]) {
    let size_bytes = expected.len() as u64 * u64::from(block_len);
    let (_device, mut queue) = device(size_bytes, &[word.to_string()], MapOptions::default());
    let ios = (0..expected.len() as u64)
        .map(|block| {
            io(
                block,
                Op::Read,
                block * u64::from(block_len),
                block_len,
                None,
            )
        })
        .collect();
    let done = run_ok(&mut queue, ios, Duration::from_secs(60));
    for completion in done {
        let block = completion.user_data as usize;
        assert!(
            completion.buf.as_slice() == expected[block].as_slice(),
            "block {block} reads back wrong through {word}"
        );
    }
}
