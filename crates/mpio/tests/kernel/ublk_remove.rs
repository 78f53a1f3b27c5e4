//! `mpio remove` and a reload that drops a map, over two maps each a
//! ublk device (numbered above any the kernel gives other tests): a mounted device is refused, naming the mount, and so is
//! the reload that drops its map; a device a process holds open is
//! refused, naming the process; `--force` removes its disk under the
//! process, and the device is deleted once the process closes it; a
//! device no one holds is removed at once.

use crate::daemon::{test_dir, Daemon};
use crate::devices::{modprobe, run, wait_until, Mount, NullBlk};
use crate::failover::{two_path_table, LIMIT};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A config's `[[map]]` named `name`, over `disk` as `/dev/ublkbN`.
fn map_section(name: &str, disk: &mut NullBlk, number: u32) -> String {
    let paths = disk.two_paths();
    let table = two_path_table(disk.sectors(), &paths[0], &paths[1]);
    format!("[[map]]\nname = \"{name}\"\ntable = \"{table}\"\n[[map.export]]\nublk = {number}\n")
}

#[test]
#[ignore = "kernel test: needs root, null_blk, ublk_drv and ext4; run scripts/kernel-test.sh"]
fn remove_refuses_a_device_in_use_naming_its_holder_unless_forced() {
    modprobe(&["ublk_drv"]);
    modprobe(&["ext4"]);
    let mut disk_a = NullBlk::memory_backed("mpio-kt-remove-a", 64);
    let mut disk_b = NullBlk::memory_backed("mpio-kt-remove-b", 64);
    let (section_a, section_b) = (
        map_section("a", &mut disk_a, 1014),
        map_section("b", &mut disk_b, 1015),
    );
    let config_dir = test_dir("remove-config");
    let config = config_dir.join("mpio.toml");
    std::fs::write(&config, format!("{section_a}{section_b}")).unwrap();
    let daemon = Daemon::start(test_dir("remove"), &["--config", config.to_str().unwrap()]);
    assert_eq!(daemon.devices, ["/dev/ublkb1014", "/dev/ublkb1015"]);
    let (device_a, device_b) = ("/dev/ublkb1014", "/dev/ublkb1015");

    // Mounted: refused, and so is the reload that drops the map.
    let minutes = |count: u64| Duration::from_secs(60 * count);
    run("mkfs.ext4", &["-q", "-F", device_a], minutes(5));
    let mount = Mount::new(Path::new(device_a), "ext4", config_dir.join("mnt"));
    let mounted = format!("mounted on {} (ext4)", mount.dir.display());
    let refused = daemon.error(&["remove", "a"]);
    assert!(refused.contains(&mounted), "{refused}");
    assert!(refused.contains("/dev/ublkb1014 is in use"), "{refused}");
    std::fs::write(&config, &section_b).unwrap();
    let refused = daemon.error(&["reload"]);
    assert!(refused.contains("map \"a\" not removed"), "{refused}");
    assert!(refused.contains(&mounted), "{refused}");
    assert!(
        Path::new(device_a).exists(),
        "{device_a} went while mounted"
    );
    std::fs::write(mount.dir.join("still-here"), b"written after the refusals").unwrap();
    mount.unmount();

    // Open in a process: refused, naming it; --force removes it anyway.
    let mut holder = Command::new("sleep")
        .arg("3600")
        .stdin(std::fs::File::open(device_a).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let refused = daemon.error(&["remove", "a"]);
    let opened = format!("opened by pid {} (sleep)", holder.id());
    assert!(refused.contains(&opened), "{refused}");
    let removed = daemon.ok(&["remove", "a", "--force"]);
    assert!(removed.contains("removed a"), "{removed}");
    assert!(removed.contains("/dev/ublkb1014 removed"), "{removed}");
    wait_until("the forced device goes", LIMIT, || {
        !Path::new(device_a).exists()
    });
    // Its number is freed once the holder closes it.
    holder.kill().unwrap();
    holder.wait().unwrap();
    wait_until("the forced device is deleted", LIMIT, || {
        daemon
            .log()
            .contains("ublk device deleted: its last holder closed it")
    });

    // Held by no one: removed at once; the map is gone.
    let removed = daemon.ok(&["remove", "b"]);
    assert!(removed.contains("/dev/ublkb1015 removed"), "{removed}");
    wait_until("the device goes", LIMIT, || !Path::new(device_b).exists());
    let gone = daemon.error(&["remove", "b"]);
    assert!(gone.contains("no map named \"b\""), "{gone}");
    drop(daemon);
    let _ = std::fs::remove_dir_all(&config_dir);
}
