//! A write held at a hung path behind the ublk device (zero copy where
//! the kernel has it, a copy elsewhere): path `a` is a dm-linear device
//! over a memory-backed null_blk disk, path `b` the disk itself, in two
//! groups so that `a` serves. With `a` suspended a write and its flush
//! stay in the kernel; the I/O timeout fails `a`, and the write is not
//! sent down `b` while `a` holds it (a stale copy could land after a
//! newer one). Once `a` resumes the write lands, the writer's flush
//! succeeds, and the newest acknowledged data is what the disk holds.

use crate::daemon::{test_dir, Daemon};
use crate::devices::{clean_up, modprobe, run, wait_until, NullBlk};
use crate::failover::{path_row, LIMIT};
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// The dm-linear device path `a` goes through.
const HUNG: &str = "mpio-kt-ublk-hang";

/// `dmsetup ARGS` (no udev in the guest: nothing to wait for).
fn dmsetup(args: &[&str]) {
    let mut all = vec!["--noudevsync"];
    all.extend(args);
    let output = run("dmsetup", &all, Duration::from_secs(60));
    assert!(
        output.status.success(),
        "dmsetup {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Removes the dm device at the end, resumed first (a test that failed
/// while it was suspended would otherwise leave I/O hanging).
struct Linear;

impl Drop for Linear {
    fn drop(&mut self) {
        clean_up("dmsetup", &["--noudevsync", "resume", HUNG]);
        clean_up("dmsetup", &["--noudevsync", "remove", HUNG]);
    }
}

/// `len` bytes of `seed`'s pattern.
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|index| (index % 251) as u8 ^ seed).collect()
}

#[test]
#[ignore = "kernel test: needs root, null_blk, dm-mod and ublk_drv; run scripts/kernel-test.sh"]
fn a_write_held_at_a_hung_path_lands_before_it_goes_elsewhere() {
    modprobe(&["ublk_drv"]);
    modprobe(&["dm-mod"]);
    let disk = NullBlk::memory_backed("mpio-kt-ublk-hang", 64);
    let sectors = disk.sectors();
    let table = format!("0 {sectors} linear {} 0", disk.device.display());
    dmsetup(&["create", HUNG, "--table", &table]);
    let linear = Linear;
    // Its node as devtmpfs makes it (no udev makes /dev/mapper/NAME).
    let node = std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .find(|entry| {
            std::fs::read_to_string(entry.path().join("dm/name"))
                .is_ok_and(|name| name.trim() == HUNG)
        })
        .map(|entry| format!("/dev/{}", entry.file_name().to_string_lossy()))
        .expect("the dm device in /sys/block");
    let dir = test_dir("ublk-hang");
    let config = dir.join("mpio.toml");
    std::fs::write(
        &config,
        format!(
            "[[map]]\nname = \"m\"\nsize = {}\nio_timeout_ms = 1000\n\
             checker_interval_ms = 3600000\n\
             [[map.path]]\nname = \"a\"\nuri = \"file:{node}\"\n\
             [[map.path]]\nname = \"b\"\nuri = \"file:{}\"\n\
             [[map.group]]\npaths = [\"a\"]\n[[map.group]]\npaths = [\"b\"]\n\
             [[map.export]]\nublk = 1018\n",
            sectors << 9,
            disk.device.display()
        ),
    )
    .unwrap();
    let daemon = Daemon::start(dir, &["--config", config.to_str().unwrap()]);
    let device = daemon.devices[0].clone();
    let ublk = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&device)
        .unwrap();
    let (old, new) = (pattern(1, 1 << 20), pattern(2, 1 << 20));
    ublk.write_all_at(&old, 0).unwrap();
    ublk.sync_data().unwrap();
    assert!(
        path_row(&daemon, "a")["ios"].as_u64().unwrap() > 0,
        "a serves"
    );

    // Path a hangs: the next write and its flush stay in the kernel.
    dmsetup(&["suspend", HUNG]);
    let writer = {
        let ublk = ublk.try_clone().unwrap();
        let new = new.clone();
        std::thread::spawn(move || {
            ublk.write_all_at(&new, 0)?;
            ublk.sync_data()
        })
    };
    // The write reaches a before a fails: only its own I/O timeout
    // fails a (the checker runs an hour apart), so however late the
    // writer runs, the write cannot go to b first.
    wait_until("the write is held at path a", LIMIT, || {
        path_row(&daemon, "a")["in_flight"].as_u64().unwrap_or(0) > 0
    });
    wait_until("the I/O timeout fails path a", LIMIT, || {
        path_row(&daemon, "a")["state"] == "failed"
    });
    // Path b is healthy, yet the write a holds has not gone down it: the
    // flush is still waiting and the disk still holds the old data.
    assert!(
        !writer.is_finished(),
        "the write went elsewhere while a held it"
    );
    run(
        "sh",
        &["-c", "echo 3 > /proc/sys/vm/drop_caches"],
        Duration::from_secs(60),
    );
    let mut on_disk = vec![0; old.len()];
    let disk_node = std::fs::File::open(&disk.device).unwrap();
    disk_node.read_exact_at(&mut on_disk, 0).unwrap();
    assert!(
        on_disk == old,
        "the held write reached the disk another way"
    );

    // Path a returns what it held: the write lands, the flush succeeds,
    // and the disk holds the newest acknowledged data.
    dmsetup(&["resume", HUNG]);
    writer
        .join()
        .expect("the writer")
        .expect("the write and its flush succeed");
    run(
        "sh",
        &["-c", "echo 3 > /proc/sys/vm/drop_caches"],
        Duration::from_secs(60),
    );
    disk_node.read_exact_at(&mut on_disk, 0).unwrap();
    assert!(on_disk == new, "the disk does not hold the newest write");
    drop(ublk);
    let removed = daemon.ok(&["remove", "m"]);
    assert!(removed.contains("removed"), "{removed}");
    drop(daemon);
    drop(linear);
}
