//! Memory disks are sparse and bounded: a disk takes memory only as it is
//! written (once it was allocated in full at start, and a 1 TiB map
//! aborted the daemon), one larger than the host's memory is refused
//! with a clear error, and a build that fails leaves no disk behind (a
//! failed reload once kept each disk it had made).

mod support;

use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_transport::MEMORY_CHUNK_SIZE as CHUNK_SIZE;
use mpio_transport::{PathHandle, SetupError, Transports};

/// One group of memory paths `words` over `bytes`.
fn table(bytes: u64, words: &[&str]) -> Table {
    support::one_group_table(bytes, words, false)
}

/// The process's resident memory in bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn a_disk_takes_memory_as_it_is_written() {
    let host = mpio_transport::host::memory_bytes().unwrap();
    let size = (host / 2).min(8 << 30) / (1 << 20) * (1 << 20);
    let before = resident_bytes();
    let transports = Transports::new();
    let device = transports
        .build(&table(size, &["memory:big#a"]), MapOptions::default())
        .unwrap();
    let grown = resident_bytes().saturating_sub(before);
    // The old disk touched a page of each 64 KiB chunk it allocated: a
    // sixteenth of its size.
    assert!(
        grown < size / 64,
        "a {size}-byte disk made the process grow by {grown} bytes before any write"
    );
    let PathHandle::Memory { disk, .. } = &device.paths[0] else {
        panic!("a memory path");
    };
    assert_eq!(disk.allocated_bytes(), 0);
    let last_chunk = size - CHUNK_SIZE as u64;
    disk.write(last_chunk + 4096, &[7; 4096]).unwrap();
    assert_eq!(disk.allocated_bytes(), CHUNK_SIZE as u64);
    let mut read = vec![1; 8192];
    disk.read(last_chunk, &mut read);
    assert!(
        read[..4096].iter().all(|byte| *byte == 0),
        "unwritten bytes read as zeroes"
    );
    assert!(read[4096..].iter().all(|byte| *byte == 7));
    disk.read(0, &mut read);
    assert!(
        read.iter().all(|byte| *byte == 0),
        "an unwritten chunk reads as zeroes"
    );
    // Zeroing part of a chunk keeps it; the whole chunk gives it back.
    disk.zero(last_chunk, 4096);
    assert_eq!(disk.allocated_bytes(), CHUNK_SIZE as u64);
    disk.zero(last_chunk, CHUNK_SIZE);
    assert_eq!(disk.allocated_bytes(), 0);
    disk.read(last_chunk, &mut read);
    assert!(read.iter().all(|byte| *byte == 0));
}

#[test]
fn a_disk_larger_than_the_host_is_refused() {
    let host = mpio_transport::host::memory_bytes().unwrap();
    let size = (host + (1 << 40)) / (1 << 20) * (1 << 20);
    let error = Transports::new()
        .build(&table(size, &["memory:huge#a"]), MapOptions::default())
        .unwrap_err();
    assert!(
        matches!(error, SetupError::MemoryTooLarge { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("cannot be held by this host"), "{message}");
}

#[test]
fn a_failed_build_leaves_no_disk_behind() {
    let transports = Transports::new();
    let kept = transports
        .build(&table(1 << 20, &["memory:kept#a"]), MapOptions::default())
        .unwrap();
    kept_disk_write(&kept);
    // The third path holds no blocks: the build fails after making disk
    // `new` (1 MiB) and finding disk `kept`.
    let failing = table(
        1 << 20,
        &["memory:kept#b", "memory:new#a", "file:/dev/null?direct=0"],
    );
    assert!(transports.build(&failing, MapOptions::default()).is_err());
    // Disk `new` is gone: a 2 MiB map makes a new one (a leaked 1 MiB
    // disk would be too small for it).
    transports
        .build(&table(2 << 20, &["memory:new#a"]), MapOptions::default())
        .expect("the failed build's disk was left behind");
    // Disk `kept` stays, with its data.
    let again = transports
        .build(&table(1 << 20, &["memory:kept#c"]), MapOptions::default())
        .unwrap();
    let PathHandle::Memory { disk, .. } = &again.paths[0] else {
        panic!("a memory path");
    };
    let mut read = [0; 4];
    disk.read(0, &mut read);
    assert_eq!(read, [9; 4]);
}

fn kept_disk_write(device: &mpio_transport::Device) {
    let PathHandle::Memory { disk, .. } = &device.paths[0] else {
        panic!("a memory path");
    };
    disk.write(0, &[9; 4]).unwrap();
}
