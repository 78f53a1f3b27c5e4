//! Tests for parsing, printing and canonicalising tables: examples and
//! malformed tables here, property tests in `properties`.

use super::super::{Features, GroupSpec, PathSpec, QueueMode, Table, TableError};
use crate::numa::NumaTopology;
use crate::selector::SELECTOR_NAMES;

/// Tables from the project's seeds; each is already in canonical form.
const SEED_TABLES: &[&str] = &[
    "0 8388608 multipath 0 0 1 1 service-time 0 1 2 /dev/nullb0 1 1",
    "0 8388608 multipath 0 0 1 1 queue-length 0 1 1 /dev/nullb0 1",
    "0 8388608 multipath 0 0 1 1 round-robin 0 1 1 /dev/nullb0 1",
    "0 16777216 multipath 0 0 1 1 io-affinity 0 16 1 8:16 1 8:32 2 8:64 4 8:48 8 8:80 10 \
     8:96 20 8:112 40 8:128 80 8:144 100 8:160 200 8:176 400 8:192 800 8:208 1000 8:224 2000 \
     8:240 4000 65:0 8000",
];

/// The base table the malformed cases below are variations of.
const ROUND_ROBIN: &str = "0 8388608 multipath 0 0 1 1 round-robin 0 1 1 /dev/nullb0 1";

fn parse(text: &str) -> Table {
    Table::parse(text).unwrap_or_else(|error| panic!("{text:?} does not parse: {error}"))
}

fn canonical(text: &str) -> Table {
    parse(text)
        .canonical(&NumaTopology::default())
        .unwrap_or_else(|error| panic!("{text:?} has no canonical form: {error}"))
}

fn parse_error(text: &str) -> TableError {
    match Table::parse(text) {
        Ok(table) => panic!("{text:?} parsed as {table}"),
        Err(error) => error,
    }
}

fn canonical_error(text: &str) -> TableError {
    match parse(text).canonical(&NumaTopology::default()) {
        Ok(table) => panic!("{text:?} canonicalised as {table}"),
        Err(error) => error,
    }
}

#[test]
fn seed_tables_parse_and_print_back_identically() {
    for text in SEED_TABLES {
        assert_eq!(parse(text).to_string(), *text);
    }
}

#[test]
fn records_word_positions_and_fields() {
    let table = parse(SEED_TABLES[0]);
    assert_eq!((table.start_sector, table.length_sectors), (0, 8_388_608));
    assert_eq!(table.features, Features::default());
    assert!(table.hardware_handler.is_empty());
    assert_eq!(table.initial_group, 1);
    let group = &table.groups[0];
    assert_eq!((group.selector.as_str(), group.word), ("service-time", 8));
    assert!(group.selector_args.is_empty());
    let path = &group.paths[0];
    assert_eq!((path.name.as_str(), path.word), ("/dev/nullb0", 12));
    assert_eq!(path.args, ["1", "1"]);

    let affinity = parse(SEED_TABLES[3]);
    let paths = &affinity.groups[0].paths;
    assert_eq!(paths.len(), 16);
    assert_eq!((paths[15].name.as_str(), paths[15].word), ("65:0", 42));
    assert_eq!(paths[15].args, ["8000"]);
}

/// Needs every seed's real selector: service-time prints 2 per-path args
/// and queue-length 1. Fails while those selectors are stubs.
#[test]
fn canonical_seed_tables() {
    for text in SEED_TABLES {
        assert_eq!(canonical(text).to_string(), *text);
    }
}

#[test]
fn round_robin_canonical_fills_in_repeat_count() {
    let table = canonical("0 1024 multipath 0 0 1 1 round-robin 0 2 0 P1 P2");
    assert_eq!(
        table.to_string(),
        "0 1024 multipath 0 0 1 1 round-robin 0 2 1 P1 1 P2 1"
    );
    let again = table.canonical(&NumaTopology::default()).unwrap();
    assert_eq!(again.to_string(), table.to_string());
    // Word positions survive, for later errors.
    assert_eq!(again.groups[0].word, 8);
    assert_eq!(again.groups[0].paths[1].word, 13);
    assert_eq!(canonical(SEED_TABLES[2]).to_string(), SEED_TABLES[2]);
}

#[test]
fn parses_features_hardware_handler_and_groups() {
    let text = "0 100 multipath 5 queue_mode rq pg_init_delay_msecs 500 queue_if_no_path \
                2 alua 1 2 2 round-robin 0 1 1 A 1 round-robin 0 2 1 B 2 C 3";
    let table = parse(text);
    assert_eq!(
        table.features,
        Features {
            queue_if_no_path: true,
            pg_init_retries: None,
            pg_init_delay_msecs: Some(500),
            retain_attached_hw_handler: false,
            queue_mode: Some(QueueMode::Rq),
        }
    );
    assert_eq!(table.hardware_handler, ["alua", "1"]);
    assert_eq!(table.initial_group, 2);
    assert_eq!(table.groups.len(), 2);
    assert_eq!(table.groups[1].word, 21);
    assert_eq!(table.groups[1].paths[1].name, "C");
    assert_eq!(table.groups[1].paths[1].word, 27);
    // Printed in dm's feature order, counts recomputed.
    let printed = "0 100 multipath 5 queue_if_no_path pg_init_delay_msecs 500 queue_mode rq \
                   2 alua 1 2 2 round-robin 0 1 1 A 1 round-robin 0 2 1 B 2 C 3";
    assert_eq!(table.to_string(), printed);
    assert_eq!(parse(printed).to_string(), printed);
    // Canonical: `queue_mode rq` is dm's default, and dm drops it.
    assert_eq!(
        canonical(text).to_string(),
        "0 100 multipath 3 queue_if_no_path pg_init_delay_msecs 500 \
         2 alua 1 2 2 round-robin 0 1 1 A 1 round-robin 0 2 1 B 2 C 3"
    );
}

#[test]
fn parses_every_feature_case_insensitively() {
    let table = parse(
        "0 8 multipath 8 QUEUE_MODE Mq Retain_Attached_HW_Handler pg_init_delay_msecs 60000 \
         PG_INIT_RETRIES 50 queue_if_no_path 0 0 0",
    );
    assert_eq!(
        table.to_string(),
        "0 8 multipath 8 queue_if_no_path pg_init_retries 50 pg_init_delay_msecs 60000 \
         retain_attached_hw_handler queue_mode mq 0 0 0"
    );
}

#[test]
fn repeated_feature_keeps_the_last_value_and_prints_once() {
    let table = parse("0 8 multipath 5 pg_init_retries 3 queue_if_no_path pg_init_retries 7 0 0 0");
    assert_eq!(table.features.pg_init_retries, Some(7));
    assert_eq!(
        table.to_string(),
        "0 8 multipath 3 queue_if_no_path pg_init_retries 7 0 0 0"
    );
}

#[test]
fn tolerates_any_ascii_whitespace() {
    let text = "\t 0  8388608\nmultipath\r\n0 0 1\x0c1 round-robin 0 1 1 /dev/nullb0 1 \n";
    assert_eq!(parse(text).to_string(), ROUND_ROBIN);
}

#[test]
fn accepts_leading_zeros_and_no_groups() {
    assert_eq!(
        parse("0 0008 multipath 00 0 0 0").to_string(),
        "0 8 multipath 0 0 0 0"
    );
    // The longest device whose size in bytes fits a u64; one sector more is
    // refused (a size that overflows would wrap every range check).
    let table = parse("0 36028797018963967 multipath 0 0 0 0");
    assert_eq!(table.length_sectors, u64::MAX / 512);
    let error = Table::parse("0 36028797018963968 multipath 0 0 0 0").unwrap_err();
    assert_eq!(error.position, 2);
}

#[test]
fn truncated_at_every_word_is_an_error_at_the_end() {
    let full = "0 8 multipath 3 queue_if_no_path pg_init_retries 5 2 alua x 2 2 \
                round-robin 0 1 1 A 1 round-robin 0 2 2 B 1 x C 2 y";
    let mut texts: Vec<&str> = SEED_TABLES.to_vec();
    texts.push(full);
    for text in texts {
        let words: Vec<&str> = text.split_whitespace().collect();
        for length in 0..words.len() {
            let prefix = words[..length].join(" ");
            let error = parse_error(&prefix);
            assert_eq!(error.position, length + 1, "{prefix:?}: {error}");
            assert_eq!(error.found, "end of table", "{prefix:?}: {error}");
        }
    }
}

/// (text, position, fragment of the message).
#[rustfmt::skip]
const MALFORMED: &[(&str, usize, &str)] = &[
    ("", 1, "the start sector 0 (an mpio map is a single target"),
    (" \t\n ", 1, "the start sector 0"),
    ("1 8 multipath 0 0 0 0", 1, "the start sector 0"),
    ("x 8 multipath 0 0 0 0", 1, "the start sector 0"),
    ("0 0 multipath 0 0 0 0", 2, "device length in 512-byte sectors (1..=36028797018963967)"),
    ("0 x multipath 0 0 0 0", 2, "device length"),
    ("0 -1 multipath 0 0 0 0", 2, "device length"),
    ("0 +8 multipath 0 0 0 0", 2, "device length"),
    ("0 8.0 multipath 0 0 0 0", 2, "device length"),
    ("0 18446744073709551616 multipath 0 0 0 0", 2, "device length"),
    ("0 99999999999999999999999999999999 multipath 0 0 0 0", 2, "device length"),
    ("0 8 linear 0 0 0 0", 3, "the target type \"multipath\""),
    ("0 8 Multipath 0 0 0 0", 3, "the target type \"multipath\""),
    ("0 8 multipath", 4, "the number of feature words (0..=8)"),
    ("0 8 multipath 9 queue_if_no_path 0 0 0", 4, "the number of feature words (0..=8)"),
    ("0 8 multipath 4294967296 0 0 0", 4, "the number of feature words"),
    ("0 8 multipath 1 queue_if_no_paths 0 0 0", 5, "a feature word (queue_if_no_path, pg_init_retries, pg_init_delay_msecs, retain_attached_hw_handler, queue_mode)"),
    ("0 8 multipath 1 fail_if_no_path 0 0 0", 5, "a feature word"),
    ("0 8 multipath 2 queue_if_no_path 0 0 0", 6, "word 4 counts 2 feature words"),
    ("0 8 multipath 1 pg_init_retries 5 0 0 0", 5, "pg_init_retries takes a value, so it counts as 2 words"),
    ("0 8 multipath 1 queue_mode bio 0 0 0", 5, "queue_mode takes a value"),
    ("0 8 multipath 2 pg_init_retries 0 0 0 0", 6, "the pg_init_retries value (1..=50)"),
    ("0 8 multipath 2 pg_init_retries 51 0 0 0", 6, "the pg_init_retries value (1..=50)"),
    ("0 8 multipath 2 pg_init_retries x 0 0 0", 6, "the pg_init_retries value"),
    ("0 8 multipath 2 pg_init_delay_msecs 60001 0 0 0", 6, "the pg_init_delay_msecs value (0..=60000)"),
    ("0 8 multipath 2 queue_mode nvme 0 0 0", 6, "the queue_mode value (bio, rq or mq)"),
    ("0 8 multipath 2 queue_mode", 6, "the queue_mode value"),
    ("0 8 multipath 0 1025 0 0", 5, "the number of hardware handler words (0..=1024)"),
    ("0 8 multipath 0 1", 6, "the hardware handler name"),
    ("0 8 multipath 0 2 alua", 7, "hardware handler argument 1 of 1"),
    ("0 8 multipath 0 0 1025 1", 6, "the number of priority groups (0..=1024)"),
    ("0 8 multipath 0 0 4294967296 1", 6, "the number of priority groups"),
    ("0 8 multipath 0 0 1 0 round-robin 0 1 0 P", 7, "the initial priority group (1..=1)"),
    ("0 8 multipath 0 0 1 2 round-robin 0 1 0 P", 7, "the initial priority group (1..=1)"),
    ("0 8 multipath 0 0 0 1", 7, "the initial priority group 0 (there are no priority groups)"),
    ("0 8 multipath 0 0 0 0 round-robin", 8, "the end of the table after the 0 priority groups counted at word 6"),
    ("0 8 multipath 0 0 1 1", 8, "the path selector of priority group 1 of 1"),
    ("0 8 multipath 0 0 1 1 round-robin 1025", 9, "the number of selector arguments for \"round-robin\" (0..=1024)"),
    ("0 8 multipath 0 0 1 1 round-robin 2 x", 11, "selector argument 2 of 2 for \"round-robin\""),
    ("0 8 multipath 0 0 1 1 round-robin 0 0 1", 10, "the number of paths in priority group 1 (1..=1024)"),
    ("0 8 multipath 0 0 1 1 round-robin 0 1025 1", 10, "the number of paths in priority group 1"),
    ("0 8 multipath 0 0 1 1 round-robin 0 1 1025", 11, "the number of arguments per path in priority group 1 (0..=1024)"),
    ("0 8 multipath 0 0 1 1 round-robin 0 1 -1", 11, "the number of arguments per path"),
    ("0 8 multipath 0 0 1 1 round-robin 0 2 1 P1 1", 14, "path 2 of 2 in priority group 1"),
    ("0 8 multipath 0 0 1 1 round-robin 0 1 2 P1 1", 14, "argument 2 of 2 for path \"P1\""),
    ("0 8 multipath 0 0 1 1 round-robin 0 1 1 P1 1 2", 14, "the end of the table after the 1 priority group counted at word 6"),
    ("0 8 multipath 0 0 2 1 round-robin 0 1 1 P1 1", 14, "the path selector of priority group 2 of 2"),
    ("0 8 multipath 0 0 1 1 round-robin 0 1 1 P1 1 round-robin 0 1 1 P2 1", 14, "the end of the table after the 1 priority group"),
];

#[test]
fn malformed_tables_name_the_word_and_the_reason() {
    for &(text, position, fragment) in MALFORMED {
        let error = parse_error(text);
        assert_eq!(error.position, position, "{text:?}: {error}");
        assert!(
            error.expected.contains(fragment),
            "{text:?}: {error:?} does not say {fragment:?}"
        );
        let found = text.split_ascii_whitespace().nth(position - 1);
        match found {
            Some(word) => assert_eq!(error.found, format!("{word:?}"), "{text:?}"),
            None => assert_eq!(error.found, "end of table", "{text:?}"),
        }
    }
}

#[test]
fn error_message_reads_well() {
    assert_eq!(
        parse_error("0 8 multipath 1 queue_if_no_paths 0 0 0").to_string(),
        "word 5 (\"queue_if_no_paths\"): expected a feature word (queue_if_no_path, \
         pg_init_retries, pg_init_delay_msecs, retain_attached_hw_handler, queue_mode); \
         word 4 counts 1 feature word"
    );
    assert_eq!(
        parse_error("").to_string(),
        "word 1 (end of table): expected the start sector 0 (an mpio map is a single target \
         covering its device from sector 0)"
    );
}

#[test]
fn very_long_words_are_quoted_short() {
    let long = "9".repeat(100_000);
    let error = parse_error(&format!("0 {long} multipath 0 0 0 0"));
    assert_eq!(error.position, 2);
    assert!(error.found.len() < 100, "{}", error.found);
    assert!(
        error.found.ends_with("... (100000 bytes)"),
        "{}",
        error.found
    );
    // Cut on a character boundary.
    let wide = "é".repeat(100);
    let error = parse_error(&format!("0 8 {wide}"));
    assert_eq!(error.found, format!("{:?}... (200 bytes)", "é".repeat(64)));
}

#[test]
fn unknown_selector_names_the_known_ones() {
    let error = canonical_error("0 8 multipath 0 0 2 1 round-robin 0 1 0 A round-robn 0 1 0 B");
    assert_eq!(error.position, 13);
    assert_eq!(error.found, "\"round-robn\"");
    for name in SELECTOR_NAMES {
        assert!(error.expected.contains(name), "{error}");
    }
}

#[test]
fn selector_argument_errors_point_at_the_argument() {
    // A selector argument round-robin does not take: word 8 + 2.
    let error = canonical_error("0 8 multipath 0 0 1 1 round-robin 1 5 1 0 P");
    assert_eq!((error.position, error.found.as_str()), (10, "\"5\""));
    assert!(
        error
            .expected
            .contains("round-robin takes no selector arguments"),
        "{error}"
    );

    // A bad repeat_count on the second path (word 14): word 14 + 1.
    let error = canonical_error("0 8 multipath 0 0 1 1 round-robin 0 2 1 P1 1 P2 0");
    assert_eq!((error.position, error.found.as_str()), (15, "\"0\""));
    assert!(error.expected.contains("repeat_count"), "{error}");
    assert!(error.expected.contains("path \"P2\""), "{error}");

    // One argument too many: the second argument of P1 (word 12 + 2).
    let error = canonical_error("0 8 multipath 0 0 1 1 round-robin 0 1 2 P1 1 7");
    assert_eq!((error.position, error.found.as_str()), (14, "\"7\""));
    assert!(
        error.expected.contains("too many path arguments"),
        "{error}"
    );
}

fn path(name: &str, args: &[&str]) -> PathSpec {
    PathSpec {
        name: name.to_owned(),
        args: args.iter().map(|arg| arg.to_string()).collect(),
        word: 0,
    }
}

fn group(selector: &str, paths: Vec<PathSpec>) -> GroupSpec {
    GroupSpec {
        selector: selector.to_owned(),
        selector_args: Vec::new(),
        paths,
        word: 0,
    }
}

fn built(groups: Vec<GroupSpec>) -> Table {
    Table {
        start_sector: 0,
        length_sectors: 8,
        features: Features::default(),
        hardware_handler: Vec::new(),
        initial_group: u32::from(!groups.is_empty()),
        groups,
    }
}

#[test]
fn canonical_checks_tables_built_in_code() {
    let numa = NumaTopology::default();
    let good = built(vec![group("round-robin", vec![path("A", &[])])]);
    assert_eq!(
        good.canonical(&numa).unwrap().to_string(),
        "0 8 multipath 0 0 1 1 round-robin 0 1 1 A 1"
    );

    let error = built(vec![group("round-robin", vec![path("A", &["0"])])])
        .canonical(&numa)
        .unwrap_err();
    assert_eq!((error.position, error.found.as_str()), (0, "\"0\""));
    assert!(
        error.expected.contains("in path 1 of priority group 1"),
        "{error}"
    );

    let error = built(vec![group("nope", vec![path("A", &[])])])
        .canonical(&numa)
        .unwrap_err();
    assert_eq!(error.position, 0);
    assert!(error.expected.contains("in priority group 1"), "{error}");

    let error = built(vec![group("round-robin", Vec::new())])
        .canonical(&numa)
        .unwrap_err();
    assert!(
        error.expected.contains("paths in priority group 1, not 0"),
        "{error}"
    );

    let error = built(vec![group("round-robin", vec![path("a b", &[])])])
        .canonical(&numa)
        .unwrap_err();
    assert!(error.expected.contains("without whitespace"), "{error}");

    let mut bad_initial = good.clone();
    bad_initial.initial_group = 2;
    assert!(bad_initial.canonical(&numa).is_err());
    let mut bad_start = good.clone();
    bad_start.start_sector = 1;
    assert_eq!(bad_start.canonical(&numa).unwrap_err().position, 1);
    let mut bad_length = good.clone();
    bad_length.length_sectors = 0;
    assert_eq!(bad_length.canonical(&numa).unwrap_err().position, 2);
    let mut bad_retries = good.clone();
    bad_retries.features.pg_init_retries = Some(0);
    assert!(bad_retries.canonical(&numa).is_err());
    let mut bad_handler = good;
    bad_handler.hardware_handler = vec![String::new()];
    assert!(bad_handler.canonical(&numa).is_err());
}

mod properties;

/// A path word is in a table once, in one group or across groups, with
/// one text whether the table was parsed or built in code.
#[test]
fn a_path_named_twice_is_refused() {
    let error = canonical_error("0 8 multipath 0 0 1 1 round-robin 0 2 1 a 1 a 1");
    assert_eq!(error.position, 14);
    assert_eq!(
        error.to_string(),
        "word 14 (\"a\"): expected a path not in the table yet (word 12 names it): a path is \
         in a table once"
    );
    let error =
        canonical_error("0 8 multipath 0 0 2 1 round-robin 0 1 1 a 1 round-robin 0 2 1 b 1 a 1");
    assert_eq!(error.position, 20);
    let mut table = parse("0 8 multipath 0 0 1 1 round-robin 0 2 1 a 1 b 1");
    for path in &mut table.groups[0].paths {
        path.name = "a".into();
        path.word = 0;
    }
    let error = table.canonical(&NumaTopology::default()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("(path 1 of priority group 1 names it)"),
        "{error}"
    );
}
