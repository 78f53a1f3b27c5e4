//! Replays the config, control and multipath.conf fuzzers' corpora
//! (`fuzz/corpus/config`, `fuzz/corpus/control`,
//! `fuzz/corpus/multipath_conf`) through each fuzz target's own check, and every
//! truncation of each committed seed, so what the corpora hold stays
//! covered on stable.

#[test]
fn config_corpus_replays() {
    replay("config", mpio_daemon::config::fuzz::check, 4);
}

#[test]
fn multipath_conf_corpus_replays() {
    replay(
        "multipath_conf",
        mpio_daemon::config::import::fuzz::check,
        2,
    );
    // Past the line bound, binary junk, and unbalanced braces.
    let long = [b"defaults {\n\tverbosity ".as_slice(), &[b'9'; 5000]].concat();
    mpio_daemon::config::import::fuzz::check(&long);
    mpio_daemon::config::import::fuzz::check(b"defaults {\n\x00\xff\x01\n}\n");
    mpio_daemon::config::import::fuzz::check(b"}}}{{{\n");
}

#[test]
fn control_corpus_replays() {
    replay("control", mpio_daemon::control::fuzz::check, 4);
    // Past the size bound, with and without a newline after it.
    let mut long = br#"{"verb":"status","map":""#.to_vec();
    long.resize(
        mpio_daemon::control::protocol::MAX_REQUEST_BYTES as usize + 10,
        b'x',
    );
    mpio_daemon::control::fuzz::check(&long);
    long.extend_from_slice(b"\"}\n");
    mpio_daemon::control::fuzz::check(&long);
}

/// Runs `check` over fuzzer `name`'s corpus (see the module docs), which
/// holds at least `seeds` inputs.
fn replay(name: &str, check: fn(&[u8]), seeds: usize) {
    let corpus = format!("{}/../../fuzz/corpus/{name}", env!("CARGO_MANIFEST_DIR"));
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
            check(&data[..end]);
        }
        inputs += 1;
    }
    assert!(inputs >= seeds, "the corpus holds its seeds");
}
