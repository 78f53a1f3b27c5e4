//! The verbs that steer a running daemon through its control socket:
//! `status`, `table MAP`, `show topology`, `show paths`, `message`,
//! `reload` (a map's new table, or without arguments the daemon's config
//! file read again), `remove`. Each sends one request and prints the answer: text by
//! default, the same facts as JSON with `--json`.

use mpio_daemon::control::client;
use mpio_daemon::control::protocol::{ReloadSource, Request, Response};
use std::path::{Path, PathBuf};

/// Where the daemon listens.
#[derive(Debug, clap::Args)]
pub struct ControlArgs {
    /// The daemon's control socket (default: $MPIO_CONTROL, else
    /// /run/mpio/control.sock for root, else
    /// $XDG_RUNTIME_DIR/mpio/control.sock or /tmp/mpio-UID/control.sock).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
}

impl ControlArgs {
    /// The socket named, else the default.
    pub fn socket(&self) -> PathBuf {
        self.control
            .clone()
            .unwrap_or_else(mpio_daemon::control::default_socket)
    }
}

/// Arguments of the read verbs.
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    /// The map (default: every map).
    map: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    control: ControlArgs,
}

/// `mpio show` views.
#[derive(Debug, clap::Subcommand)]
pub enum ShowCommand {
    /// A `multipath -ll`-style tree: groups, paths, their states, checker
    /// verdicts and live I/O counts.
    Topology(ReadArgs),
    /// One row per path.
    Paths(ReadArgs),
}

/// Arguments of `mpio message`.
#[derive(Debug, clap::Args)]
pub struct MessageArgs {
    /// The map.
    map: String,
    /// The message, as one argument or several words: fail_path P,
    /// reinstate_path P, switch_group N, enable_group N, disable_group N,
    /// queue_if_no_path, fail_if_no_path.
    #[arg(required = true, num_args = 1..)]
    message: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    control: ControlArgs,
}

/// Arguments of `mpio reload`.
#[derive(Debug, clap::Args)]
pub struct ReloadArgs {
    /// The map (without it: the daemon reads its config file again and
    /// makes its maps match it: maps added, removed and changed).
    map: Option<String>,
    /// A config file (its section for MAP gives the new table, paths and
    /// options), or a dm table as one argument or several words.
    #[arg(num_args = 0.., requires = "map")]
    source: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    control: ControlArgs,
}

/// Arguments of `mpio remove`.
#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    /// The map.
    map: String,
    /// Remove its block devices even while they are mounted or open:
    /// their holders' I/O then fails.
    #[arg(long)]
    force: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    control: ControlArgs,
}

/// `mpio remove MAP [--force]`.
pub fn remove(args: &RemoveArgs) -> Result<(), String> {
    let request = Request::Remove {
        map: args.map.clone(),
        force: args.force,
    };
    run(&args.control, &request, args.json)
}

/// Arguments of `mpio resize`.
#[derive(Debug, clap::Args)]
pub struct ResizeArgs {
    /// The map.
    map: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    control: ControlArgs,
}

/// `mpio resize MAP`.
pub fn resize(args: &ResizeArgs) -> Result<(), String> {
    let request = Request::Resize {
        map: args.map.clone(),
    };
    run(&args.control, &request, args.json)
}

/// `mpio status [MAP]`.
pub fn status(args: &ReadArgs) -> Result<(), String> {
    run(
        &args.control,
        &Request::Status {
            map: args.map.clone(),
        },
        args.json,
    )
}

/// `mpio table MAP`.
pub fn table(args: &ReadArgs) -> Result<(), String> {
    run(
        &args.control,
        &Request::Table {
            map: args.map.clone(),
        },
        args.json,
    )
}

/// `mpio show ...`.
pub fn show(command: &ShowCommand) -> Result<(), String> {
    match command {
        ShowCommand::Topology(args) => run(
            &args.control,
            &Request::Topology {
                map: args.map.clone(),
            },
            args.json,
        ),
        ShowCommand::Paths(args) => run(
            &args.control,
            &Request::Paths {
                map: args.map.clone(),
            },
            args.json,
        ),
    }
}

/// `mpio message MAP WORDS...`.
pub fn message(args: &MessageArgs) -> Result<(), String> {
    let request = Request::Message {
        map: args.map.clone(),
        message: args.message.join(" "),
    };
    run(&args.control, &request, args.json)
}

/// `mpio reload MAP <config file | table>`, or `mpio reload` (the
/// daemon's config file read again).
pub fn reload(args: &ReloadArgs) -> Result<(), String> {
    let Some(map) = &args.map else {
        return run(&args.control, &Request::ReloadConfig, args.json);
    };
    let source = match args.source.as_slice() {
        [] => {
            return Err(format!(
                "reload {map}: give the map's new table or a config file (`mpio reload` alone \
                 reads the daemon's config file again)"
            ))
        }
        [one] if Path::new(one).is_file() => ReloadSource::Config {
            origin: one.clone(),
            text: std::fs::read_to_string(one).map_err(|error| format!("{one}: {error}"))?,
        },
        words => ReloadSource::Table(words.join(" ")),
    };
    let request = Request::Reload {
        map: map.clone(),
        source,
    };
    run(&args.control, &request, args.json)
}

/// Sends `request` and prints the answer.
fn run(control: &ControlArgs, request: &Request, json: bool) -> Result<(), String> {
    match client::call(&control.socket(), request)? {
        Response::Ok { text, json: value } => {
            if json {
                let pretty =
                    serde_json::to_string_pretty(&value).map_err(|error| error.to_string())?;
                println!("{pretty}");
            } else {
                print!("{text}");
            }
            Ok(())
        }
        Response::Error { message } => Err(message),
    }
}
