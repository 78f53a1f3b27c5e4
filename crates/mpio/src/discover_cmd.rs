//! `mpio discover`: the host's block devices grouped by WWID (the
//! kernel's form, then udev's and multipath-tools' in brackets for SCSI:
//! `naa.600a… (3600a…)`), each path
//! with its transport, access state, NUMA node, size and holders (as
//! `multipath -d -v3` lists them), as text or JSON; or, with `--config`,
//! a config with a map by WWID for each LUN that has a path.
//!
//! An NVMe namespace's ANA state is read from its controller
//! (`/dev/nvmeN`), which needs read access to that device (root): without
//! it the state shows as `unknown` (`null` in JSON).

use mpio_transport::blockdev::blacklist::Blacklist;
use mpio_transport::blockdev::discover::{discover, Discovery};
use mpio_transport::blockdev::{current_access, Sysfs};
use mpio_transport::uri::size_word;
use std::fmt::Write;
use std::path::PathBuf;

/// Arguments of `mpio discover`.
#[derive(Debug, clap::Args)]
pub struct DiscoverArgs {
    /// Print JSON.
    #[arg(long, conflicts_with = "config")]
    json: bool,
    /// Print a config: a map by WWID per LUN (`mpatha`, `mpathb`, ...),
    /// grouped by priority, exported on a unix socket under `--run-dir`.
    #[arg(long)]
    config: bool,
    /// Where `--config`'s export sockets go.
    #[arg(long, default_value = "/run/mpio")]
    run_dir: PathBuf,
    /// A config file whose `[blacklist]` and `[blacklist_exceptions]`
    /// apply (the built-in list otherwise).
    #[arg(long)]
    blacklist_from: Option<PathBuf>,
    /// The sysfs tree to read (tests).
    #[arg(long, default_value = "/sys", hide = true)]
    sysfs: PathBuf,
}

/// Runs `mpio discover`.
pub fn main(args: &DiscoverArgs) -> Result<(), String> {
    let blacklist = match &args.blacklist_from {
        Some(path) => {
            mpio_daemon::config::DaemonConfig::load(path)
                .map_err(|error| error.to_string())?
                .blacklist
        }
        None => Blacklist::default(),
    };
    let mut found = discover(&Sysfs::at(&args.sysfs), &blacklist);
    for lun in &mut found.luns {
        for path in &mut lun.paths {
            path.access = current_access(path);
        }
    }
    if args.json {
        let json = serde_json::to_string_pretty(&found).map_err(|error| error.to_string())?;
        println!("{json}");
    } else if args.config {
        print!("{}", config_text(&found, &args.run_dir));
    } else {
        print!("{}", text(&found));
    }
    Ok(())
}

/// The listing.
fn text(found: &Discovery) -> String {
    let mut out = String::new();
    for lun in &found.luns {
        let size = lun.paths.first().map_or(0, |path| path.size_bytes);
        let udev = lun
            .udev_wwid
            .as_ref()
            .map(|udev| format!(" ({udev})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}{udev} size={} paths={}",
            lun.wwid,
            size_word(size),
            lun.paths.len()
        );
        for path in &lun.paths {
            let access = path.access.map_or("unknown", |state| state.as_str());
            let preferred = if path.preferred { " preferred" } else { "" };
            let node = path
                .numa_node
                .map_or_else(|| "-".to_string(), |node| node.to_string());
            let holders = if path.holders.is_empty() {
                String::new()
            } else {
                format!(" holders={}", path.holders.join(","))
            };
            let _ = writeln!(
                out,
                "  {} {} {} {access}{preferred} numa_node={node}{holders}",
                path.name, path.dev, path.transport
            );
        }
    }
    for excluded in &found.excluded {
        let _ = writeln!(out, "not a path: {} ({})", excluded.name, excluded.reason);
    }
    out
}

/// A ready config: one map by WWID per LUN.
fn config_text(found: &Discovery, run_dir: &std::path::Path) -> String {
    let mut out = String::from("# written by `mpio discover --config`\n");
    for (index, lun) in found.luns.iter().enumerate() {
        let name = friendly_name(index);
        let _ = write!(
            out,
            "\n[[map]]\nname = \"{name}\"\nwwid = {wwid:?}\n\
             path_grouping_policy = \"group_by_prio\"\nfailback = \"immediate\"\n\
             # paths now: {paths}\n[[map.export]]\nsocket = {socket:?}\n",
            wwid = lun.wwid,
            paths = lun
                .paths
                .iter()
                .map(|path| path.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            socket = run_dir.join(format!("{name}.sock")).display().to_string(),
        );
    }
    out
}

/// multipath's user-friendly names: `mpatha` .. `mpathz`, `mpathaa`, ...
fn friendly_name(index: usize) -> String {
    let mut letters = Vec::new();
    let mut rest = index + 1;
    while rest > 0 {
        rest -= 1;
        letters.push(b'a' + (rest % 26) as u8);
        rest /= 26;
    }
    letters.reverse();
    format!(
        "mpath{}",
        String::from_utf8(letters).expect("ASCII letters")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn friendly_names_count_as_multipath_does() {
        let names: Vec<String> = [0, 1, 25, 26, 27, 701, 702]
            .into_iter()
            .map(friendly_name)
            .collect();
        assert_eq!(
            names,
            ["mpatha", "mpathb", "mpathz", "mpathaa", "mpathab", "mpathzz", "mpathaaa"]
        );
    }
}
