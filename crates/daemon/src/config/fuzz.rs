//! The config fuzzer's check, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/config.rs`) and the corpus replay test, so both
//! hold every input to the same rules.

use super::DaemonConfig;

/// Parses `data` as a config (read as UTF-8, lossily) and panics unless
/// the outcome keeps the parser's promises: an error points at a line and
/// column inside the text (line 0 only for a file that cannot be read,
/// never here) and says why; a config that parses has maps with tables
/// that print and parse back.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    // Maps by WWID find no device: the outcome must not depend on the host.
    match DaemonConfig::parse_with(&text, &super::wwid::NoPaths) {
        Err(error) => {
            let lines = text.split('\n').count();
            assert!(
                (1..=lines).contains(&error.line),
                "error line {} outside the text's {lines} lines: {error}",
                error.line
            );
            assert!(error.column >= 1, "error without a column: {error}");
            assert!(!error.reason.is_empty(), "error without a reason: {error}");
        }
        Ok(config) => {
            assert!(!config.maps.is_empty(), "a config that parses has a map");
            for map in &config.maps {
                let printed = map.table.to_string();
                let reparsed = mpio_core::table::Table::parse(&printed)
                    .unwrap_or_else(|error| panic!("map {}: table {printed:?}: {error}", map.name));
                assert_eq!(reparsed.to_string(), printed);
            }
        }
    }
}
