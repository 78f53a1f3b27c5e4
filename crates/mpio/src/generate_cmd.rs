//! `mpio generate`: the manual pages and shell completions, made from the
//! command's own definitions so they never drift from it.
//!
//! `man DIR` writes `mpio.8` (every subcommand listed), one `mpio-VERB.8`
//! per subcommand (nested ones as `mpio-show-paths.8`), and `mpio.toml.5`
//! made from the config reference (`docs/CONFIG.md`, compiled in; see
//! [`crate::config_man`]). `completion SHELL` prints the completion
//! script for bash, zsh, fish, elvish or PowerShell on standard output.
//! `scripts/install.sh` installs both.

use clap::{Args, Subcommand};
use clap_complete::Shell;
use std::path::{Path, PathBuf};

/// Arguments of `mpio generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// Write the manual pages (mpio.8, mpio-VERB.8, mpio.toml.5) into DIR.
    Man {
        /// The directory to write into (made if missing).
        dir: PathBuf,
    },
    /// Print the completion script for SHELL.
    Completion {
        /// bash, zsh, fish, elvish or powershell.
        shell: Shell,
    },
}

/// Runs `mpio generate` for the command `cli` (the whole `mpio`).
pub fn main(args: &GenerateArgs, cli: clap::Command) -> Result<(), String> {
    match &args.what {
        What::Man { dir } => {
            std::fs::create_dir_all(dir)
                .map_err(|error| format!("cannot make {}: {error}", dir.display()))?;
            let mut cli = cli.disable_help_subcommand(true);
            cli.build();
            write_command_pages(&cli, dir)?;
            let page = crate::config_man::page(include_str!("../../../docs/CONFIG.md"));
            write(&dir.join("mpio.toml.5"), page.as_bytes())
        }
        What::Completion { shell } => {
            let mut cli = cli;
            clap_complete::generate(*shell, &mut cli, "mpio", &mut std::io::stdout());
            Ok(())
        }
    }
}

/// Writes the section 8 page of `command` and of each of its visible
/// subcommands, depth first.
fn write_command_pages(command: &clap::Command, dir: &Path) -> Result<(), String> {
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        write_command_pages(sub, dir)?;
    }
    let page = clap_mangen::Man::new(command.clone())
        .section("8")
        .manual("mpio");
    let mut rendered = Vec::new();
    page.render(&mut rendered)
        .map_err(|error| format!("cannot render {}: {error}", page.get_filename()))?;
    write(&dir.join(page.get_filename()), &rendered)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|error| format!("cannot write {}: {error}", path.display()))
}
