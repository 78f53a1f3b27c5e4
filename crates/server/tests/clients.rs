//! Real NBD clients against an in-process server over a memory map:
//! nbdinfo (size, flags, multi-conn), nbdcopy of a pattern in and out
//! with a byte-exact compare, qemu-img convert and compare, and fio's nbd
//! engine with crc32c verification — each once on healthy paths and once
//! while paths fail and recover underneath, with zero errors seen by the
//! client.

mod support;

use support::*;

/// Bytes the copy tests move (the whole map).
const COPY_BYTES: usize = MAP_BYTES as usize;

#[test]
fn nbdinfo_sees_size_flags_and_multi_conn() {
    require("nbdinfo", "libnbd-bin");
    let server = TestServer::default_two_loops();
    let json = run_ok("nbdinfo", &["--json", &server.uri()]);
    for expected in [
        format!("\"export-size\": {MAP_BYTES}"),
        "\"can_multi_conn\": true".into(),
        "\"can_flush\": true".into(),
        "\"can_fua\": true".into(),
        "\"can_trim\": true".into(),
        "\"can_zero\": true".into(),
        "\"is_read_only\": false".into(),
        "\"block_size_maximum\": 33554432".into(),
    ] {
        assert!(json.contains(&expected), "{expected} not in {json}");
    }
    let list = run_ok("nbdinfo", &["--list", "--json", &server.uri()]);
    assert!(list.contains("\"export-name\": \"mpio\""), "{list}");
    let read_only = TestServer::start(mpio_server::ServerConfig {
        read_only: true,
        loops: 1,
        ..Default::default()
    });
    let json = run_ok("nbdinfo", &["--json", &read_only.uri()]);
    assert!(json.contains("\"is_read_only\": true"), "{json}");
}

#[test]
fn nbdinfo_reaches_the_export_over_tcp_on_loopback() {
    require("nbdinfo", "libnbd-bin");
    let server = TestServer::start(mpio_server::ServerConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        loops: 1,
        ..Default::default()
    });
    let address = server.server.tcp_address().unwrap();
    assert!(address.ip().is_loopback() && address.port() != 0);
    let uri = format!("nbd://{address}/mpio");
    assert_eq!(server.server.uris()[1], uri);
    let json = run_ok("nbdinfo", &["--json", &uri]);
    assert!(
        json.contains(&format!("\"export-size\": {MAP_BYTES}")),
        "{json}"
    );
}

/// nbdcopy a pattern in, then out, and compares byte for byte.
fn nbdcopy_round_trip(server: &TestServer, seed: u64) {
    let input = server.dir.join("in.bin");
    let output = server.dir.join("out.bin");
    pattern_file(&input, COPY_BYTES, seed);
    let uri = server.uri();
    run_ok(
        "nbdcopy",
        &["--connections=4", input.to_str().unwrap(), &uri],
    );
    run_ok(
        "nbdcopy",
        &["--connections=4", &uri, output.to_str().unwrap()],
    );
    assert!(
        std::fs::read(&input).unwrap() == std::fs::read(&output).unwrap(),
        "nbdcopy out differs from what went in"
    );
}

/// qemu-img converts a pattern onto the export and compares it back.
fn qemu_round_trip(server: &TestServer, seed: u64) {
    let input = server.dir.join("qemu.bin");
    pattern_file(&input, COPY_BYTES, seed);
    let target = format!("nbd+unix:///mpio?socket={}", server.socket().display());
    let input = input.to_str().unwrap();
    run_ok(
        "qemu-img",
        &["convert", "-n", "-f", "raw", "-O", "raw", input, &target],
    );
    let compared = run_ok(
        "qemu-img",
        &["compare", "-f", "raw", "-F", "raw", input, &target],
    );
    assert!(compared.contains("identical"), "{compared}");
}

#[test]
fn nbdcopy_round_trips_byte_exact() {
    require("nbdcopy", "libnbd-bin");
    let server = TestServer::default_two_loops();
    nbdcopy_round_trip(&server, 1);
}

#[test]
fn qemu_img_converts_and_compares() {
    require("qemu-img", "qemu-utils");
    let server = TestServer::default_two_loops();
    qemu_round_trip(&server, 2);
}

#[test]
fn fio_verifies_crc32c() {
    require("fio", "fio");
    let server = TestServer::default_two_loops();
    fio_verify(&server.uri());
}

#[test]
fn every_client_is_unharmed_while_paths_fail_and_recover() {
    require("nbdcopy", "libnbd-bin");
    require("qemu-img", "qemu-utils");
    require("fio", "fio");
    let server = TestServer::default_two_loops();
    let faults = server.faults();
    nbdcopy_round_trip(&server, 3);
    qemu_round_trip(&server, 4);
    fio_verify(&server.uri());
    let info = run_ok("nbdinfo", &["--json", &server.uri()]);
    assert!(info.contains(&format!("\"export-size\": {MAP_BYTES}")));
    let rounds = faults.stop();
    assert!(rounds >= 1, "the faults never completed a round");
    // The faults did reach I/O: group 2's port served while group 1 was
    // down, and paths were failed by I/O errors, not only by the test's
    // own `fail_path` (one per path per round).
    assert!(server.transports.port("disk", "c").completed() > 0);
    let paths = server.map.paths();
    let failures = u64::from(paths[0].fail_count() + paths[1].fail_count());
    assert!(
        failures > 2 * rounds,
        "{failures} path failures in {rounds} rounds: no I/O met a fault"
    );
    let stats = server.server.stats();
    assert_eq!(stats.protocol_errors, 0);
    assert!(stats.requests_completed > 0);
}
