//! Property tests: generated tables print, parse and print back the
//! same; word soup and mutated tables never make the parser panic.

use super::super::super::{Features, GroupSpec, PathSpec, QueueMode, Table};
use super::super::is_one_word;
use crate::numa::NumaTopology;
use proptest::prelude::*;

/// Whether `table` prints as a line that parses back to the same print.
fn assert_round_trips(table: &Table) -> Result<(), TestCaseError> {
    let printed = table.to_string();
    let reparsed = Table::parse(&printed)
        .map_err(|error| TestCaseError::fail(format!("{printed:?} does not parse: {error}")))?;
    prop_assert_eq!(reparsed.to_string(), printed);
    prop_assert_eq!(&reparsed.features, &table.features);
    Ok(())
}

fn features() -> impl Strategy<Value = Features> {
    (
        any::<bool>(),
        proptest::option::of(1u32..=50),
        proptest::option::of(0u32..=60_000),
        any::<bool>(),
        proptest::option::of(prop_oneof![
            Just(QueueMode::Bio),
            Just(QueueMode::Rq),
            Just(QueueMode::Mq)
        ]),
    )
        .prop_map(
            |(queue_if_no_path, pg_init_retries, pg_init_delay_msecs, retain, queue_mode)| {
                Features {
                    queue_if_no_path,
                    pg_init_retries,
                    pg_init_delay_msecs,
                    retain_attached_hw_handler: retain,
                    queue_mode,
                }
            },
        )
}

/// A word as a path name or argument could be: no whitespace.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9/:._#?=+@-]{1,24}",
        "\\PZ{1,6}".prop_filter("one word", |word| is_one_word(word)),
    ]
}

/// A round-robin group: 1 to 5 paths, all with no argument or all with a
/// repeat_count.
fn round_robin_group() -> impl Strategy<Value = GroupSpec> {
    (
        any::<bool>(),
        prop::collection::vec((word(), 1u32..=100), 1..=5),
    )
        .prop_map(|(with_repeat_count, paths)| GroupSpec {
            selector: "round-robin".to_owned(),
            selector_args: Vec::new(),
            paths: paths
                .into_iter()
                .map(|(name, repeat_count)| PathSpec {
                    name,
                    args: if with_repeat_count {
                        vec![repeat_count.to_string()]
                    } else {
                        Vec::new()
                    },
                    word: 0,
                })
                .collect(),
            word: 0,
        })
}

fn table() -> impl Strategy<Value = Table> {
    (
        1u64..=u64::MAX / 512,
        features(),
        prop::collection::vec(word(), 0..4),
        prop::collection::vec(round_robin_group(), 1..=4),
        any::<prop::sample::Index>(),
    )
        .prop_map(
            |(length_sectors, features, hardware_handler, mut groups, initial)| {
                // A path is in a table once: a name drawn again gets a
                // suffix until it is new.
                let mut names = std::collections::HashSet::new();
                for path in groups.iter_mut().flat_map(|group| &mut group.paths) {
                    while !names.insert(path.name.clone()) {
                        path.name.push_str(".1");
                    }
                }
                Table {
                    start_sector: 0,
                    length_sectors,
                    features,
                    hardware_handler,
                    initial_group: initial.index(groups.len()) as u32 + 1,
                    groups,
                }
            },
        )
}

/// Words that steer the parser down its branches, plus noise.
const VOCABULARY: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "4",
    "8",
    "50",
    "51",
    "1024",
    "1025",
    "60000",
    "4294967296",
    "18446744073709551616",
    "-1",
    "+1",
    "multipath",
    "queue_if_no_path",
    "pg_init_retries",
    "pg_init_delay_msecs",
    "retain_attached_hw_handler",
    "queue_mode",
    "bio",
    "rq",
    "mq",
    "alua",
    "round-robin",
    "service-time",
    "queue-length",
    "io-affinity",
    "numa",
    "queue-depth",
    "historical-service-time",
    "/dev/nullb0",
    "8:16",
    "P1",
    "null:4G",
];

/// Runs of ASCII whitespace between soup words.
const SEPARATORS: &[&str] = &[" ", "  ", "\t", "\n", " \r\n"];

fn soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        4 => prop::sample::select(VOCABULARY).prop_map(str::to_owned),
        1 => "\\PC{0,8}",
        1 => "[0-9]{1,25}",
    ];
    let separator = prop::sample::select(SEPARATORS);
    (
        any::<bool>(),
        prop::collection::vec((token, separator), 0..48),
    )
        .prop_map(|(with_header, tokens)| {
            let mut text = String::from(if with_header { "0 8 multipath " } else { "" });
            for (token, separator) in tokens {
                text.push_str(&token);
                text.push_str(separator);
            }
            text
        })
}

/// Selector names for tables built in code, one of them unknown.
const BUILT_SELECTORS: &[&str] = &["round-robin", "service-time", "nope"];

proptest! {
    #[test]
    fn generated_tables_print_parse_print(table in table()) {
        assert_round_trips(&table)?;
        let canonical = table.canonical(&NumaTopology::default())
            .map_err(|error| TestCaseError::fail(format!("{table}: {error}")))?;
        assert_round_trips(&canonical)?;
        for group in &canonical.groups {
            for path in &group.paths {
                prop_assert_eq!(path.args.len(), 1);
            }
        }
        let again = canonical.canonical(&NumaTopology::default())
            .map_err(|error| TestCaseError::fail(format!("{canonical}: {error}")))?;
        prop_assert_eq!(again.to_string(), canonical.to_string());
    }

    #[test]
    fn word_soup_never_panics(text in soup()) {
        if let Ok(table) = Table::parse(&text) {
            assert_round_trips(&table)?;
            if let Ok(canonical) = table.canonical(&NumaTopology::default()) {
                assert_round_trips(&canonical)?;
            }
        }
    }

    #[test]
    fn mutated_tables_never_panic(
        table in table(),
        edits in prop::collection::vec(
            (0u8..4, any::<prop::sample::Index>(), prop::sample::select(VOCABULARY)),
            1..4,
        ),
    ) {
        let printed = table.to_string();
        let mut words: Vec<&str> = printed.split(' ').collect();
        for (kind, at, token) in edits {
            let index = at.index(words.len() + 1);
            match kind {
                0 => words.insert(index, token),
                1 if index < words.len() => { words.remove(index); }
                2 if index < words.len() => words[index] = token,
                _ => words.truncate(index),
            }
        }
        if let Ok(table) = Table::parse(&words.join(" ")) {
            assert_round_trips(&table)?;
            if let Ok(canonical) = table.canonical(&NumaTopology::default()) {
                assert_round_trips(&canonical)?;
            }
        }
    }

    #[test]
    fn canonical_of_any_built_table_prints_back(
        start_sector in 0u64..2,
        length_sectors in 0u64..3,
        retries in proptest::option::of(0u32..60),
        handler in prop::collection::vec("\\PC{0,3}", 0..3),
        groups in prop::collection::vec(
            (
                prop::sample::select(BUILT_SELECTORS),
                prop::collection::vec(
                    ("\\PC{0,4}", prop::collection::vec("[0-9x]{1,2}", 0..3)),
                    0..4,
                ),
            ),
            0..3,
        ),
        initial_group in 0u32..4,
    ) {
        let table = Table {
            start_sector,
            length_sectors,
            features: Features { pg_init_retries: retries, ..Features::default() },
            hardware_handler: handler,
            initial_group,
            groups: groups
                .into_iter()
                .map(|(selector, paths)| GroupSpec {
                    selector: selector.to_owned(),
                    selector_args: Vec::new(),
                    paths: paths
                        .into_iter()
                        .map(|(name, args)| PathSpec { name, args, word: 0 })
                        .collect(),
                    word: 0,
                })
                .collect(),
        };
        if let Ok(canonical) = table.canonical(&NumaTopology::default()) {
            assert_round_trips(&canonical)?;
        }
    }
}
