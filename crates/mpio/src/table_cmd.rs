//! `mpio table`: a running map's canonical dm table (`mpio table MAP`),
//! or check a table and print its canonical form (`mpio table check`).

use mpio_core::numa::NumaTopology;
use mpio_core::table::Table;

/// Arguments of `mpio table`: a map's table from the daemon, or `check`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TableArgs {
    /// Check a table instead of asking the daemon.
    #[command(subcommand)]
    command: Option<TableCommand>,
    #[command(flatten)]
    read: crate::control_cmd::ReadArgs,
}

/// `mpio table` verbs.
#[derive(Debug, clap::Subcommand)]
pub enum TableCommand {
    /// Parse and validate a table; print dm's canonical form, or the error.
    Check {
        /// The table, as one argument or as several words.
        #[arg(required = true, num_args = 1..)]
        table: Vec<String>,
        /// Print the parsed table as JSON instead.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `mpio table`.
pub fn main(args: &TableArgs) -> Result<(), String> {
    let Some(command) = &args.command else {
        return crate::control_cmd::table(&args.read);
    };
    match command {
        TableCommand::Check { table, json } => {
            let text = table.join(" ");
            let canonical = Table::parse(&text)
                .and_then(|table| table.canonical(&NumaTopology::default()))
                .map_err(|error| format!("table: {error}"))?;
            if *json {
                let value =
                    serde_json::to_string_pretty(&canonical).map_err(|error| error.to_string())?;
                println!("{value}");
            } else {
                println!("{canonical}");
            }
            Ok(())
        }
    }
}
