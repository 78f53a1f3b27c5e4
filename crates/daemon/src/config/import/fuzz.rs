//! The multipath.conf fuzzer's check, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/multipath_conf.rs`) and the corpus replay test,
//! so both hold every input to the same rules.

use super::import;
use crate::config::wwid::NoPaths;
use crate::config::DaemonConfig;

/// Imports `data` and panics unless the outcome keeps the importer's
/// promises: an error names a line of the input and says why; an import
/// is a config the daemon's loader refuses only for what the text cannot
/// give (no device has a map's WWID, here where none has any; no map at
/// all), and accounts for every note by a line of the input.
pub fn check(data: &[u8]) {
    let lines = data.split(|&byte| byte == b'\n').count();
    match import(data) {
        Err(error) => {
            assert!(
                (1..=lines).contains(&error.line),
                "error line {} outside the input's {lines} lines: {error}",
                error.line
            );
            assert!(!error.reason.is_empty(), "error without a reason");
        }
        Ok(imported) => {
            for line in imported.notes.iter().map(|note| note.line) {
                assert!(
                    (1..=lines).contains(&line),
                    "note on line {line} of {lines}"
                );
            }
            let error = DaemonConfig::parse_with(&imported.toml, &NoPaths)
                .expect_err("no device has any WWID, so no map by WWID loads");
            assert!(
                error.reason.starts_with("no block device has this WWID")
                    || error.reason.starts_with("the config defines no map"),
                "the loader refuses the import's text: {error}\n{}",
                imported.toml
            );
        }
    }
}
