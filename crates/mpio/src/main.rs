//! `mpio`: multipath block I/O in userspace.
//!
//! Verbs: `serve` (the daemon: export maps over NBD from a config, a
//! table, or with no arguments a demo map), the control verbs that steer
//! it (`status`, `table`, `show topology`, `show paths`, `message`,
//! `reload`), `bench` (measure a map against the raw path), `table check`
//! (validate a dm table and print its canonical form), `sim` (the
//! deterministic simulator: run seeds, replay one), `discover` (the
//! host's block devices by WWID, or a config for them), `top` (the maps
//! and paths live), `generate` (the manual pages and shell completions,
//! from these definitions), `import-multipath-conf` (a multipath.conf as
//! an mpio config).

mod bench;
mod config_man;
mod control_cmd;
mod discover_cmd;
mod generate_cmd;
mod import_cmd;
mod keeper_cmd;
mod serve_cmd;
mod signals;
mod sim_cmd;
mod table_cmd;
mod top;

use clap::{CommandFactory, Parser, Subcommand};
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
    /// Run the daemon: export maps over NBD from a config or a table
    /// (default: a demo map of memory paths on a unix socket).
    Serve(serve_cmd::ServeArgs),
    /// dm status of the daemon's maps (`dmsetup status`).
    Status(control_cmd::ReadArgs),
    /// A map's canonical dm table from the daemon, or `table check TABLE`.
    Table(table_cmd::TableArgs),
    /// Views of the daemon's maps.
    #[command(subcommand)]
    Show(control_cmd::ShowCommand),
    /// Send a dm message to a map (`dmsetup message`).
    Message(control_cmd::MessageArgs),
    /// Give a map a new table, from a dm table or a config file, without
    /// pausing or losing I/O; without arguments, have the daemon read its
    /// config file again (maps added, removed and changed).
    Reload(control_cmd::ReloadArgs),
    /// Take a map out of the daemon (`multipath -f`): its exports
    /// drained, its block devices removed; refused while a device is
    /// mounted or open, naming who holds it, unless --force.
    Remove(control_cmd::RemoveArgs),
    /// Grow a map to what its paths hold now (`multipathd resize map`),
    /// with its ublk devices where the kernel can resize them; refused
    /// if a path is smaller than the map.
    Resize(control_cmd::ResizeArgs),
    /// Run a fio-like load against a map (default: 8 null paths, round-robin) or the raw path.
    Bench(bench::BenchArgs),
    /// Deterministic simulation of failover: run seeds, or replay one.
    Sim(sim_cmd::SimArgs),
    /// The host's block devices grouped by WWID (`multipath -d -v3`), or
    /// a config for them (`--config`).
    Discover(discover_cmd::DiscoverArgs),
    /// The manual pages (mpio(8), mpio-VERB(8), mpio.toml(5)) or a shell's
    /// completion script, for packagers and `scripts/install.sh`.
    Generate(generate_cmd::GenerateArgs),
    /// The daemon's maps and paths live: IOPS, MB/s, latency, errors and
    /// states per interval, like top or iostat -x 1 (`--once`: one
    /// interval as text).
    Top(top::TopArgs),
    /// Print a multipath.conf as an mpio config, listing what does not
    /// carry over.
    ImportMultipathConf(import_cmd::ImportArgs),
    /// Started by `mpio serve` as it stops with ublk devices kept: bounds
    /// how long their I/O waits for the next daemon.
    #[command(hide = true)]
    UblkKeeper(keeper_cmd::KeeperArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Serve(args) => serve_cmd::main(args),
        Command::Bench(args) => bench::main(args),
        Command::Status(args) => control_cmd::status(args),
        Command::Table(args) => table_cmd::main(args),
        Command::Show(command) => control_cmd::show(command),
        Command::Message(args) => control_cmd::message(args),
        Command::Reload(args) => control_cmd::reload(args),
        Command::Remove(args) => control_cmd::remove(args),
        Command::Resize(args) => control_cmd::resize(args),
        Command::Sim(args) => sim_cmd::main(args),
        Command::Discover(args) => discover_cmd::main(args),
        Command::Generate(args) => generate_cmd::main(args, Cli::command()),
        Command::Top(args) => top::main(args),
        Command::ImportMultipathConf(args) => import_cmd::main(args),
        Command::UblkKeeper(args) => keeper_cmd::main(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mpio: {message}");
            ExitCode::FAILURE
        }
    }
}
