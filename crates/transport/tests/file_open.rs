//! Opening `file` paths: O_DIRECT refused is a clear error and `direct=0`
//! is the explicit way to buffered I/O; a file smaller than the map, a
//! missing file and a non-storage file are refused with errors that name
//! them.

mod file_common;

use file_common::*;
use mpio_core::io::Op;
use mpio_core::map::MapOptions;
use mpio_transport::file::FileError;
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
    // Asked for buffered I/O, the same file opens, and is then refused for
    // what it is: far smaller than the map.
    let error = build(1 << 20, "file:/proc/self/comm?direct=0").unwrap_err();
    assert!(
        matches!(error, SetupError::TooSmall { path_bytes: 0, .. }),
        "{error:?}"
    );
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
fn a_file_smaller_than_the_map_is_refused() {
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "small", 1 << 20);
    let word = format!("file:{}", file.display());
    let error = build(2 << 20, &word).unwrap_err();
    match &error {
        SetupError::TooSmall {
            word: named,
            path_bytes,
            map_bytes,
        } => {
            assert_eq!((named, *path_bytes, *map_bytes), (&word, 1 << 20, 2 << 20));
        }
        other => panic!("expected TooSmall, got {other:?}"),
    }
    assert!(error.to_string().contains(&word));
    // The same file is fine for a map of its size or smaller.
    build(1 << 20, &word).unwrap();
    build(512 << 10, &word).unwrap();
}

#[test]
fn missing_files_directories_and_devices_without_blocks_are_refused() {
    let dir = direct_dir();
    let missing = format!("file:{}/absent", dir.path().display());
    let error = build(1 << 20, &missing).unwrap_err();
    assert!(
        matches!(
            &error,
            SetupError::File {
                source: FileError::Open { .. },
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("absent"), "{error}");
    let directory = format!("file:{}", dir.path().display());
    assert!(matches!(
        build(1 << 20, &directory).unwrap_err(),
        SetupError::File {
            source: FileError::Open { .. },
            ..
        }
    ));
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
