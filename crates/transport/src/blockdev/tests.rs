//! Discovery over a fake sysfs tree laid out as the kernel lays it out:
//! `/sys/block/<name>` links into `/sys/devices`, whose `device` link
//! leads to the SCSI device or NVMe controller.

use super::blacklist::Blacklist;
use super::discover::{discover, paths_of, Discovery};
use super::*;
use std::os::unix::fs::symlink;

/// Builds files and links under a temporary root.
struct FakeSysfs {
    root: tempfile::TempDir,
}

impl FakeSysfs {
    fn new() -> Self {
        FakeSysfs {
            root: tempfile::tempdir().unwrap(),
        }
    }

    fn file(&self, path: &str, text: &str) {
        let path = self.root.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn link(&self, path: &str, target: &str) {
        let path = self.root.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, path).unwrap();
    }

    fn sysfs(&self) -> Sysfs {
        Sysfs::at(self.root.path())
    }

    /// A SCSI disk `name` (`dev`) at `hctl` behind host `host` of a PCI
    /// function on node `node`.
    fn scsi_disk(&self, name: &str, dev: &str, hctl: &str, wwid: Option<&str>, access: &str) {
        let host = hctl.split(':').next().unwrap();
        let function = format!("devices/pci0000:00/0000:00:0{host}.0");
        self.file(&format!("{function}/numa_node"), "1\n");
        self.file(
            &format!("{function}/host{host}/scsi_host/host{host}/proc_name"),
            "tcm_loopback\n",
        );
        let target = format!("{function}/host{host}/target{host}:0:0/{hctl}");
        self.file(&format!("{target}/scsi_level"), "7\n");
        if let Some(wwid) = wwid {
            self.file(&format!("{target}/wwid"), &format!("{wwid}\n"));
        }
        self.file(&format!("{target}/access_state"), &format!("{access}\n"));
        self.file(&format!("{target}/preferred_path"), "0\n");
        let block = format!("{target}/block/{name}");
        self.file(&format!("{block}/dev"), &format!("{dev}\n"));
        self.file(&format!("{block}/size"), "2097152\n");
        std::fs::create_dir_all(self.root.path().join(&block).join("holders")).unwrap();
        self.link(&format!("{block}/device"), "../..");
        self.link(&format!("block/{name}"), &format!("../{block}"));
        self.link(&format!("dev/block/{dev}"), &format!("../../{block}"));
    }

    /// An NVMe-oF namespace `name` of controller `controller`.
    fn nvme_namespace(&self, name: &str, controller: &str, files: &[(&str, &str)]) {
        let ctrl = format!("devices/virtual/nvme-fabrics/ctl/{controller}");
        self.file(&format!("{ctrl}/transport"), "loop\n");
        self.file(&format!("{ctrl}/numa_node"), "-1\n");
        let block = format!("{ctrl}/{name}");
        self.file(&format!("{block}/dev"), "259:1\n");
        self.file(&format!("{block}/size"), "1024\n");
        self.file(&format!("{block}/nsid"), "1\n");
        for (file, text) in files {
            self.file(&format!("{block}/{file}"), text);
        }
        self.link(&format!("{block}/device"), "..");
        self.link(&format!("block/{name}"), &format!("../{block}"));
    }
}

const NAA: &str = "naa.6001405abcdef0123456789abcdef012";

#[test]
fn scsi_facts_come_from_the_device_and_its_adapter() {
    let fake = FakeSysfs::new();
    fake.scsi_disk("sdb", "8:16", "2:0:0:0", Some(NAA), "active/optimized");
    std::fs::create_dir_all(fake.root.path().join("block/sdb/holders/dm-0")).unwrap();
    let device = fake.sysfs().device("sdb").unwrap();
    assert_eq!(device.wwid.as_deref(), Some(NAA));
    assert_eq!(device.transport, "scsi:tcm_loopback");
    assert_eq!(device.size_bytes, 1 << 30);
    assert_eq!(device.numa_node, Some(1), "the PCI function's node");
    assert_eq!(device.holders, ["dm-0"]);
    assert_eq!(device.access, Some(AccessState::Optimized));
    assert_eq!(device.dev, "8:16");
    assert_eq!(fake.sysfs().name_of(8, 16).as_deref(), Some("sdb"));
    assert_eq!(fake.sysfs().name_of(8, 32), None);
    // A dm path word `8:16` is the link `/dev/block/8:16`: its numbers
    // name the device, whether or not udev made the link.
    let by_numbers = Path::new("/dev/block/8:16");
    assert_eq!(
        name_of_node(&fake.sysfs(), by_numbers).as_deref(),
        Some("sdb")
    );
    assert_eq!(
        name_of_node(&fake.sysfs(), Path::new("/dev/block/8:32")),
        None
    );
}

/// Without `device/wwid` the WWID comes from VPD page 0x83.
#[test]
fn scsi_wwid_falls_back_to_vpd_page_83() {
    let fake = FakeSysfs::new();
    fake.scsi_disk("sdc", "8:32", "3:0:0:0", None, "standby");
    let mut page = vec![0, 0x83, 0, 12, 1, 0x02, 0, 8];
    page.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    std::fs::write(fake.root.path().join("block/sdc/device/vpd_pg83"), &page).unwrap();
    let device = fake.sysfs().device("sdc").unwrap();
    assert_eq!(device.wwid.as_deref(), Some("eui.0102030405060708"));
    assert_eq!(device.access, Some(AccessState::Standby));
}

#[test]
fn nvme_facts_come_from_the_namespace_and_its_controller() {
    let fake = FakeSysfs::new();
    fake.nvme_namespace("nvme1n1", "nvme1", &[("wwid", "uuid.1234\n")]);
    fake.nvme_namespace(
        "nvme2n1",
        "nvme2",
        &[("nguid", "0102-0304-0506-0708-090a-0b0c-0d0e-0f10\n")],
    );
    let first = fake.sysfs().device("nvme1n1").unwrap();
    assert_eq!(first.wwid.as_deref(), Some("uuid.1234"));
    assert_eq!(first.transport, "nvme:loop");
    assert_eq!(first.numa_node, None, "-1 is no node");
    assert_eq!(first.access, None, "no ana_state: read the log page");
    assert_eq!(
        first.nvme,
        Some(NvmeNamespace {
            controller: "nvme1".into(),
            nsid: 1
        })
    );
    let second = fake.sysfs().device("nvme2n1").unwrap();
    assert_eq!(
        second.wwid.as_deref(),
        Some("eui.0102030405060708090a0b0c0d0e0f10")
    );
}

/// Each LUN's WWID and its paths' names.
fn wwids_and_paths(found: &Discovery) -> Vec<(&str, Vec<&str>)> {
    found
        .luns
        .iter()
        .map(|lun| {
            (
                lun.wwid.as_str(),
                lun.paths.iter().map(|path| path.name.as_str()).collect(),
            )
        })
        .collect()
}

/// Two SCSI paths and two NVMe paths make two LUNs; a loop device is
/// blacklisted by default, a disk without a WWID is no path, and a
/// config's wwid pattern removes a LUN.
#[test]
fn devices_group_by_wwid_and_the_blacklist_holds_some_out() {
    let fake = FakeSysfs::new();
    fake.scsi_disk("sdb", "8:16", "2:0:0:0", Some(NAA), "active/optimized");
    fake.scsi_disk("sdc", "8:32", "3:0:0:0", Some(NAA), "active/non-optimized");
    fake.scsi_disk("sdd", "8:48", "4:0:0:0", None, "active/optimized");
    fake.nvme_namespace("nvme1n1", "nvme1", &[("wwid", "uuid.1234\n")]);
    fake.nvme_namespace("nvme2n1", "nvme2", &[("wwid", "uuid.1234\n")]);
    fake.file("devices/virtual/block/loop0/dev", "7:0\n");
    fake.link("block/loop0", "../devices/virtual/block/loop0");
    let found = discover(&fake.sysfs(), &Blacklist::default());
    let luns = wwids_and_paths(&found);
    assert_eq!(
        luns,
        [
            (NAA, vec!["sdb", "sdc"]),
            ("uuid.1234", vec!["nvme1n1", "nvme2n1"])
        ]
    );
    let excluded: Vec<(&str, &str)> = found
        .excluded
        .iter()
        .map(|device| (device.name.as_str(), device.reason.as_str()))
        .collect();
    assert_eq!(excluded.len(), 2);
    assert!(excluded[0].0 == "loop0" && excluded[0].1.starts_with("blacklisted: devnode"));
    assert_eq!(excluded[1], ("sdd", "no wwid"));
    let blacklist = Blacklist::new(&[], &["^uuid\\.".into()]).unwrap();
    assert!(paths_of(&fake.sysfs(), &blacklist, "uuid.1234").is_empty());
    assert_eq!(paths_of(&fake.sysfs(), &blacklist, NAA).len(), 2);
    let error = Blacklist::new(&["(".into()], &[]).unwrap_err();
    assert!(error.starts_with("pattern \"(\""), "{error}");
}

/// An exception takes a device back from every pattern that matches it
/// (the built-in list is the first devnode pattern, so it yields too), by
/// the device's name or its WWID; a device without a WWID stays out.
#[test]
fn blacklist_exceptions_take_devices_back() {
    let fake = FakeSysfs::new();
    fake.scsi_disk("sdb", "8:16", "2:0:0:0", Some(NAA), "active/optimized");
    fake.scsi_disk("sdd", "8:48", "4:0:0:0", None, "active/optimized");
    fake.nvme_namespace("nvme1n1", "nvme1", &[("wwid", "uuid.1234\n")]);
    fake.nvme_namespace("nvme2n1", "nvme2", &[("wwid", "uuid.1234\n")]);
    let every_disk = Blacklist::new(&["^(sd|nvme)".into()], &["^uuid\\.".into()]).unwrap();
    assert!(discover(&fake.sysfs(), &every_disk).luns.is_empty());
    // By name: nvme2n1 only (its WWID is blacklisted too, and excepted
    // with it); by WWID: the SCSI disk.
    let blacklist = every_disk
        .with_exceptions(&["^nvme2n1$".into(), "^sdd$".into()], &[format!("^{NAA}$")])
        .unwrap();
    let found = discover(&fake.sysfs(), &blacklist);
    let luns = wwids_and_paths(&found);
    assert_eq!(luns, [(NAA, vec!["sdb"]), ("uuid.1234", vec!["nvme2n1"])]);
    let reason = |name: &str| {
        found
            .excluded
            .iter()
            .find(|device| device.name == name)
            .map(|device| device.reason.clone())
    };
    assert_eq!(reason("sdd").as_deref(), Some("no wwid"));
    assert!(reason("nvme1n1").is_some_and(|reason| reason.starts_with("blacklisted: devnode")));
    let error = Blacklist::default()
        .with_exceptions(&[], &["[".into()])
        .unwrap_err();
    assert!(error.starts_with("pattern \"[\""), "{error}");
}

/// multipath-tools' form of a WWID (`3` and the NAA's hex, as udev's
/// `scsi_id` writes it) finds the devices whose sysfs WWID is the
/// kernel's `naa.` form, in a lookup and in blacklist patterns and
/// exceptions; discovery shows both forms.
#[test]
fn udev_and_kernel_forms_find_the_same_devices() {
    let fake = FakeSysfs::new();
    fake.scsi_disk("sdb", "8:16", "2:0:0:0", Some(NAA), "active/optimized");
    fake.scsi_disk("sdc", "8:32", "3:0:0:0", Some(NAA), "active/non-optimized");
    fake.nvme_namespace("nvme1n1", "nvme1", &[("wwid", "uuid.1234\n")]);
    let udev = "36001405abcdef0123456789abcdef012";
    let names = |wwid: &str, blacklist: &Blacklist| -> Vec<String> {
        paths_of(&fake.sysfs(), blacklist, wwid)
            .into_iter()
            .map(|device| device.name)
            .collect()
    };
    let open = Blacklist::default();
    assert_eq!(names(NAA, &open), ["sdb", "sdc"]);
    assert_eq!(names(udev, &open), ["sdb", "sdc"]);
    assert_eq!(names(&udev.to_ascii_uppercase(), &open), ["sdb", "sdc"]);
    assert!(names("36001405abcdef0123456789abcdef013", &open).is_empty());
    let found = discover(&fake.sysfs(), &open);
    assert_eq!(found.luns[0].udev_wwid.as_deref(), Some(udev));
    assert_eq!(found.luns[1].udev_wwid, None, "NVMe has one form");
    let by_udev = Blacklist::new(&[], &["^36001405".into()]).unwrap();
    assert!(names(NAA, &by_udev).is_empty());
    let taken_back = Blacklist::new(&[], &[".*".into()])
        .unwrap()
        .with_exceptions(&[], &[format!("^{udev}$")])
        .unwrap();
    assert_eq!(names(NAA, &taken_back), ["sdb", "sdc"]);
}
