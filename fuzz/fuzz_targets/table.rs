//! Fuzzes the dm table grammar: any bytes (read as UTF-8, lossily) either
//! fail to parse with an error or parse into a table whose printed form
//! parses back and prints identically; the same holds for its canonical
//! form, and the canonical form of a canonical table is itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mpio_core::numa::NumaTopology;
use mpio_core::table::Table;

/// Panics unless `table` prints as a line that parses back to the same
/// print.
fn assert_round_trips(table: &Table) {
    let printed = table.to_string();
    match Table::parse(&printed) {
        Ok(reparsed) => assert_eq!(reparsed.to_string(), printed),
        Err(error) => panic!("printed table {printed:?} does not parse: {error}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(table) = Table::parse(&text) else {
        return;
    };
    assert_round_trips(&table);
    let numa = NumaTopology::default();
    if let Ok(canonical) = table.canonical(&numa) {
        assert_round_trips(&canonical);
        match canonical.canonical(&numa) {
            Ok(again) => assert_eq!(again.to_string(), canonical.to_string()),
            Err(error) => panic!("canonical table {canonical} is refused: {error}"),
        }
    }
});
