//! Replays the server fuzzer's corpus (`fuzz/corpus/serve`) through the
//! fuzz target's own body, so every input the corpus holds stays covered
//! on the stable toolchain: no panic, no request outside the export
//! handed to the map, and every session ends.

#[test]
fn serve_corpus_replays() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/serve");
    let mut replayed = 0;
    let mut handed = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(corpus).expect("the corpus is in the repo") {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        handed.insert(name, mpio_server::fuzz::session(&bytes));
        replayed += 1;
    }
    assert!(replayed >= 8, "only {replayed} corpus files");
    // The seeds reach where they were written to reach: valid sessions
    // hand every good request to the map, bad ones hand none.
    let expected = [
        ("seed-go-read-write-disc", 5),
        ("seed-export-name-simple", 2),
        ("seed-read-only-write", 1),
        ("seed-bad-requests", 0),
        ("seed-oversize-write", 0),
        ("seed-bad-option-magic", 0),
    ];
    for (seed, count) in expected {
        assert_eq!(handed.get(seed), Some(&count), "{seed}: {handed:?}");
    }
}

/// A few thousand random mutations of the seeds, on stable: the fuzzer's
/// cheapest tricks (flip, truncate, splice) in a deterministic loop.
#[test]
fn mutated_seeds_keep_the_contract() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/serve");
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(corpus)
        .unwrap()
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        // xorshift64: deterministic, so a failure reproduces.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..2000 {
        let mut bytes = seeds[next() as usize % seeds.len()].clone();
        match next() % 3 {
            0 if !bytes.is_empty() => {
                let at = next() as usize % bytes.len();
                bytes[at] ^= 1 << (next() % 8);
            }
            1 => bytes.truncate(next() as usize % (bytes.len() + 1)),
            _ => {
                let other = &seeds[next() as usize % seeds.len()];
                let at = next() as usize % (bytes.len() + 1);
                let from = next() as usize % (other.len() + 1);
                bytes.splice(at..at, other[from..].iter().copied());
            }
        }
        let outcome = std::panic::catch_unwind(|| mpio_server::fuzz::session(&bytes));
        assert!(outcome.is_ok(), "round {round}: input {bytes:?}");
    }
}
