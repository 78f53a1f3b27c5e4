//! `mpio import-multipath-conf` run on files: a multipath.conf becomes a
//! config `mpio serve` loads once its WWIDs find devices, with what does
//! not carry over listed; multipath-tools' own `multipath -t` output; a
//! broken file is refused with its line.

mod common;

use common::{mpio, stderr, stdout};
use mpio_daemon::config::import::import;

const CONF: &str = "defaults {\n\
                    \tpolling_interval 2\n\
                    \tpath_selector \"round-robin 0\"\n\
                    \tno_path_retry 6\n\
                    \trr_weight priorities\n\
                    }\n\
                    blacklist {\n\
                    \twwid \"^3600508b1\"\n\
                    }\n\
                    multipaths {\n\
                    \tmultipath {\n\
                    \t\twwid 3600a098038303053\n\
                    \t\talias data\n\
                    \t\tfailback immediate\n\
                    \t}\n\
                    }\n";

#[test]
fn a_multipath_conf_prints_as_an_mpio_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("multipath.conf");
    std::fs::write(&file, CONF).unwrap();
    let output = mpio(&["import-multipath-conf", file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("#   line 5: defaults: rr_weight priorities: no equivalent: "),
        "{text}"
    );
    for key in [
        "checker_interval_ms = 2000  # line 2\n",
        "selector = \"round-robin\"  # line 3\n",
        "no_path_retry = 6  # line 4\n",
        "    \"^3600508b1\",  # line 8\n",
        "name = \"data\"\nwwid = \"3600a098038303053\"\n",
        "failback = \"immediate\"  # line 14\n",
        "[[map.export]]\nublk = true",
    ] {
        assert!(text.contains(key), "{key:?} in\n{text}");
    }
    assert!(
        stderr(&output).contains("1 map(s), 7 keyword(s) carried over, 1 not carried over"),
        "{}",
        stderr(&output)
    );
    // The binary prints what the library imports, whatever it is run on.
    assert_eq!(text, import(CONF.as_bytes()).unwrap().toml);
    // And the daemon's loader reads the text (its map needs devices: the
    // refusal is about the WWID, not the text).
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
        stderr(&output).contains("0 map(s), 4 keyword(s) carried over, 770 not carried over"),
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
