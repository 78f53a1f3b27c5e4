//! The `mpio` command as a user runs it: exit codes, output shapes, and
//! the bench on a tiny load so it cannot rot (no speed is asserted).

mod common;

use common::{mpio, stderr, stdout};

#[test]
fn table_check_prints_the_canonical_form() {
    let output = mpio(&[
        "table",
        "check",
        "0 8 multipath 0 0 1 1 round-robin 0 2 0 a b",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output).trim(),
        "0 8 multipath 0 0 1 1 round-robin 0 2 1 a 1 b 1"
    );
}

#[test]
fn table_check_names_the_bad_word_and_fails() {
    let output = mpio(&[
        "table",
        "check",
        "0 8 multipath 0 0 1 1 round-robin 0 2 0 a",
    ]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("word 13"), "{message}");
    assert!(message.contains("end of table"), "{message}");
}

#[test]
fn bench_runs_a_tiny_load_and_reports_every_path() {
    let output = mpio(&["bench", "--ios", "2000", "--paths", "4", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["ios"], 2000);
    assert_eq!(report["errors"], 0);
    let paths = report["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 4);
    let dispatched: u64 = paths.iter().map(|path| path["ios"].as_u64().unwrap()).sum();
    assert_eq!(dispatched, 2000);
}

#[test]
fn bench_matrix_covers_raw_and_every_selector() {
    let output = mpio(&[
        "bench",
        "--matrix",
        "--ios",
        "500",
        "--locking",
        "global",
        "--repeat",
        "2",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["rounds"], 2);
    let rows = report["rows"].as_array().unwrap();
    for row in rows {
        assert_eq!(row["iops_by_round"].as_array().unwrap().len(), 2, "{row}");
    }
    let labels: Vec<&str> = rows
        .iter()
        .map(|row| row["label"].as_str().unwrap())
        .collect();
    assert!(labels[0].starts_with("raw"));
    for selector in [
        "round-robin",
        "queue-length",
        "service-time",
        "historical-service-time",
        "io-affinity",
        "numa",
        "queue-depth",
    ] {
        assert!(
            labels.iter().any(|label| label.starts_with(selector)),
            "{selector} missing"
        );
        assert!(
            labels
                .iter()
                .any(|label| label.starts_with(selector) && label.contains("global lock")),
            "{selector} locked row missing"
        );
    }
    assert!(rows
        .iter()
        .all(|row| row["errors"] == 0 && row["ios"].as_u64().unwrap() > 0));
    // Each map row's best: its best round against raw's best at its job
    // count.
    let best_iops = |row: &serde_json::Value| {
        row["iops_by_round"]
            .as_array()
            .unwrap()
            .iter()
            .map(|iops| iops.as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    for row in rows
        .iter()
        .filter(|row| !row["label"].as_str().unwrap().starts_with("raw"))
    {
        let jobs = row["jobs"].as_f64().unwrap();
        let raw = rows
            .iter()
            .find(|raw| {
                raw["label"].as_str().unwrap().starts_with("raw") && raw["jobs"] == row["jobs"]
            })
            .unwrap();
        let expected = jobs * (1.0 / best_iops(row) - 1.0 / best_iops(raw)) * 1e9;
        let best = row["added_ns_per_io_best"].as_f64().unwrap();
        assert!(
            (best - expected).abs() <= 1e-6 * expected.abs().max(1.0),
            "{row}"
        );
    }
}

#[test]
fn bench_refuses_a_bad_table_with_its_reason() {
    let output = mpio(&[
        "bench",
        "--ios",
        "10",
        "--table",
        "0 8 multipath 0 0 1 1 round-robin 0 1 0 nvme:x",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("unknown transport"),
        "{}",
        stderr(&output)
    );
}
