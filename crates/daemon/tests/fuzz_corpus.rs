//! Replays the config fuzzer's corpus (`fuzz/corpus/config`) through the
//! fuzz target's own check, and every truncation of each committed seed,
//! so what the corpus holds stays covered on stable.

#[test]
fn config_corpus_replays() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/config");
    let mut inputs = 0;
    for entry in std::fs::read_dir(corpus).expect("the corpus is in the repo") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        // Every truncation of the committed seeds; what a local fuzzing
        // run added (thousands of inputs) is replayed whole.
        let seed = path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("seed-"));
        let ends = if seed {
            0..=data.len()
        } else {
            data.len()..=data.len()
        };
        for end in ends {
            mpio_daemon::config::fuzz::check(&data[..end]);
        }
        inputs += 1;
    }
    assert!(inputs >= 4, "the corpus holds its seeds");
}
