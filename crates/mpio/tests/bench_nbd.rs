//! `mpio bench --table` over NBD paths: two connections to one `nbdkit
//! memory` server carry a small mixed load with no error, and a path word
//! whose server is missing is refused with its reason.

#[path = "../../transport/tests/support/mod.rs"]
mod support;

use mpio_test_support::{output_within, HANG_BOUND};
use std::process::Command;
use support::{Server, TempDir};

#[test]
fn bench_runs_over_nbdkit_and_refuses_a_missing_server() {
    let dir = TempDir::new("bench-nbd");
    let server = Server::nbdkit(&dir.join("m.sock"), &["memory", "size=16M"]);
    let table = format!(
        "0 32768 multipath 0 0 1 1 queue-length 0 2 0 {}#a {}#b",
        server.uri(),
        server.uri()
    );
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .args([
                "bench", "--table", &table, "--rw", "randrw", "--ios", "2000",
            ])
            .args(["--json", "--quiet"]),
        HANG_BOUND,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["ios"], 2000);
    assert_eq!(result["errors"], 0);
    let paths = result["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "{result}");
    assert!(paths.iter().all(|path| path["ios"].as_u64() > Some(0)));

    let missing = format!(
        "0 32768 multipath 0 0 1 1 round-robin 0 1 0 nbd+unix:///?socket={}",
        dir.join("none.sock").display()
    );
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .args(["bench", "--table", &missing, "--ios", "10", "--quiet"]),
        HANG_BOUND,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("none.sock") && stderr.contains("connecting to"),
        "{stderr}"
    );
}
