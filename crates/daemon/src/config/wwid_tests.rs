//! Maps by WWID over a fake set of devices: their paths, sizes and
//! `group_by_prio` groups, the blacklist, `numa_node`, and the refusals.

use super::wwid::{FoundPath, PathSource};
use super::*;
use mpio_transport::blockdev::blacklist::Blacklist;
use mpio_transport::blockdev::wwid_forms::{same_lun, WwidForms};

/// Devices `sdb` (optimized, 1 GiB) and `sdc` (non-optimized, 1 GiB + 1
/// sector) with WWID `naa.1`, and `sdd` with `naa.2`; `naa.3` has `sdg`
/// (1 GiB) and `sdh`, which reports 0 bytes (an ALUA-unavailable LUN
/// after a rescan), and `naa.4` has only `sdi`, which reports 0; any
/// other WWID starting `naa.6` has `sde` and `sdf`; `sdj` has the T10
/// vendor id WWID `t10.DEC     321816758474`. A WWID may be asked for in
/// either form (`36…` is `naa.6…`), as the host's lookup takes it. The
/// block device `ublkb5` holds 2 GiB.
pub(super) struct Fake;

impl PathSource for Fake {
    fn paths_of(&self, wwid: &str, blacklist: &Blacklist) -> Vec<FoundPath> {
        let devices = [
            ("sdb", "naa.1", 1 << 30, 50),
            ("sdc", "naa.1", (1 << 30) + 512, 10),
            ("sdd", "naa.2", 1 << 30, 50),
            ("sdg", "naa.3", 1 << 30, 50),
            ("sdh", "naa.3", 0, 1),
            ("sdi", "naa.4", 0, 1),
            ("sdj", "t10.DEC     321816758474", 1 << 30, 50),
        ];
        devices
            .into_iter()
            .filter(|device| same_lun(device.1, wwid))
            .chain(
                WwidForms::of(wwid)
                    .kernel
                    .starts_with("naa.6")
                    .then_some([("sde", "", 1 << 30, 50), ("sdf", "", 1 << 30, 10)])
                    .into_iter()
                    .flatten(),
            )
            .filter(|device| {
                let sysfs = mpio_transport::blockdev::BlockDevice {
                    name: device.0.into(),
                    dev: String::new(),
                    transport: "scsi:fake".into(),
                    wwid: Some(device.1.into()),
                    size_bytes: device.2,
                    numa_node: None,
                    holders: Vec::new(),
                    access: None,
                    preferred: false,
                    nvme: None,
                };
                blacklist.excludes(&sysfs).is_none()
            })
            .map(|(name, _, size_bytes, prio)| FoundPath {
                name: name.into(),
                size_bytes,
                prio,
            })
            .collect()
    }

    fn device_bytes(&self, name: &str) -> Option<u64> {
        (name == "ublkb5").then_some(2 << 30)
    }
}

fn parse(text: &str) -> Result<DaemonConfig, ConfigError> {
    DaemonConfig::parse_with(text, &Fake)
}

#[test]
fn a_map_by_wwid_takes_the_devices_as_paths_grouped_by_their_state() {
    let config = parse(
        "[[map]]\nname = \"m\"\nwwid = \"naa.1\"\npath_grouping_policy = \"group_by_prio\"\n\
         selector = \"round-robin\"\n",
    )
    .unwrap();
    let map = &config.maps[0];
    assert_eq!(map.wwid.as_deref(), Some("naa.1"));
    assert_eq!(
        map.table.to_string(),
        "0 2097152 multipath 0 0 2 1 round-robin 0 1 1 sdb 1 round-robin 0 1 1 sdc 1",
        "the smaller device's size; the optimized path's group first"
    );
    let uris: Vec<&str> = map.paths.iter().map(|path| path.uri.as_str()).collect();
    assert_eq!(uris, ["file:/dev/sdb", "file:/dev/sdc"]);
}

/// A device that reports no size (0 bytes) is still a path, and never the
/// map's size: the devices that report one size it; with none, the map's
/// own ublk device left by a daemon that died does, or the config must.
#[test]
fn a_device_that_reports_no_size_never_sizes_the_map() {
    let map = |wwid: &str, export: &str| {
        format!(
            "[[map]]\nname = \"m\"\nwwid = \"{wwid}\"\npath_grouping_policy = \"multibus\"\n{export}"
        )
    };
    let config = parse(&map("naa.3", "")).unwrap();
    let names: Vec<&str> = config.maps[0]
        .paths
        .iter()
        .map(|path| path.name.as_str())
        .collect();
    assert_eq!(names, ["sdg", "sdh"], "the zero-sized device is a path");
    assert!(
        config.maps[0]
            .table
            .to_string()
            .starts_with("0 2097152 multipath"),
        "{}",
        config.maps[0].table
    );
    let recovered = parse(&map("naa.4", "[[map.export]]\nublk = 5\n")).unwrap();
    assert!(
        recovered.maps[0]
            .table
            .to_string()
            .starts_with("0 4194304 multipath"),
        "the recovered device's size: {}",
        recovered.maps[0].table
    );
    let error = parse(&map("naa.4", "[[map.export]]\nublk = 6\n")).unwrap_err();
    assert!(
        error
            .reason
            .contains("no device with this WWID reports a size"),
        "{error}"
    );
    let given = parse(&map("naa.4", "size = \"1G\"\n")).unwrap();
    assert!(given.maps[0]
        .table
        .to_string()
        .starts_with("0 2097152 multipath"));
}

#[test]
fn the_blacklist_holds_devices_out() {
    let config = "[blacklist]\ndevnode = [\"^sdb$\"]\n\
                  [[map]]\nname = \"m\"\nwwid = \"naa.1\"\npath_grouping_policy = \"multibus\"\n";
    let map = &parse(config).unwrap().maps[0];
    assert_eq!(map.paths.len(), 1);
    assert_eq!(map.paths[0].name, "sdc");
    let all_out =
        "[blacklist]\nwwid = [\"^naa\\\\.1$\"]\n[[map]]\nname = \"m\"\nwwid = \"naa.1\"\n";
    let error = parse(all_out).unwrap_err();
    assert_eq!(error.key, "map \"m\": wwid");
    assert!(
        error.reason.contains("no block device has this WWID"),
        "{error}"
    );
    let bad = parse("[blacklist]\ndevnode = [\"(\"]\n[[map]]\nname = \"m\"\nwwid = \"naa.1\"\n")
        .unwrap_err();
    assert_eq!((bad.key.as_str(), bad.line), ("blacklist: devnode[0]", 2));
}

/// `[blacklist_exceptions]` takes a device back from the blacklist, by
/// name or by WWID, and names a bad pattern by its section.
#[test]
fn blacklist_exceptions_take_devices_back() {
    let by_name =
        "[blacklist]\ndevnode = [\"^sd\"]\n[blacklist_exceptions]\ndevnode = [\"^sdc$\"]\n\
                   [[map]]\nname = \"m\"\nwwid = \"naa.1\"\npath_grouping_policy = \"multibus\"\n";
    let map = &parse(by_name).unwrap().maps[0];
    let names: Vec<&str> = map.paths.iter().map(|path| path.name.as_str()).collect();
    assert_eq!(names, ["sdc"]);
    let by_wwid =
        "[blacklist]\nwwid = [\"^naa\\\\.\"]\n[blacklist_exceptions]\nwwid = [\"^naa\\\\.1$\"]\n\
                   [[map]]\nname = \"m\"\nwwid = \"naa.1\"\npath_grouping_policy = \"multibus\"\n";
    assert_eq!(parse(by_wwid).unwrap().maps[0].paths.len(), 2);
    let bad =
        parse("[blacklist_exceptions]\nwwid = [\"[\"]\n[[map]]\nname = \"m\"\nwwid = \"naa.1\"\n")
            .unwrap_err();
    assert_eq!(
        (bad.key.as_str(), bad.line),
        ("blacklist_exceptions: wwid[0]", 2)
    );
}

#[test]
fn a_map_by_wwid_lists_no_paths_of_its_own() {
    let error = parse(
        "[[map]]\nname = \"m\"\nwwid = \"naa.1\"\n[[map.path]]\nname = \"a\"\nuri = \"null:1G\"\n",
    )
    .unwrap_err();
    assert_eq!(error.line, 4);
    assert!(error.reason.contains("lists no paths"), "{error}");
    let error = parse("[[map]]\nname = \"m\"\nwwid = \"naa.9\"\n").unwrap_err();
    assert_eq!((error.line, error.key.as_str()), (3, "map \"m\": wwid"));
}

/// A path's `numa_node` reaches the map's options; out of range is
/// refused.
#[test]
fn numa_node_is_read_per_path() {
    let text = |node: &str| {
        format!(
            "[[map]]\nname = \"m\"\nsize = \"1G\"\n[[map.path]]\nname = \"a\"\n\
             uri = \"null:1G\"\nnuma_node = {node}\n[[map.path]]\nname = \"b\"\nuri = \"null:1G?latency_ns=1\"\n"
        )
    };
    let config = parse(&text("1")).unwrap();
    let options = config.maps[0].options();
    assert_eq!(options.path_nodes.get("a"), Some(&1));
    assert_eq!(options.path_nodes.get("b"), None);
    let error = parse(&text("5000")).unwrap_err();
    assert_eq!(error.key, "map \"m\" path \"a\": numa_node");
}
