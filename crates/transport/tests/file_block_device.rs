//! A `file` path on a real block device: a loop device over a file,
//! attached for the test and detached when it ends. Shows the size found
//! by seeking to the device's end, O_DIRECT data through two paths, a
//! discard through the device's own discard (io_uring's
//! `BLOCK_URING_CMD_DISCARD`; the loop driver punches a hole in its
//! backing file, so the range reads back zeroes) and write-zeroes through
//! the block layer's zero-out.
//! Needs root and `losetup` (util-linux); skipped with the reason if
//! either is missing.

mod file_common;

use file_common::*;
use mpio_core::io::{Buffer, Op};
use mpio_core::map::MapOptions;
use mpio_test_support::{cleanup_within, output_of, HANG_BOUND};
use mpio_transport::Transports;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const BYTES: u64 = 4 << 20;

/// An attached loop device, detached on drop.
struct Loop {
    device: PathBuf,
}

impl Loop {
    fn attach(backing: &std::path::Path) -> Result<Loop, String> {
        let losetup = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(backing)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| format!("losetup: {error}"))?;
        let output = output_of(losetup, HANG_BOUND, "losetup --find --show");
        if !output.status.success() {
            return Err(format!(
                "losetup: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let device = String::from_utf8_lossy(&output.stdout).trim().to_string();
        Ok(Loop {
            device: PathBuf::from(device),
        })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        cleanup_within(
            Command::new("losetup").arg("-d").arg(&self.device),
            HANG_BOUND,
        );
    }
}

#[test]
fn a_loop_device_carries_data_discard_and_write_zeroes() {
    let dir = direct_dir();
    let backing = pattern_file(dir.path(), "backing", BYTES);
    let device_node = match Loop::attach(&backing) {
        Ok(device) => device,
        Err(reason) => {
            eprintln!("skipped: no loop device here ({reason})");
            return;
        }
    };
    let word = format!("file:{}", device_node.device.display());
    // The device's size is the backing file's; in a larger map its path
    // cannot serve, and says why.
    let larger = Transports::new()
        .build(
            &table(2 * BYTES, std::slice::from_ref(&word)),
            MapOptions::default(),
        )
        .unwrap();
    let reasons: Vec<(&str, String)> = larger.unready_paths().collect();
    assert_eq!(
        reasons,
        [(
            word.as_str(),
            format!("it holds {BYTES} bytes but the map needs {}", 2 * BYTES)
        )]
    );
    assert!(larger.map.paths()[0].is_failed());
    let device = Transports::new()
        .build(
            &table(BYTES, &[format!("{word}#a"), format!("{word}#b")]),
            MapOptions::default(),
        )
        .unwrap();
    assert!(file_of(&device.paths[0]).is_block_device());
    let block = u64::from(BLOCK);
    let mut queue = device.queue(16, 0);
    let mut ios: Vec<_> = (0..16u64)
        .map(|index| io(index, Op::Write, index * block, filled(0xE0 | index as u8)))
        .collect();
    ios.push(io(16, Op::Flush, 0, Buffer::empty()));
    for completion in run(&mut queue, ios) {
        assert_eq!(completion.result, Ok(()), "I/O {}", completion.user_data);
    }
    let ios = vec![
        io(20, Op::Discard, 2 * block, Buffer::empty()),
        io(21, Op::WriteZeroes, 3 * block, Buffer::empty()),
    ];
    for completion in run(&mut queue, ios) {
        assert_eq!(completion.result, Ok(()), "op {}", completion.user_data);
    }
    for handle in &device.paths {
        let data = read_through(handle, 16 * block);
        for index in 0..16u64 {
            let bytes = &data[(index * block) as usize..][..BLOCK as usize];
            let expected = match index {
                2 | 3 => 0,
                _ => 0xE0 | index as u8,
            };
            assert!(bytes.iter().all(|&byte| byte == expected), "block {index}");
        }
    }
}
