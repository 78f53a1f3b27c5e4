//! Force unit access over NBD, against nbdkit with its log filter: a FUA
//! write goes out with `NBD_CMD_FLAG_FUA` to a server that takes it, and
//! as a write then a flush (the I/O completing with the flush) to one that
//! caches but takes no FUA; a write without FUA carries no flag and no
//! flush.

mod support;

use mpio_core::io::Op;
use mpio_core::map::MapOptions;
use mpio_transport::Transports;
use std::time::Duration;
use support::{io, one_group_table, run_ok, Server, TempDir};

const BOUND: Duration = Duration::from_secs(30);

/// The log lines of nbdkit's log filter for the transmission commands
/// (Write, Flush), in order.
fn commands(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|line| line.contains(" Write ") || line.contains(" Flush "))
        .map(str::to_string)
        .collect()
}

/// Writes block 0 without FUA, then block 1 with it, through one path to
/// an nbdkit started with `plugin_args` behind its log filter; returns
/// the server's log of writes and flushes.
fn write_plain_then_fua(dir: &TempDir, plugin_args: &[&str]) -> Vec<String> {
    let log = dir.join("log");
    let log_arg = format!("logfile={}", log.display());
    let mut args = vec!["--filter=log"];
    args.extend(plugin_args);
    args.push(&log_arg);
    let server = Server::nbdkit(&dir.join("s.sock"), &args);
    let table = one_group_table(1 << 20, &[server.uri()], false);
    let device = Transports::new()
        .build(&table, MapOptions::default())
        .unwrap();
    let mut queue = device.queue(8, 0);
    let data = vec![0x5a; 4096];
    run_ok(
        &mut queue,
        vec![io(1, Op::Write, 0, 4096, Some(&data))],
        BOUND,
    );
    let mut fua_write = io(2, Op::Write, 4096, 4096, Some(&data));
    fua_write.fua = true;
    run_ok(&mut queue, vec![fua_write], BOUND);
    drop(queue);
    drop(device);
    drop(server);
    commands(&log)
}

#[test]
fn a_fua_write_carries_the_flag_where_the_server_takes_it() {
    let dir = TempDir::new("nbd-fua-native");
    let log = write_plain_then_fua(&dir, &["--filter=fua", "memory", "1M", "fuamode=native"]);
    assert_eq!(log.len(), 2, "two writes, no flush: {log:#?}");
    assert!(log[0].contains("fua=0"), "{}", log[0]);
    assert!(log[1].contains("fua=1"), "{}", log[1]);
}

#[test]
fn a_fua_write_is_followed_by_a_flush_where_the_server_takes_no_fua() {
    // nbdkit 1.32's fua filter refuses its documented fuamode=none, so
    // the server that caches but takes no FUA is the eval plugin over a
    // file: flush yes, FUA no, multi-conn yes (mpio requires it).
    let dir = TempDir::new("nbd-fua-none");
    let image = dir.join("image");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let image = image.display().to_string();
    let pread =
        format!("pread=dd if={image} skip=$4 count=$3 iflag=skip_bytes,count_bytes status=none");
    let pwrite = format!("pwrite=dd of={image} seek=$4 conv=notrunc oflag=seek_bytes status=none");
    let log = write_plain_then_fua(
        &dir,
        &[
            "eval",
            "get_size=echo 1048576",
            &pread,
            &pwrite,
            "flush=exit 0",
            "can_write=exit 0",
            "can_flush=exit 0",
            "can_fua=echo none",
            "can_multi_conn=exit 0",
        ],
    );
    assert_eq!(log.len(), 3, "two writes and one flush: {log:#?}");
    assert!(
        log[0].contains(" Write ") && log[0].contains("fua=0"),
        "{}",
        log[0]
    );
    assert!(
        log[1].contains(" Write ") && log[1].contains("fua=0"),
        "{}",
        log[1]
    );
    assert!(log[2].contains(" Flush "), "{}", log[2]);
}
