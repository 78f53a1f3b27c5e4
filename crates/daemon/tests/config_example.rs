//! The shipped example config (`docs/examples/mpio.toml`) loads through
//! the public API, and its maps are what its comments say.

use mpio_daemon::config::{DaemonConfig, NoPathRetry};
use std::path::Path;

#[test]
fn the_shipped_example_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/mpio.toml");
    let config = match DaemonConfig::load(&path) {
        Ok(config) => config,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(config.metrics, Some("127.0.0.1:9642".parse().unwrap()));
    let mpatha = config.map("mpatha").unwrap();
    assert_eq!(
        mpatha.table.to_string(),
        "0 2097152 multipath 1 queue_if_no_path 0 2 1 service-time 0 1 2 near 1 1 service-time 0 1 2 far 1 1"
    );
    assert_eq!(mpatha.no_path_retry, NoPathRetry::Checks(12));
    assert_eq!(mpatha.options().no_path_timeout_ns, Some(60_000_000_000));
    assert_eq!(mpatha.exports[0].name, "mpatha");
    let legacy = config.map("legacy").unwrap();
    assert_eq!(legacy.uri_of("disk"), "file:/var/lib/mpio/legacy.img");
    assert!(legacy.exports[0].read_only);
}
