//! `mpio serve` raises its soft limit on open files to the hard one as
//! it starts (`mpio_daemon::open_files`): each file path holds a
//! descriptor and each ublk thread lends its file paths as many fixed
//! files as the soft limit allowed when its ring was made. Started with
//! a soft limit of 256 (util-linux `prlimit`), the daemon's limits in
//! `/proc` show the soft limit equal to the hard one once its control
//! socket is open, and its log says it raised the limit.

mod common;
mod daemon;

use daemon::{test_dir, Daemon};

/// (soft, hard) of "Max open files" in `/proc/PID/limits`.
fn open_file_limits(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .expect("/proc/PID/limits has Max open files");
    let mut numbers = line["Max open files".len()..]
        .split_whitespace()
        .map(|word| word.parse::<u64>().expect("a number of files"));
    (numbers.next().unwrap(), numbers.next().unwrap())
}

#[test]
fn serve_raises_its_soft_open_file_limit_to_the_hard_one() {
    let dir = test_dir("open-files");
    let socket = dir.join("nbd.sock").display().to_string();
    let daemon = Daemon::start_under(
        dir,
        &["prlimit", "--nofile=256:"],
        &[
            "--table",
            "0 2048 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1",
            "--socket",
            &socket,
        ],
    );
    let (soft, hard) = open_file_limits(daemon.child.id());
    assert_eq!(soft, hard, "{}", daemon.log());
    if hard > 256 {
        assert!(
            daemon.log().contains("open-file limit raised") && daemon.log().contains("was=256"),
            "{}",
            daemon.log()
        );
    }
}
