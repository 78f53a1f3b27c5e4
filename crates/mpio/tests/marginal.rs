//! Marginal paths end to end: a path whose nbdkit server fails reads, then
//! recovers, twice within the window is held out by the daemon's checker
//! although its probes succeed again, shown as `marginal` by `mpio show
//! paths` and `mpio show topology`, and let back by an admin's
//! `reinstate_path`.

mod common;
mod daemon;

use daemon::{Daemon, Nbdkit};
use mpio_test_support::wait_until;

/// The row of `path` in `mpio show paths --json`.
fn row(daemon: &Daemon, path: &str) -> serde_json::Value {
    let rows = daemon.json(&["show", "paths", "m"]);
    rows.as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == path)
        .cloned()
        .unwrap()
}

/// Waits until `test` holds for `path`'s row (only a hang reaches
/// the bound).
fn wait_for(daemon: &Daemon, path: &str, what: &str, test: impl Fn(&serde_json::Value) -> bool) {
    wait_until(&format!("{path} {what}"), || test(&row(daemon, path)));
}

/// Probes of `row`'s path that succeeded.
fn good_probes(row: &serde_json::Value) -> u64 {
    row["probes"].as_u64().unwrap() - row["failed_probes"].as_u64().unwrap()
}

#[test]
fn a_flapping_path_is_held_out_as_marginal_until_the_admin_lets_it_back() {
    let dir = daemon::test_dir("marginal");
    let disk = dir.join("disk.img");
    std::fs::File::create(&disk)
        .and_then(|file| file.set_len(4 << 20))
        .unwrap();
    let fail = dir.join("flaky.fail");
    let disk_arg = disk.display().to_string();
    let error_file = format!("error-file={}", fail.display());
    let flaky = Nbdkit::nbdkit(
        &dir.join("flaky.sock"),
        &[
            "--filter=error",
            "file",
            &disk_arg,
            "error=EIO",
            "error-rate=100%",
            &error_file,
        ],
    );
    let steady = Nbdkit::nbdkit(&dir.join("steady.sock"), &["file", &disk_arg]);
    // The window and the recovery time are an hour and a probe may take
    // two minutes: however slow the machine, the two failures fall in
    // one window, the path is not let back on its own while the test
    // looks, and only the failures the test makes fail a probe.
    let config = format!(
        "[[map]]\nname = \"m\"\nsize = \"4M\"\npath_grouping_policy = \"multibus\"\n\
         checker_interval_ms = 50\nchecker_timeout_ms = 120000\n\
         [map.marginal]\nfailures = 2\nwindow_ms = 3600000\nrecovery_ms = 3600000\n\
         [[map.path]]\nname = \"flaky\"\nuri = \"nbd+unix:///?socket={}\"\n\
         [[map.path]]\nname = \"steady\"\nuri = \"nbd+unix:///?socket={}\"\n",
        flaky.socket().display(),
        steady.socket().display()
    );
    let config_file = dir.join("mpio.toml");
    std::fs::write(&config_file, config).unwrap();
    let daemon = Daemon::start(dir.clone(), &["--config", config_file.to_str().unwrap()]);
    wait_for(&daemon, "flaky", "came up", |row| row["checker"] == "ready");

    // Fail and recover once: reinstated, not marginal.
    std::fs::write(&fail, b"").unwrap();
    wait_for(&daemon, "flaky", "failed", |row| row["state"] == "failed");
    std::fs::remove_file(&fail).unwrap();
    wait_for(&daemon, "flaky", "was reinstated", |row| {
        row["state"] == "active"
    });
    assert_eq!(row(&daemon, "flaky")["marginal"], false);

    // A second failure within the window: marginal, held out although its
    // probes succeed again.
    std::fs::write(&fail, b"").unwrap();
    wait_for(&daemon, "flaky", "failed again", |row| {
        row["state"] == "failed"
    });
    std::fs::remove_file(&fail).unwrap();
    wait_for(&daemon, "flaky", "turned marginal", |row| {
        row["marginal"] == true
    });
    // Ten more probes succeed, each of which would reinstate a path
    // that is not marginal; it stays out all along.
    let good = good_probes(&row(&daemon, "flaky"));
    wait_for(&daemon, "flaky", "passed ten more probes", |row| {
        assert_eq!(row["state"], "failed", "{row}");
        assert_eq!(row["checker"], "marginal", "{row}");
        good_probes(row) >= good + 10
    });
    let topology = daemon.ok(&["show", "topology", "m"]);
    assert!(
        topology.contains("flaky nbd+unix:///?socket="),
        "{topology}"
    );
    assert!(topology.contains(" failed marginal "), "{topology}");
    let paths = daemon.ok(&["show", "paths", "m"]);
    assert!(
        paths
            .lines()
            .any(|line| line.contains("flaky") && line.contains("marginal")),
        "{paths}"
    );
    assert_eq!(row(&daemon, "steady")["state"], "active");

    // The admin knows better.
    daemon.ok(&["message", "m", "reinstate_path", "flaky"]);
    wait_for(&daemon, "flaky", "was let back", |row| {
        row["state"] == "active" && row["marginal"] == false
    });
}
