//! `mpio resize`: a map over two file paths to one growing file, served
//! over NBD. The resize grows the map to what the file holds, data past
//! the old end reads back through a new connection, a path smaller than
//! the map refuses it, and a reload cannot change the size behind it.

mod common;
mod daemon;

use daemon::Daemon;
use mpio_test_support::{output_within, HANG_BOUND};
use std::path::Path;
use std::process::Command;

const MIB: u64 = 1 << 20;

/// A config of map `m`: paths `a` and `b` to `lun`, buffered (tmpfs
/// takes no `O_DIRECT`), `size` bytes, exported on `nbd.sock`.
fn config(dir: &Path, lun: &Path, size: u64) -> String {
    let mut text = format!("[[map]]\nname = \"m\"\nsize = {size}\n");
    for path in ["a", "b"] {
        text.push_str(&format!(
            "[[map.path]]\nname = \"{path}\"\nuri = \"file:{}?direct=0#{path}\"\n",
            lun.display()
        ));
    }
    text.push_str(&format!(
        "[[map.export]]\nsocket = \"{}\"\n",
        dir.join("nbd.sock").display()
    ));
    text
}

/// Runs `program` of libnbd-bin to its end, which must succeed; its
/// standard output.
fn libnbd(program: &str, args: &[&str]) -> String {
    let output = output_within(Command::new(program).args(args), HANG_BOUND);
    assert!(output.status.success(), "{program}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// What `nbdinfo --size` says of the export: a new connection's size.
fn export_size(daemon: &Daemon) -> u64 {
    libnbd("nbdinfo", &["--size", &daemon.uris[0]])
        .trim()
        .parse()
        .unwrap()
}

/// The export's bytes, through a new connection.
fn export_bytes(daemon: &Daemon) -> Vec<u8> {
    let copy = daemon.dir.join("copy.img");
    libnbd("nbdcopy", &[&daemon.uris[0], copy.to_str().unwrap()]);
    std::fs::read(copy).unwrap()
}

/// The length of the map's table, in sectors.
fn table_sectors(daemon: &Daemon) -> String {
    let table = daemon.ok(&["table", "m"]);
    table.split_whitespace().nth(1).unwrap().to_string()
}

#[test]
fn resize_grows_the_map_to_its_paths_and_only_grows() {
    let dir = daemon::test_dir("resize");
    let lun = dir.join("lun.img");
    let file = std::fs::File::create(&lun).unwrap();
    file.set_len(4 * MIB).unwrap();
    let config_file = dir.join("mpio.toml");
    std::fs::write(&config_file, config(&dir, &lun, 4 * MIB)).unwrap();
    let daemon = Daemon::start(dir.clone(), &["--config", config_file.to_str().unwrap()]);

    // Paths of the map's size: nothing to do.
    let answer = daemon.ok(&["resize", "m"]);
    assert!(
        answer.starts_with("map m is 4194304 bytes already"),
        "{answer}"
    );

    // The LUN grows, and holds data past the map's old end.
    file.set_len(8 * MIB).unwrap();
    let pattern: Vec<u8> = (0..MIB).map(|byte| (byte * 7 % 251) as u8).collect();
    std::os::unix::fs::FileExt::write_all_at(&file, &pattern, 6 * MIB).unwrap();
    assert_eq!(export_size(&daemon), 4 * MIB, "not before the resize");
    let json = daemon.json(&["resize", "m"]);
    assert_eq!(json["from_bytes"], 4 * MIB, "{json}");
    assert_eq!(json["to_bytes"], 8 * MIB, "{json}");
    let notes = json["notes"].to_string();
    assert!(
        notes.contains("connections made from now on are told 8388608 bytes"),
        "{json}"
    );
    assert!(notes.contains("make it 8388608 bytes there"), "{json}");
    assert_eq!(table_sectors(&daemon), "16384");
    assert_eq!(export_size(&daemon), 8 * MIB);
    let bytes = export_bytes(&daemon);
    assert_eq!(bytes.len() as u64, 8 * MIB);
    assert_eq!(&bytes[6 * MIB as usize..7 * MIB as usize], &pattern[..]);
    // Both paths serve the new size.
    let paths = daemon.ok(&["show", "paths", "m"]);
    assert_eq!(paths.matches(" active ").count(), 2, "{paths}");

    // The file still says 4 MiB: its reload would shrink an exported map.
    let error = daemon.error(&["reload"]);
    assert!(
        error.contains("a reload keeps an exported map's size"),
        "{error}"
    );

    // A path smaller than the map refuses the resize, naming it.
    file.set_len(2 * MIB).unwrap();
    let error = daemon.error(&["resize", "m"]);
    assert!(
        error.contains("path \"a\" holds 2097152 bytes, less than the map's 8388608"),
        "{error}"
    );
    assert!(error.contains("a map only grows"), "{error}");
    assert_eq!(table_sectors(&daemon), "16384");
    let error = daemon.error(&["resize", "nope"]);
    assert!(error.contains("no map named \"nope\""), "{error}");
}
