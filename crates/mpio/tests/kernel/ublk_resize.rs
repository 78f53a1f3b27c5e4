//! `mpio resize` of a map served as `/dev/ublkb1017`, over two file
//! paths to one file that grows: where the kernel can resize a live ublk
//! device (6.16 and later) the device follows the map and data written
//! past its old end reads back through it; on an older kernel the resize
//! is refused, naming the kernel, and nothing changes. Which of the two
//! is expected comes from the kernel's release, not from mpio; so does
//! which optional features `mpio show topology` says the device uses.

use crate::daemon::{test_dir, Daemon};
use crate::devices::{kernel_at_least, kernel_release, modprobe, read_attribute, wait_until};
use crate::failover::LIMIT;
use std::os::unix::fs::FileExt;
use std::path::Path;

const MIB: u64 = 1 << 20;
const DEVICE: &str = "/dev/ublkb1017";

/// The config of map `m`, `size` bytes over two file paths to `lun`,
/// served as /dev/ublkb1017.
fn config(lun: &Path, size: u64) -> String {
    let mut config = format!("[[map]]\nname = \"m\"\nsize = {size}\n");
    for path in ["a", "b"] {
        // The guest's root is a RAM file system: no O_DIRECT.
        config.push_str(&format!(
            "[[map.path]]\nname = \"{path}\"\nuri = \"file:{}?direct=0#{path}\"\n",
            lun.display()
        ));
    }
    config + "[[map.export]]\nublk = 1017\n"
}

/// The length of map `m`'s table, in sectors.
fn table_sectors(daemon: &Daemon) -> String {
    let table = daemon.ok(&["table", "m"]);
    table.split_whitespace().nth(1).unwrap().to_string()
}

/// The device's size in bytes, as the kernel has it.
fn device_bytes() -> u64 {
    let sectors = read_attribute("/sys/block/ublkb1017/size").expect("the device's size");
    sectors.parse::<u64>().unwrap() * 512
}

#[test]
#[ignore = "kernel test: needs root and ublk_drv; run scripts/kernel-test.sh"]
fn resize_grows_the_ublk_device_where_the_kernel_can() {
    modprobe(&["ublk_drv"]);
    let dir = test_dir("ublk-resize-files");
    let lun = dir.join("lun.img");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&lun)
        .unwrap();
    file.set_len(32 * MIB).unwrap();
    let config_file = dir.join("mpio.toml");
    std::fs::write(&config_file, config(&lun, 32 * MIB)).unwrap();
    let daemon = Daemon::start(
        test_dir("ublk-resize"),
        &["--config", config_file.to_str().unwrap()],
    );
    assert_eq!(daemon.devices, [DEVICE]);
    assert_eq!(device_bytes(), 32 * MIB);
    // The device says how its data moves and which of the kernel's
    // optional features serve it: those this kernel has.
    let topology = daemon.json(&["show", "topology", "m"]);
    let ublk = &topology[0]["ublk"][0];
    assert_eq!(ublk["device"], DEVICE, "{topology}");
    // Zero copy where the kernel registers the requests' pages itself
    // (UBLK_F_AUTO_BUF_REG, 6.16): both paths are files.
    let zero_copy = kernel_at_least(6, 16);
    let mode = if zero_copy {
        "zero copy"
    } else {
        "get-data copy"
    };
    assert_eq!(ublk["data_mode"], mode, "{topology}");
    let features = ublk["features"].to_string();
    assert!(features.contains("user recovery"), "{features}");
    assert_eq!(
        features.contains("live resize"),
        kernel_at_least(6, 16),
        "{features}"
    );
    assert_eq!(
        features.contains("safe stop"),
        kernel_at_least(7, 0),
        "{features}"
    );
    let text = daemon.ok(&["show", "topology", "m"]);
    assert!(
        text.contains(&format!("ublk /dev/ublkb1017: {mode}; user recovery")),
        "{text}"
    );

    // The LUN grows, holding data past the map's end.
    file.set_len(64 * MIB).unwrap();
    let pattern: Vec<u8> = (0..MIB).map(|byte| (byte * 13 % 251) as u8).collect();
    file.write_all_at(&pattern, 40 * MIB).unwrap();
    file.sync_all().unwrap();

    if kernel_at_least(6, 16) {
        let answer = daemon.ok(&["resize", "m"]);
        assert!(
            answer.contains("map m grown from 33554432 to 67108864 bytes"),
            "{answer}"
        );
        assert!(
            answer.contains("/dev/ublkb1017 is now 67108864 bytes"),
            "{answer}"
        );
        wait_until("the device takes its new size", LIMIT, || {
            device_bytes() == 64 * MIB
        });
        let device = std::fs::File::open(DEVICE).unwrap();
        let mut read = vec![0; MIB as usize];
        device.read_exact_at(&mut read, 40 * MIB).unwrap();
        assert!(read == pattern, "the data past the old end reads back");
        // And a write there goes to the file.
        let device = std::fs::OpenOptions::new()
            .write(true)
            .open(DEVICE)
            .unwrap();
        device.write_all_at(&[0x5a; 4096], 60 * MIB).unwrap();
        device.sync_all().unwrap();
        let mut back = [0; 4096];
        file.read_exact_at(&mut back, 60 * MIB).unwrap();
        assert!(back.iter().all(|&byte| byte == 0x5a));
    } else {
        let error = daemon.error(&["resize", "m"]);
        assert!(
            error.contains("cannot resize a live device") && error.contains("Linux 6.16"),
            "{error}"
        );
        assert!(
            error.contains(&kernel_release()),
            "names the kernel: {error}"
        );
        assert_eq!(device_bytes(), 32 * MIB, "the device keeps its size");
        assert_eq!(table_sectors(&daemon), "65536", "the map keeps its size");
    }
    // A reload keeps the size of a map a ublk device serves: only a
    // resize grows it.
    let sectors = table_sectors(&daemon);
    std::fs::write(&config_file, config(&lun, 48 * MIB)).unwrap();
    let refused = daemon.error(&["reload"]);
    assert!(
        refused.contains("a reload keeps a served map's size")
            && refused.contains("/dev/ublkb1017 is"),
        "{refused}"
    );
    assert_eq!(table_sectors(&daemon), sectors, "the map keeps its table");
    // A zero-copy device's paths stay files: a memory path could not
    // reach the request's pages.
    let memory = format!("0 {sectors} multipath 0 0 1 1 round-robin 0 1 1 memory:disk#port 1");
    if zero_copy {
        let refused = daemon.error(&["reload", "m", &memory]);
        assert!(
            refused.contains("/dev/ublkb1017 moves data by zero copy")
                && refused.contains("memory:disk#port"),
            "{refused}"
        );
        assert_eq!(table_sectors(&daemon), sectors, "the map keeps its table");
    }
    let removed = daemon.ok(&["remove", "m"]);
    assert!(removed.contains("/dev/ublkb1017 removed"), "{removed}");
    wait_until("the device goes", LIMIT, || !Path::new(DEVICE).exists());
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);
}
