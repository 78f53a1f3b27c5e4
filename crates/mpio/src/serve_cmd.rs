//! `mpio serve`: export a map over NBD. With no arguments it serves a
//! built-in demo map (two priority groups of memory paths) on a unix
//! socket and prints the URI to give an NBD client.
//!
//! It runs until SIGTERM or SIGINT. The first drains: no new connection
//! or request, every request read is answered, a FLUSH goes through the
//! map, then it exits (0 when nothing was abandoned, 1 when the
//! `--shutdown-timeout` ran out first; the report says what). A second
//! signal exits at once ([`crate::signals`]: 130 or 143).

use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_server::{Server, ServerConfig};
use mpio_transport::Transports;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The demo map: 256 MiB of RAM reached through ports `a` and `b`
/// (group 1, round-robin) and, should both fail, port `c` (group 2).
pub const DEMO_TABLE: &str = "0 524288 multipath 0 0 2 1 round-robin 0 2 1 memory:demo#a 1 memory:demo#b 1 round-robin 0 1 1 memory:demo#c 1";

/// Arguments of `mpio serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Listen on this unix socket (default, when no --tcp is given: a
    /// new socket in the temporary directory).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Listen on this TCP address (e.g. 127.0.0.1:10809); any address
    /// other than loopback must be given here explicitly.
    #[arg(long, value_name = "ADDR")]
    tcp: Option<SocketAddr>,
    /// The map to export, as a dm table (default: the demo map).
    #[arg(long, value_name = "TABLE")]
    table: Option<String>,
    /// Refuse writes.
    #[arg(long)]
    read_only: bool,
    /// The export's name.
    #[arg(long, default_value = "mpio")]
    name: String,
    /// Event loops (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    loops: usize,
    /// Queue depth of each event loop.
    #[arg(long, default_value_t = 256)]
    queue_depth: usize,
    /// Most client connections at once.
    #[arg(long, default_value_t = 128)]
    max_connections: usize,
    /// After work, how long (µs) each event loop polls before sleeping
    /// (0: sleep at once; saves CPU, costs latency).
    #[arg(long, default_value_t = 25)]
    idle_spin_us: u64,
    /// On SIGTERM or SIGINT, how long (seconds) to wait for requests in
    /// flight and the final flush before giving up on them.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    shutdown_timeout: f64,
}

/// Runs `mpio serve` until a signal; then drains, reports and exits.
pub fn main(args: &ServeArgs) -> Result<(), String> {
    let shutdown_timeout = Duration::try_from_secs_f64(args.shutdown_timeout)
        .map_err(|error| format!("--shutdown-timeout {}: {error}", args.shutdown_timeout))?;
    // Before the server starts: a signal from now on drains it.
    let mut signals = crate::signals::ShutdownSignals::install()
        .map_err(|error| format!("cannot catch SIGTERM and SIGINT: {error}"))?;
    let table_text = args.table.as_deref().unwrap_or(DEMO_TABLE);
    let table = Table::parse(table_text).map_err(|error| format!("--table: {error}"))?;
    let options = MapOptions {
        numa: mpio_transport::host::host_topology(),
        ..MapOptions::default()
    };
    let transports = Transports::new();
    let device = transports
        .build(&table, options)
        .map_err(|error| error.to_string())?;
    let unix_socket = match (&args.socket, &args.tcp) {
        (None, None) => {
            Some(std::env::temp_dir().join(format!("mpio-serve-{}.sock", std::process::id())))
        }
        (socket, _) => socket.clone(),
    };
    let config = ServerConfig {
        unix_socket,
        tcp: args.tcp,
        export_name: args.name.clone(),
        read_only: args.read_only,
        loops: args.loops,
        queue_depth: args.queue_depth,
        max_connections: args.max_connections,
        idle_spin_us: args.idle_spin_us,
        ..ServerConfig::default()
    };
    let server = Server::start(&config, device.into_slot()).map_err(|error| error.to_string())?;
    let export = server.export();
    println!(
        "mpio serve: exporting {} ({} bytes{}) as {:?}",
        if args.table.is_some() {
            "the map"
        } else {
            "the demo map: memory:demo#a + #b, then #c"
        },
        export.size_bytes,
        if export.read_only { ", read-only" } else { "" },
        export.name,
    );
    let uris = server.uris();
    for uri in &uris {
        println!("  {uri}");
    }
    if let Some(uri) = uris.first() {
        println!("try: nbdinfo '{uri}'");
    }
    println!("stop with Ctrl-C or SIGTERM (a second one exits at once)");
    let signal = signals.wait();
    eprintln!(
        "mpio serve: {signal}: draining (up to {:?}; a second signal exits at once)",
        shutdown_timeout
    );
    let report = server.shutdown(shutdown_timeout);
    eprintln!("mpio serve: shut down: {report}");
    if report.is_clean() {
        Ok(())
    } else {
        Err("shutdown abandoned work (see the report above)".into())
    }
}
