//! Map names: `name` over the bindings file, `user_friendly_names` over
//! the WWID, the bindings file written and read again, and the same names
//! whatever order the maps and their devices come in.

use super::wwid::{FoundPath, PathSource};
use super::wwid_tests::Fake;
use super::*;
use mpio_transport::blockdev::blacklist::Blacklist;

/// [`Fake`]'s devices, found in the opposite order.
struct Reversed;

impl PathSource for Reversed {
    fn paths_of(&self, wwid: &str, blacklist: &Blacklist) -> Vec<FoundPath> {
        let mut found = Fake.paths_of(wwid, blacklist);
        found.reverse();
        found
    }

    fn device_bytes(&self, name: &str) -> Option<u64> {
        Fake.device_bytes(name)
    }
}

/// A config of maps by WWID, unnamed but for `named`, in the order given,
/// with `user_friendly_names` and a bindings file at `bindings`.
fn config(wwids: &[&str], named: &[(&str, &str)], bindings: &Path) -> String {
    let mut text = format!(
        "user_friendly_names = true\nbindings_file = {:?}\n",
        bindings.display().to_string()
    );
    for wwid in wwids {
        text.push_str(&format!("[[map]]\nwwid = {wwid:?}\n"));
    }
    for (name, wwid) in named {
        text.push_str(&format!("[[map]]\nname = {name:?}\nwwid = {wwid:?}\n"));
    }
    text
}

/// Each map's WWID and name, sorted by WWID.
fn names(config: &DaemonConfig) -> Vec<(String, String)> {
    let mut names: Vec<(String, String)> = config
        .maps
        .iter()
        .map(|map| (map.wwid.clone().unwrap_or_default(), map.name.clone()))
        .collect();
    names.sort();
    names
}

const WWIDS: [&str; 3] = ["naa.2", "naa.1", "naa.600a0980000000000000000000000001"];

#[test]
fn two_starts_finding_the_devices_in_another_order_give_the_same_names() {
    let first_host = tempfile::tempdir().unwrap();
    let second_host = tempfile::tempdir().unwrap();
    let first_file = first_host.path().join("bindings");
    let second_file = second_host.path().join("bindings");
    let first = DaemonConfig::parse_with(&config(&WWIDS, &[], &first_file), &Fake).unwrap();
    let mut reordered = WWIDS;
    reordered.reverse();
    let second =
        DaemonConfig::parse_with(&config(&reordered, &[], &second_file), &Reversed).unwrap();
    let expected = [
        ("naa.1", "mpatha"),
        ("naa.2", "mpathb"),
        ("naa.600a0980000000000000000000000001", "mpathc"),
    ]
    .map(|(wwid, name)| (wwid.to_string(), name.to_string()));
    assert_eq!(names(&first), expected);
    assert_eq!(names(&second), expected);
    // The binding is in multipath-tools' form, under its header.
    let written = std::fs::read_to_string(&first_file).unwrap();
    assert!(written.starts_with("# Multipath bindings"), "{written}");
    assert!(written.ends_with("mpatha 31\nmpathb 32\nmpathc 3600a0980000000000000000000000001\n"));
    assert_eq!(written, std::fs::read_to_string(&second_file).unwrap());
    // The maps take their devices whatever order they were found in.
    assert_eq!(second.map("mpatha").unwrap().paths.len(), 2);
}

#[test]
fn a_start_after_more_luns_appeared_keeps_every_name_it_had() {
    let host = tempfile::tempdir().unwrap();
    let file = host.path().join("bindings");
    let before = DaemonConfig::parse_with(&config(&["naa.2"], &[], &file), &Fake).unwrap();
    assert_eq!(before.maps[0].name, "mpatha");
    // naa.1 sorts first but is new: it gets the next free name. A reload
    // of the same file gives the same names again, and writes nothing.
    let text = config(&["naa.1", "naa.2"], &[], &file);
    let after = DaemonConfig::parse_with(&text, &Reversed).unwrap();
    assert_eq!(
        names(&after),
        [("naa.1", "mpathb"), ("naa.2", "mpatha")].map(|(w, n)| (w.into(), n.into()))
    );
    let written = std::fs::read_to_string(&file).unwrap();
    let reloaded = DaemonConfig::parse_with(&text, &Fake).unwrap();
    assert_eq!(names(&reloaded), names(&after));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
}

#[test]
fn a_maps_own_name_wins_and_is_never_bound() {
    let host = tempfile::tempdir().unwrap();
    let file = host.path().join("bindings");
    std::fs::write(&file, "mpatha 31\n").unwrap();
    let config = DaemonConfig::parse_with(
        &config(&["naa.2"], &[("db", "naa.1"), ("mpathb", "naa.3")], &file),
        &Fake,
    )
    .unwrap();
    assert_eq!(
        names(&config),
        [("naa.1", "db"), ("naa.2", "mpathc"), ("naa.3", "mpathb")]
            .map(|(w, n)| (w.into(), n.into())),
        "mpatha stays naa.1's in the file; mpathb is a map's own name"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "mpatha 31\nmpathc 32\n"
    );
}

#[test]
fn without_user_friendly_names_a_map_is_named_by_its_wwid() {
    let config = DaemonConfig::parse_with(
        "[[map]]\nwwid = \"t10.DEC     321816758474\"\n[[map]]\nwwid = \"naa.1\"\n\
         [[map.export]]\nsocket = \"/run/x.sock\"\n",
        &Fake,
    )
    .unwrap();
    assert_eq!(config.maps[0].name, "1DEC_321816758474");
    assert_eq!(config.maps[1].name, "31");
    assert_eq!(
        config.maps[1].exports[0].name, "31",
        "the export's default name"
    );
}

#[test]
fn the_links_directory_is_dev_unless_set_or_switched_off() {
    let map = "[[map]]\nname = \"m\"\nwwid = \"naa.1\"\n";
    let dir = |text: &str| {
        DaemonConfig::parse_with(text, &Fake).unwrap().maps[0]
            .device_links
            .clone()
    };
    assert_eq!(dir(map), Some(PathBuf::from("/dev")));
    assert_eq!(
        dir(&format!("[links]\ndev_dir = \"/tmp/dev\"\n{map}")),
        Some(PathBuf::from("/tmp/dev"))
    );
    assert_eq!(dir(&format!("[links]\nenabled = false\n{map}")), None);
    let error =
        DaemonConfig::parse_with(&format!("[links]\ndev_dir = \"dev\"\n{map}"), &Fake).unwrap_err();
    assert_eq!(error.key, "links: dev_dir");
}

#[test]
fn names_are_refused_with_what_to_do() {
    let cases: Vec<(String, &str, &str)> = vec![
        (
            "[[map]]\nsize = \"1G\"\n[[map.path]]\nname = \"a\"\nuri = \"null:1G\"\n".into(),
            "map[0]: name",
            "a map needs a name unless it is a map by wwid",
        ),
        (
            "[[map]]\nwwid = \"naa.1\"\n[[map]]\nwwid = \"naa.1\"\n".into(),
            "map \"31\": name",
            "a second map of this name",
        ),
        (
            "user_friendly_names = true\nbindings_file = \"bindings\"\n[[map]]\nwwid = \"naa.1\"\n"
                .into(),
            "bindings_file",
            "expected an absolute path",
        ),
    ];
    for (text, key, reason) in cases {
        let error = DaemonConfig::parse_with(&text, &Fake).unwrap_err();
        assert_eq!(error.key, key, "{text}\n{error}");
        assert!(error.reason.contains(reason), "{text}\n{error}");
    }
}

#[test]
fn a_bindings_file_that_cannot_serve_is_refused_naming_it() {
    let host = tempfile::tempdir().unwrap();
    let file = host.path().join("bindings");
    let shown = format!("{:?}", file.display().to_string());
    let cases = [
        ("mpatha 31\nmpathb\n", config(&["naa.1"], &[], &file), "line 2 of the bindings file"),
        (
            "# mine\nmpatha 32\n",
            config(&["naa.1"], &[("mpatha", "naa.2")], &file).replace("naa.2", "naa.3"),
            "",
        ),
        (
            "mpatha 31\n",
            config(&["naa.1"], &[("mpatha", "naa.2")], &file),
            "line 1 of the bindings file binds WWID \"naa.1\" to \"mpatha\", the name of the map at line",
        ),
    ];
    for (bindings, text, reason) in cases {
        std::fs::write(&file, bindings).unwrap();
        let outcome = DaemonConfig::parse_with(&text, &Fake);
        if reason.is_empty() {
            // mpatha is naa.2's in the file, and a map's own name: naa.1
            // takes mpathb.
            assert_eq!(outcome.unwrap().maps[0].name, "mpathb");
            continue;
        }
        let error = outcome.unwrap_err();
        assert_eq!(error.key, "bindings_file", "{error}");
        assert_eq!(error.value.as_deref(), Some(shown.as_str()), "{error}");
        assert!(error.reason.contains(reason), "{error}");
    }
    // A new name that cannot be kept is refused, not given.
    std::fs::remove_file(&file).unwrap();
    let temporary = host
        .path()
        .join(format!(".bindings.{}.tmp", std::process::id()));
    std::fs::create_dir(&temporary).unwrap();
    let error = DaemonConfig::parse_with(&config(&["naa.1"], &[], &file), &Fake).unwrap_err();
    assert!(
        error.reason.contains("cannot write the bindings file"),
        "{error}"
    );
}
