//! `mpio discover` over a fake sysfs tree (`--sysfs`): two NVMe
//! namespaces of one WWID behind two controllers, a SCSI disk without a
//! WWID and a loop device; the listing, the JSON and a config that
//! checks.

mod common;

use common::{mpio, stderr, stdout};
use mpio_daemon::config::wwid::{FoundPath, PathSource};
use mpio_daemon::config::DaemonConfig;
use mpio_transport::blockdev::blacklist::Blacklist;
use std::path::Path;

/// Writes `text` at `path` under `root`, making its directories.
fn put(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Links `path` under `root` to `target`.
fn link(root: &Path, path: &str, target: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, path).unwrap();
}

fn fake_sysfs() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path();
    for (controller, minor) in [("nvme0", 1), ("nvme1", 2)] {
        let ctrl = format!("devices/virtual/nvme-fabrics/ctl/{controller}");
        put(root_path, &format!("{ctrl}/transport"), "loop\n");
        put(root_path, &format!("{ctrl}/numa_node"), "0\n");
        let block = format!("{ctrl}/{controller}n1");
        put(
            root_path,
            &format!("{block}/dev"),
            &format!("259:{minor}\n"),
        );
        put(root_path, &format!("{block}/size"), "2048\n");
        put(root_path, &format!("{block}/nsid"), "1\n");
        put(root_path, &format!("{block}/wwid"), "uuid.0f1e2d3c\n");
        link(root_path, &format!("{block}/device"), "..");
        link(
            root_path,
            &format!("block/{controller}n1"),
            &format!("../{block}"),
        );
    }
    put(root_path, "devices/virtual/block/loop0/dev", "7:0\n");
    link(root_path, "block/loop0", "../devices/virtual/block/loop0");
    root
}

#[test]
fn discover_lists_one_wwid_with_its_two_paths() {
    let sysfs = fake_sysfs();
    let root = sysfs.path().to_str().unwrap();
    let output = mpio(&["discover", "--sysfs", root]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "uuid.0f1e2d3c size=1M paths=2", "{text}");
    assert!(lines[1].starts_with("  nvme0n1 259:1 nvme:loop "), "{text}");
    assert!(lines[1].ends_with(" numa_node=0"), "{text}");
    assert!(lines[2].starts_with("  nvme1n1 259:2 nvme:loop "), "{text}");
    assert!(
        lines[3].starts_with("not a path: loop0 (blacklisted"),
        "{text}"
    );

    let output = mpio(&["discover", "--sysfs", root, "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["luns"][0]["wwid"], "uuid.0f1e2d3c");
    assert_eq!(json["luns"][0]["paths"][1]["nvme"]["controller"], "nvme1");
    assert_eq!(json["excluded"][0]["name"], "loop0");
}

/// `--blacklist-from` applies a config's `[blacklist]` and
/// `[blacklist_exceptions]`: the WWID blacklisted, one of its two paths
/// taken back by name.
#[test]
fn discover_applies_the_config_s_blacklist_and_its_exceptions() {
    let sysfs = fake_sysfs();
    let root = sysfs.path().to_str().unwrap();
    let config = sysfs.path().join("mpio.toml");
    std::fs::write(
        &config,
        "[blacklist]\nwwid = [\"^uuid\\\\.\"]\n[blacklist_exceptions]\ndevnode = [\"^nvme1n1$\"]\n\
         [[map]]\nname = \"m\"\nsize = \"1M\"\n[[map.path]]\nname = \"a\"\nuri = \"null:1M\"\n",
    )
    .unwrap();
    let output = mpio(&[
        "discover",
        "--sysfs",
        root,
        "--blacklist-from",
        config.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "uuid.0f1e2d3c size=1M paths=1", "{text}");
    assert!(lines[1].starts_with("  nvme1n1 "), "{text}");
    assert!(
        text.contains("not a path: nvme0n1 (blacklisted: wwid"),
        "{text}"
    );
}

/// The devices the fake tree has, as the daemon would find them.
struct Found;

impl PathSource for Found {
    fn paths_of(&self, wwid: &str, _blacklist: &Blacklist) -> Vec<FoundPath> {
        assert_eq!(wwid, "uuid.0f1e2d3c");
        ["nvme0n1", "nvme1n1"]
            .into_iter()
            .map(|name| FoundPath {
                name: name.into(),
                size_bytes: 1 << 20,
                prio: 50,
            })
            .collect()
    }

    fn device_bytes(&self, _name: &str) -> Option<u64> {
        None
    }
}

#[test]
fn discover_writes_a_config_that_checks() {
    let sysfs = fake_sysfs();
    let root = sysfs.path().to_str().unwrap();
    let output = mpio(&[
        "discover",
        "--sysfs",
        root,
        "--config",
        "--run-dir",
        "/run/x",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let config =
        DaemonConfig::parse_with(&text, &Found).unwrap_or_else(|error| panic!("{error}\n{text}"));
    assert_eq!(config.maps.len(), 1);
    let map = &config.maps[0];
    assert_eq!(map.name, "mpatha");
    assert_eq!(map.wwid.as_deref(), Some("uuid.0f1e2d3c"));
    assert_eq!(
        map.table.to_string(),
        "0 2048 multipath 0 0 1 1 service-time 0 2 2 nvme0n1 1 1 nvme1n1 1 1"
    );
    assert_eq!(
        map.exports[0].socket.as_deref(),
        Some(Path::new("/run/x/mpatha.sock"))
    );
}

/// A SCSI disk's WWID is listed in the kernel's form and, in brackets,
/// in the form multipath.conf and udev write it; JSON has both.
#[test]
fn discover_shows_both_forms_of_a_scsi_wwid() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path();
    let target = "devices/pci0000:00/0000:00:02.0/host2/target2:0:0/2:0:0:0";
    put(root_path, &format!("{target}/scsi_level"), "7\n");
    put(
        root_path,
        &format!("{target}/wwid"),
        "naa.600a098038303053\n",
    );
    let block = format!("{target}/block/sdb");
    put(root_path, &format!("{block}/dev"), "8:16\n");
    put(root_path, &format!("{block}/size"), "2048\n");
    link(root_path, &format!("{block}/device"), "../..");
    link(root_path, "block/sdb", &format!("../{block}"));
    let root = root_path.to_str().unwrap();
    let output = mpio(&["discover", "--sysfs", root]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("naa.600a098038303053 (3600a098038303053) size=1M paths=1\n"),
        "{text}"
    );
    let output = mpio(&["discover", "--sysfs", root, "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["luns"][0]["wwid"], "naa.600a098038303053");
    assert_eq!(json["luns"][0]["udev_wwid"], "3600a098038303053");
}
