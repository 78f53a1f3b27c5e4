//! NVMe paths without native multipath (`nvme_core.multipath=N`): two
//! nvme-loop controllers to one namespace are two block devices with one
//! WWID. `mpio discover` shows them as one LUN with two paths and reads
//! each one's ANA state from its controller's log page; a map by that
//! WWID under fio verify follows port 1's ANA state (non-optimized, then
//! inaccessible, then back) and the port's removal and return, with no
//! error seen by fio.

use crate::common::{mpio, stderr, stdout};
use crate::devices::wait_until;
use crate::failover::{
    assert_only_one_serves, finish_clean, serve_by_wwid, verify_running_through, wait_for_access,
    wait_serves, LIMIT,
};
use crate::nvme::NvmeLoop;

/// `mpio discover --json`'s LUN `wwid`, if listed.
fn discovered(wwid: &str) -> Option<serde_json::Value> {
    let output = mpio(&["discover", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    json["luns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|lun| lun["wwid"] == wwid)
        .cloned()
}

/// The access state `discover` gives device `name` of LUN `lun`.
fn access_in(lun: &serde_json::Value, name: &str) -> String {
    let path = lun["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|path| path["name"] == name);
    path.map_or_else(String::new, |path| {
        path["access"].as_str().unwrap_or("").to_string()
    })
}

#[test]
#[ignore = "kernel test: needs root, nvmet and nvme-loop; run scripts/kernel-test.sh"]
fn discover_shows_one_wwid_with_two_nvme_paths_and_their_ana_states() {
    let target = NvmeLoop::new("mpio-kt-discover", 64, [11, 12]);
    let wwid = target.wwid();
    let first = target.device_of(11).unwrap();
    let second = target.device_of(12).unwrap();
    let lun = discovered(&wwid).expect("the namespace's WWID is listed");
    let names: Vec<&str> = lun["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|path| path["name"].as_str().unwrap())
        .collect();
    let mut expected = [first.as_str(), second.as_str()];
    expected.sort();
    assert_eq!(names, expected, "{lun}");
    for path in lun["paths"].as_array().unwrap() {
        assert_eq!(path["transport"], "nvme:loop", "{lun}");
        assert_eq!(path["access"], "optimized", "{lun}");
    }
    // The state comes from the controller's ANA log page: no sysfs file
    // holds it with native multipath off.
    assert!(!std::path::Path::new(&format!("/sys/block/{first}/ana_state")).exists());
    target.set_ana(11, "non-optimized");
    wait_until("discover reads port 11's new state", LIMIT, || {
        discovered(&wwid).is_some_and(|lun| access_in(&lun, &first) == "non-optimized")
    });
    let lun = discovered(&wwid).unwrap();
    assert_eq!(access_in(&lun, &second), "optimized", "{lun}");
    target.set_ana(11, "inaccessible");
    wait_until("discover reads port 11 inaccessible", LIMIT, || {
        discovered(&wwid).is_some_and(|lun| access_in(&lun, &first) == "inaccessible")
    });
}

#[test]
#[ignore = "kernel test: needs root, nvmet and nvme-loop; run scripts/kernel-test.sh"]
fn a_map_by_wwid_follows_ana_states_under_fio_verify() {
    let target = NvmeLoop::new("mpio-kt-ana", 256, [21, 22]);
    let first = target.device_of(21).unwrap();
    let second = target.device_of(22).unwrap();
    let daemon = serve_by_wwid("kernel-ana", &target.wwid());
    let fio = verify_running_through(&daemon, &first);
    for state in ["non-optimized", "inaccessible"] {
        target.set_ana(21, state);
        let took = wait_for_access(&daemon, &first, state);
        eprintln!("{first} seen {state} after {took:?}");
        assert_only_one_serves(&daemon, &first, &second);
    }
    target.set_ana(21, "optimized");
    wait_for_access(&daemon, &first, "optimized");
    wait_serves(&daemon, &first, 100, "the path serves again");
    finish_clean(fio);
}

#[test]
#[ignore = "kernel test: needs root, nvmet and nvme-loop; run scripts/kernel-test.sh"]
fn a_removed_port_leaves_the_map_and_its_return_rejoins_it() {
    let target = NvmeLoop::new("mpio-kt-hotplug", 256, [31, 32]);
    let first = target.device_of(31).unwrap();
    let second = target.device_of(32).unwrap();
    let daemon = serve_by_wwid("kernel-hotplug", &target.wwid());
    let fio = verify_running_through(&daemon, &first);
    target.remove_port(31);
    let listed = |name: &str| {
        daemon
            .json(&["show", "paths"])
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["name"] == name)
    };
    wait_until("the vanished device leaves the map", LIMIT, || {
        !listed(&first)
    });
    wait_serves(&daemon, &second, 300, "the other path serves");
    target.add_port(31);
    let returned = target.device_of(31).unwrap();
    wait_until("the returned device joins the map", LIMIT, || {
        listed(&returned)
    });
    wait_serves(&daemon, &returned, 100, "the returned path serves");
    finish_clean(fio);
}
