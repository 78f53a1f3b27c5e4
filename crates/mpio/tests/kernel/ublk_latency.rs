//! Paths with latency behind the ublk device: a null_blk disk that
//! completes each I/O 200 µs after it is submitted (a timer), under fio
//! verify. Every request then waits at a path, and the I/O threads must
//! sleep on their ring (the paths' I/O completes there) rather than poll:
//! the log they write when they end must show turns resting on the ring
//! and none spinning (a turn taken at once because a completion already
//! waited is no spin: it is counted as `ready`), and fio must verify
//! every block.

use crate::devices::{modprobe, run, NullBlk};
use crate::failover::two_path_table;
use crate::fio::{FioVerify, Phase, Target};
use crate::ublk::serve_ublk;
use mpio_test_support::wait_within;
use std::time::Duration;

/// The sum of `field=N` over the daemon log's `ublk thread ended` lines.
fn thread_total(log: &str, field: &str) -> u64 {
    log.lines()
        .filter(|line| line.contains("ublk thread ended"))
        .flat_map(|line| line.split_whitespace())
        .filter_map(|word| word.strip_prefix(field)?.strip_prefix('='))
        .map(|value| value.parse::<u64>().unwrap())
        .sum()
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn with_slow_paths_the_threads_rest_on_their_ring_and_verify_clean() {
    modprobe(&["ublk_drv"]);
    let mut disk = NullBlk::memory_backed_with(
        "mpio-kt-ublk-latency",
        64,
        &[("irqmode", "2"), ("completion_nsec", "200000")],
    );
    let paths = disk.two_paths();
    let table = two_path_table(disk.sectors(), &paths[0], &paths[1]);
    let mut daemon = serve_ublk("ublk-latency", &table, &["--ublk"]);
    let device = daemon.devices[0].clone();
    let fio = FioVerify::start(
        Target::Block(&device),
        16,
        Phase::WriteAndVerify,
        daemon.dir.join("fio.log"),
    );
    fio.finish(Duration::from_secs(600)).assert_clean();
    let limit = Duration::from_secs(120);
    run("kill", &["-TERM", &daemon.child.id().to_string()], limit);
    let status = wait_within(&mut daemon.child, limit, "mpio serve");
    assert!(status.success(), "mpio serve exited with {status}");
    let log = daemon.log();
    let (rests, spins) = (thread_total(&log, "rests"), thread_total(&log, "spins"));
    assert!(
        rests > 100,
        "the threads rested on their ring {rests} times:\n{log}"
    );
    assert_eq!(spins, 0, "the threads spun over file paths:\n{log}");
}
