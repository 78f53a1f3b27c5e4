//! `mpio import-multipath-conf` run on files: a multipath.conf becomes a
//! config `mpio serve` loads once its WWIDs find devices, with what does
//! not carry over listed; multipath-tools' own `multipath -t` output; a
//! broken file is refused with its line.

mod common;

use common::{mpio, stderr, stdout};
use mpio_daemon::config::import::import;

/// A multipath.conf in the repository: the fuzz target's seed of
/// blacklist, exceptions, multipaths and devices entries.
const SECTIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fuzz/corpus/multipath_conf/seed-sections"
);

#[test]
fn a_multipath_conf_prints_as_an_mpio_config() {
    let output = mpio(&["import-multipath-conf", SECTIONS]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("#   line 8: blacklist: property (SCSI_IDENT_|ID_WWN): no equivalent: "),
        "{text}"
    );
    assert!(
        text.contains("#   line 28: device \"NETAPP LUN.*\": prio alua: as mpio does: "),
        "{text}"
    );
    for key in [
        "    \"^sda$\",  # line 2\n",
        "    \"3600508b1001c\",  # line 3\n",
        "[blacklist_exceptions]\nwwid = [\n    \"^3600a0980\",  # line 11\n",
        "name = \"data\"  # line 16\nwwid = \"3600a098038303053\"  # line 15\n",
        "queue_if_no_path = true  # line 17\n",
        "selector = \"service-time\"  # line 18\n[[map.export]]\nublk = 0  # /dev/ublkb0",
        "[[map.export]]\nublk = 1  # /dev/ublkb1",
        "name = \"naa.600a098038303054\"\nwwid = \"naa.600a098038303054\"  # line 21\n",
    ] {
        assert!(text.contains(key), "{key:?} in\n{text}");
    }
    assert!(
        stderr(&output).contains("2 map(s), 8 keyword(s) carried over, 6 not carried over"),
        "{}",
        stderr(&output)
    );
    // The binary prints what the library imports.
    let data = std::fs::read(SECTIONS).unwrap();
    assert_eq!(text, import(&data).unwrap().toml);
    // And the daemon's loader reads the text: its maps need devices, so
    // the refusal is about the WWID, not the text.
    let error = mpio_daemon::config::DaemonConfig::parse(&text).unwrap_err();
    assert!(
        error.reason.starts_with("no block device has this WWID"),
        "{error}"
    );
}

#[test]
fn multipath_t_output_imports() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../daemon/testdata/multipath/multipath-t.conf"
    );
    let output = mpio(&["import-multipath-conf", file]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("0 map(s), 6 keyword(s) carried over, 769 not carried over"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_broken_file_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("multipath.conf");
    std::fs::write(&file, "defaults {\n\tverbosity 2\n}\n}\n").unwrap();
    let output = mpio(&["import-multipath-conf", file.to_str().unwrap()]);
    assert!(!output.status.success());
    assert_eq!(
        stderr(&output),
        format!("mpio: {}: line 4: `}}` closes no section\n", file.display())
    );
    let missing = dir.path().join("absent.conf");
    let output = mpio(&["import-multipath-conf", missing.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("absent.conf: No such file"),
        "{}",
        stderr(&output)
    );
}
