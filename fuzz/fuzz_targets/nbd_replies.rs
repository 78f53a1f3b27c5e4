//! Fuzzes the NBD client's reply parser: any bytes a server sends (first
//! byte: structured replies or not; see `mpio_transport::nbd_replay`)
//! never panic the client, and every I/O in flight comes back exactly
//! once, answered or failed when the connection ends.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mpio_transport::nbd_replay as replay;

fuzz_target!(|data: &[u8]| {
    let mut tags: Vec<u64> = replay(data).iter().map(|done| done.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, [1, 2, 3, 4], "every I/O comes back exactly once");
});
