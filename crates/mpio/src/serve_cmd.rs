//! `mpio serve`: the daemon. It runs the maps of a TOML config
//! (`--config`; without it and without a map's flags, `$MPIO_CONFIG` or
//! else [`DEFAULT_CONFIG`], if that file exists), or one map given as a dm
//! table (`--table`) or, with neither, a built-in demo map (two priority
//! groups of memory paths), exports them over NBD, prints the URIs to
//! give an NBD client, and answers the control verbs on its control
//! socket. Under a service manager it speaks the notify protocol
//! (`READY=1` once every map's devices and exports are up, `STATUS=`,
//! `STOPPING=1`, and `WATCHDOG=1` when asked).
//!
//! A panic on any of its threads aborts it, logged
//! ([`mpio_daemon::fail_fast`]), for its supervisor to restart it.
//!
//! It runs until SIGTERM or SIGINT. The first shuts it down cleanly
//! ([`Daemon::shutdown`]): no new connection or request, every request
//! read is answered, a FLUSH goes through each map, then it exits: 0 when
//! nothing was abandoned, 1 when `--shutdown-timeout` ran out first (the
//! logged report says what). A second signal exits at once
//! ([`crate::signals`]: 130 after SIGINT, 143 after SIGTERM). SIGHUP
//! reads the config file again ([`Daemon::reload_config`]); the outcome
//! is logged, and a file refused leaves the daemon serving as it was.

use crate::signals::Asked;
use mpio_core::checker::CheckerOptions;
use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_daemon::config::{
    DaemonConfig, ExportConfig, MapConfig, NoPathRetry, UblkNumber, UblkOnStop,
    DEFAULT_KEEP_TIMEOUT_MS, MAX_KEEP_TIMEOUT_MS,
};
use mpio_daemon::daemon::{Daemon, ExportReport, ExportShutdown, ServerSettings};
use mpio_server::ServerConfig;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The demo map: 256 MiB of RAM reached through ports `a` and `b`
/// (group 1, round-robin) and, should both fail, port `c` (group 2).
pub const DEMO_TABLE: &str = "0 524288 multipath 0 0 2 1 round-robin 0 2 1 memory:demo#a 1 memory:demo#b 1 round-robin 0 1 1 memory:demo#c 1";

/// The config `mpio serve` runs when given neither `--config` nor a
/// map's flags, if the file exists and `$MPIO_CONFIG` names no other
/// (the path the packaged service uses).
pub const DEFAULT_CONFIG: &str = "/etc/mpio/mpio.toml";

/// Arguments of `mpio serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Run the maps of this TOML config (see docs/CONFIG.md) instead of
    /// one map from the flags below (default: $MPIO_CONFIG, else
    /// /etc/mpio/mpio.toml, if that file exists and no such flag is
    /// given; else the demo map). SIGHUP or
    /// `mpio reload` reads it again.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["socket", "tcp", "table", "read_only", "name", "map", "metrics", "ublk_on_stop", "ublk_keep_timeout_ms"])]
    config: Option<PathBuf>,
    /// The control socket (default: the config's, else $MPIO_CONTROL,
    /// else /run/mpio/control.sock for root, else
    /// $XDG_RUNTIME_DIR/mpio/control.sock or /tmp/mpio-UID/control.sock).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// Least severe log events printed (on stderr): error, warn, info,
    /// debug or trace. Every state change (path failed and why,
    /// reinstated, group switched, no usable path) is logged at info or
    /// above.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    log_level: tracing::Level,
    /// Serve Prometheus metrics at http://ADDR/metrics (loopback only,
    /// e.g. 127.0.0.1:9642; off by default).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// The map's name, for the control verbs.
    #[arg(long, default_value = "mpatha")]
    map: String,
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
    /// Serve the map as a ublk block device too, /dev/ublkbN: this N,
    /// or the kernel's choice without one (needs root and ublk_drv).
    /// Alone, without --socket or --tcp, it is the only export.
    #[arg(long, value_name = "N", num_args = 0..=1)]
    #[allow(clippy::option_option)] // absent, --ublk, or --ublk N
    ublk: Option<Option<u32>>,
    /// At SIGTERM or SIGINT, keep the ublk device (--ublk N) with its
    /// I/O waiting for the next daemon, which takes it over, or remove
    /// it (a config's `[ublk] on_stop`). A device numbered by the
    /// kernel is always removed.
    #[arg(long, value_enum, value_name = "WHAT", default_value = "keep")]
    ublk_on_stop: OnStop,
    /// How long (ms) a kept device's I/O waits for the next daemon;
    /// then the device is removed and that I/O fails.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_KEEP_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(1..=MAX_KEEP_TIMEOUT_MS))]
    ublk_keep_timeout_ms: u64,
    /// Refuse writes.
    #[arg(long)]
    read_only: bool,
    /// The export's name.
    #[arg(long, default_value = "mpio")]
    name: String,
    /// Event loops (0: one per CPU).
    #[arg(long, default_value_t = ServerConfig::default().loops)]
    loops: usize,
    /// Queue depth of each event loop.
    #[arg(long, default_value_t = ServerConfig::default().queue_depth)]
    queue_depth: usize,
    /// Most client connections at once, per export; at the cap a new
    /// client replaces the connection idle the longest, or is refused.
    #[arg(long, default_value_t = ServerConfig::default().max_connections)]
    max_connections: usize,
    /// After work, how long (µs) each event loop polls before sleeping
    /// (0: sleep at once; saves CPU, costs latency).
    #[arg(long, default_value_t = ServerConfig::default().idle_spin_us)]
    idle_spin_us: u64,
    /// Most request and reply buffer bytes each export holds at once,
    /// past each connection's first request of up to 1 MiB (suffixes K,
    /// M, G; default: an eighth of the host's memory, 256M to 16G).
    #[arg(long, value_name = "SIZE", value_parser = parse_buffered)]
    max_buffered: Option<usize>,
    /// On SIGTERM or SIGINT, how long (seconds) to wait for requests in
    /// flight and the final flush before giving up on them.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    shutdown_timeout: f64,
}

/// `--ublk-on-stop`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum OnStop {
    /// The device waits for the next daemon.
    Keep,
    /// The device is removed.
    Remove,
}

/// Runs `mpio serve` until a signal; then shuts down cleanly (see the
/// module docs).
pub fn main(args: &ServeArgs) -> Result<(), String> {
    let shutdown_timeout = Duration::try_from_secs_f64(args.shutdown_timeout)
        .map_err(|error| format!("--shutdown-timeout {}: {error}", args.shutdown_timeout))?;
    // Before anything starts: a signal from now on shuts down cleanly.
    let mut signals = crate::signals::ShutdownSignals::install()
        .map_err(|error| format!("cannot catch SIGTERM, SIGINT and SIGHUP: {error}"))?;
    tracing_subscriber::fmt()
        .with_max_level(args.log_level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    // A panic on any thread ends the daemon (see the module docs).
    mpio_daemon::fail_fast::install();
    // Before any path is opened and any ublk ring made (their fixed-file
    // tables are sized by it).
    match mpio_daemon::open_files::raise_limit() {
        Ok(limit) if limit.now > limit.was => {
            tracing::info!(was = limit.was, now = limit.now, "open-file limit raised");
        }
        Ok(_) => {}
        Err(error) => tracing::warn!("the open-file limit could not be raised: {error}"),
    }
    let config_file = config_file(args);
    let server_settings = ServerSettings {
        loops: args.loops,
        queue_depth: args.queue_depth,
        max_connections: args.max_connections,
        idle_spin_us: args.idle_spin_us,
        max_buffered_bytes: args
            .max_buffered
            .unwrap_or_else(mpio_server::budget::default_max_buffered_bytes),
    };
    let control = args.control.as_deref();
    let daemon = match &config_file {
        Some(path) => Daemon::start_file(path, control, server_settings),
        None => Daemon::start(flag_config(args)?, control, server_settings),
    }
    .map_err(|error| error.to_string())?;
    print_banner(&daemon, args, config_file.is_some());
    daemon.ready();
    let signal = loop {
        match signals.wait() {
            Asked::Shutdown(signal) => break signal,
            Asked::Reload => match daemon.reload_config() {
                Ok(text) => tracing::info!(
                    "SIGHUP: config read again: {}",
                    text.trim_end().replace('\n', "; ")
                ),
                Err(error) => tracing::error!("SIGHUP: {error}"),
            },
        }
    };
    tracing::info!(
        "{signal}: shutting down, up to {shutdown_timeout:?} (a second signal exits at once)"
    );
    let reports = daemon.shutdown(shutdown_timeout);
    keep_released_devices(&reports);
    let mut clean = true;
    for export in &reports {
        let (map, name, report) = (&export.map, &export.export, &export.report);
        if report.is_clean() {
            tracing::info!(%map, export = %name, "shut down: {report}");
        } else {
            clean = false;
            tracing::warn!(%map, export = %name, "shut down, abandoning work: {report}");
        }
    }
    if clean {
        Ok(())
    } else {
        Err("the shutdown abandoned work (see the reports above)".into())
    }
}

/// Starts the keeper of the ublk devices the shutdown kept, if any
/// (`keeper_cmd`): their I/O waits in the kernel for the next daemon,
/// and the keeper bounds that wait.
fn keep_released_devices(reports: &[ExportShutdown]) {
    let kept: Vec<(u32, Duration)> = reports
        .iter()
        .filter_map(|export| match &export.report {
            ExportReport::Ublk(report) => report.kept_for().map(|timeout| (report.number, timeout)),
            ExportReport::Nbd(_) => None,
        })
        .collect();
    let Some(timeout) = kept.iter().map(|&(_, timeout)| timeout).max() else {
        return;
    };
    let devices: Vec<u32> = kept.iter().map(|&(id, _)| id).collect();
    match crate::keeper_cmd::spawn(&devices, timeout) {
        Ok(pid) => tracing::info!(
            ?devices,
            keeper = pid,
            "ublk devices kept for the next daemon: their I/O fails if none takes them over within {} ms",
            timeout.as_millis()
        ),
        Err(error) => tracing::error!(
            ?devices,
            %error,
            "ublk devices kept, but no keeper started: their I/O waits until a daemon takes them over"
        ),
    }
}

/// The config file to run: `--config`, else `$MPIO_CONFIG` or
/// [`DEFAULT_CONFIG`] when no flag describes a map and that file exists;
/// `None`: the map of the flags (or the demo map).
fn config_file(args: &ServeArgs) -> Option<PathBuf> {
    if args.config.is_some() {
        return args.config.clone();
    }
    let map_flags = args.table.is_some()
        || args.socket.is_some()
        || args.tcp.is_some()
        || args.ublk.is_some()
        || args.read_only
        || args.metrics.is_some()
        || args.map != "mpatha"
        || args.name != "mpio";
    let default = std::env::var_os("MPIO_CONFIG")
        .map_or_else(|| PathBuf::from(DEFAULT_CONFIG), PathBuf::from);
    (!map_flags && default.exists()).then_some(default)
}

/// `--max-buffered`: a size of at least one largest request.
fn parse_buffered(text: &str) -> Result<usize, String> {
    let bytes = mpio_transport::uri::parse_size(text)?;
    let least = mpio_server::export::MAX_PAYLOAD as u64;
    if bytes < least {
        return Err(format!("at least {least} bytes (one largest request)"));
    }
    usize::try_from(bytes).map_err(|_| format!("{text}: too large"))
}

/// The one-map config the command-line flags describe.
fn flag_config(args: &ServeArgs) -> Result<DaemonConfig, String> {
    let table_text = args.table.as_deref().unwrap_or(DEMO_TABLE);
    let table = Table::parse(table_text).map_err(|error| format!("--table: {error}"))?;
    let socket = match (&args.socket, &args.tcp, &args.ublk) {
        (None, None, None) => {
            Some(std::env::temp_dir().join(format!("mpio-serve-{}.sock", std::process::id())))
        }
        (socket, _, _) => socket.clone(),
    };
    let defaults = MapOptions::default();
    Ok(DaemonConfig {
        control_socket: None,
        metrics: args.metrics,
        blacklist: Default::default(),
        ublk_on_stop: match args.ublk_on_stop {
            OnStop::Keep => UblkOnStop::Keep {
                timeout: Duration::from_millis(args.ublk_keep_timeout_ms),
            },
            OnStop::Remove => UblkOnStop::Remove,
        },
        maps: vec![MapConfig {
            name: args.map.clone(),
            wwid: None,
            source: None,
            no_path_retry: if table.features.queue_if_no_path {
                NoPathRetry::Queue
            } else {
                NoPathRetry::Fail
            },
            table,
            paths: Vec::new(),
            io_timeout_ns: defaults.io_timeout_ns,
            fence_timeout_ns: defaults.fence_timeout_ns,
            hedge_reads: defaults.hedge_reads,
            max_attempts: defaults.max_attempts,
            checker: CheckerOptions::default(),
            exports: vec![ExportConfig {
                name: args.name.clone(),
                socket,
                socket_mode: mpio_daemon::config::DEFAULT_SOCKET_MODE,
                socket_group: None,
                tcp: args.tcp,
                ublk: args
                    .ublk
                    .map(|number| number.map_or(UblkNumber::Any, UblkNumber::Fixed)),
                max_connections: None,
                read_only: args.read_only,
            }],
            device_links: Some(mpio_daemon::config::DEFAULT_DEV_DIR.into()),
        }],
    })
}

/// Prints what the daemon serves, where to try it and how to stop it, to
/// stdout. A stdout nobody reads any more (`mpio serve | head -1`, a
/// supervisor that closed the pipe) is no reason to stop serving: write
/// errors are ignored, where `println!` would panic.
fn print_banner(daemon: &Daemon, args: &ServeArgs, from_file: bool) {
    let mut banner = String::new();
    let exports = daemon.exports();
    for (map, uris) in &exports {
        if from_file {
            banner.push_str(&format!("mpio serve: map {map}\n"));
        } else {
            banner.push_str(&format!(
                "mpio serve: exporting {}\n",
                if args.table.is_some() {
                    "the map"
                } else {
                    "the demo map: memory:demo#a + #b, then #c"
                }
            ));
        }
        for uri in uris {
            banner.push_str(&format!("  {uri}\n"));
        }
    }
    let mut uris = exports.iter().flat_map(|(_, uris)| uris);
    if let Some(uri) = uris.find(|uri| uri.starts_with("nbd")) {
        banner.push_str(&format!("try: nbdinfo '{uri}'\n"));
    }
    if let Some(address) = daemon.metrics_address() {
        banner.push_str(&format!("metrics: http://{address}/metrics\n"));
    }
    banner.push_str(&format!(
        "control socket: {}\n",
        daemon.control_socket().display()
    ));
    if from_file {
        banner.push_str("read the config again with SIGHUP or `mpio reload`\n");
    }
    banner.push_str("stop with Ctrl-C or SIGTERM (a second one exits at once)\n");
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(banner.as_bytes());
    let _ = stdout.flush();
}
