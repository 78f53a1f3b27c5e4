//! The importer: the parser's every form and refusal, each keyword's
//! mapping or reason, the round trip through the daemon's loader, and the
//! real files multipath-tools ships (`testdata/multipath/`).

use super::model::Section;
use super::report::{Outcome, Why};
use super::settings::{setting, Scope};
use super::*;
use crate::config::wwid::{FoundPath, PathSource};
use crate::config::wwid_tests::Fake;
use crate::config::NoPathRetry;
use mpio_core::failback::Failback;
use mpio_transport::blockdev::blacklist::Blacklist;
use mpio_transport::blockdev::wwid_forms::same_lun;
use std::path::Path;

/// Imports `text`, which must be read.
fn imported(text: &str) -> Imported {
    import(text.as_bytes()).unwrap_or_else(|error| panic!("{error}\n{text}"))
}

/// The refusal of `text`.
fn refused(text: &str) -> ImportError {
    match import(text.as_bytes()) {
        Ok(imported) => panic!("read:\n{}", imported.toml),
        Err(error) => error,
    }
}

/// The sections of `text`.
fn sections(text: &str) -> Vec<Section> {
    parser::parse(&lexer::words(text).unwrap()).unwrap()
}

/// The note of the keyword on `line`.
fn note_on(imported: &Imported, line: usize) -> &Note {
    imported
        .notes
        .iter()
        .find(|note| note.line == line)
        .unwrap_or_else(|| panic!("no note on line {line}:\n{}", imported.toml))
}

/// [`Fake`]'s devices, with the bindings file in memory: an imported
/// config may name multipath-tools' own, which a test must not touch.
#[derive(Default)]
struct InMemory {
    bindings: std::cell::RefCell<Option<String>>,
}

impl PathSource for InMemory {
    fn paths_of(&self, wwid: &str, blacklist: &Blacklist) -> Vec<FoundPath> {
        Fake.paths_of(wwid, blacklist)
    }

    fn device_bytes(&self, name: &str) -> Option<u64> {
        Fake.device_bytes(name)
    }

    fn read_bindings(&self, _file: &Path) -> std::io::Result<Option<String>> {
        Ok(self.bindings.borrow().clone())
    }

    fn write_bindings(&self, _file: &Path, text: &str) -> std::io::Result<()> {
        *self.bindings.borrow_mut() = Some(text.to_string());
        Ok(())
    }
}

/// The imported text loaded by the daemon's own loader.
fn loaded(imported: &Imported) -> DaemonConfig {
    DaemonConfig::parse_with(&imported.toml, &InMemory::default())
        .unwrap_or_else(|error| panic!("{error}\n{}", imported.toml))
}

#[test]
fn every_syntax_form_parses() {
    let text = "# a comment\n\
                ! another comment\n\
                defaults {   # trailing comment\n\
                \tpolling_interval\t10 ! trailing\n\
                \tpath_selector \"service-time 0\"\n\
                \tfailback \"\"\"odd\"\"\"\n\
                \tuser_friendly_names\n\
                \tfeatures \"1 queue_if_no_path\" extra words\n\
                }\r\n\
                multipaths\n\
                {\n\
                \tmultipath {\n\
                \t\twwid \"3600a0980 {#!}\"\n\
                \t}\n\
                }\n";
    let parsed = sections(text);
    assert_eq!(parsed.len(), 2);
    let defaults = &parsed[0];
    assert_eq!((defaults.name.as_str(), defaults.line), ("defaults", 3));
    let words: Vec<(&str, Option<&str>, usize)> = defaults
        .keywords
        .iter()
        .map(|keyword| {
            (
                keyword.name.as_str(),
                keyword.value.as_deref(),
                keyword.line,
            )
        })
        .collect();
    assert_eq!(
        words,
        [
            ("polling_interval", Some("10"), 4),
            ("path_selector", Some("service-time 0"), 5),
            ("failback", Some("\"odd\""), 6),
            ("user_friendly_names", None, 7),
            ("features", Some("1 queue_if_no_path"), 8),
        ]
    );
    assert_eq!(defaults.keywords[4].extra, ["extra", "words"]);
    let multipath = &parsed[1].sections[0];
    assert_eq!((multipath.name.as_str(), multipath.line), ("multipath", 12));
    assert_eq!(
        multipath.keywords[0].value.as_deref(),
        Some("3600a0980 {#!}")
    );
}

#[test]
fn every_fault_is_refused_with_its_line() {
    let long = format!("defaults {{\n\tverbosity {}\n}}\n", "9".repeat(5000));
    let cases: [(&str, usize, &str); 10] = [
        ("defaults {\n}\n}\n", 3, "`}` closes no section"),
        (
            "defaults {\n\tverbosity 2\n",
            2,
            "section `defaults` opened at line 1 is not closed",
        ),
        (
            "defaults {\n}\ncolours {\n}\n",
            3,
            "unknown section `colours`",
        ),
        (
            "devices {\n\tdevice {\n\t\tfoo {\n",
            3,
            "unknown sub-section `foo` in `device`",
        ),
        (
            "defaults {\n\tdevice {\n",
            2,
            "unknown sub-section `device`: `defaults` has none",
        ),
        ("verbosity 2\n", 1, "`verbosity` outside a section"),
        (
            "defaults {\n\tpath_selector \"round-robin 0\n}\n",
            2,
            "quote not closed",
        ),
        ("{\n", 1, "`{` without a section name"),
        (
            "defaults {\n\tvendor \u{1}\u{2}\n}\n",
            2,
            "control character U+0001",
        ),
        (&long, 2, "line of 5011 bytes, longer than 4096"),
    ];
    for (text, line, reason) in cases {
        let error = refused(text);
        assert_eq!(error.line, line, "{error} for {text:?}");
        assert!(error.reason.starts_with(reason), "{error} for {text:?}");
    }
    let mut binary = b"defaults {\n\tverbosity 2\n".to_vec();
    binary.extend_from_slice(&[0xff, 0xfe, b'\n']);
    let error = import(&binary).unwrap_err();
    assert_eq!(
        (error.line, error.reason.as_str()),
        (3, "byte 0xff is not UTF-8: not a text file")
    );
}

/// mpio keys and their TOML values.
type Keys = &'static [(&'static str, &'static str)];

#[test]
fn map_settings_carry_over_by_their_meaning() {
    let cases: [(&str, &str, Keys); 12] = [
        (
            "path_selector",
            "service-time 0",
            &[("selector", "\"service-time\"")],
        ),
        (
            "path_selector",
            "historical-service-time 2 1 8",
            &[
                ("selector", "\"historical-service-time\""),
                ("selector_args", "[1, 8]"),
            ],
        ),
        (
            "path_grouping_policy",
            "multibus",
            &[("path_grouping_policy", "\"multibus\"")],
        ),
        (
            "path_grouping_policy",
            "group_by_prio",
            &[("path_grouping_policy", "\"group_by_prio\"")],
        ),
        ("failback", "followover", &[("failback", "\"followover\"")]),
        ("failback", "30", &[("failback", "30")]),
        ("no_path_retry", "queue", &[("no_path_retry", "\"queue\"")]),
        ("no_path_retry", "0", &[("no_path_retry", "\"fail\"")]),
        ("no_path_retry", "12", &[("no_path_retry", "12")]),
        ("polling_interval", "5", &[("checker_interval_ms", "5000")]),
        ("checker_timeout", "30", &[("checker_timeout_ms", "30000")]),
        (
            "features",
            "1 queue_if_no_path",
            &[("queue_if_no_path", "true")],
        ),
    ];
    for (name, value, keys) in cases {
        let Outcome::Set(set) = setting(name, value, Scope::Defaults) else {
            panic!("{name} {value} not set");
        };
        let written: Vec<(&str, String)> = set
            .iter()
            .map(|(key, value)| (*key, value.toml()))
            .collect();
        let expected: Vec<(&str, String)> = keys
            .iter()
            .map(|(key, value)| (*key, value.to_string()))
            .collect();
        assert_eq!(written, expected, "{name} {value}");
    }
}

#[test]
fn keywords_without_an_equivalent_say_why() {
    let cases: [(&str, &str, Scope, Option<Why>); 16] = [
        (
            "path_grouping_policy",
            "group_by_serial",
            Scope::Defaults,
            Some(Why::DifferentMeaning),
        ),
        (
            "path_grouping_policy",
            "group_by_node_name",
            Scope::Multipath,
            Some(Why::DifferentMeaning),
        ),
        ("prio", "alua", Scope::Device, None),
        ("prio", "ana", Scope::Defaults, None),
        (
            "prio",
            "const",
            Scope::Defaults,
            Some(Why::DifferentMeaning),
        ),
        ("prio", "emc", Scope::Device, Some(Why::NoEquivalent)),
        ("hardware_handler", "1 alua", Scope::Device, None),
        (
            "hardware_handler",
            "1 rdac",
            Scope::Device,
            Some(Why::NoEquivalent),
        ),
        (
            "user_friendly_names",
            "yes",
            Scope::Device,
            Some(Why::NoEquivalent),
        ),
        ("user_friendly_names", "no", Scope::Device, None),
        ("queue_without_daemon", "no", Scope::Defaults, None),
        (
            "queue_without_daemon",
            "yes",
            Scope::Defaults,
            Some(Why::DifferentMeaning),
        ),
        (
            "marginal_path_err_sample_time",
            "120",
            Scope::Defaults,
            Some(Why::NoEquivalent),
        ),
        (
            "getuid_callout",
            "/sbin/scsi_id",
            Scope::Defaults,
            Some(Why::IgnoredByMultipathTools),
        ),
        (
            "polling_interval",
            "5",
            Scope::Multipath,
            Some(Why::IgnoredByMultipathTools),
        ),
        (
            "colour",
            "blue",
            Scope::Defaults,
            Some(Why::IgnoredByMultipathTools),
        ),
    ];
    for (name, value, scope, why) in cases {
        let got = match setting(name, value, scope) {
            Outcome::Set(keys) => panic!("{name} {value} set {keys:?}"),
            Outcome::Same(_) => None,
            Outcome::Dropped(why, _) => Some(why),
        };
        assert_eq!(got, why, "{name} {value} in {scope:?}");
    }
}

/// A `no_path_retry` anywhere wins over a `features` `queue_if_no_path`
/// (the loader would refuse the two disagreeing at one level); a second
/// entry for a WWID, in its other form, is reported.
#[test]
fn no_path_retry_wins_across_sections_and_a_wwid_maps_once() {
    let text = "defaults {\n\
                \tfeatures \"1 queue_if_no_path\"\n\
                }\n\
                overrides {\n\
                \tno_path_retry fail\n\
                }\n\
                multipaths {\n\
                \tmultipath {\n\
                \t\twwid 3600a098038303053\n\
                \t\tfeatures \"1 queue_if_no_path\"\n\
                \t}\n\
                \tmultipath {\n\
                \t\twwid naa.600A098038303053\n\
                \t\talias again\n\
                \t}\n\
                }\n";
    let out = imported(text);
    for line in [2, 10] {
        assert!(
            note_on(&out, line)
                .reason
                .contains("no_path_retry at line 5"),
            "{}",
            out.toml
        );
    }
    assert!(note_on(&out, 13).reason.contains("has this WWID already"));
    assert_eq!(out.maps, 1);
    let config = loaded(&out);
    assert_eq!(config.maps[0].no_path_retry, NoPathRetry::Fail);
    assert!(!config.maps[0].table.features.queue_if_no_path);
}

/// `user_friendly_names` and `bindings_file` become the top-level keys,
/// and a map without alias is named from the bindings file where the
/// flag is on for it (its entry's over the defaults'), else by its WWID.
#[test]
fn user_friendly_names_carry_over_with_their_precedence() {
    let text = "defaults {\n\
                \tuser_friendly_names yes\n\
                }\n\
                multipaths {\n\
                \tmultipath {\n\
                \t\twwid naa.2\n\
                \t}\n\
                \tmultipath {\n\
                \t\twwid naa.1\n\
                \t\talias db\n\
                \t}\n\
                \tmultipath {\n\
                \t\twwid naa.3\n\
                \t\tuser_friendly_names no\n\
                \t}\n\
                }\n";
    let out = imported(text);
    assert!(out.dropped().next().is_none(), "{}", out.toml);
    assert!(
        out.toml.contains(
            "\nuser_friendly_names = true  # line 2\n\
             bindings_file = \"/etc/multipath/bindings\"  # multipath-tools' default"
        ),
        "{}",
        out.toml
    );
    assert!(!out.toml.contains("[defaults]"), "{}", out.toml);
    let config = loaded(&out);
    let names: Vec<&str> = config.maps.iter().map(|map| map.name.as_str()).collect();
    assert_eq!(names, ["mpatha", "db", "naa.3"]);

    // Off in the defaults, on in one entry: on at the top, and the other
    // maps named by their WWIDs.
    let text = text
        .replace("names yes", "names no")
        .replace("wwid naa.2\n", "wwid naa.2\n\t\tuser_friendly_names yes\n")
        .replace("bindings_file", "");
    let out = imported(&format!(
        "{text}defaults {{\n\tbindings_file /etc/mpio/bindings\n}}\n"
    ));
    assert!(
        out.toml
            .contains("\nbindings_file = \"/etc/mpio/bindings\"  # line 19\nuser_friendly_names = true  # line 7\n"),
        "{}",
        out.toml
    );
    let config = loaded(&out);
    let names: Vec<&str> = config.maps.iter().map(|map| map.name.as_str()).collect();
    assert_eq!(names, ["mpatha", "db", "naa.3"]);
}

#[test]
fn sections_map_with_multipath_tools_precedence() {
    let text = "defaults {\n\
                \tpolling_interval 10\n\
                \tno_path_retry fail\n\
                \tfailback manual\n\
                \tfailback immediate\n\
                \tfeatures \"1 queue_if_no_path\"\n\
                \tfailback 100000\n\
                \tmarginal_path_double_failed_time 60\n\
                }\n\
                overrides {\n\
                \tno_path_retry 12\n\
                }\n\
                blacklist {\n\
                \tdevnode \"^sda$\"\n\
                \twwid \"^3600508b1\"\n\
                \tdevnode \"!^sd\"\n\
                \tdevnode \"(\"\n\
                \tproperty \"ID_ATA\"\n\
                \tdevice {\n\
                \t\tvendor \"IBM\"\n\
                \t}\n\
                }\n\
                blacklist_exceptions {\n\
                \twwid \"^3600a0980\"\n\
                }\n\
                multipaths {\n\
                \tmultipath {\n\
                \t\twwid 3600a098038303053\n\
                \t\talias db\n\
                \t\tpath_grouping_policy group_by_prio\n\
                \t\tpath_selector \"round-robin 0\"\n\
                \t\tmarginal_path_double_failed_time 60\n\
                \t\tmarginal_path_err_sample_time 120\n\
                \t\tmarginal_path_err_rate_threshold 10\n\
                \t\tmarginal_path_err_recheck_gap_time 300\n\
                \t}\n\
                \tmultipath {\n\
                \t\twwid naa.600a098038303054\n\
                \t}\n\
                \tmultipath {\n\
                \t\talias lost\n\
                \t}\n\
                \tmultipath {\n\
                \t\twwid 3600a098038303055\n\
                \t\talias db\n\
                \t}\n\
                }\n\
                devices {\n\
                \tdevice {\n\
                \t\tvendor NETAPP\n\
                \t\tprio alua\n\
                \t\tfailback immediate\n\
                \t}\n\
                }\n";
    let out = imported(text);
    let why = |line| note_on(&out, line).why;
    assert_eq!(
        why(3),
        Some(Why::IgnoredByMultipathTools),
        "overridden by overrides"
    );
    assert!(note_on(&out, 3).reason.contains("line 11"));
    assert_eq!(
        why(4),
        Some(Why::IgnoredByMultipathTools),
        "set again later"
    );
    assert!(
        note_on(&out, 6).reason.contains("no_path_retry"),
        "{}",
        out.toml
    );
    assert_eq!(
        why(7),
        Some(Why::DifferentMeaning),
        "failback out of mpio's range"
    );
    assert!(note_on(&out, 7)
        .reason
        .starts_with("mpio refuses the value"));
    assert!(note_on(&out, 8).reason.contains("all four"));
    assert_eq!(why(16), Some(Why::DifferentMeaning), "a negated pattern");
    assert_eq!(
        why(17),
        Some(Why::DifferentMeaning),
        "a pattern mpio cannot compile"
    );
    assert_eq!(why(18), Some(Why::NoEquivalent), "property");
    assert_eq!(why(20), Some(Why::NoEquivalent), "blacklist by vendor");
    assert_eq!(why(33), Some(Why::NoEquivalent), "sample time");
    assert_eq!(why(41), Some(Why::IgnoredByMultipathTools), "no wwid");
    assert_eq!(why(44), Some(Why::IgnoredByMultipathTools), "alias taken");
    assert!(note_on(&out, 44).reason.contains("3600a098038303053"));
    assert_eq!(why(51), None, "prio alua: what mpio does");
    assert_eq!(why(52), Some(Why::NoEquivalent), "per-vendor failback");
    assert_eq!(out.maps, 2);

    let config = loaded(&out);
    assert_eq!(config.maps.len(), 2);
    let db = config.map("db").expect("the alias names the map");
    assert_eq!(db.wwid.as_deref(), Some("3600a098038303053"));
    assert_eq!(
        db.no_path_retry,
        NoPathRetry::Checks(12),
        "overrides over defaults"
    );
    assert_eq!(db.checker.interval_ns, 10_000_000_000);
    assert_eq!(db.checker.failback, Failback::Immediate);
    assert_eq!(db.table.groups[0].selector, "round-robin");
    assert_eq!(
        db.table.groups.len(),
        2,
        "group_by_prio: sde at 50, sdf at 10"
    );
    let marginal = db.checker.marginal.expect("all four marginal keywords");
    assert_eq!(marginal.failures, 2);
    assert_eq!(marginal.window_ns, 60_000_000_000);
    assert_eq!(marginal.recovery_ns, 300_000_000_000);
    let unnamed = &config.maps[1];
    assert_eq!(unnamed.name, "naa.600a098038303054", "named by its WWID");
    assert_eq!(unnamed.table.groups.len(), 2, "failover, the default");
    let device = |name: &str, wwid: &str| mpio_transport::blockdev::BlockDevice {
        name: name.into(),
        dev: String::new(),
        transport: "scsi:fake".into(),
        wwid: Some(wwid.into()),
        size_bytes: 1 << 30,
        numa_node: None,
        holders: Vec::new(),
        access: None,
        preferred: false,
        nvme: None,
    };
    assert!(config.blacklist.excludes(&device("sda", "naa.1")).is_some());
    assert!(config
        .blacklist
        .excludes(&device("sdb", "naa.600508b1ff"))
        .is_some());
    assert!(config
        .blacklist
        .excludes(&device("sdb", "naa.600a0980ff"))
        .is_none());
    assert!(config.blacklist.excludes(&device("sdc", "naa.7")).is_none());
}

/// Every keyword line of `text` is carried over or noted, none twice
/// unless extra words were noted too; the count of each.
fn accounted(text: &str, out: &Imported) -> (usize, usize, usize) {
    fn keywords(section: &Section, lines: &mut Vec<usize>) {
        lines.extend(section.keywords.iter().map(|keyword| keyword.line));
        for inner in &section.sections {
            keywords(inner, lines);
        }
    }
    let mut lines = Vec::new();
    for section in sections(text) {
        keywords(&section, &mut lines);
    }
    let mut accounted: Vec<usize> = out
        .carried
        .iter()
        .copied()
        .chain(out.notes.iter().map(|note| note.line))
        .collect();
    accounted.sort_unstable();
    lines.sort_unstable();
    assert_eq!(accounted, lines, "every keyword once, carried or noted");
    (lines.len(), out.carried.len(), out.dropped().count())
}

fn testdata(name: &str) -> String {
    let path = format!("{}/testdata/multipath/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// `multipath -t` of multipath-tools 0.9.4: its built-in defaults and
/// its 200-odd device entries. Every keyword is carried or noted; the
/// defaults that carry over are multipath-tools' own (5 s checks,
/// service-time, failover, manual failback); the loader takes them once
/// a map is added (the file has none).
#[test]
fn multipath_t_output_is_accounted_for_keyword_by_keyword() {
    let text = testdata("multipath-t.conf");
    let out = imported(&text);
    let (keywords, carried, dropped) = accounted(&text, &out);
    assert_eq!((keywords, carried), (852, 6), "{}", out.toml);
    assert_eq!(dropped, 769);
    assert!(out
        .toml
        .contains("user_friendly_names = false  # line 22\n"));
    assert!(out
        .toml
        .contains("bindings_file = \"/etc/multipath/bindings\"  # line 24\n"));
    assert_eq!(out.maps, 0);
    assert!(out.toml.contains("checker_interval_ms = 5000  # line 3\n"));
    assert!(out.toml.contains("selector = \"service-time\"  # line 6\n"));
    assert!(out
        .toml
        .contains("path_grouping_policy = \"failover\"  # line 7\n"));
    assert!(out.toml.contains("failback = \"manual\"  # line 14\n"));
    let with_map = format!(
        "{}\n[[map]]\nname = \"m\"\nwwid = \"3600a0980\"\n",
        out.toml
    );
    let config = DaemonConfig::parse_with(&with_map, &Fake).unwrap();
    assert_eq!(config.maps[0].checker.interval_ns, 5_000_000_000);
    assert_eq!(
        config.maps[0].table.groups.len(),
        2,
        "failover: a group per path"
    );
}

/// multipath-tools' annotated example, as shipped (every line commented
/// out: nothing to import) and with its one-`#` lines uncommented (the
/// old keywords it uses are reported as multipath-tools ignores them).
#[test]
fn the_annotated_example_imports_its_two_maps() {
    let text = testdata("multipath.conf.annotated");
    let out = imported(&text);
    assert_eq!((out.maps, out.notes.len(), out.carried.len()), (0, 0, 0));
    let uncommented: String = text
        .lines()
        .map(|line| match line.strip_prefix('#') {
            Some(rest) if !rest.starts_with('#') => rest,
            _ => line,
        })
        .flat_map(|line| [line, "\n"])
        .collect();
    let out = imported(&uncommented);
    let (keywords, carried, dropped) = accounted(&uncommented, &out);
    assert_eq!((keywords, carried, dropped), (102, 11, 91), "{}", out.toml);
    for (line, keyword) in [
        (17, "multipath_tool"),
        (24, "udev_dir"),
        (42, "default_selector"),
        (79, "r_min_io"),
    ] {
        let note = note_on(&out, line);
        assert!(note.what.contains(keyword), "{note}");
        assert_eq!(note.why, Some(Why::IgnoredByMultipathTools), "{note}");
    }
    let config = loaded(&out);
    let yellow = config.map("yellow").unwrap();
    assert!(same_lun(
        yellow.wwid.as_deref().unwrap(),
        "naa.600508b4000156d700012000000b0000"
    ));
    assert_eq!(yellow.table.groups.len(), 1, "multibus");
    assert_eq!(yellow.table.groups[0].selector, "round-robin");
    assert_eq!(yellow.checker.interval_ns, 10_000_000_000);
    let red = config.map("red").unwrap();
    assert!(same_lun(
        red.wwid.as_deref().unwrap(),
        "t10.DEC_____321816758474"
    ));
}

/// Every keyword multipath.conf(5) of 0.9.4 documents for a section is
/// one the importer knows there: none falls to "not a multipath.conf
/// keyword" or "not taken in this section".
#[test]
fn every_keyword_of_the_man_page_is_known_in_its_section() {
    let man = testdata("multipath.conf.5");
    let mut scope = None;
    let mut checked = 0;
    let mut lines = man.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(title) = line.strip_prefix(".SH ") {
            scope = match title.trim_matches('"') {
                "defaults section" => Some(Scope::Defaults),
                "multipaths section" => Some(Scope::Multipath),
                "devices section" => Some(Scope::Device),
                "overrides section" => Some(Scope::Overrides),
                _ => None,
            };
        }
        let (Some(scope), ".TP") = (scope, line) else {
            continue;
        };
        let Some(name) = lines.peek().and_then(|next| next.strip_prefix(".B ")) else {
            continue;
        };
        if !name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            || matches!(name, "wwid" | "alias" | "protocol" | "type")
            || (scope == Scope::Defaults && parser::SECTIONS.contains(&name))
        {
            continue;
        }
        if let Outcome::Dropped(Why::IgnoredByMultipathTools, reason) = setting(name, "1", scope) {
            assert!(
                !reason.starts_with("not a multipath.conf keyword")
                    && !reason.contains("does not take it"),
                "{name} in {scope:?}: {reason}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 167);
}

proptest::proptest! {
    /// Files made of multipath.conf's own words in any order — sections,
    /// braces, keywords, values good and bad, quotes, comments, newlines —
    /// keep the fuzz target's promises (an error with a line, or a config
    /// the loader reads).
    #[test]
    fn any_arrangement_of_its_words_keeps_the_promises(
        words in proptest::collection::vec(
            proptest::sample::select(vec![
                "defaults", "blacklist", "blacklist_exceptions", "multipaths", "devices",
                "overrides", "multipath", "device", "protocol", "{", "}", "\n", "\n", "\n",
                "wwid", "alias", "3600a0980", "naa.600a0980", "data", "devnode", "\"^sd\"",
                "\"(\"", "\"!^sd\"", "path_selector", "\"round-robin 0\"", "\"service-time 2 1\"",
                "failback", "immediate", "100000", "0", "-1", "no_path_retry", "queue",
                "polling_interval", "features", "\"1 queue_if_no_path\"", "prio", "alua",
                "marginal_path_double_failed_time", "marginal_path_err_sample_time",
                "marginal_path_err_rate_threshold", "marginal_path_err_recheck_gap_time",
                "60", "# note", "! note", "\"", "\"\"", "vendor", "property", "x y",
            ]),
            0..80,
        )
    ) {
        super::fuzz::check(words.join(" ").as_bytes());
    }
}

/// An alias mpio cannot take as a map's name is reported on each of the
/// entry's keywords, with the loader's reason; the entry makes no map.
#[test]
fn an_alias_mpio_refuses_is_reported() {
    let out = imported(
        "multipaths {\n\tmultipath {\n\t\twwid 3600a0980\n\t\talias \"two words\"\n\t}\n}\n",
    );
    assert_eq!(out.maps, 0);
    for line in [3, 4] {
        let note = note_on(&out, line);
        assert_eq!(note.why, Some(Why::DifferentMeaning));
        assert!(
            note.reason
                .starts_with("mpio refuses the map's name \"two words\": "),
            "{note}"
        );
    }
}
