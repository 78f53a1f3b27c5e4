//! `mpio`: multipath block I/O in userspace.
//!
//! Verbs: `bench` (measure a map against the raw path), `table check`
//! (validate a dm table and print its canonical form).

mod bench;
mod table_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mpio: a userspace multipath block I/O engine.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a fio-like load against a map (default: 8 null paths, round-robin) or the raw path.
    Bench(bench::BenchArgs),
    /// dm table tools.
    #[command(subcommand)]
    Table(table_cmd::TableCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Bench(args) => bench::main(args),
        Command::Table(command) => table_cmd::main(command),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mpio: {message}");
            ExitCode::FAILURE
        }
    }
}
