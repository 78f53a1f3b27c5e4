//! `mpio import-multipath-conf [FILE]`: a multipath.conf (default
//! `/etc/multipath.conf`) printed as the mpio config that means the same,
//! every keyword not carried over listed at its top with its line and why
//! (see `mpio_daemon::config::import`). A summary goes to stderr; a file
//! that cannot be read is an error naming the file and the line.

use mpio_daemon::config::import::import;
use std::path::PathBuf;

/// Arguments of `mpio import-multipath-conf`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The multipath.conf to read.
    #[arg(default_value = "/etc/multipath.conf")]
    file: PathBuf,
}

/// Runs `mpio import-multipath-conf`.
pub fn main(args: &ImportArgs) -> Result<(), String> {
    let file = args.file.display();
    let data = std::fs::read(&args.file).map_err(|error| format!("{file}: {error}"))?;
    let imported = import(&data).map_err(|error| format!("{file}: {error}"))?;
    print!("{}", imported.toml);
    eprintln!(
        "mpio: {file}: {} map(s), {} keyword(s) carried over, {} not carried over \
         (listed at the top of the output)",
        imported.maps,
        imported.carried.len(),
        imported.dropped().count(),
    );
    Ok(())
}
