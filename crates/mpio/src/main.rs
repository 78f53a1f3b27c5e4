//! `mpio`: multipath block I/O in userspace.
//!
//! Verbs: `serve` (export a map over NBD; with no arguments, a demo
//! map), `bench` (measure a map against the raw path), `table check`
//! (validate a dm table and print its canonical form), `sim` (the
//! deterministic simulator: run seeds, replay one).

mod bench;
mod serve_cmd;
mod signals;
mod sim_cmd;
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
    /// Export a map over NBD (default: a demo map of memory paths on a unix socket).
    Serve(serve_cmd::ServeArgs),
    /// Run a fio-like load against a map (default: 8 null paths, round-robin) or the raw path.
    Bench(bench::BenchArgs),
    /// dm table tools.
    #[command(subcommand)]
    Table(table_cmd::TableCommand),
    /// Deterministic simulation of failover: run seeds, or replay one.
    Sim(sim_cmd::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Serve(args) => serve_cmd::main(args),
        Command::Bench(args) => bench::main(args),
        Command::Table(command) => table_cmd::main(command),
        Command::Sim(args) => sim_cmd::main(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mpio: {message}");
            ExitCode::FAILURE
        }
    }
}
