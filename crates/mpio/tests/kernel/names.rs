//! Stable names: two `scsi_debug` LUNs, each a map by WWID without a
//! name under `user_friendly_names`, each exported as a ublk device. The
//! daemon is started twice, the second time with the LUNs found by the
//! kernel in the other order (the first LUN deleted and scanned again,
//! so it comes back under a later `sd` name) and the maps listed in the
//! other order on other device numbers: each WWID keeps its name, the
//! bindings file is not rewritten, and `/dev/mpio/NAME` and
//! `/dev/disk/by-id/mpio-WWID` lead to the map's device while it serves
//! and are gone once a SIGTERM removed it.

use crate::daemon::{test_dir, Daemon};
use crate::devices::{
    clean_up, modprobe, modprobe_fresh, read_attribute, wait_until, write_attribute,
};
use crate::failover::LIMIT;
use crate::scsi::disks_where;
use crate::ublk::terminate;
use std::path::{Path, PathBuf};

/// The first map's ublk number; the next map's is the next.
const FIRST_UBLK: usize = 41;

/// `scsi_debug` with two LUNs (two WWIDs); unloaded when dropped.
struct TwoLuns;

impl TwoLuns {
    fn new() -> TwoLuns {
        modprobe(&["sd_mod"]);
        modprobe_fresh("scsi_debug", &["dev_size_mb=16", "max_luns=2"]);
        wait_until("both scsi_debug LUNs appear", LIMIT, || {
            disks_where("model", "scsi_debug").len() == 2
        });
        TwoLuns
    }

    /// The disks (`sdb`) with their WWIDs, in the kernel's name order.
    fn disks(&self) -> Vec<(String, String)> {
        disks_where("model", "scsi_debug")
            .into_iter()
            .map(|disk| {
                let wwid = read_attribute(&format!("/sys/block/{disk}/device/wwid"))
                    .expect("a scsi_debug LUN has a WWID");
                (disk, wwid)
            })
            .collect()
    }
}

impl Drop for TwoLuns {
    fn drop(&mut self) {
        clean_up("modprobe", &["-r", "scsi_debug"]);
    }
}

/// A WWID as multipath-tools writes it (`naa.3333…` is `33333…`).
fn udev_form(wwid: &str) -> String {
    wwid.strip_prefix("naa.")
        .map_or_else(|| wwid.to_string(), |hex| format!("3{hex}"))
}

/// The config: a map by each WWID, in this order, exported on `ublk`
/// numbers 41, 42, ... and removed at a stop; names from the bindings
/// file in `dir`.
fn write_config(dir: &Path, wwids: &[&str], bindings: &Path) -> PathBuf {
    // Devices removed at a stop (not kept for a next daemon), so that
    // their links go with them.
    let mut text = format!(
        "user_friendly_names = true\nbindings_file = {:?}\n[ublk]\non_stop = \"remove\"\n",
        bindings.display().to_string()
    );
    for (index, wwid) in wwids.iter().enumerate() {
        text.push_str(&format!(
            "[[map]]\nwwid = {wwid:?}\n[[map.export]]\nublk = {}\n",
            FIRST_UBLK + index
        ));
    }
    let config = dir.join(format!("mpio-{}.toml", wwids[0]));
    std::fs::write(&config, text).unwrap();
    config
}

/// Where `link` leads, if it is a link.
fn target(link: &str) -> Option<PathBuf> {
    std::fs::read_link(link).ok()
}

/// Starts the daemon on `wwids` (in that order), checks each map's name
/// and links, stops it with SIGTERM and checks the links went with the
/// devices.
fn start_check_stop(round: &str, wwids: &[&str], bindings: &Path, names: &[(&str, &str)]) {
    let config_dir = test_dir(&format!("names-config-{round}"));
    let config = write_config(&config_dir, wwids, bindings);
    let mut daemon = Daemon::start(
        test_dir(&format!("names-{round}")),
        &["--config", config.to_str().unwrap()],
    );
    let devices: Vec<String> = (0..wwids.len())
        .map(|index| format!("/dev/ublkb{}", FIRST_UBLK + index))
        .collect();
    assert_eq!(daemon.devices, devices, "{round}");
    let mut links = Vec::new();
    for (number, wwid) in wwids.iter().enumerate() {
        let device = format!("ublkb{}", FIRST_UBLK + number);
        let name = names.iter().find(|(w, _)| w == wwid).unwrap().1;
        let status = daemon.json(&["status", name]);
        assert_eq!(
            status["size_bytes"],
            16 << 20,
            "{round}: map {name}: {status}"
        );
        let by_name = format!("/dev/mpio/{name}");
        let by_wwid = format!("/dev/disk/by-id/mpio-{}", udev_form(wwid));
        assert_eq!(
            target(&by_name),
            Some(Path::new("..").join(&device)),
            "{round}: {by_name}"
        );
        assert_eq!(
            target(&by_wwid),
            Some(Path::new("../..").join(&device)),
            "{round}: {by_wwid}"
        );
        assert_eq!(
            std::fs::canonicalize(&by_name).unwrap(),
            Path::new("/dev").join(&device)
        );
        links.push(by_name);
        links.push(by_wwid);
    }
    terminate(&mut daemon);
    for link in links {
        assert_eq!(target(&link), None, "{round}: {link} outlived its device");
    }
    let _ = std::fs::remove_dir_all(config_dir);
}

#[test]
#[ignore = "kernel test: needs root, scsi_debug and ublk_drv; run scripts/kernel-test.sh"]
fn two_starts_finding_the_luns_in_another_order_give_the_same_names_and_links() {
    modprobe(&["ublk_drv"]);
    let luns = TwoLuns::new();
    let first = luns.disks();
    let [(_, first_wwid), (_, second_wwid)] = [first[0].clone(), first[1].clone()];
    assert_ne!(first_wwid, second_wwid, "two LUNs, two WWIDs");
    // New names go in sorted WWID order.
    let mut sorted = [first_wwid.as_str(), second_wwid.as_str()];
    sorted.sort_by_key(|wwid| udev_form(wwid));
    let names = [(sorted[0], "mpatha"), (sorted[1], "mpathb")];
    let dir = test_dir("names-bindings");
    let bindings = dir.join("bindings");

    start_check_stop("first", &[&first_wwid, &second_wwid], &bindings, &names);
    let written = std::fs::read_to_string(&bindings).unwrap();
    for (wwid, name) in names {
        assert!(
            written.contains(&format!("{name} {}\n", udev_form(wwid))),
            "{written}"
        );
    }

    // Both LUNs found again, the one named second first: the kernel
    // names them the other way round now. (Which LUN was named first
    // depends on the machine's load at the module's own scan.)
    let lun_of = |disk: &str| {
        let address = std::fs::read_link(format!("/sys/block/{disk}/device")).unwrap();
        let address = address.file_name().unwrap().to_string_lossy().into_owned();
        address.rsplit(':').next().unwrap().to_string()
    };
    let rescan_order = [lun_of(&first[1].0), lun_of(&first[0].0)];
    for (disk, _) in &first {
        write_attribute(
            &PathBuf::from(format!("/sys/block/{disk}/device/delete")),
            "1",
        );
    }
    wait_until("both LUNs are gone", LIMIT, || luns.disks().is_empty());
    let host = std::fs::read_dir("/sys/class/scsi_host")
        .unwrap()
        .flatten()
        .map(|host| host.path())
        .find(|host| {
            read_attribute(host.join("proc_name").to_str().unwrap()).as_deref()
                == Some("scsi_debug")
        })
        .expect("the scsi_debug host");
    for (lun, count) in rescan_order.iter().zip([1, 2]) {
        write_attribute(&host.join("scan"), &format!("0 0 {lun}"));
        wait_until(&format!("LUN {lun} is back"), LIMIT, || {
            luns.disks().len() == count
        });
    }
    let again = luns.disks();
    assert_eq!(again[0].1, second_wwid, "found first now: {again:?}");

    start_check_stop("second", &[&second_wwid, &first_wwid], &bindings, &names);
    assert_eq!(std::fs::read_to_string(&bindings).unwrap(), written);
    let _ = std::fs::remove_dir_all(dir);
}
