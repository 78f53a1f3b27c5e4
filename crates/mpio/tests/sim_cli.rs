//! `mpio sim` as a user runs it: a batch of seeds, a replay with its
//! trace, and the usage error.

mod common;

use common::{mpio, stderr, stdout};

#[test]
fn sim_runs_seeds_and_reports_them_as_json() {
    let output = mpio(&["sim", "--seeds", "6", "--start", "40", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["seeds"], 6);
    assert_eq!(report["first_seed"], 40);
    assert_eq!(report["failures"].as_array().unwrap().len(), 0);
    assert!(report["ios"].as_u64().unwrap() > 0);
    assert!(report["seeds_per_second"].as_f64().unwrap() > 0.0);
}

#[test]
fn sim_replays_one_seed_with_its_trace() {
    let output = mpio(&["sim", "--seed", "7"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("table: 0 "), "{text}");
    assert!(text.contains("== faults"), "{text}");
    assert!(text.contains("== liveness"), "{text}");
    assert!(text.contains("== verify through p0"), "{text}");
    assert!(
        text.trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("seed 7 passed"),
        "{text}"
    );
    let again = mpio(&["sim", "--seed", "7"]);
    assert_eq!(stdout(&again), text, "a replay prints the same trace");
}

#[test]
fn sim_without_seeds_names_what_it_needs() {
    let output = mpio(&["sim"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("--seeds N"), "{}", stderr(&output));
}
