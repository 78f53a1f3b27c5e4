//! Replays the table fuzzer's corpus (`fuzz/corpus/table`) through the same
//! checks as the fuzz target, so every input the corpus holds stays
//! covered on the stable toolchain: parsing never panics, and whatever
//! parses prints back to text that parses to the same print.

use mpio_core::numa::NumaTopology;
use mpio_core::table::Table;

#[test]
fn table_corpus_replays() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/table");
    let mut replayed = 0;
    for entry in std::fs::read_dir(corpus).expect("the corpus is in the repo") {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(table) = Table::parse(&text) {
            let printed = table.to_string();
            let reparsed = Table::parse(&printed).expect("a printed table parses");
            assert_eq!(reparsed.to_string(), printed);
            if let Ok(canonical) = table.canonical(&NumaTopology::default()) {
                let printed = canonical.to_string();
                let again = Table::parse(&printed)
                    .unwrap()
                    .canonical(&NumaTopology::default())
                    .unwrap();
                assert_eq!(again.to_string(), printed, "canonical is a fixed point");
            }
        }
        replayed += 1;
    }
    assert!(replayed >= 5, "only {replayed} corpus files");
}
