//! Failover over real NBD servers: three paths to one disk file (two
//! `nbdkit file` servers with `--filter=error`, one `qemu-nbd`). Paths
//! fail (the error filter's file appears) and recover (it goes, and the
//! path is reinstated) between rounds of writes through the map; after
//! every round and at the end, every block reads back byte-exact, and at
//! the end through each path alone.

mod support;

use mpio_core::io::{Op, PathError};
use mpio_core::map::MapOptions;
use mpio_core::status::PathState;
use std::time::Duration;
use support::{block_data, device, io, run_ok, verify_through, Server, TempDir};

const BLOCK: u32 = 4096;
const BLOCKS: u64 = 96;
const BOUND: Duration = Duration::from_secs(60);

fn error_server(dir: &TempDir, name: &str) -> Server {
    let fail = dir.join(&format!("{name}.fail"));
    let disk = dir.join("disk.img");
    Server::nbdkit(
        &dir.join(&format!("{name}.sock")),
        &[
            "--filter=error",
            "file",
            &disk.display().to_string(),
            "error=EIO",
            "error-rate=100%",
            &format!("error-file={}", fail.display()),
        ],
    )
}

#[test]
fn data_written_while_paths_fail_and_recover_reads_back_through_each_path() {
    let dir = TempDir::new("nbd-failover");
    let disk = dir.sparse_file("disk.img", BLOCKS * u64::from(BLOCK));
    let a = error_server(&dir, "a");
    let b = error_server(&dir, "b");
    let c = Server::qemu_nbd(&dir.join("c.sock"), &disk, &[]);
    let words = [a.uri(), b.uri(), c.uri()];
    // Without read hedging: on a loaded machine a read that waits a
    // millisecond is hedged away and its path held out for 100 ms, so the
    // next round's writes could all miss the path it just failed.
    let options = MapOptions {
        hedge_reads: false,
        ..MapOptions::default()
    };
    let (device, mut queue) = device(BLOCKS * u64::from(BLOCK), &words, options);
    let map = std::sync::Arc::clone(&device.map);
    let fail = |name: &str| std::fs::write(dir.join(&format!("{name}.fail")), b"").unwrap();
    let heal = |name: &str| std::fs::remove_file(dir.join(&format!("{name}.fail"))).unwrap();
    let state = |path: usize| map.status().groups[0].paths[path].state;

    let mut reference = vec![vec![0u8; BLOCK as usize]; BLOCKS as usize];
    for round in 0..6u64 {
        match round {
            1 => fail("a"),
            2 => fail("b"),
            3 => {
                heal("a");
                assert!(map.reinstate_path(0));
            }
            4 => {
                heal("b");
                assert!(map.reinstate_path(1));
                fail("a");
            }
            5 => {
                heal("a");
                assert!(map.reinstate_path(0));
            }
            _ => {}
        }
        // Every other block gets new data this round.
        let blocks: Vec<u64> = (0..BLOCKS)
            .filter(|block| (block + round) % 2 == 0)
            .collect();
        let ios = blocks
            .iter()
            .map(|&block| {
                let data = block_data(block, round, BLOCK as usize);
                let write = io(
                    block,
                    Op::Write,
                    block * u64::from(BLOCK),
                    BLOCK,
                    Some(&data),
                );
                reference[block as usize] = data;
                write
            })
            .collect();
        run_ok(&mut queue, ios, BOUND);
        let expected_failed: &[usize] = match round {
            1 => &[0],
            2 => &[0, 1],
            3 => &[1],
            4 => &[0],
            _ => &[],
        };
        for path in 0..3 {
            let expected = if expected_failed.contains(&path) {
                PathState::Failed
            } else {
                PathState::Active
            };
            assert_eq!(state(path), expected, "round {round}, path {path}");
        }
        if round == 1 {
            // EIO from the error filter is a path error.
            assert_eq!(
                map.status().groups[0].paths[0].last_error,
                Some(PathError::Transport)
            );
        }
        // Read everything back through the map.
        let reads = (0..BLOCKS)
            .map(|block| io(block, Op::Read, block * u64::from(BLOCK), BLOCK, None))
            .collect();
        for completion in run_ok(&mut queue, reads, BOUND) {
            let block = completion.user_data as usize;
            assert!(
                completion.buf.as_slice() == reference[block].as_slice(),
                "round {round}: block {block} reads back wrong through the map"
            );
        }
    }
    let status = map.status();
    assert_eq!(status.groups[0].paths[0].fail_count, 2);
    assert_eq!(status.groups[0].paths[1].fail_count, 1);
    assert!(queue.stats().retries >= 3, "{:?}", queue.stats());
    let flush = vec![io(0, Op::Flush, 0, 0, None)];
    run_ok(&mut queue, flush, BOUND);
    for word in &words {
        verify_through(word, BLOCK, &reference);
    }
}
