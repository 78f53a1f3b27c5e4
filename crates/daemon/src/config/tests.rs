//! The config parser: each form's table, inheritance from `[defaults]`,
//! every refusal at its line and key, and no panic on any text.

use super::*;
use mpio_core::failback::Failback;
use proptest::prelude::*;

/// The example config shipped in `docs/examples/`.
const EXAMPLE: &str = include_str!("../../../../docs/examples/mpio.toml");

fn parse(text: &str) -> DaemonConfig {
    match DaemonConfig::parse(text) {
        Ok(config) => config,
        Err(error) => panic!("refused: {error}\n{text}"),
    }
}

fn refused(text: &str) -> ConfigError {
    match DaemonConfig::parse(text) {
        Ok(config) => panic!("accepted: {config:?}\n{text}"),
        Err(error) => error,
    }
}

/// A map of three paths (prios 10, 50, 10) with `extra` keys in the map.
fn three_paths(extra: &str) -> String {
    format!(
        "[[map]]\nname = \"m\"\nsize = \"1G\"\n{extra}\n\
         [[map.path]]\nname = \"a\"\nuri = \"null:1G\"\nprio = 10\n\
         [[map.path]]\nname = \"b\"\nuri = \"memory:d#b\"\nprio = 50\n\
         [[map.path]]\nname = \"c\"\nuri = \"memory:d#c\"\nprio = 10\n"
    )
}

/// [`three_paths`] without its `size` (a table gives it): `extra` is
/// line 3, path a at 4, path b at 8, path c at 12.
fn table_map(extra: &str) -> String {
    three_paths(extra).replace("size = \"1G\"\n", "")
}

fn table_of(text: &str) -> String {
    parse(text).maps[0].table.to_string()
}

#[test]
fn each_policy_makes_its_table() {
    let cases = [
        (
            "",
            "0 2097152 multipath 0 0 3 1 service-time 0 1 2 a 1 1 service-time 0 1 2 b 1 1 service-time 0 1 2 c 1 1",
        ),
        (
            "path_grouping_policy = \"failover\"",
            "0 2097152 multipath 0 0 3 1 service-time 0 1 2 a 1 1 service-time 0 1 2 b 1 1 service-time 0 1 2 c 1 1",
        ),
        (
            "path_grouping_policy = \"multibus\"",
            "0 2097152 multipath 0 0 1 1 service-time 0 3 2 a 1 1 b 1 1 c 1 1",
        ),
        (
            "path_grouping_policy = \"group_by_prio\"",
            "0 2097152 multipath 0 0 2 1 service-time 0 1 2 b 1 1 service-time 0 2 2 a 1 1 c 1 1",
        ),
        (
            "path_grouping_policy = \"group_by_prio\"\nselector = \"round-robin\"\nno_path_retry = \"queue\"\ninitial_group = 2",
            "0 2097152 multipath 1 queue_if_no_path 0 2 2 round-robin 0 1 1 b 1 round-robin 0 2 1 a 1 c 1",
        ),
        (
            "path_grouping_policy = \"multibus\"\nselector = \"queue-depth\"\nno_path_retry = 3",
            "0 2097152 multipath 1 queue_if_no_path 0 1 1 queue-depth 0 3 0 a b c",
        ),
    ];
    for (extra, expected) in cases {
        assert_eq!(table_of(&three_paths(extra)), expected, "{extra}");
    }
}

#[test]
fn explicit_groups_and_path_args_make_their_table() {
    let text = "[[map]]\nname = \"m\"\nsize = \"4096s\"\nselector = \"round-robin\"\n\
        [[map.path]]\nname = \"a\"\nuri = \"null:2M\"\nargs = [3]\n\
        [[map.path]]\nname = \"b\"\nuri = \"null:4M\"\nargs = [\"4\"]\n\
        [[map.path]]\nname = \"c\"\nuri = \"null:8M\"\nargs = [\"1\", 100]\n\
        [[map.group]]\npaths = [\"b\", \"a\"]\n\
        [[map.group]]\nselector = \"service-time\"\npaths = [\"c\"]\n";
    assert_eq!(
        table_of(text),
        "0 4096 multipath 0 0 2 1 round-robin 0 2 1 b 4 a 3 service-time 0 1 2 c 1 100"
    );
}

#[test]
fn a_table_is_taken_as_written_and_made_canonical() {
    let text = "[[map]]\nname = \"m\"\nsize = \"1G\"\n\
        table = \"0 2097152 multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 0 a null:1G\"\n\
        [[map.path]]\nname = \"a\"\nuri = \"memory:d#a\"\n\
        [[map.path]]\nname = \"spare\"\nuri = \"memory:d#spare\"\n";
    let config = parse(text);
    let map = &config.maps[0];
    assert_eq!(
        map.table.to_string(),
        "0 2097152 multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 1 a 1 null:1G 1"
    );
    assert_eq!(map.no_path_retry, NoPathRetry::Queue);
    assert_eq!(map.uri_of("a"), "memory:d#a");
    assert_eq!(map.uri_of("null:1G"), "null:1G");
    assert_eq!(map.paths.len(), 2, "names the table does not use are kept");
}

#[test]
fn a_table_without_queueing_follows_its_own_features() {
    let text = "[defaults]\nno_path_retry = \"queue\"\n\
        [[map]]\nname = \"m\"\ntable = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 null:4K 1\"\n\
        [[map]]\nname = \"n\"\ntable = \"0 8 multipath 1 queue_if_no_path 0 1 1 round-robin 0 1 1 null:4K 1\"\n";
    let config = parse(text);
    assert_eq!(config.maps[0].no_path_retry, NoPathRetry::Fail);
    assert_eq!(config.maps[1].no_path_retry, NoPathRetry::Queue);
    let with_count = parse(&text.replace("\"queue\"", "4"));
    assert_eq!(with_count.maps[1].no_path_retry, NoPathRetry::Checks(4));
}

#[test]
fn defaults_are_inherited_and_overridden() {
    let text = "control_socket = \"/run/x.sock\"\n\
        [metrics]\nlisten = \"[::1]:9642\"\n\
        [defaults]\nselector = \"historical-service-time\"\nselector_args = [5]\n\
        failback = \"immediate\"\nno_path_retry = 6\nchecker_interval_ms = 1000\n\
        checker_timeout_ms = 300\nio_timeout_ms = 0\nfence_timeout_ms = 0\nmax_attempts = 8\n\
        hedge_reads = false\n\
        path_grouping_policy = \"multibus\"\n\
        [defaults.marginal]\nfailures = 5\n\
        [[map]]\nname = \"inherits\"\nsize = 4096\n\
        [[map.path]]\nname = \"a\"\nuri = \"null:4K\"\n\
        [[map]]\nname = \"overrides\"\nsize = \"8K\"\nselector = \"round-robin\"\n\
        queue_if_no_path = false\nio_timeout_ms = 100\nfence_timeout_ms = 250\nfailback = 30\n\
        max_attempts = 2\n\
        [map.marginal]\nenabled = false\n\
        [[map.path]]\nname = \"a\"\nuri = \"null:8K\"\n\
        [[map]]\nname = \"own-marginal\"\nsize = \"8K\"\nselector_args = [7]\n\
        [map.marginal]\nwindow_ms = 10\n\
        [[map.path]]\nname = \"a\"\nuri = \"null:8K\"\n";
    let config = parse(text);
    assert_eq!(config.control_socket, Some(PathBuf::from("/run/x.sock")));
    assert_eq!(config.metrics, Some("[::1]:9642".parse().unwrap()));

    let inherits = config.map("inherits").unwrap();
    assert_eq!(
        inherits.table.to_string(),
        "0 8 multipath 1 queue_if_no_path 0 1 1 historical-service-time 2 5 0 1 1 a 1"
    );
    assert_eq!(inherits.no_path_retry, NoPathRetry::Checks(6));
    assert_eq!(inherits.checker.interval_ns, 1_000_000_000);
    assert_eq!(inherits.checker.probe_timeout_ns, 300_000_000);
    assert_eq!(inherits.checker.failback, Failback::Immediate);
    assert!(inherits.checker.fail_active_paths);
    assert_eq!(inherits.io_timeout_ns, None);
    assert_eq!(inherits.max_attempts, 8);
    let marginal = inherits.checker.marginal.unwrap();
    assert_eq!(marginal.failures, 5);
    assert_eq!(marginal.window_ns, 60_000_000_000);
    let options = inherits.options();
    assert_eq!(options.name, "inherits");
    assert_eq!(options.no_path_timeout_ns, Some(6_000_000_000));
    assert_eq!(options.io_timeout_ns, None);
    assert_eq!(options.fence_timeout_ns, None, "0: no limit");
    assert!(!options.hedge_reads);
    assert_eq!(options.max_attempts, 8);

    let overrides = config.map("overrides").unwrap();
    assert_eq!(
        overrides.table.to_string(),
        "0 16 multipath 0 0 1 1 round-robin 0 1 1 a 1",
        "a map's own selector does not take the defaults' arguments"
    );
    assert_eq!(overrides.no_path_retry, NoPathRetry::Fail);
    assert_eq!(overrides.options().no_path_timeout_ns, None);
    assert_eq!(overrides.io_timeout_ns, Some(100_000_000));
    assert_eq!(overrides.options().fence_timeout_ns, Some(250_000_000));
    assert_eq!(
        overrides.checker.failback,
        Failback::Deferred { seconds: 30 }
    );
    assert_eq!(overrides.max_attempts, 2);
    assert_eq!(overrides.checker.marginal, None);

    let own = config.map("own-marginal").unwrap();
    assert!(own
        .table
        .to_string()
        .contains("historical-service-time 2 7 0"));
    let marginal = own.checker.marginal.unwrap();
    assert_eq!((marginal.failures, marginal.window_ns), (5, 10_000_000));
    assert!(config.map("absent").is_none());
}

#[test]
fn bare_defaults() {
    let config =
        parse("[[map]]\nname = \"m\"\nsize = 512\n[[map.path]]\nname = \"a\"\nuri = \"null:4K\"\n");
    let map = &config.maps[0];
    assert_eq!(config.control_socket, None);
    assert_eq!(config.metrics, None);
    assert_eq!(
        map.table.to_string(),
        "0 1 multipath 0 0 1 1 service-time 0 1 2 a 1 1"
    );
    assert_eq!(map.no_path_retry, NoPathRetry::Fail);
    assert_eq!(map.checker, mpio_core::checker::CheckerOptions::default());
    assert_eq!(map.io_timeout_ns, Some(30_000_000_000));
    assert_eq!(map.fence_timeout_ns, Some(30_000_000_000));
    assert!(map.hedge_reads);
    assert_eq!(map.max_attempts, 64);
    assert_eq!(map.checker.marginal, None);
    assert!(map.exports.is_empty());
    let options = map.options();
    let defaults = mpio_core::map::MapOptions::default();
    assert_eq!(
        (
            options.io_timeout_ns,
            options.no_path_timeout_ns,
            options.max_attempts
        ),
        (defaults.io_timeout_ns, None, defaults.max_attempts)
    );
}

#[test]
fn exports_are_read() {
    let text = three_paths("")
        + "[[map.export]]\nsocket = \"/run/m.sock\"\n\
           [[map.export]]\ntcp = \"0.0.0.0:10809\"\nname = \"other\"\nread_only = true\n\
           [[map.export]]\nname = \"u\"\nublk = 7\n\
           [[map.export]]\nname = \"v\"\nublk = true\nsocket = \"/run/v.sock\"\n";
    let exports = &parse(&text).maps[0].exports;
    let export =
        |name: &str, socket: Option<&str>, tcp: Option<&str>, ublk, read_only| ExportConfig {
            name: name.into(),
            socket: socket.map(Into::into),
            socket_mode: 0o600,
            socket_group: None,
            tcp: tcp.map(|address| address.parse().unwrap()),
            ublk,
            max_connections: None,
            read_only,
        };
    assert_eq!(
        exports,
        &vec![
            export("m", Some("/run/m.sock"), None, None, false),
            export("other", None, Some("0.0.0.0:10809"), None, true),
            export("u", None, None, Some(UblkNumber::Fixed(7)), false),
            export("v", Some("/run/v.sock"), None, Some(UblkNumber::Any), false),
        ]
    );
}

#[test]
fn ublk_devices_are_kept_at_a_stop_unless_the_config_says_remove() {
    let two_minutes = UblkOnStop::Keep {
        timeout: std::time::Duration::from_millis(DEFAULT_KEEP_TIMEOUT_MS),
    };
    assert_eq!(parse(&three_paths("")).ublk_on_stop, two_minutes);
    assert_eq!(
        parse(&("[ublk]\n".to_string() + &three_paths(""))).ublk_on_stop,
        two_minutes
    );
    let text = "[ublk]\nkeep_timeout_ms = 5000\n".to_string() + &three_paths("");
    assert_eq!(
        parse(&text).ublk_on_stop,
        UblkOnStop::Keep {
            timeout: std::time::Duration::from_secs(5)
        }
    );
    let text = "[ublk]\non_stop = \"remove\"\n".to_string() + &three_paths("");
    assert_eq!(parse(&text).ublk_on_stop, UblkOnStop::Remove);
}

#[test]
fn a_ublk_number_is_in_range_and_one_export_s() {
    let error = refused(&(three_paths("") + "[[map.export]]\nublk = -1\n")).to_string();
    assert!(error.contains("a ublk device number is 0 to"), "{error}");
    let error = refused(&(three_paths("") + "[[map.export]]\nublk = false\n")).to_string();
    assert!(
        error.contains("needs a socket, a tcp address, ublk"),
        "{error}"
    );
    let text =
        three_paths("") + "[[map.export]]\nublk = 3\n[[map.export]]\nname = \"b\"\nublk = 3\n";
    let error = refused(&text).to_string();
    assert!(error.contains("already"), "{error}");
}

#[test]
fn the_example_config_parses() {
    let config = parse(EXAMPLE);
    let names: Vec<&str> = config.maps.iter().map(|map| map.name.as_str()).collect();
    assert_eq!(names, ["mpatha", "scratch", "legacy"]);
    assert_eq!(
        config.map("scratch").unwrap().table.to_string(),
        "0 524288 multipath 1 queue_if_no_path 0 2 1 round-robin 0 2 1 p0 2 p1 2 queue-length 0 1 1 p2 1"
    );
}

/// The module docs' example parses too.
#[test]
fn the_module_docs_example_parses() {
    let docs = include_str!("mod.rs");
    let start = docs.find("//! ```toml\n").unwrap() + "//! ```toml\n".len();
    let end = start + docs[start..].find("//! ```\n").unwrap();
    let example: String = docs[start..end]
        .lines()
        .map(|line| {
            line.strip_prefix("//! ")
                .unwrap_or(line.trim_start_matches("//!"))
        })
        .collect::<Vec<_>>()
        .join("\n");
    // Its map by WWID finds two devices wherever the test runs.
    let config = DaemonConfig::parse_with(&example, &super::wwid_tests::Fake)
        .unwrap_or_else(|error| panic!("refused: {error}"));
    assert_eq!(config.maps.len(), 4);
    assert_eq!(config.maps[1].table.initial_group, 2);
    assert_eq!(config.maps[2].paths.len(), 2);
}

/// One refusal: where (line, key) and a piece of why.
struct Refusal {
    text: String,
    line: usize,
    key: &'static str,
    reason: &'static str,
}

fn case(text: impl Into<String>, line: usize, key: &'static str, reason: &'static str) -> Refusal {
    Refusal {
        text: text.into(),
        line,
        key,
        reason,
    }
}

/// Lines of `three_paths(extra)` with a one-line `extra`: name 2, size 3,
/// extra 4, path a at 5 (name 6, uri 7, prio 8), path b at 9 (uri 11),
/// path c at 13 (uri 15); what is appended starts at 17.
#[test]
fn every_refusal_names_its_line_and_key() {
    let cases = [
        // toml's own: syntax, unknown keys, wrong types, missing keys.
        case("[[map]\n", 1, "", "unclosed array table"),
        case("control_socket = \"/x\"\n\nbogus = 1\n", 3, "bogus", "unknown field `bogus`"),
        case(three_paths("colour = \"red\""), 4, "map \"m\": colour", "unknown field"),
        case(three_paths("") + "[[map.path]]\nname = \"d\"\nurl = \"null:1G\"\n", 19, "map \"m\" path \"d\": url", "unknown field `url`"),
        case(three_paths("[map.marginal]\nfailure = 2"), 5, "map \"m\" marginal: failure", "unknown field"),
        case(three_paths("checker_interval_ms = \"5s\""), 4, "map \"m\": checker_interval_ms", "invalid type"),
        case(three_paths("size2 = 1").replace("size = \"1G\"", "size = true"), 3, "map \"m\": size", "an integer or a string"),
        case(three_paths("") + "[[map.export]]\nread_only = \"yes\"\n", 18, "map \"m\" export[0]: read_only", "invalid type"),
        case("[[map]]\nsize = 512\n", 1, "map[0]: name", "name missing: a map needs a name"),
        case(three_paths("") + "[[map.path]]\nname = \"d\"\n", 17, "map \"m\" path \"d\"", "missing field `uri`"),
        case("[metrics]\n", 1, "metrics", "missing field `listen`"),
        // The document.
        case("# nothing\n", 2, "map", "no map"),
        case("control_socket = \"run/x.sock\"\n", 1, "control_socket", "absolute path"),
        case("[metrics]\nlisten = \"0.0.0.0:9642\"\n", 2, "metrics: listen", "loopback"),
        case("[metrics]\nlisten = \"localhost:9642\"\n", 2, "metrics: listen", "IP address and port"),
        case("[ublk]\non_stop = \"stay\"\n", 2, "ublk: on_stop", "expected \"keep\""),
        case("[ublk]\nkeep_timeout_ms = 0\n", 2, "ublk: keep_timeout_ms", "expected 1 to 86400000 ms"),
        case("[ublk]\non_stop = \"remove\"\nkeep_timeout_ms = 5\n", 3, "ublk: keep_timeout_ms", "goes with on_stop = \"keep\""),
        case("[ublk]\nlinger = 1\n", 2, "ublk: linger", "unknown field"),
        // Names.
        case(three_paths("") + &three_paths(""), 18, "map \"m\": name", "second map of this name (the first is at line 2)"),
        case(three_paths("").replace("name = \"m\"", "name = \"my map\""), 2, "map: name", "a name is"),
        case(three_paths("").replace("\"c\"", "\"a\""), 14, "map \"m\" path \"a\": name", "second path of this name in the map (the first is at line 6)"),
        case(three_paths("").replace("\"c\"", "\"nbd:x\""), 14, "map \"m\" path: name", "a name is"),
        // Paths and sizes.
        case("[[map]]\nname = \"m\"\nsize = 512\n", 1, "map \"m\"", "no [[map.path]]"),
        case(three_paths("").replace("size = \"1G\"\n", ""), 1, "map \"m\"", "size missing"),
        case(three_paths("").replace("\"1G\"", "1000"), 3, "map \"m\": size", "not a whole number of 512-byte sectors"),
        case(three_paths("").replace("\"1G\"", "0"), 3, "map \"m\": size", "not empty"),
        case(three_paths("").replace("\"1G\"", "-512"), 3, "map \"m\": size", "not negative"),
        case(three_paths("").replace("\"1G\"", "\"99999999T\""), 3, "map \"m\": size", "too large"),
        case(three_paths("").replace("\"1G\"", "\"99999999999999999999s\""), 3, "map \"m\": size", "sectors"),
        case(three_paths("").replace("\"1G\"", "\"1Q\""), 3, "map \"m\": size", "not a number"),
        case(three_paths("").replace("memory:d#b", "nbd:/x"), 11, "map \"m\" path \"b\": uri", "nbd"),
        case(three_paths("").replace("memory:d#b", "scsi:0:0"), 11, "map \"m\" path \"b\": uri", "unknown transport \"scsi\""),
        case(three_paths("").replace("memory:d#c", "memory:d#b"), 15, "map \"m\" path \"c\": uri", "same URI (the first is at line 11)"),
        case(three_paths("").replace("prio = 50", "prio = -1"), 12, "map \"m\" path \"b\": prio", "expected 0 to"),
        // Forms of the groups.
        case(three_paths("path_grouping_policy = \"group_by_serial\""), 4, "map \"m\": path_grouping_policy", "not supported by mpio"),
        case(three_paths("path_grouping_policy = \"multibus\"") + "[[map.group]]\npaths = [\"a\"]\n", 17, "map \"m\" group[0]", "path_grouping_policy is given too (line 4)"),
        case(table_map("table = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 a 1\"") + "[[map.group]]\npaths = [\"a\"]\n", 16, "map \"m\" group[0]", "table is given too (line 3)"),
        case(three_paths("path_grouping_policy = \"multibus\"\ntable = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 a 1\""), 5, "map \"m\": table", "path_grouping_policy is given too (line 4)"),
        case(three_paths("") + "[[map.group]]\npaths = [\"a\", \"z\"]\n", 18, "map \"m\" group[0]: paths[1]", "no [[map.path]] of this name; the map's paths are a, b, c"),
        case(three_paths("") + "[[map.group]]\npaths = [\"a\", \"b\"]\n[[map.group]]\npaths = [\"c\",\n \"a\"]\n", 21, "map \"m\" group[1]: paths[1]", "already in group[0] (line 18)"),
        case(three_paths("") + "[[map.group]]\npaths = [\"a\", \"c\"]\n", 9, "map \"m\" path \"b\"", "in no [[map.group]]"),
        case(three_paths("") + "[[map.group]]\npaths = []\n", 18, "map \"m\" group[0]: paths", "at least one path"),
        case(three_paths("initial_group = 4"), 4, "map \"m\": initial_group", "expected 1 to 3"),
        // Selectors and their arguments, refused by the core at the key.
        case(three_paths("selector = \"fastest\""), 4, "map \"m\": selector", "no such selector; the selectors are round-robin"),
        case(three_paths("selector = \"round-robin\"\nselector_args = [1]"), 5, "map \"m\": selector_args[0]", "round-robin takes no selector arguments"),
        case(three_paths("selector_args = [\"a b\"]"), 4, "map \"m\": selector_args[0]", "one word"),
        case(three_paths("selector = \"round-robin\"").replace("prio = 50", "prio = 50\nargs = [\"x\"]"), 13, "map \"m\" path \"b\": args[0]", "repeat_count"),
        case(three_paths("path_grouping_policy = \"multibus\"").replace("prio = 50", "prio = 50\nargs = [1]"), 13, "map \"m\" path \"b\": args", "but path \"a\" of the same group has 0"),
        case(three_paths("") + "[[map.group]]\nselector = \"numa\"\nselector_args = [\"1\"]\npaths = [\"a\", \"b\", \"c\"]\n", 19, "map \"m\" group[0]: selector_args[0]", "numa"),
        case(three_paths("selector = \"io-affinity\""), 5, "map \"m\" path \"a\"", "io-affinity needs a cpumask"),
        case(three_paths("selector = \"historical-service-time\"\nselector_args = [1, 2, 3]"), 5, "map \"m\": selector_args[2]", "at most 2"),
        // Features.
        case(three_paths("no_path_retry = \"forever\""), 4, "map \"m\": no_path_retry", "expected \"queue\", \"fail\""),
        case(three_paths("no_path_retry = 0"), 4, "map \"m\": no_path_retry", "say \"fail\""),
        case(three_paths("no_path_retry = 70000"), 4, "map \"m\": no_path_retry", "1 to 65535"),
        case(three_paths("no_path_retry = \"fail\"\nqueue_if_no_path = true"), 5, "map \"m\": queue_if_no_path", "contradicts no_path_retry \"fail\" (line 4)"),
        case("[defaults]\nqueue_if_no_path = false\nno_path_retry = 3\n", 2, "defaults: queue_if_no_path", "contradicts no_path_retry 3 (line 3)"),
        case(three_paths("failback = \"sometimes\""), 4, "map \"m\": failback", "immediate, manual, followover"),
        case(three_paths("failback = 0"), 4, "map \"m\": failback", "say immediate"),
        // Tables.
        case(three_paths("table = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 a 1\"").replace("\"1G\"", "\"8K\""), 3, "map \"m\": size", "the table's length is 8 sectors"),
        case(table_map("table = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 a 1\"\ninitial_group = 1"), 4, "map \"m\": initial_group", "a table gives its own initial group"),
        case(table_map("table = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 a 1\"\nno_path_retry = \"queue\""), 4, "map \"m\": no_path_retry", "does not have queue_if_no_path"),
        case(table_map("table = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 a 1\"\nselector = \"round-robin\""), 4, "map \"m\": selector", "a table names each group's selector"),
        case(table_map("table = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 a 1\"").replace("prio = 50", "args = [1]"), 11, "map \"m\" path \"b\": args", "a table gives each path's arguments"),
        case(table_map("table = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 zz 1\""), 3, "map \"m\": table", "word 12 (\"zz\"): neither a [[map.path]] name"),
        case(table_map("table = \"0 8 multipath 0 0 1 1 round-robin 0 2 1 a 1 a 1\""), 3, "map \"m\": table", "a path not in the table yet (word 12 names it): a path is in a table once"),
        case(table_map("table = \"0 8 multipath 0 0 1 1 roundrobin 0 1 1 a 1\""), 3, "map \"m\": table", "word 8"),
        case(table_map("table = \"0 8 multipath 0 0 2 1 round-robin 0 1 1 a 1\""), 3, "map \"m\": table", "end of table"),
        // Timing and limits.
        case(three_paths("checker_interval_ms = 0"), 4, "map \"m\": checker_interval_ms", "expected 1 to 3600000 ms"),
        case("[defaults]\nchecker_timeout_ms = 100000000\n", 2, "defaults: checker_timeout_ms", "at most one day"),
        case(three_paths("io_timeout_ms = -5"), 4, "map \"m\": io_timeout_ms", "(0: never)"),
        case(three_paths("fence_timeout_ms = -5"), 4, "map \"m\": fence_timeout_ms", "(0: never)"),
        case(three_paths("max_attempts = 0"), 4, "map \"m\": max_attempts", "expected 1 to 1024"),
        case("[defaults.marginal]\nfailures = 1\n", 2, "defaults.marginal: failures", "expected 2 to 1000"),
        case(three_paths("[map.marginal]\nwindow_ms = 0"), 5, "map \"m\" marginal: window_ms", "expected 1 to"),
        case(three_paths("[map.marginal]\nrecovery_ms = 0"), 5, "map \"m\" marginal: recovery_ms", "expected 1 to"),
        // Exports and listeners.
        case(three_paths("") + "[[map.export]]\nname = \"x\"\n", 17, "map \"m\" export \"x\"", "a socket, a tcp address, ublk, or several"),
        case(three_paths("") + "[[map.export]]\nsocket = \"m.sock\"\n", 18, "map \"m\" export[0]: socket", "absolute path"),
        case(three_paths("") + "[[map.export]]\ntcp = \"10809\"\n", 18, "map \"m\" export[0]: tcp", "IP address and port"),
        case(three_paths("") + "[[map.export]]\nname = \"\"\nsocket = \"/s\"\n", 18, "map \"m\" export \"\": name", "1 to 4096 bytes"),
        case(
            three_paths("") + "[[map.export]]\nsocket = \"/run/s\"\n" + &three_paths("").replace("\"m\"", "\"n\"") + "[[map.export]]\nsocket = \"/run/s\"\n",
            36,
            "map \"n\" export[0]: socket",
            "already listened on by map \"m\" export[0]: socket (line 18)",
        ),
        case("control_socket = \"/run/c\"\n".to_string() + &three_paths("") + "[[map.export]]\nsocket = \"/run/c\"\n", 19, "map \"m\" export[0]: socket", "already listened on by control_socket (line 1)"),
        case(three_paths("") + "[[map.export]]\ntcp = \"127.0.0.1:10809\"\n[[map.export]]\ntcp = \"0.0.0.0:10809\"\n", 20, "map \"m\" export[1]: tcp", "already listened on"),
        case("[metrics]\nlisten = \"127.0.0.1:9000\"\n".to_string() + &three_paths("") + "[[map.export]]\ntcp = \"127.0.0.1:9000\"\n", 20, "map \"m\" export[0]: tcp", "already listened on by metrics: listen (line 2)"),
    ];
    let mut failures = Vec::new();
    for case in cases {
        let Err(error) = DaemonConfig::parse(&case.text) else {
            failures.push(format!("accepted:\n{}", case.text));
            continue;
        };
        if error.line != case.line
            || error.key != case.key
            || !error.to_string().contains(case.reason)
        {
            failures.push(format!(
                "expected line {} key {:?} reason {:?}\n     got line {} key {:?}: {error}",
                case.line, case.key, case.reason, error.line, error.key
            ));
        }
        assert!(error.column >= 1);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn display_says_line_column_key_value_and_why() {
    let error = refused(&three_paths("").replace("memory:d#b", "nbd:/x"));
    assert_eq!(
        error.to_string(),
        format!(
            "line 11, column 7: map \"m\" path \"b\": uri \"nbd:/x\": {}",
            error.reason
        )
    );
    let missing_argument = refused(&three_paths("selector = \"io-affinity\""));
    assert!(
        missing_argument
            .to_string()
            .starts_with("line 5, column 1: map \"m\" path \"a\": expected"),
        "{missing_argument}"
    );
    let in_table = refused(&table_map(
        "table = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 a x\"",
    ));
    assert_eq!(
        (in_table.line, in_table.column),
        (3, 52),
        "at the word itself: {in_table}"
    );
}

#[test]
fn load_names_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("mpio.toml");
    let missing = DaemonConfig::load(&path).unwrap_err();
    assert_eq!(
        (missing.file.as_deref(), missing.line),
        (Some(path.as_path()), 0)
    );
    assert!(
        missing
            .to_string()
            .starts_with(&format!("{}: cannot read", path.display())),
        "{missing}"
    );

    std::fs::write(&path, three_paths("selector = 1")).unwrap();
    let error = DaemonConfig::load(&path).unwrap_err();
    assert!(
        error.to_string().starts_with(&format!(
            "{}: line 4, column 12: map \"m\": selector",
            path.display()
        )),
        "{error}"
    );

    std::fs::write(&path, EXAMPLE).unwrap();
    assert_eq!(DaemonConfig::load(&path).unwrap().maps.len(), 3);
}

/// What a refusal must hold whatever the text: a line within the text
/// (one past the last for an error at the end) and a column on it.
fn check_any(text: &str) {
    if let Err(error) = DaemonConfig::parse(text) {
        let lines = text.split('\n').count();
        assert!(
            (1..=lines).contains(&error.line),
            "line {} of {lines}: {error}\n{text:?}",
            error.line
        );
        assert!(error.column >= 1, "{error}");
        assert!(!error.reason.is_empty(), "{error}");
    }
}

#[test]
fn every_truncation_of_the_example_is_parsed_or_refused_at_a_line() {
    for (end, _) in EXAMPLE.char_indices() {
        check_any(&EXAMPLE[..end]);
    }
    for line in 0..EXAMPLE.lines().count() {
        let without: Vec<&str> = EXAMPLE
            .lines()
            .enumerate()
            .filter(|&(at, _)| at != line)
            .map(|(_, text)| text)
            .collect();
        check_any(&without.join("\n"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn garbage_never_panics(text in "\\PC{0,200}") {
        check_any(&text);
    }

    #[test]
    fn toml_shaped_garbage_never_panics(
        text in "(\\[\\[?(map|map\\.path|map\\.group|map\\.export|defaults|metrics)\\]\\]?\n|[a-z_]{1,20} = (\"[a-z0-9:/#. ]{0,20}\"|-?[0-9]{1,12}|true|\\[\\]|\\[\"a\", 1\\])\n){0,30}"
    ) {
        check_any(&text);
    }

    #[test]
    fn mutated_example_never_panics(at in 0usize..4000, byte in any::<u8>(), delete in any::<bool>()) {
        let mut bytes = EXAMPLE.as_bytes().to_vec();
        let at = at % bytes.len();
        if delete {
            bytes.remove(at);
        } else {
            bytes[at] = byte;
        }
        if let Ok(text) = String::from_utf8(bytes) {
            check_any(&text);
        }
    }
}

#[test]
fn an_export_socket_gets_the_mode_and_group_configured() {
    let map = |export: &str| {
        format!(
            "[[map]]\nname = \"m\"\ntable = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 null:4K 1\"\n\
             [[map.export]]\n{export}\n"
        )
    };
    let config = parse(&map("socket = \"/run/m.sock\""));
    assert_eq!(config.maps[0].exports[0].socket_mode, 0o600);
    assert_eq!(config.maps[0].exports[0].socket_group, None);
    let config = parse(&map(
        "socket = \"/run/m.sock\"\nsocket_mode = \"0660\"\nsocket_group = \"root\"",
    ));
    assert_eq!(config.maps[0].exports[0].socket_mode, 0o660);
    assert_eq!(config.maps[0].exports[0].socket_group, Some(0));
    let config = parse(&map("socket = \"/run/m.sock\"\nsocket_group = 6"));
    assert_eq!(config.maps[0].exports[0].socket_group, Some(6));
    let error = refused(&map("socket = \"/run/m.sock\"\nsocket_mode = \"1777\""));
    assert!(
        error.to_string().contains("octal permission bits"),
        "{error}"
    );
    let error = refused(&map(
        "socket = \"/run/m.sock\"\nsocket_group = \"no such group\"",
    ));
    assert!(error.to_string().contains("group name"), "{error}");
    let error = refused(&map("tcp = \"127.0.0.1:0\"\nsocket_mode = \"0660\""));
    assert!(error.to_string().contains("need a socket"), "{error}");
}

#[test]
fn an_export_may_set_its_connection_cap() {
    let map = |export: &str| {
        format!(
            "[[map]]\nname = \"m\"\ntable = \"0 8 multipath 0 0 1 1 round-robin 0 1 1 null:4K 1\"\n\
             [[map.export]]\nsocket = \"/run/m.sock\"\n{export}\n"
        )
    };
    assert_eq!(parse(&map("")).maps[0].exports[0].max_connections, None);
    assert_eq!(
        parse(&map("max_connections = 16")).maps[0].exports[0].max_connections,
        Some(16)
    );
    for bad in ["0", "-1", "65537"] {
        let error = refused(&map(&format!("max_connections = {bad}")));
        assert!(error.to_string().contains("expected 1 to 65536"), "{error}");
    }
}
