//! `mpio table`: check a dm multipath table and print its canonical form.

use mpio_core::numa::NumaTopology;
use mpio_core::table::Table;

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

/// Runs a `table` verb.
pub fn main(command: &TableCommand) -> Result<(), String> {
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
