//! Replays the NBD reply fuzzer's corpus (`fuzz/corpus/nbd_replies`)
//! through the same harness and check as the fuzz target, so every input
//! the corpus holds stays covered on the stable toolchain: the client's
//! reply parser never panics, and every I/O comes back exactly once.

use mpio_transport::nbd_replay as replay;

#[test]
fn nbd_replies_corpus_replays() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/nbd_replies");
    let mut replayed = 0;
    for entry in std::fs::read_dir(corpus).expect("the corpus is in the repo") {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let mut tags: Vec<u64> = replay(&bytes).iter().map(|done| done.tag).collect();
        tags.sort_unstable();
        assert_eq!(tags, [1, 2, 3, 4], "{}", path.display());
        replayed += 1;
    }
    assert!(replayed >= 8, "only {replayed} corpus files");
}
