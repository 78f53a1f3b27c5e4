//! Replays the config fuzzer's corpus (`fuzz/corpus/config`) through the
//! fuzz target's own check, and every truncation of each input, so what
//! the corpus holds stays covered on stable.

#[test]
fn config_corpus_replays() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/config");
    let mut inputs = 0;
    for entry in std::fs::read_dir(corpus).expect("the corpus is in the repo") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        for end in 0..=data.len() {
            mpio_daemon::config::fuzz::check(&data[..end]);
        }
        inputs += 1;
    }
    assert!(inputs >= 4, "the corpus holds its seeds");
}
