//! Maps that start while paths are down, as they must during the outage
//! multipath exists for: a file path whose file is missing and an NBD
//! path whose server is not up start failed, with why in `mpio show
//! paths`, while I/O flows through the other paths; the checker brings
//! each back once it answers. A map whose only path is down starts too,
//! holds its I/O (`queue_if_no_path`) and serves it once the path is back.

mod common;
mod daemon;

use daemon::{Daemon, Nbdkit};
use mpio_test_support::{output_of, output_within, wait_until, HANG_BOUND};
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

const DISK_BYTES: u64 = 4 << 20;

/// The rows of `mpio show paths --json` for `map`, by path name.
fn row(daemon: &Daemon, map: &str, path: &str) -> serde_json::Value {
    let rows = daemon.json(&["show", "paths", map]);
    rows.as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == path)
        .cloned()
        .unwrap_or_else(|| panic!("no path {path} in {rows}"))
}

/// Waits until `test` holds for the row of `path` of `map`.
fn wait_for(
    daemon: &Daemon,
    map: &str,
    path: &str,
    what: &str,
    test: impl Fn(&serde_json::Value) -> bool,
) {
    wait_until(&format!("{map}/{path} {what}"), || {
        test(&row(daemon, map, path))
    });
}

/// A file of `bytes` of data that differs block by block, seeded.
fn data_file(path: &Path, bytes: u64, seed: u8) {
    let data: Vec<u8> = (0..bytes)
        .map(|offset| (offset / 4096) as u8 ^ (offset % 251) as u8 ^ seed)
        .collect();
    std::fs::write(path, data).unwrap();
}

/// `nbdcopy FROM TO`, which must succeed.
fn nbdcopy(from: &str, to: &str) {
    mpio_test_support::require("nbdcopy", "libnbd-bin");
    let output = output_within(Command::new("nbdcopy").args([from, to]), HANG_BOUND);
    assert!(
        output.status.success(),
        "nbdcopy {from} {to}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Reads the whole export at `uri` into `out` and compares it with
/// `expected`.
fn assert_reads_back(uri: &str, out: &Path, expected: &Path) {
    let _ = std::fs::remove_file(out);
    std::fs::File::create(out).unwrap();
    nbdcopy(uri, out.to_str().unwrap());
    assert!(
        std::fs::read(out).unwrap() == std::fs::read(expected).unwrap(),
        "{uri} does not read back what was written"
    );
}

#[test]
fn a_missing_file_and_a_server_not_up_start_failed_and_join_when_they_answer() {
    let dir = daemon::test_dir("down-at-start");
    let lun = dir.join("lun.img");
    std::fs::File::create(&lun)
        .and_then(|file| file.set_len(DISK_BYTES))
        .unwrap();
    // The second file path reaches the same LUN once the link exists.
    let late_link = dir.join("late.img");
    let nbd_disk = dir.join("nbd.img");
    std::fs::File::create(&nbd_disk)
        .and_then(|file| file.set_len(DISK_BYTES))
        .unwrap();
    let nbd_arg = nbd_disk.display().to_string();
    let up = Nbdkit::nbdkit(&dir.join("up.sock"), &["file", &nbd_arg]);
    let down_socket = dir.join("down.sock");
    let config = format!(
        "[defaults]\nchecker_interval_ms = 50\n\
         [[map]]\nname = \"files\"\nsize = \"4M\"\npath_grouping_policy = \"multibus\"\n\
         [[map.path]]\nname = \"here\"\nuri = \"file:{lun}\"\n\
         [[map.path]]\nname = \"late\"\nuri = \"file:{late}\"\n\
         [[map.export]]\nsocket = \"{dir}/files.sock\"\n\
         [[map]]\nname = \"nbd\"\nsize = \"4M\"\npath_grouping_policy = \"multibus\"\n\
         [[map.path]]\nname = \"up\"\nuri = \"nbd+unix:///?socket={up}\"\n\
         [[map.path]]\nname = \"down\"\nuri = \"nbd+unix:///?socket={down}\"\n\
         [[map.export]]\nsocket = \"{dir}/nbd.sock\"\n",
        lun = lun.display(),
        late = late_link.display(),
        dir = dir.display(),
        up = up.socket().display(),
        down = down_socket.display(),
    );
    let config_file = dir.join("mpio.toml");
    std::fs::write(&config_file, config).unwrap();
    let daemon = Daemon::start(dir.clone(), &["--config", config_file.to_str().unwrap()]);
    let files_uri = format!("nbd+unix:///files?socket={}/files.sock", dir.display());
    let nbd_uri = format!("nbd+unix:///nbd?socket={}/nbd.sock", dir.display());

    // Each down path is failed and says why; the map is not.
    let late = row(&daemon, "files", "late");
    assert_eq!(late["state"], "failed", "{late}");
    assert!(
        late["unready"]
            .as_str()
            .is_some_and(|why| why.starts_with("cannot open") && why.contains("late.img")),
        "{late}"
    );
    let down = row(&daemon, "nbd", "down");
    assert_eq!(down["state"], "failed", "{down}");
    assert!(
        down["unready"]
            .as_str()
            .is_some_and(|why| why.contains("connecting to") && why.contains("down.sock")),
        "{down}"
    );
    let text = daemon.ok(&["show", "paths", "files"]);
    assert!(
        text.lines()
            .any(|line| line.contains("late") && line.contains("cannot open")),
        "{text}"
    );
    assert_eq!(row(&daemon, "files", "here")["state"], "active");
    assert_eq!(row(&daemon, "nbd", "up")["state"], "active");

    // I/O flows meanwhile, through the paths that are up.
    let written = dir.join("written.img");
    data_file(&written, DISK_BYTES, 0x5a);
    nbdcopy(written.to_str().unwrap(), &files_uri);
    nbdcopy(written.to_str().unwrap(), &nbd_uri);

    // The paths answer: the checker reinstates each.
    std::os::unix::fs::symlink(&lun, &late_link).unwrap();
    let _down = Nbdkit::nbdkit(&down_socket, &["file", &nbd_arg]);
    wait_for(&daemon, "files", "late", "was reinstated", |row| {
        row["state"] == "active" && row["unready"].is_null()
    });
    wait_for(&daemon, "nbd", "down", "was reinstated", |row| {
        row["state"] == "active" && row["unready"].is_null()
    });

    // With the paths that were up failed, the late ones serve the data.
    daemon.ok(&["message", "files", "fail_path", "here"]);
    daemon.ok(&["message", "nbd", "fail_path", "up"]);
    let out = dir.join("out.img");
    assert_reads_back(&files_uri, &out, &written);
    assert_reads_back(&nbd_uri, &out, &written);
    assert!(row(&daemon, "files", "late")["ios"].as_u64() > Some(0));
    assert!(row(&daemon, "nbd", "down")["ios"].as_u64() > Some(0));
}

/// The value of `metric` for `map` in the daemon's Prometheus text.
fn metric(daemon: &Daemon, metric: &str, map: &str) -> Option<f64> {
    let url = daemon.metrics.as_ref().expect("metrics served");
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(HANG_BOUND)).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let prefix = format!("{metric}{{map=\"{map}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
}

#[test]
fn a_map_whose_only_path_is_down_holds_its_io_until_the_path_returns() {
    let dir = daemon::test_dir("only-path-down");
    let lun = dir.join("lun.img");
    let link = dir.join("link.img");
    let config = format!(
        "[defaults]\nchecker_interval_ms = 50\n\
         [metrics]\nlisten = \"127.0.0.1:0\"\n\
         [[map]]\nname = \"m\"\nsize = \"4M\"\nno_path_retry = \"queue\"\n\
         [[map.path]]\nname = \"only\"\nuri = \"file:{link}\"\n\
         [[map.export]]\nsocket = \"{dir}/m.sock\"\n",
        link = link.display(),
        dir = dir.display(),
    );
    let config_file = dir.join("mpio.toml");
    std::fs::write(&config_file, config).unwrap();
    let daemon = Daemon::start(dir.clone(), &["--config", config_file.to_str().unwrap()]);
    let uri = format!("nbd+unix:///m?socket={}/m.sock", dir.display());
    assert_eq!(row(&daemon, "m", "only")["state"], "failed");
    let status = daemon.json(&["status", "m"]);
    assert_eq!(status["queueing"], true, "{status}");

    // A read sent now waits for the path, not for an error.
    let out = dir.join("out.img");
    std::fs::File::create(&out).unwrap();
    let reader = Command::new("nbdcopy")
        .args([&uri, out.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("an I/O waits for a path", || {
        metric(&daemon, "mpio_map_waiting_for_path", "m").unwrap_or(0.0) >= 1.0
    });

    // The LUN appears: the path opens, the held read completes with its
    // data, and the map serves.
    data_file(&lun, DISK_BYTES, 0xa5);
    std::os::unix::fs::symlink(&lun, &link).unwrap();
    let output = output_of(reader, HANG_BOUND, "nbdcopy of the held read");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&lun).unwrap());
    assert_eq!(row(&daemon, "m", "only")["state"], "active");
    let written = dir.join("written.img");
    data_file(&written, DISK_BYTES, 0x3c);
    nbdcopy(written.to_str().unwrap(), &uri);
    assert_reads_back(&uri, &out, &written);
}
